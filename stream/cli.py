"""``fleetepi worker``, ``fleetepi publish`` and ``fleetepi dev kafka start|stop|status``."""

from __future__ import annotations

import importlib
import json
import logging
import sys
from pathlib import Path
from types import ModuleType

import click

from fleetepi.brokers import DEFAULT_BROKER, DEFAULT_KAFKA_PORT, broker_option
from fleetepi.exceptions import FleetepiError


def _fail(exc: Exception) -> click.ClickException:
    return click.ClickException(str(exc))


@click.command("worker")
@click.option("--broker", default=DEFAULT_BROKER, show_default=True, callback=broker_option,
              help="kafka://HOST:PORT[,HOST:PORT] of the broker(s).")
@click.option("--app-id", default="fleetepi", show_default=True, help="Consumer group: workers with one id share the load.")
@click.option("--topic-prefix", default="", help="Prefix of every topic name (several pipelines on one broker).")
@click.option("--partitions", default=4, show_default=True, type=click.IntRange(1, 1024),
              help="Partitions of the topics the worker creates (existing topics are kept).")
@click.option("--web-port", default=6066, show_default=True, type=click.IntRange(1, 65535),
              help="faust web server: /fleetepi/status/ and /fleetepi/counts/.")
@click.option("--metrics-port", default=9108, show_default=True, type=click.IntRange(0, 65535),
              help="Prometheus /metrics (0: a free port).")
@click.option("--no-metrics", is_flag=True, help="Do not serve Prometheus metrics.")
@click.option("--bind", default="127.0.0.1", show_default=True, help="Listen address of the web and metrics servers.")
@click.option("--data-dir", default="./fleetepi-worker-data", show_default=True, type=click.Path(file_okay=False),
              help="faust's directory and the state checkpoints.")
@click.option("--batch-max", default=2000, show_default=True, type=click.IntRange(1, 100_000), help="Records per batch.")
@click.option("--batch-within", default=0.05, show_default=True, type=click.FloatRange(0.001, 10.0),
              help="Longest wait (s) to fill a batch.")
@click.option("--checkpoint-interval", default=30.0, show_default=True, type=click.FloatRange(0.0),
              help="Seconds between state checkpoints (0: off; recovery then reads the whole retained log).")
@click.option("--idle-release", default=10.0, show_default=True, type=click.FloatRange(0.0),
              help="Seconds a detector partition waits for a quiet source partition before releasing "
                   "its events anyway (0: wait forever).")
@click.option("--fetch-loop", type=click.Choice(["fast", "faust"]), default="fast", show_default=True,
              help="fast: faust's fetch loop without its per-record task race (~2x the throughput, "
                   "stream/faust_adapter.py); faust: faust's own, if an upgrade of faust breaks the fast one.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Detector settings (YAML or JSON mapping of DetectorConfig fields).")
@click.option("--maintenance", "maintenance_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Maintenance windows (YAML or CSV, see fleetepi/maintenance.py), re-read when it changes.")
@click.option("--alertmanager", "alertmanager_url", metavar="URL",
              help="Alertmanager base URL: its silences that name a host or a place (rack=r07) are maintenance "
                   "windows, read every --maintenance-refresh seconds.")
@click.option("--maintenance-refresh", default=60.0, show_default=True, type=click.FloatRange(1.0),
              help="Seconds between two reads of the maintenance file and the silences.")
@click.option("--ticket-ttl", "ticket_ttl_s", default=86_400.0, show_default=True, type=click.FloatRange(0.0),
              metavar="SECONDS", help="Event time a ticket's alert series stays up (tickets never resolve); 0: forever.")
def worker_command(broker: str, app_id: str, topic_prefix: str, partitions: int, web_port: int, metrics_port: int,
                   no_metrics: bool, bind: str, data_dir: str, batch_max: int, batch_within: float,
                   checkpoint_interval: float, idle_release: float, fetch_loop: str,
                   config_path: str | None, maintenance_path: str | None, alertmanager_url: str | None,
                   maintenance_refresh: float, ticket_ttl_s: float) -> None:
    """Run a stream worker: the detectors on the partitions this worker owns.

    \b
    Planned work: hosts announced with a maintenance attribute, the windows
    of --maintenance FILE and the silences of --alertmanager URL count
    neither as cases nor in baselines. Silences make a live worker's
    decisions depend on when it read them (a replay with the file only is
    deterministic).

    \b
    Examples:
      fleetepi worker --broker kafka://127.0.0.1:9092
      fleetepi worker --maintenance /etc/fleetepi/maintenance.yaml --alertmanager http://alertmanager:9093
    """
    from fleetepi.config import config_errors, load
    from fleetepi.detectors import DetectorConfig
    from fleetepi.stream.app import WorkerSettings
    from fleetepi.stream.worker import run

    with config_errors():
        config = load(config_path, DetectorConfig) if config_path else DetectorConfig()
        if maintenance_path:
            from fleetepi.maintenance import load_windows

            load_windows(maintenance_path)  # a bad file stops here, before the broker is touched
    try:
        settings = WorkerSettings(broker=broker, app_id=app_id, topic_prefix=topic_prefix, partitions=partitions,
                                  web_port=web_port, metrics_port=None if no_metrics else metrics_port, bind=bind,
                                  data_dir=data_dir, batch_max=batch_max, batch_within_s=batch_within,
                                  checkpoint_interval_s=checkpoint_interval, idle_release_s=idle_release,
                                  fast_consumer=fetch_loop == "fast",
                                  config=config, maintenance_file=maintenance_path,
                                  alertmanager_url=alertmanager_url, maintenance_refresh_s=maintenance_refresh,
                                  ticket_ttl_s=ticket_ttl_s)
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
        run(settings, loglevel=level)
    except FleetepiError as exc:
        raise _fail(exc) from None


@click.command("publish")
@click.argument("events", type=click.Path(allow_dash=True))
@click.option("--broker", default=DEFAULT_BROKER, show_default=True, callback=broker_option,
              help="kafka://HOST:PORT[,HOST:PORT] of the broker(s).")
@click.option("--topic-prefix", default="", help="Prefix of every topic name.")
@click.option("--rate", type=click.FloatRange(min=1.0), help="Events per second (default: as fast as possible).")
@click.option("--create-topics/--no-create-topics", default=True, show_default=True,
              help="Create missing topics first (with --partitions).")
@click.option("--partitions", default=4, show_default=True, type=click.IntRange(1, 1024))
def publish_command(events: str, broker: str, topic_prefix: str, rate: float | None, create_topics: bool,
                    partitions: int) -> None:
    """Send the events of EVENTS.jsonl[.gz] to the topics, hosts first, keyed by host."""
    from fleetepi.brokers import bootstrap_of
    from fleetepi.stream.publish import publish_file
    from fleetepi.stream.topics import TopicNames, ensure_topics, topic_specs

    names = TopicNames(topic_prefix)
    bootstrap = bootstrap_of(broker)
    try:
        if create_topics:
            ensure_topics(bootstrap, topic_specs(names, partitions))
        stats = publish_file(events, bootstrap, names, rate=rate)
    except FleetepiError as exc:
        raise _fail(exc) from None
    parts = ", ".join(f"{t}: {n}" for t, n in sorted(stats.sent.items()))
    skipped = ", ".join(f"{r}: {n}" for r, n in sorted(stats.skipped.items()))
    click.echo(f"published {stats.total} events in {stats.elapsed_s:.2f} s ({stats.rate:,.0f}/s): {parts}"
               + (f"; skipped {skipped}" if skipped else ""))


@click.command("alerts")
@click.option("--broker", default=DEFAULT_BROKER, show_default=True, callback=broker_option,
              help="kafka://HOST:PORT[,HOST:PORT] of the broker(s).")
@click.option("--topic-prefix", default="", help="Prefix of every topic name.")
@click.option("--count", "-n", type=click.IntRange(min=1), help="Exit after this many firing alerts.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), help="Stop after this many seconds; with "
              "--count, exit 1 if fewer came.")
@click.option("--new-only", is_flag=True, help="Only alerts written from now on (default: the topic from its start).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as they are (JSON lines, contract v1.1).")
def alerts_command(broker: str, topic_prefix: str, count: int | None, timeout_s: float | None, new_only: bool,
                   as_json: bool) -> None:
    """Print the alerts the workers wrote to the alerts topic, as they come.

    Reads without a consumer group (no offsets move). One line per alert:
    time, severity, state, kind, summary.

    \b
    Examples:
      fleetepi alerts --broker kafka://127.0.0.1:9092 --count 1 --timeout 600
      fleetepi alerts --json | jq 'select(.severity == "page")'
    """
    from fleetepi.brokers import bootstrap_of
    from fleetepi.stream.tail import one_line, read_alerts
    from fleetepi.stream.topics import TopicNames

    topic = TopicNames(topic_prefix).alerts
    firing = 0
    try:
        for raw, alert in read_alerts(bootstrap_of(broker), topic, from_beginning=not new_only, timeout_s=timeout_s):
            if as_json or alert is None:
                click.echo(raw.decode("utf-8", "replace"))
            else:
                click.echo(one_line(alert))
            if alert is not None and alert.state == "firing":
                firing += 1
                if count is not None and firing >= count:
                    return
    except FleetepiError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt:
        return
    if count is not None and firing < count:
        click.echo(f"{firing} firing alert(s) on {topic} within {timeout_s:g} s, fewer than {count}", err=True)
        raise SystemExit(1)


@click.group("dev")
def dev_group() -> None:
    """Local development services (from a source checkout: tools/ is not in the installed package)."""


@dev_group.group("kafka")
def kafka_group() -> None:
    """A single-node Kafka broker (KRaft) on 127.0.0.1, installed from Maven Central into the cache.

    For trying fleetepi and for its tests; a deployment points --broker at its own Kafka.
    """


def _devbroker() -> ModuleType:
    """``tools/devbroker.py`` of the source checkout this fleetepi runs from (editable install, or the repo).

    A development tool, not part of the package: an installed wheel has no
    tools/ and says so instead of shipping a Maven-based broker installer.
    """
    tools = Path(__file__).resolve().parents[1] / "tools"
    if not (tools / "devbroker.py").is_file():
        raise click.ClickException("`fleetepi dev kafka` runs from a source checkout of fleetepi (tools/devbroker.py); "
                                   "an installed fleetepi uses your Kafka: pass its address with --broker")
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))
    return importlib.import_module("devbroker")


_cache = click.option("--cache-dir", type=click.Path(file_okay=False), help="Jar cache (default $FLEETEPI_CACHE or ~/.cache/fleetepi).")
_data = click.option("--data-dir", type=click.Path(file_okay=False), help="Broker state (default <cache>/kafka-data).")


@kafka_group.command("start")
@_cache
@_data
@click.option("--port", type=click.IntRange(1, 65535),
              help="Client port (default: 9092, the README's and every command's default broker, when it is free; else a free one, said so).")
@click.option("--fresh", is_flag=True, help="Wipe the data directory first.")
def kafka_start(cache_dir: str | None, data_dir: str | None, port: int | None, fresh: bool) -> None:
    """Install (once), format (once) and start the broker; prints its bootstrap address."""
    devbroker = _devbroker()
    try:
        info = devbroker.start(data_dir=data_dir, port=port, cache_dir=cache_dir, fresh=fresh,
                               preferred_port=DEFAULT_KAFKA_PORT)
    except FleetepiError as exc:
        raise _fail(exc) from None
    if port is None and info.port != DEFAULT_KAFKA_PORT:
        click.echo(f"port {DEFAULT_KAFKA_PORT} was taken: the broker is on {info.port}; pass its --broker to the "
                   "other commands (their default is kafka://127.0.0.1:9092)", err=True)
    click.echo(f"kafka {info.version} running (pid {info.pid}): --broker kafka://{info.bootstrap}")


@kafka_group.command("stop")
@_cache
@_data
def kafka_stop(cache_dir: str | None, data_dir: str | None) -> None:
    """Stop the broker (SIGTERM, then wait)."""
    devbroker = _devbroker()
    click.echo("stopped" if devbroker.stop(data_dir, cache_dir) else "not running")


@kafka_group.command("status")
@_cache
@_data
def kafka_status(cache_dir: str | None, data_dir: str | None) -> None:
    """Print the broker's pid, ports and whether it answers (JSON); exit 1 if it is not running."""
    devbroker = _devbroker()
    st = devbroker.status(data_dir, cache_dir)
    click.echo(json.dumps(st, indent=2))
    if not st.get("answers"):
        raise SystemExit(1)


__all__ = ["dev_group", "publish_command", "worker_command"]
