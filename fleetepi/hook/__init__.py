"""Quarantine hook: Alertmanager webhook in, cordon/drain/command out, with safety limits.

See docs/operations.md. The policy lives in :mod:`fleetepi.hook.decider`,
the HTTP front in :mod:`fleetepi.hook.server`, the command lines in
:mod:`fleetepi.hook.actions`.
"""

from fleetepi.hook.config import HookConfig, load_config, parse_config
from fleetepi.hook.decider import Decision, QuarantineHook
from fleetepi.hook.server import HookServer

__all__ = ["Decision", "HookConfig", "HookServer", "QuarantineHook", "load_config", "parse_config"]
