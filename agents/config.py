"""The agent's config file: YAML, validated once at start-up, frozen after.

Every mistake (unknown key, wrong type, unknown source kind, duplicate
source name, a spool cap of zero) is an :class:`AgentConfigError` naming
the key, raised before the loop starts (node-problem-detector's
``...OrDie``); nothing in the loop re-reads or re-checks it. Source options
are decoded into each kind's typed options struct here too
(``fleetepi.agents.sources.registry``), so a wrong option names its path. Secrets can be read
from files (``sasl_plain_password_file``) and are masked in :meth:`redacted`.
See ``docs/agent.example.yaml``.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from fleetepi.agents.exceptions import AgentConfigError
from fleetepi.config import ConfigFileError, convert, read_yaml

#: Poll interval per kind when the config gives none (seconds).
DEFAULT_INTERVALS_S = {
    "kmsg": 1.0, "journal": 1.0, "logfile": 1.0, "coredir": 5.0,
    "nvml": 30.0, "hwmon": 30.0, "edac": 60.0, "inventory": 300.0,
    "applog": 1.0, "appjournal": 1.0,
}
FALLBACK_INTERVAL_S = 10.0
#: Longest interval of any kind (a day): also keeps every interval a finite number of milliseconds.
MAX_INTERVAL_S = 86400.0
_SOURCE_KEYS = ("kind", "name", "interval_s")


class PublishConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    spool_dir: str = "/var/lib/fleetepi/spool"
    spool_max_bytes: Annotated[int, Meta(ge=1 << 16)] = 256 << 20
    compression: str | None = "auto"
    batch: Annotated[int, Meta(ge=1)] = 500
    max_block_ms: Annotated[int, Meta(ge=100)] = 2000
    fsync: bool = True
    security_protocol: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    sasl_plain_password_file: str | None = None
    client_id: str | None = None

    def kafka_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`fleetepi.agents.publish.kafka.KafkaPublisher`."""
        opts = {f: getattr(self, f) for f in self.__struct_fields__ if getattr(self, f) is not None}
        opts.pop("sasl_plain_password_file", None)
        if self.sasl_plain_password_file:
            try:
                opts["sasl_plain_password"] = Path(self.sasl_plain_password_file).read_text().strip()
            except OSError as exc:
                raise AgentConfigError(f"publish.sasl_plain_password_file: {exc.strerror or exc}") from None
        return opts


class MetricsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    port: Annotated[int, Meta(ge=0, le=65535)] | None = None
    address: str = "127.0.0.1"


class SourceConfig(msgspec.Struct, frozen=True):
    """One configured source instance; ``options`` is its kind's typed options struct, decoded at start-up."""

    kind: str
    name: str
    interval_s: float
    options: msgspec.Struct


class _Raw(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str | None = None
    labels: dict[str, str] = {}
    output: str | None = None
    publish: PublishConfig = PublishConfig()
    metrics: MetricsConfig = MetricsConfig()
    flush_interval_s: Annotated[float, Meta(gt=0, le=MAX_INTERVAL_S)] = 1.0
    dedup_interval_s: Annotated[float, Meta(gt=0, le=MAX_INTERVAL_S)] = 10.0
    sources: list[dict[str, Any]] = []


class AgentConfig(msgspec.Struct, frozen=True):
    host: str
    labels: dict[str, str]
    output: str | None
    publish: PublishConfig
    metrics: MetricsConfig
    flush_interval_s: float
    dedup_interval_s: float
    sources: tuple[SourceConfig, ...]

    def redacted(self) -> dict[str, Any]:
        """The config as plain data with secrets masked (for ``--print-config`` and logs)."""
        data = msgspec.to_builtins(self)
        if data["publish"].get("sasl_plain_password"):
            data["publish"]["sasl_plain_password"] = "***"
        return data


def _source(i: int, entry: Any, known: list[str]) -> SourceConfig:
    where = f"sources[{i}]"
    if not isinstance(entry, Mapping):
        raise AgentConfigError(f"{where}: expected a mapping with at least 'kind'")
    kind = entry.get("kind")
    if not isinstance(kind, str):
        raise AgentConfigError(f"{where}: 'kind' is required (one of: {', '.join(known)})")
    if kind not in known:
        raise AgentConfigError(f"{where}: unknown source kind {kind!r}; known: {', '.join(known)}")
    name = entry.get("name", kind)
    if not isinstance(name, str) or not name:
        raise AgentConfigError(f"{where}: 'name' must be a non-empty string")
    interval = entry.get("interval_s", DEFAULT_INTERVALS_S.get(kind, FALLBACK_INTERVAL_S))
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval <= MAX_INTERVAL_S:
        raise AgentConfigError(f"{where}: interval_s must be a number > 0 and <= {MAX_INTERVAL_S:.0f}, got {str(interval)[:40]}")
    from fleetepi.agents.sources.registry import decode_options

    options = decode_options(kind, {str(k): v for k, v in entry.items() if k not in _SOURCE_KEYS}, where=where)
    return SourceConfig(kind=kind, name=name, interval_s=float(interval), options=options)


def parse_config(data: Any, host: str | None = None, path: str | Path = "agent config") -> AgentConfig:
    """Validate a config mapping (as loaded from YAML).

    :param host: ``--host`` from the command line; wins over the file.
    :param path: the file, named in every error (``fleetepi.config`` style).
    :raises AgentConfigError: ``path: field.path: problem``, one line.
    """
    from fleetepi.agents.sources.registry import kinds

    try:
        raw = convert(data, _Raw, path)
    except ConfigFileError as exc:
        raise AgentConfigError(str(exc)) from None
    known = kinds()
    try:
        sources = tuple(_source(i, e, known) for i, e in enumerate(raw.sources))
        return _assemble(raw, sources, host)
    except AgentConfigError as exc:
        raise AgentConfigError(f"{path}: {exc}") from None


def _assemble(raw: _Raw, sources: tuple[SourceConfig, ...], host: str | None) -> AgentConfig:
    names = [s.name for s in sources]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise AgentConfigError(f"duplicate source name(s) {', '.join(dup)}: give each instance its own 'name'")
    name = host or raw.host or socket.gethostname()
    if not name or len(name) > 253:
        raise AgentConfigError(f"host name {name!r} must be 1..253 characters")
    if len(raw.labels) > 32:
        raise AgentConfigError("labels: at most 32 static labels")
    return AgentConfig(host=name, labels=dict(raw.labels), output=raw.output, publish=raw.publish,
                       metrics=raw.metrics, flush_interval_s=raw.flush_interval_s,
                       dedup_interval_s=raw.dedup_interval_s, sources=sources)


def load_config(path: str | Path, host: str | None = None) -> AgentConfig:
    """Read and validate the YAML file at ``path`` (bounded reader of ``fleetepi.config``)."""
    try:
        data = read_yaml(path)
    except ConfigFileError as exc:
        raise AgentConfigError(str(exc)) from None
    return parse_config(data, host=host, path=path)


__all__ = ["AgentConfig", "DEFAULT_INTERVALS_S", "MetricsConfig", "PublishConfig", "SourceConfig", "load_config", "parse_config"]
