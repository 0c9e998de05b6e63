"""``fleetepi hook``: serve the quarantine hook until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import click
from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)


@click.command("hook")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="Hook YAML config (see deploy/hook/hook.example.yaml).")
@click.option("--listen", default=None, help="HOST:PORT to listen on; overrides the config's listen (127.0.0.1:9109).")
@click.option("--dry-run", is_flag=True, help="Log the commands, run none (overrides the config to dry run).")
def hook_command(config_path: str, listen: str | None, dry_run: bool) -> None:
    """Alertmanager webhook -> cordon/taint (kubectl), drain (scontrol) or a command.

    The bearer token comes from the config's token_file or token_env, never
    from the command line. Every decision goes to the JSON-lines audit log.

    Safety first: the circuit breaker stops acting after N hosts or X % of the
    fleet per window (and pages through fleetepi_hook_circuit_open), allow and
    deny lists filter hosts, and --dry-run logs what would have run.

    \b
    Examples:
      fleetepi hook --config deploy/hook/hook.example.yaml --dry-run
      fleetepi hook --config /etc/fleetepi/hook.yaml --listen 0.0.0.0:9109
      curl -s localhost:9109/healthz
    Point an Alertmanager webhook receiver at http://HOST:9109/alerts
    (see deploy/alertmanager/alertmanager.yml).
    """
    import msgspec

    from fleetepi.config import ConfigExit, config_errors
    from fleetepi.hook.audit import AuditLog
    from fleetepi.hook.config import load_config
    from fleetepi.hook.decider import QuarantineHook
    from fleetepi.hook.server import HookServer

    with config_errors():
        cfg = load_config(config_path)
        if dry_run:
            cfg = msgspec.structs.replace(cfg, dry_run=True)
        token = cfg.read_token()
        registry = CollectorRegistry()
        audit = AuditLog(cfg.audit_log)
        hook = QuarantineHook(cfg, registry, audit)  # reads the audit log back: a damaged one stops here
    try:
        server = HookServer(listen or cfg.listen, hook, token, registry)
    except ValueError as exc:  # the listen address
        raise ConfigExit(f"--listen/listen: {exc}") from None
    except OSError as exc:
        raise click.ClickException(f"cannot start the hook: {exc}") from None

    def stop(signum: int, _frame: Any) -> None:
        log.warning("signal %d: stopping", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    mode = "DRY RUN" if cfg.dry_run else "acting"
    click.echo(f"fleetepi hook: {mode}, listening on {server.url} (audit log {cfg.audit_log})", err=True)
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        logging.getLogger("fleetepi.hook").setLevel(logging.INFO)  # every decision on stderr
    try:
        server.serve_forever()
    finally:
        server.server_close()
        audit.close()


__all__ = ["hook_command"]
