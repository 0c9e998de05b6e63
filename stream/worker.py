"""Run one stream worker process: topics, metrics server, faust worker, until a signal.

Start-up does every check that can fail before faust starts (broker
reachable, topics present with co-partitioned input topics, ports free),
so a misconfigured worker exits at once with one clear sentence instead
of looping on reconnects.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fleetepi.metrics import serve
from fleetepi.stream.app import StreamWorker, WorkerSettings
from fleetepi.stream.exceptions import StreamError
from fleetepi.stream.metrics import StreamMetrics
from fleetepi.stream.topics import ensure_topics, topic_specs

log = logging.getLogger(__name__)


def prepare(settings: WorkerSettings) -> StreamWorker:
    """Create topics, start the metrics server and build the app (no event loop yet)."""
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    created = ensure_topics(settings.bootstrap, topic_specs(settings.topics, settings.partitions))
    if created:
        log.info("created topics: %s", ", ".join(created))
    metrics = StreamMetrics(input_topics=settings.topics.inputs, ticket_ttl_s=settings.ticket_ttl_s)
    if settings.metrics_port is not None:
        try:
            server = serve(metrics.registry, settings.metrics_port, addr=settings.bind)
        except OSError as exc:
            raise StreamError(f"metrics port {settings.bind}:{settings.metrics_port}: {exc.strerror or exc}") from None
        log.info("metrics on http://%s:%d/metrics", settings.bind, server.server_port)
    return StreamWorker(settings, metrics=metrics)


def run(settings: WorkerSettings, loglevel: str = "warning") -> None:
    """Run until SIGTERM/SIGINT (faust's worker handles the signals and a clean leave of the group)."""
    from faust.worker import Worker

    worker = prepare(settings)
    Worker(worker.app, loglevel=loglevel, quiet=True, redirect_stdouts=False, override_logging=False
           ).execute_from_commandline()


__all__ = ["prepare", "run"]
