"""One registry of source kinds, each with a typed options struct.

Like node-problem-detector's problem daemons, a source kind maps to a class,
and the agent config lists instances (``- kind: kmsg``, ``- kind: edac``).
A kind registers one way only::

    class EdacOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
        root: str = "/sys/devices/system/edac/mc"

    @register("edac", EdacOptions)
    class EdacSource:
        @classmethod
        def from_options(cls, options: EdacOptions, ctx: SourceContext) -> EdacSource: ...

The options of a config entry are decoded into that struct by
:func:`decode_options` (``msgspec.convert``), so an unknown key or a wrong
type is an :class:`AgentConfigError` naming the source and the field path
(``sources[2].max_per_poll: Expected `int`, got `str```) at start-up, never a
surprise in the loop. What every source may need from the agent (host name,
metrics registry, static labels, the dedup interval) comes in one
:class:`SourceContext`, not through constructor introspection.

Built-in kinds are imported lazily from :data:`BUILTIN`, so an agent without
NVML never imports pynvml and one without core dumps never imports
pyelftools. A third-party source registers itself with :func:`register`
before the config is parsed.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import msgspec

from fleetepi.agents.exceptions import AgentConfigError
from fleetepi.agents.sources.base import Source

#: kind -> module that defines (and registers) it.
BUILTIN: dict[str, str] = {
    "kmsg": "fleetepi.agents.telemetry.kmsg",
    "journal": "fleetepi.agents.telemetry.kmsg",
    "logfile": "fleetepi.agents.telemetry.kmsg",
    "edac": "fleetepi.agents.telemetry.edac",
    "nvml": "fleetepi.agents.telemetry.nvml",
    "hwmon": "fleetepi.agents.telemetry.hwmon",
    "inventory": "fleetepi.agents.inventory",
    "coredir": "fleetepi.agents.sources.coredir",
    "applog": "fleetepi.agents.applog.sources",
    "appjournal": "fleetepi.agents.applog.sources",
}


@dataclass(frozen=True)
class SourceContext:
    """What the agent gives every source besides its own options.

    :param host: host name put on every event.
    :param registry: Prometheus registry of the agent (None: no metrics).
    :param labels: the config's static labels (inventory attributes).
    :param dedup_interval_s: the agent-wide dedup interval, for sources whose options leave it unset.
    :param nvml: the NVML module the nvml and inventory sources use (None: ``pynvml``; tests: a FakeNvml).
    """

    host: str
    registry: Any = None
    labels: Mapping[str, str] = field(default_factory=dict)
    dedup_interval_s: float = 10.0
    nvml: Any = None


class SourceClass(Protocol):
    """What :func:`register` needs of a class: a way to build it from its options."""

    @classmethod
    def from_options(cls, options: Any, ctx: SourceContext) -> Source: ...


@dataclass(frozen=True)
class Kind:
    """One registered kind: its class and its options struct."""

    name: str
    cls: type
    options: type[msgspec.Struct]

    def fields(self) -> list[str]:
        return sorted(self.options.__struct_fields__)


_REGISTRY: dict[str, Kind] = {}

T = TypeVar("T", bound=type)


def register(kind: str, options: type[msgspec.Struct]) -> Callable[[T], T]:
    """Class decorator: make ``kind`` usable in the agent config, with ``options`` as its typed options.

    :raises TypeError: the class has no ``from_options`` or ``options`` is not a msgspec Struct.
    :raises ValueError: another class already holds ``kind``.
    """
    if not (isinstance(options, type) and issubclass(options, msgspec.Struct)):
        raise TypeError(f"source kind {kind!r}: options must be a msgspec.Struct class, got {options!r}")

    def deco(cls: T) -> T:
        if not callable(getattr(cls, "from_options", None)):
            raise TypeError(f"source kind {kind!r}: {cls.__qualname__} needs a from_options(options, ctx) classmethod")
        existing = _REGISTRY.get(kind)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"source kind {kind!r} is already registered by {existing.cls.__module__}.{existing.cls.__qualname__}")
        _REGISTRY[kind] = Kind(kind, cls, options)
        return cls

    return deco


def kinds() -> list[str]:
    """Every kind the config may name."""
    return sorted(set(BUILTIN) | set(_REGISTRY))


def lookup(kind: str) -> Kind:
    """The registered kind, importing its built-in module on first use.

    :raises AgentConfigError: unknown kind, its module cannot be imported, or it does not register ``kind``.
    """
    spec = _REGISTRY.get(kind)
    if spec is not None:
        return spec
    module_name = BUILTIN.get(kind)
    if module_name is None:
        raise AgentConfigError(f"unknown source kind {kind!r}; known: {', '.join(kinds())}")
    try:
        importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentConfigError(f"source kind {kind!r}: cannot import {module_name}: {exc}") from None
    spec = _REGISTRY.get(kind)
    if spec is None:
        raise AgentConfigError(f"source kind {kind!r}: {module_name} does not register it")
    return spec


_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]+)`")


def _explain(exc: msgspec.ValidationError, spec: Kind, where: str) -> str:
    """msgspec's message with ``$`` replaced by where the options sit in the config."""
    text = str(exc)
    m = _AT.search(text)
    path = where + (m.group("path") if m else "")
    text = _AT.sub("", text)
    u = _UNKNOWN.match(text)
    if u:
        return f"{path}: unknown option `{u.group('name')}` for source kind {spec.name!r}; it takes: {', '.join(spec.fields()) or 'no options'}"
    return f"{path}: {text} (source kind {spec.name!r})"


def decode_options(kind: str, options: Mapping[str, Any], where: str | None = None) -> msgspec.Struct:
    """The options of one config entry as ``kind``'s struct.

    :param where: where the entry sits in the config, for messages (``sources[2]``).
    :raises AgentConfigError: unknown kind, unknown option, wrong type or value, naming the field path.
    """
    spec = lookup(kind)
    try:
        return msgspec.convert(dict(options), spec.options)
    except msgspec.ValidationError as exc:
        raise AgentConfigError(_explain(exc, spec, where or f"source {kind!r}")) from None


def create(kind: str, options: Mapping[str, Any] | msgspec.Struct, ctx: SourceContext) -> Source:
    """One source instance from one config entry (options as a mapping or already decoded).

    :raises AgentConfigError: unknown kind or bad options.
    :raises SourceUnavailable: the source cannot run on this host (the caller says so once).
    """
    spec = lookup(kind)
    opts = options if isinstance(options, spec.options) else decode_options(kind, cast(Mapping[str, Any], options))
    try:
        return cast(SourceClass, spec.cls).from_options(opts, ctx)
    except (TypeError, ValueError) as exc:
        raise AgentConfigError(f"source {kind!r}: {exc}") from None


__all__ = ["BUILTIN", "Kind", "SourceContext", "create", "decode_options", "kinds", "lookup", "register"]
