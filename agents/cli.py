"""``fleetepi agent``: the node agent's command line."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

import click

from fleetepi.exceptions import FleetepiError

log = logging.getLogger("agents")

EXAMPLE_CONFIG = Path(__file__).resolve().parent.parent / "docs" / "agent.example.yaml"

_HELP = """Publish this host's hardware telemetry, crashes and inventory.

\b
Sources (each optional; one that cannot run here is switched off with one
log line and fleetepi_agent_source_up{source}=0):
  inventory  DMI, CPU model/microcode, kernel, GPU model/driver/VBIOS + labels
  kmsg       /dev/kmsg: Xid, SXid, fallen-off-the-bus, RmInitAdapter, GSP,
             EDAC/MCE, PCIe AER lines (rules: agents/rules/kernel-log/)
  journal    the same through `journalctl -k -f` (no /dev/kmsg access)
  logfile    the same from a text file (followed across rotation)
  edac       /sys/devices/system/edac counters, published as deltas
  nvml       GPU ECC, retired pages, row remapping, temperature, power, throttling
  hwmon      /sys/class/hwmon temperatures: threshold crossings + samples
  coredir    core dumps in a directory -> crash events with signatures
  applog     application log files (globs): Python tracebacks, NCCL watchdog
             hangs, CUDA OOM/illegal address, OOM kills -> crash events
  appjournal the same from systemd units (journalctl -o json -f)
  (wrap a job instead with: fleetepi run --output FILE -- CMD ...)

\b
Outputs (--output or `output:` in the config):
  kafka://host:9092[,host2:9092]  Kafka, acks=all, keyed by host; spooled on
                                  disk (publish.spool_dir) while the broker
                                  is away and resent in order
  events.jsonl                    JSON lines, appended (replay, tests)
  -                               JSON lines on stdout

\b
Example config (docs/agent.example.yaml):
  labels: {rack: r17, datacenter: dc1, cluster: train-a}
  output: kafka://kafka-1:9092
  publish: {spool_dir: /var/lib/fleetepi/spool, spool_max_bytes: 268435456}
  metrics: {port: 9110}
  sources:
    - {kind: inventory, interval_s: 300}
    - {kind: kmsg}
    - {kind: edac, interval_s: 60}
    - {kind: nvml, interval_s: 30}
    - {kind: hwmon, interval_s: 30}

\b
Try it without a broker:
  fleetepi agent --config docs/agent.example.yaml --output - --once
"""


@click.command(name="agent", help=_HELP)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Agent config (YAML). Default: inventory + kmsg + edac + nvml + hwmon with built-in settings.")
@click.option("--output", "-o", default=None, help="kafka://host:port[,...], a .jsonl file, or - for stdout (overrides the config).")
@click.option("--host", default=None, help="Host name on every event (default: config 'host', else this machine's hostname).")
@click.option("--once", is_flag=True, help="Poll every source once, publish, flush and exit (cron, smoke tests).")
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus metrics on this port (overrides the config; 0 = off).")
@click.option("--metrics-address", default=None, help="Address to serve metrics on (default 127.0.0.1).")
@click.option("--print-config", is_flag=True, help="Print the validated config (secrets masked) and exit.")
def agent_command(config_path: str | None, output: str | None, host: str | None, once: bool,
                  metrics_port: int | None, metrics_address: str | None, print_config: bool) -> None:
    from fleetepi.config import config_errors

    try:
        with config_errors():
            code = _run(config_path, output, host, once, metrics_port, metrics_address, print_config)
    except FleetepiError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


_DEFAULT_SOURCES = [{"kind": k} for k in ("inventory", "kmsg", "edac", "nvml", "hwmon")]


def _run(config_path: str | None, output: str | None, host: str | None, once: bool,
         metrics_port: int | None, metrics_address: str | None, print_config: bool) -> int:
    import json

    import yaml
    from prometheus_client import CollectorRegistry, start_http_server

    from fleetepi.agents.agent import Agent
    from fleetepi.agents.config import load_config, parse_config
    from fleetepi.agents.exceptions import AgentConfigError
    from fleetepi.agents.publish import open_publisher

    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # kafka-python logs every refused connection as an ERROR; while the
        # broker is away our own one-line warning (with the spool depth) says it.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    if config_path:
        config = load_config(config_path, host=host)
    else:
        config = parse_config({"sources": _DEFAULT_SOURCES}, host=host)
    if print_config:
        click.echo(yaml.safe_dump(json.loads(json.dumps(config.redacted())), sort_keys=False))
        return 0
    url = output or config.output
    if not url:
        raise click.UsageError("no output: give --output (kafka://..., a file, or -) or 'output:' in the config")
    registry = CollectorRegistry()
    opts = config.publish.kafka_options() if url.startswith("kafka://") else {"fsync": False}
    try:
        publisher = open_publisher(url, registry=registry, **opts) if url.startswith("kafka://") else open_publisher(url, **opts)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        agent = Agent(config, publisher, registry=registry)
    except AgentConfigError as exc:  # a source's options: still the config file's fault
        publisher.close()
        raise AgentConfigError(f"{config_path}: {exc}" if config_path else str(exc)) from None
    port = metrics_port if metrics_port is not None else config.metrics.port
    if port and not once:
        start_http_server(port, addr=metrics_address or config.metrics.address, registry=registry)
        log.info("metrics on http://%s:%d/metrics", metrics_address or config.metrics.address, port)
    off = [f"{s.name} ({s.why_off})" for s in agent.slots if s.source is None]
    on = [s.name for s in agent.slots if s.source is not None]
    click.echo(f"fleetepi agent: host {config.host}; sources on: {', '.join(on) or 'none'}"
               + (f"; off: {'; '.join(off)}" if off else ""), err=True)
    if once:
        try:
            n = agent.run_once()
        finally:
            agent.close()
        click.echo(f"fleetepi agent: published {n} events", err=True)
        return 0

    def _stop(signum: int, frame: object) -> None:
        agent.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        agent.run()
    finally:
        agent.close()
    return 0


__all__ = ["agent_command"]
