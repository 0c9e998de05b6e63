"""Sources register by name; one config entry is one instance.

Like node-problem-detector's problem daemons, a source kind maps to a class,
and the agent config lists instances (``- kind: kmsg``, ``- kind: edac``).
Built-in kinds are imported lazily from :data:`BUILTIN`, so an agent
without NVML never imports pynvml and one without core dumps never imports
pyelftools. A third-party source registers itself with :func:`register`.

Construction: ``cls(**options)`` plus ``host=`` and ``registry=`` when the
constructor takes them. Unknown or bad options are a ``ConfigError`` at
start-up, never a surprise in the loop.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

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
}

_REGISTRY: dict[str, type] = {}

T = TypeVar("T", bound=type)


def register(kind: str) -> Callable[[T], T]:
    """Class decorator: make ``kind`` usable in the agent config."""

    def deco(cls: T) -> T:
        existing = _REGISTRY.get(kind)
        if existing is not None and existing is not cls:
            raise ValueError(f"source kind {kind!r} is already registered by {existing.__module__}.{existing.__qualname__}")
        _REGISTRY[kind] = cls
        return cls

    return deco


def kinds() -> list[str]:
    """Every kind the config may name."""
    return sorted(set(BUILTIN) | set(_REGISTRY))


def lookup(kind: str) -> type:
    """The class for ``kind``, importing its module on first use.

    A module that does not use :func:`register` is searched for a class whose
    ``kind`` attribute equals ``kind`` (so ``fleetepi.agents.sources.coredir`` needs no
    knowledge of this registry).

    :raises AgentConfigError: unknown kind, or its module cannot be imported.
    """
    cls = _REGISTRY.get(kind)
    if cls is not None:
        return cls
    module_name = BUILTIN.get(kind)
    if module_name is None:
        raise AgentConfigError(f"unknown source kind {kind!r}; known: {', '.join(kinds())}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentConfigError(f"source kind {kind!r}: cannot import {module_name}: {exc}") from None
    cls = _REGISTRY.get(kind)
    if cls is None:
        for obj in vars(module).values():
            if inspect.isclass(obj) and getattr(obj, "kind", None) == kind and obj.__module__ == module.__name__:
                cls = obj
                break
    if cls is None:
        raise AgentConfigError(f"source kind {kind!r}: {module_name} defines no class with kind = {kind!r}")
    _REGISTRY[kind] = cls
    return cls


def create(kind: str, options: Mapping[str, Any], *, host: str, registry: Any = None) -> Source:
    """One source instance from one config entry.

    :raises AgentConfigError: unknown kind or options the class does not take.
    :raises SourceUnavailable: the source cannot run on this host (the caller says so once).
    """
    cls = lookup(kind)
    params = inspect.signature(cls).parameters
    kwargs = dict(options)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if "host" in params or takes_any:
        kwargs.setdefault("host", host)
    if registry is not None and ("registry" in params or takes_any):
        kwargs.setdefault("registry", registry)
    unknown = sorted(k for k in kwargs if k not in params and not takes_any)
    if unknown:
        allowed = sorted(n for n, p in params.items() if n not in ("self", "host", "registry") and p.kind is not inspect.Parameter.VAR_POSITIONAL)
        raise AgentConfigError(f"source {kind!r}: unknown option(s) {', '.join(unknown)}; it takes: {', '.join(allowed) or 'no options'}")
    try:
        return cls(**kwargs)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise AgentConfigError(f"source {kind!r}: {exc}") from None


__all__ = ["BUILTIN", "create", "kinds", "lookup", "register"]
