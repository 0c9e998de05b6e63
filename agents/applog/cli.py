"""``fleetepi run``: the job wrapper's command line."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
from pathlib import Path

import click

from fleetepi.brokers import broker_option
from fleetepi.procs import pid_alive

log = logging.getLogger(__name__)

_HELP = """Run a job; pass its output through unchanged; turn its failures into crash events.

\b
Everything after -- is the job. Its stdout and stderr are copied to this
command's stdout and stderr byte for byte, and read for failures: Python
tracebacks (chained, threads, worker processes, torchrun [rankN]: prefixes),
NCCL watchdog timeouts (hangs), NCCL warnings, CUDA out-of-memory and
illegal-address errors, C++ terminate and glog FATAL lines. Each becomes a
fleetepi.crash/v1 event with its origin; a flood of one failure becomes one
event with a count. The exit status is the job's (128+N when it died of
signal N, like a shell); signals sent to this command are passed to the job.

\b
The job id on every event: --job, else FLEETEPI_JOB, SLURM_JOB_ID (slurm:N),
TORCHELASTIC_RUN_ID (torchelastic:ID), so the ranks of one job count as one
case.

\b
Examples:
  fleetepi run --output /var/log/fleetepi/crashes.jsonl -- python train.py --lr 3e-4
  srun fleetepi run --broker kafka://kafka-1:9092 -- python train.py
  FLEETEPI_BROKER=kafka://kafka-1:9092 fleetepi run --job exp-17 -- torchrun --nproc-per-node 8 train.py
"""


def _spool_base() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "fleetepi" / "run-spool"



def _resend_orphans(base: Path, mine: Path, url: str, timeout_s: float) -> None:
    """Spools of earlier runs whose process is gone (the broker was away then): send what they hold."""
    from fleetepi.agents.exceptions import PublishError
    from fleetepi.agents.publish import open_publisher

    for d in sorted(base.glob("[0-9]*")):
        if d == mine or not d.is_dir() or pid_alive(int(d.name)):
            continue
        try:
            pub = open_publisher(url, spool_dir=str(d))
            pub.flush(timeout_s=timeout_s)
            pending = pub.spool.pending  # type: ignore[attr-defined]
            pub.close()
        except (PublishError, ValueError, OSError) as exc:
            log.info("fleetepi run: spool %s left for later: %s", d, exc)
            continue
        if not pending:
            shutil.rmtree(d, ignore_errors=True)


@click.command(name="run", help=_HELP, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--output", "-o", envvar="FLEETEPI_RUN_OUTPUT", default=None, help="Append crash events to this JSON-lines file (env FLEETEPI_RUN_OUTPUT).")
@click.option("--broker", envvar="FLEETEPI_BROKER", default=None, callback=broker_option, help="kafka://host:port[,...]: publish crash events to Kafka (env FLEETEPI_BROKER).")
@click.option("--job", default=None, help="Job id on every event (default: from the scheduler's environment).")
@click.option("--job-env", multiple=True, help="Another environment variable holding the job id (repeatable).")
@click.option("--host", default=None, help="Host name on every event (default: this machine's hostname).")
@click.option("--spool-dir", default=None, type=click.Path(file_okay=False),
              help="With --broker: where events wait while the broker is away (default ~/.cache/fleetepi/run-spool/PID; "
                   "a later run resends what an earlier one left).")
@click.option("--rules-dir", default=None, type=click.Path(file_okay=False), help="App-log rules (default: the shipped agents/rules/app-log).")
@click.option("--flush-timeout", "flush_timeout_s", default=10.0, show_default=True, help="Seconds to wait for the broker after the job ends.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def run_command(output: str | None, broker: str | None, job: str | None, job_env: tuple[str, ...], host: str | None,
                spool_dir: str | None, rules_dir: str | None, flush_timeout_s: float, cmd: tuple[str, ...]) -> None:
    from fleetepi.agents.applog.job import job_from_env
    from fleetepi.agents.applog.rules import shipped_rules
    from fleetepi.agents.applog.run import run_job
    from fleetepi.agents.exceptions import PublishError
    from fleetepi.agents.publish import open_publisher
    from fleetepi.exceptions import FleetepiError

    if bool(output) == bool(broker):
        raise click.UsageError("give exactly one of --output FILE or --broker kafka://... (or FLEETEPI_RUN_OUTPUT / FLEETEPI_BROKER)")
    try:
        shipped_rules(rules_dir)  # a bad rules edit stops here, before the job starts
    except FleetepiError as exc:
        raise click.ClickException(str(exc)) from None
    base = _spool_base()
    mine = Path(spool_dir) if spool_dir else base / str(os.getpid())
    try:
        publisher = (open_publisher(broker, spool_dir=str(mine)) if broker else open_publisher(output or "-"))
    except (PublishError, ValueError) as exc:
        raise click.UsageError(f"cannot open the event output: {exc}") from None
    status = run_job(list(cmd), publisher, host or socket.gethostname(), job or job_from_env(os.environ, job_env),
                     flush_timeout_s=flush_timeout_s, rules_dir=rules_dir)
    if broker:
        if not spool_dir and not publisher.spool.pending:  # type: ignore[attr-defined]
            shutil.rmtree(mine, ignore_errors=True)
        if not spool_dir and base.is_dir():
            _resend_orphans(base, mine, broker, min(5.0, flush_timeout_s))
    sys.exit(status)


__all__ = ["run_command"]
