"""The hook's configuration: one YAML file, validated whole at start-up.

Every pattern is compiled, every argv template is checked for unknown
placeholders and every taint/label is checked against Kubernetes' syntax
before the server binds its port, so a typo fails ``fleetepi hook`` at once
and never half-way through quarantining a host (NPD's ``...OrDie``).

The bearer token is read from a file or an environment variable only: a
token on the command line would sit in ``ps`` output and shell history.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

from msgspec import Meta, Struct

from fleetepi.config import ConfigFileError, convert, load
from fleetepi.exceptions import ConfigError
from fleetepi.hook.template import TEMPLATE_FIELDS, template_fields

#: RFC 1123 labels joined by dots; first character alphanumeric so a host
#: can never read as an option (``-rf``) and no shell metacharacter passes.
DEFAULT_HOST_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"

_K8S_KEY = r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_K8S_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
TAINT_RE = re.compile(rf"^(?P<key>{_K8S_KEY})(=(?P<value>{_K8S_VALUE}))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)$")
LABEL_RE = re.compile(rf"^(?P<key>{_K8S_KEY})=(?P<value>{_K8S_VALUE})$")


class KubernetesAction(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True, tag="kubernetes"):
    """Cordon, taint and/or label the node named like the host (``kubectl``)."""

    cordon: bool = True
    #: ``key[=value]:Effect``, e.g. ``fleetepi.io/quarantine=true:NoSchedule``.
    taint: str | None = None
    #: ``key=value``, e.g. ``fleetepi.io/quarantine=true``.
    label: str | None = None
    kubectl: str = "kubectl"
    #: Extra arguments before the verb, e.g. ``["--context", "prod"]``.
    kubectl_args: tuple[str, ...] = ()


class SlurmAction(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True, tag="slurm"):
    """``scontrol update nodename=HOST state=drain reason=...``; resume on release."""

    reason: str = "fleetepi {alertname} {fingerprint}"
    scontrol: str = "scontrol"


class CommandAction(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True, tag="command"):
    """Any program, run without a shell; each argv element may hold ``{placeholders}``."""

    quarantine: tuple[str, ...]
    release: tuple[str, ...] = ()
    timeout_s: float = 30.0


Action = KubernetesAction | SlurmAction | CommandAction


class Rule(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Alerts whose labels equal every ``match`` entry get ``actions``; first rule wins."""

    name: str
    match: dict[str, str]
    actions: tuple[Action, ...]


class Breaker(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """At most ``max_hosts`` and at most ``max_percent`` % of the fleet per ``window_s``."""

    window_s: Annotated[float, Meta(gt=0)] = 3600.0
    max_hosts: Annotated[int, Meta(ge=0)] = 5
    max_percent: Annotated[float, Meta(ge=0, le=100)] = 2.0
    #: Fleet size; a fallback when ``fleet_size_url`` is set.
    fleet_size: Annotated[int, Meta(ge=1)] | None = None
    #: A fleetepi ``/metrics`` URL; its ``fleetepi_hosts`` gauge is the fleet size.
    fleet_size_url: str | None = None
    fleet_size_ttl_s: float = 60.0


class Rehits(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """A host quarantined, released and hit again: at most ``max`` such re-hits per ``window_s`` (wall time).

    A host that keeps coming back needs a person (an RMA, a firmware fix),
    not another cordon; beyond the cap the hook refuses and says why.
    """

    max: Annotated[int, Meta(ge=0)] = 2
    window_s: Annotated[float, Meta(gt=0)] = 30 * 86400.0


class Places(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """At most ``max_hosts`` hosts of one place (the alert's ``label``, e.g. ``escalation=rack=r07``) held at once.

    Half a rack paging is the rack's problem (its power, switch, cooling):
    draining its hosts one by one would empty it and fix nothing. The first
    ``max_hosts`` are drained (capacity for a diagnosis); the others are
    refused, audited, and wait under the rack's page.
    """

    label: str = "escalation"
    max_hosts: Annotated[int, Meta(ge=1)] = 2


class MaintenanceSettings(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Hosts in planned work are never quarantined: by a label of the alert, a maintenance file, silences.

    ``label``: an alert label that, when non-empty, says the host is in
    maintenance. ``file``: the maintenance file the workers read
    (``fleetepi.maintenance``); ``alertmanager_url``: an Alertmanager whose
    silences naming a host or a place are windows. Both are re-read every
    ``refresh_s`` seconds at most, when a decision needs them.
    """

    label: str = "maintenance"
    file: str | None = None
    alertmanager_url: str | None = None
    refresh_s: Annotated[float, Meta(gt=0)] = 60.0


class HookConfig(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """The whole file (see ``deploy/hook/hook.example.yaml`` for every key, commented)."""

    rules: tuple[Rule, ...]
    listen: str = "127.0.0.1:9109"
    token_file: str | None = None
    token_env: str | None = None
    dry_run: bool = False
    audit_log: str = "fleetepi-hook-audit.jsonl"
    host_label: str = "host"
    host_pattern: str = DEFAULT_HOST_PATTERN
    release_on_resolved: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    breaker: Breaker = Breaker()
    #: The alert label that says page or ticket; the hook never acts on a ticket.
    severity_label: str = "severity"
    rehits: Rehits = Rehits()
    places: Places = Places()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    #: Decisions remembered for idempotency (oldest forgotten first).
    remember: Annotated[int, Meta(ge=1)] = 100_000

    def host_regex(self) -> re.Pattern[str]:
        return re.compile(self.host_pattern)

    def read_token(self, environ: dict[str, str] | None = None) -> str:
        """The bearer token, from ``token_file`` or ``token_env``; never empty."""
        env = os.environ if environ is None else environ
        if self.token_file:
            try:
                token = Path(self.token_file).read_text().strip()
            except OSError as exc:
                raise ConfigError(f"hook token_file {self.token_file}: {exc.strerror}") from None
        elif self.token_env:
            token = env.get(self.token_env, "").strip()
        else:
            raise ConfigError("hook config needs token_file or token_env (the token is never a command-line option)")
        if not token:
            raise ConfigError("hook bearer token is empty")
        return token


def _check(cfg: HookConfig) -> HookConfig:
    try:
        re.compile(cfg.host_pattern)
    except re.error as exc:
        raise ConfigError(f"host_pattern: {exc}") from None
    if cfg.token_file and cfg.token_env:
        raise ConfigError("set token_file or token_env, not both")
    if cfg.breaker.fleet_size is None and cfg.breaker.fleet_size_url is None:
        raise ConfigError("breaker needs fleet_size or fleet_size_url (the X % limit needs a fleet)")
    if not cfg.rules:
        raise ConfigError("no rules: the hook would never act")
    for rule in cfg.rules:
        where = f"rule {rule.name!r}"
        if not rule.match:
            raise ConfigError(f"{where}: empty match would act on every alert")
        for act in rule.actions:
            if isinstance(act, KubernetesAction):
                if act.taint is not None and not TAINT_RE.match(act.taint):
                    raise ConfigError(f"{where}: taint {act.taint!r} is not key[=value]:NoSchedule|PreferNoSchedule|NoExecute")
                if act.label is not None and not LABEL_RE.match(act.label):
                    raise ConfigError(f"{where}: label {act.label!r} is not key=value")
                if not (act.cordon or act.taint or act.label):
                    raise ConfigError(f"{where}: kubernetes action does nothing (cordon false, no taint, no label)")
            elif isinstance(act, SlurmAction):
                _check_template(where, [act.reason])
            else:
                if not act.quarantine:
                    raise ConfigError(f"{where}: command action needs a quarantine argv")
                _check_template(where, [*act.quarantine, *act.release])
    return cfg


def _check_template(where: str, parts: list[str]) -> None:
    for part in parts:
        unknown = template_fields(part) - set(TEMPLATE_FIELDS)
        if unknown:
            raise ConfigError(f"{where}: unknown placeholder(s) {sorted(unknown)} in {part!r}; known: {list(TEMPLATE_FIELDS)}")


def parse_config(data: object, path: str | Path = "hook config") -> HookConfig:
    """Validate a mapping (the parsed YAML) into a frozen config; errors name ``path`` and the field."""
    return _checked(convert(data, HookConfig, path), path)


def _checked(cfg: HookConfig, path: str | Path) -> HookConfig:
    try:
        return _check(cfg)
    except ConfigError as exc:
        raise ConfigFileError(path, "", str(exc)) from None


def load_config(path: str | Path) -> HookConfig:
    """Read and validate the YAML file; every error is one line naming the file and the field."""
    return load(path, HookConfig, check=_check)


__all__ = [
    "DEFAULT_HOST_PATTERN",
    "Action",
    "Breaker",
    "CommandAction",
    "HookConfig",
    "KubernetesAction",
    "MaintenanceSettings",
    "Places",
    "Rehits",
    "Rule",
    "SlurmAction",
    "load_config",
    "parse_config",
]
