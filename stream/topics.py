"""The Kafka topics of the stream workers, and creating them.

Topics are created by the worker with an admin client *before* faust
starts, so partition counts and configs (compaction of ``fleetepi.hosts``,
a message size limit above the contract's 1 MiB so oversized messages reach
the dead-letter path) are ours and not faust's defaults. Creating is
idempotent: an existing topic is left as it is (its partition count is
checked, because the co-partitioning of ``crashes`` and ``telemetry`` by
host depends on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetepi.contract import TOPIC_ALERTS, TOPIC_CRASHES, TOPIC_DEADLETTER, TOPIC_HOSTS, TOPIC_TELEMETRY
from fleetepi.stream.exceptions import StreamError

#: The internal topic of the fleet stage: crashes and telemetry of every input partition, merged
#: in event time by the one partition that runs the detectors (docs/stream.md, "One fleet partition").
TOPIC_EVENTS_FLEET = "fleetepi.events.fleet"

#: Largest message the topics accept (the contract rejects > 1 MiB itself, as ``too_large``).
MAX_MESSAGE_BYTES = 8 << 20


@dataclass(frozen=True)
class TopicNames:
    """Names of every topic, with an optional prefix.

    The contract's names are the default; a prefix (``--topic-prefix``)
    lets several pipelines, or several tests, share one broker.
    """

    prefix: str = ""

    def _n(self, name: str) -> str:
        return self.prefix + name

    @property
    def hosts(self) -> str:
        return self._n(TOPIC_HOSTS)

    @property
    def crashes(self) -> str:
        return self._n(TOPIC_CRASHES)

    @property
    def telemetry(self) -> str:
        return self._n(TOPIC_TELEMETRY)

    @property
    def alerts(self) -> str:
        return self._n(TOPIC_ALERTS)

    @property
    def deadletter(self) -> str:
        return self._n(TOPIC_DEADLETTER)

    @property
    def fleet(self) -> str:
        return self._n(TOPIC_EVENTS_FLEET)

    @property
    def inputs(self) -> tuple[str, str, str]:
        return (self.hosts, self.crashes, self.telemetry)


@dataclass(frozen=True)
class TopicSpec:
    """One topic: name, partitions and topic-level config."""

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


def topic_specs(names: TopicNames | None = None, partitions: int = 4) -> list[TopicSpec]:
    """Every topic a worker reads or writes.

    :param partitions: of the input topics (hosts, crashes, telemetry) and alerts. The fleet
        topic has one partition: the detectors decide over the whole fleet at once.
    """
    if partitions < 1:
        raise StreamError(f"partitions must be >= 1, got {partitions}")
    n = names or TopicNames()
    big = {"max.message.bytes": str(MAX_MESSAGE_BYTES)}
    return [
        TopicSpec(n.hosts, partitions, {**big, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1",
                                            "segment.ms": "3600000"}),
        TopicSpec(n.crashes, partitions, big),
        TopicSpec(n.telemetry, partitions, big),
        TopicSpec(n.fleet, 1, big),
        TopicSpec(n.alerts, partitions),
        TopicSpec(n.deadletter, 1, big),
    ]


def ensure_topics(bootstrap: str, specs: list[TopicSpec], timeout_s: float = 30.0) -> list[str]:
    """Create the missing topics; returns the names created.

    :raises StreamError: the broker cannot be reached, or an input topic
        exists with another partition count than its co-partitioned sibling.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fleetepi-topics",
                                 request_timeout_ms=int(timeout_s * 1000))
    except (KafkaError, OSError, ValueError) as exc:
        raise StreamError(f"cannot reach the broker at {bootstrap}: {exc}") from None
    try:
        existing = set(admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        created: list[str] = []
        for s in missing:
            try:
                admin.create_topics([NewTopic(s.name, s.partitions, 1, topic_configs=dict(s.config))])
                created.append(s.name)
            except TopicAlreadyExistsError:
                pass  # another worker was faster
        pair = [s.name for s in specs if s.name.endswith((TOPIC_CRASHES, TOPIC_TELEMETRY))]
        counts = partition_counts(admin, pair)
        if len({n for n in counts.values() if n}) > 1:  # 0: metadata of a new topic not there yet
            raise StreamError(f"{' and '.join(pair)} must have equal partition counts "
                              f"(both keyed by host): {counts}")
        return created
    except KafkaError as exc:
        raise StreamError(f"creating topics on {bootstrap} failed: {exc}") from None
    finally:
        admin.close()


def partition_counts(admin: object, names: list[str]) -> dict[str, int]:
    """Partitions per topic from the admin client's metadata (0 if unknown)."""
    out: dict[str, int] = {}
    for desc in admin.describe_topics(names):  # type: ignore[attr-defined]
        out[desc.get("name") or desc.get("topic")] = len(desc.get("partitions") or [])
    return out


__all__ = ["MAX_MESSAGE_BYTES", "TOPIC_EVENTS_FLEET", "TopicNames", "TopicSpec", "ensure_topics", "partition_counts",
           "topic_specs"]
