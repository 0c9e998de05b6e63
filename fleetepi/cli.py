"""The ``fleetepi`` command line: one entry point, one subcommand per job.

Subcommands are imported only when invoked, so ``fleetepi replay`` never
loads faust or pyelftools, and ``fleetepi --help`` is instant. Each package
owns its commands (``agents/cli.py``, ``stream/cli.py``, ...); this table is
the only place that names them.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

#: name -> "module:attribute" of a click command. Order is the help order.
COMMANDS: dict[str, str] = {
    "demo": "fleetepi.demo:demo_command",
    "replay": "fleetepi.replay:replay_command",
    "simulate": "fleetepi.simulate.cli:simulate_command",
    "investigate": "fleetepi.investigate:investigate_command",
    "report": "fleetepi.report.cli:report_command",
    "archive": "fleetepi.archive.cli:archive_command",
    "agent": "fleetepi.agents.cli:agent_command",
    "signature": "fleetepi.agents.core.cli:signature_command",
    "core-handler": "fleetepi.agents.core.cli:core_handler_command",
    "run": "fleetepi.agents.applog.cli:run_command",
    "worker": "fleetepi.stream.cli:worker_command",
    "publish": "fleetepi.stream.cli:publish_command",
    "alerts": "fleetepi.stream.cli:alerts_command",
    "dev": "fleetepi.stream.cli:dev_group",
    "hook": "fleetepi.hook.cli:hook_command",
    "dashboard": "fleetepi.dashboard.cli:dashboard_command",
}

_HELP = {
    "demo": "Simulate a fleet and detect outbreaks in-process; serve metrics on :9108.",
    "replay": "Run the detectors over recorded events (JSON lines) and write alerts.",
    "simulate": "Write a simulated fleet's events with labelled outbreaks (ground truth).",
    "investigate": "Look back at one signature, host or cohort over the event archive's months.",
    "report": "One self-contained HTML report of the event archive: curves, cohorts, shapes, heat maps.",
    "archive": "Archive the contract topics from Kafka into Parquet; compact and expire an archive.",
    "agent": "Node agent: publish crashes, hardware telemetry and inventory of this host.",
    "signature": "Print the crash signature, frames and crash shape of a core file.",
    "core-handler": "core_pattern pipe handler: read a core from stdin, publish its crash event.",
    "run": "Run a job, pass its output through, publish its failures (tracebacks, hangs, OOM) as crash events.",
    "worker": "Stream worker (faust) on a Kafka broker: detectors at fleet scale.",
    "publish": "Feed recorded events (JSON lines) into the contract's Kafka topics.",
    "alerts": "Print the alerts the stream workers wrote to the alerts topic, as they come.",
    "dev": "Local development services (a single-node Kafka broker).",
    "hook": "Quarantine hook: Alertmanager webhook -> cordon/drain/command, with safety limits.",
    "dashboard": "Generate the Grafana dashboard and render its main panels to PNG.",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            return _unavailable(cmd_name, exc)
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _HELP.get(name, "")) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, exc: ImportError) -> click.Command:
    @click.command(name=name, help=f"(unavailable: {exc})")
    def stub() -> None:
        raise click.ClickException(
            f"'fleetepi {name}' needs a component that is not installed ({exc}). "
            "Install the extras: pip install 'fleetepi[agent,stream,ops]'."
        )

    return stub


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="fleetepi")
def main(verbose: int) -> None:
    """fleetepi: core dump epidemiology for GPU fleets.

    Counts crashes and hardware errors across the fleet, in event time and by
    cohort, and says which signature is spiking, which host is sick, and
    which crash lives only on hosts with one attribute value.

    \b
    Start here:
      fleetepi demo                      simulated fleet, alerts, metrics on :9108
      fleetepi simulate -o ev.jsonl      record a simulated fleet
      fleetepi replay -i ev.jsonl -o -   detectors over a recording
      fleetepi signature core.1234       what a core dump says
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    main()
