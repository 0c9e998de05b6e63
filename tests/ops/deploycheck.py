"""Helpers of the deployment tests (Helm chart, systemd units): check a command line against the real CLI."""

from __future__ import annotations

import copy

import click


def parse_command_line(component: str, args: list[str]) -> click.Context:
    """Let ``fleetepi <component>``'s click command parse ``args`` without running it.

    Path options are not checked for existence: the files a pod or an
    installed host has (/etc/fleetepi/...) do not exist here. The command is
    copied first, because click command objects are shared by the whole test
    session. Raises click's usage errors for an unknown flag or a bad value.
    """
    from fleetepi.cli import main

    ctx = click.Context(main)
    command = main.get_command(ctx, component)
    assert command is not None, f"fleetepi has no subcommand {component!r}"
    command = copy.copy(command)
    command.params = [copy.copy(p) for p in command.params]
    for param in command.params:
        if isinstance(param.type, click.Path):
            param.type = click.STRING
    return command.make_context(component, list(args), parent=ctx)
