"""Metrics *in event time*: replay a recording and write what Prometheus would have scraped.

A live Prometheus sees fleetepi's counters move in wall time. To look at a
recording (a post-mortem, a simulated fleet, the README picture) the dashboard
needs the series as they were *when the events happened*. This module runs
the real pipeline (``fleetepi.pipeline.Pipeline`` with
``fleetepi.metrics.PipelineMetrics``) over the events and, every ``step_s``
of event time, takes the registry's samples with that event time as their
timestamp. The result is an OpenMetrics file that
``promtool tsdb create-blocks-from openmetrics`` turns into TSDB blocks; a
Prometheus started on them serves the dashboard's queries over the recording.

Why OpenMetrics and promtool rather than remote-write: promtool ships with
Prometheus, needs no running server and writes blocks of any age; the
exposition format comes from prometheus_client, so escaping is not ours.
OpenMetrics forbids interleaving families, so samples are kept per family
and written at the end, each series in time order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample, Timestamp

from fleetepi.contract import Event, decode_event
from fleetepi.dashboard.exceptions import DashboardError
from fleetepi.exceptions import InvalidMessage


@dataclass
class _Family:
    name: str
    documentation: str
    typ: str
    unit: str
    #: labelset (sorted items) -> [(sample name, value, ts_ms)]
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, int]]] = field(default_factory=dict)


@dataclass
class HistorySummary:
    """What a recording produced: event-time span, snapshots, alerts."""

    start_ms: int | None = None
    end_ms: int | None = None
    snapshots: int = 0
    events: int = 0
    alerts_fired: int = 0
    series: int = 0


class _Replay(Collector):
    """Yields the recorded families with every sample timestamped (what generate_latest writes)."""

    def __init__(self, families: dict[str, _Family]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        for fam in self._families.values():
            metric = Metric(fam.name, fam.documentation, fam.typ, fam.unit)
            for (sample_name, labels), points in sorted(fam.series.items()):
                label_dict = dict(labels)
                for value, ts_ms in points:
                    metric.samples.append(
                        Sample(sample_name, label_dict, value, Timestamp(ts_ms // 1000, (ts_ms % 1000) * 1_000_000))
                    )
            yield metric


class HistoryRecorder:
    """Feed events in event-time order; take a snapshot of the metrics every ``step_s``.

    :param step_s: event seconds between snapshots (Prometheus' scrape interval, in event time).
    :param pipeline: the pipeline to drive; built with fresh metrics if None.
    """

    def __init__(self, step_s: float = 60.0, pipeline: object | None = None) -> None:
        from fleetepi.metrics import PipelineMetrics
        from fleetepi.pipeline import Pipeline

        if step_s <= 0:
            raise DashboardError(f"step must be positive, got {step_s}")
        self.step_ms = int(step_s * 1000)
        self.metrics = PipelineMetrics(registry=CollectorRegistry())
        self.pipeline = pipeline if pipeline is not None else Pipeline(metrics=self.metrics)
        self.summary = HistorySummary()
        self._families: dict[str, _Family] = {}
        self._next_ms: int | None = None

    def feed(self, events: Iterable[Event | bytes]) -> HistorySummary:
        """Feed decoded events or raw JSON lines (a bad line is counted by the pipeline, as in replay)."""
        pipe = self.pipeline
        s = self.summary
        for item in events:
            if isinstance(item, (bytes, str)):
                if not item.strip():
                    continue
                try:
                    ev = decode_event(item)
                except InvalidMessage:
                    pipe.feed_line(item)
                    continue
            else:
                ev = item
            ts = ev.ts_ms
            if self._next_ms is None:
                self._next_ms = ts - ts % self.step_ms + self.step_ms
                s.start_ms = ts
            while ts >= self._next_ms:
                self.snapshot(self._next_ms)
                self._next_ms += self.step_ms
            s.alerts_fired += sum(1 for a in pipe.feed_event(ev) if a.state == "firing")
            s.events += 1
        return s

    def finish(self) -> HistorySummary:
        """Take the last snapshot (at the step after the last event) and close the span."""
        if self._next_ms is not None:
            self.snapshot(self._next_ms)
        self.summary.series = sum(len(f.series) for f in self._families.values())
        return self.summary

    def snapshot(self, ts_ms: int) -> None:
        self.pipeline.report()
        for metric in self.metrics.registry.collect():
            fam = self._families.get(metric.name)
            if fam is None:
                fam = self._families[metric.name] = _Family(metric.name, metric.documentation, metric.type, metric.unit)
            for sample in metric.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                fam.series.setdefault(key, []).append((float(sample.value), ts_ms))
        self.summary.snapshots += 1
        self.summary.end_ms = ts_ms

    def write(self, out: IO[bytes]) -> None:
        """The whole history as one OpenMetrics document (ends with ``# EOF``)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Replay(self._families))
        out.write(generate_latest(registry))


def record_history(events: Iterable[Event | bytes], output: Path, step_s: float = 60.0) -> HistorySummary:
    """Run the pipeline over ``events`` and write their metrics history to ``output`` (OpenMetrics)."""
    rec = HistoryRecorder(step_s=step_s)
    rec.feed(events)
    summary = rec.finish()
    if summary.snapshots == 0:
        raise DashboardError("no events: nothing to record")
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "wb") as fh:
        rec.write(fh)
    return summary


__all__ = ["HistoryRecorder", "HistorySummary", "record_history"]
