"""Worker metrics: the "Stream workers" section of docs/metrics.md.

The pipeline series (events, invalid, alerts, watermark, hosts, top-N) come
from :class:`fleetepi.metrics.PipelineMetrics` in the same registry, so a
worker and the embedded ``fleetepi demo`` expose the same names and one
dashboard serves both.

Like ``PipelineMetrics`` this is a collector over plain dicts: the worker
updates them once per batch on its event-loop thread, the scrape thread
copies them. Dead-letter counters are pre-created at 0 for every input
topic and reason, so a rate() over them exists before the first bad message.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetepi.contract.codec import REASONS
from fleetepi.metrics import TICKET_TTL_S, PipelineMetrics

#: Buckets of ``fleetepi_stream_batch_seconds``: 1 ms .. 10 s.
BATCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class StreamMetrics(Collector):
    """Consumer lag, dead letters, checkpoint age and batch time of one worker.

    :param registry: where to register (a fresh one by default, never the global one).
    :param input_topics: topics whose dead-letter counters start at 0.
    :param pipeline: the pipeline metrics sharing the registry (created if None).
    :param ticket_ttl_s: event time a ticket's alert series stays up (``PipelineMetrics``), for a created pipeline.
    """

    def __init__(self, registry: CollectorRegistry | None = None, input_topics: Iterable[str] = (),
                 pipeline: PipelineMetrics | None = None, ticket_ttl_s: float = TICKET_TTL_S) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.pipeline = (pipeline if pipeline is not None
                         else PipelineMetrics(registry=self.registry, ticket_ttl_s=ticket_ttl_s))
        #: (topic, partition) -> messages behind the log end.
        self.lag: dict[tuple[str, int], int] = {}
        self.deadletters: dict[tuple[str, str], int] = {(t, r): 0 for t in input_topics for r in REASONS}
        #: wall time (time.time()) of the last checkpoint written; None until the first.
        self.last_checkpoint: float | None = None
        #: records folded while rebuilding partitions from their logs (recovery work).
        self.rebuilt = 0
        #: detector batches folded without the host feed synced (``HostFeed.sync`` gave up).
        self.inventory_sync_timeouts = 0
        self.batch_seconds = Histogram("fleetepi_stream_batch_seconds", "Time to process one batch.",
                                       buckets=BATCH_BUCKETS, registry=self.registry)
        self.registry.register(self)

    def count_deadletter(self, topic: str, reason: str) -> None:
        key = (topic, reason)
        self.deadletters[key] = self.deadletters.get(key, 0) + 1

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self.lag[(topic, partition)] = max(0, lag)

    def checkpointed(self, when: float | None = None) -> None:
        self.last_checkpoint = time.time() if when is None else when

    def collect(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily("fleetepi_stream_consumer_lag", "Messages behind the log end.",
                                labels=("topic", "partition"))
        for (topic, p), n in sorted(dict(self.lag).items()):
            lag.add_metric([topic, str(p)], n)
        yield lag
        dl = CounterMetricFamily("fleetepi_stream_deadletters", "Messages sent to fleetepi.deadletter.",
                                 labels=("topic", "reason"))
        for (topic, reason), n in sorted(dict(self.deadletters).items()):
            dl.add_metric([topic, reason], n)
        yield dl
        age = GaugeMetricFamily("fleetepi_stream_checkpoint_age_seconds", "Wall time since the last state checkpoint.")
        if self.last_checkpoint is not None:
            age.add_metric([], max(0.0, time.time() - self.last_checkpoint))
        yield age
        yield CounterMetricFamily("fleetepi_stream_rebuilt_records", "Records folded while rebuilding partition state "
                                  "from the retained logs.", value=self.rebuilt)
        yield CounterMetricFamily("fleetepi_stream_inventory_sync_timeouts", "Detector batches folded before the "
                                  "host feed had read every announcement produced before them.",
                                  value=self.inventory_sync_timeouts)


__all__ = ["BATCH_BUCKETS", "StreamMetrics"]
