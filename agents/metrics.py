"""The node agent's Prometheus series (docs/metrics.md, "Node agent").

One :class:`AgentMetrics` per registry, shared by the agent loop, the spool
and the Kafka publisher through :meth:`AgentMetrics.of`, so each series is
registered once however many components report into it.
"""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge

_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, AgentMetrics] = weakref.WeakKeyDictionary()


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.spool_messages = Gauge("fleetepi_agent_spool_messages", "Events waiting in the on-disk spool.", registry=registry)
        self.spool_bytes = Gauge("fleetepi_agent_spool_bytes", "Size of the on-disk spool.", registry=registry)
        self.spool_dropped = Counter("fleetepi_agent_spool_dropped", "Events dropped because the spool cap was hit.", registry=registry)
        self.published = Counter("fleetepi_agent_published", "Events delivered.", ["topic"], registry=registry)
        self.source_up = Gauge("fleetepi_agent_source_up", "1 if the source runs, 0 if it is off on this host.", ["source"], registry=registry)
        self.log_lines = Counter("fleetepi_agent_log_lines", "Kernel-log lines read, by outcome (event or rejection reason).",
                                 ["outcome"], registry=registry)
        self.events = Counter("fleetepi_agent_events", "Events produced by sources, by kind (after dedup).", ["kind"], registry=registry)
        self.source_errors = Counter("fleetepi_agent_source_errors", "Unexpected errors in a source's poll (the source keeps running).",
                                     ["source"], registry=registry)

    @classmethod
    def of(cls, registry: CollectorRegistry | None) -> AgentMetrics:
        """The metrics of ``registry`` (a private throw-away registry when None)."""
        if registry is None:
            return cls(CollectorRegistry())
        m = _BY_REGISTRY.get(registry)
        if m is None:
            m = _BY_REGISTRY[registry] = cls(registry)
        return m


__all__ = ["AgentMetrics"]
