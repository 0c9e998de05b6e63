"""One way to read a config file, for every command: YAML in, typed frozen settings out.

Each command used to read its YAML its own way, with its own error style (a
YAML error or ``sig_alpha: x`` was a traceback for ``fleetepi worker
--config`` and a clean error for ``replay``). Now every config goes through
:func:`load`::

    settings = load(path, DetectorConfig)            # a frozen dataclass
    hook_cfg = load(path, HookConfig, check=_check)  # a frozen msgspec Struct

and every mistake is one :class:`ConfigFileError` whose message is one line
naming the file and the field path::

    detectors.yaml: sig_alpha: expected float, got str
    agent.yaml: publish.spool_dirr: unknown key (did you mean spool_dir?)
    hook.yaml: line 7, column 3: YAML syntax: mapping values are not allowed here
    agent.yaml: not UTF-8 (byte 0xff at offset 12)

Commands wrap their start-up in :func:`config_errors`, which turns any
``ConfigError`` into that line on stderr and exit code 2 (click's code for a
usage error), never a traceback.

Typing is msgspec's (already the contract's decoder): ``msgspec.convert``
checks types, ranges and required keys of a Struct or a dataclass and says
where. Unknown keys are refused for both (msgspec ignores them for
dataclasses, so :func:`_unknown_keys` looks). The YAML reader is bounded:
a file over :data:`MAX_BYTES`, nesting over :data:`MAX_DEPTH` or more than
:data:`MAX_NODES` nodes (aliases counted as what they expand to, so a
"billion laughs" file is refused, not expanded) is an error, not a hang.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec
import yaml

from fleetepi.exceptions import ConfigError

T = TypeVar("T")

#: Largest config file read (configs are a few KiB).
MAX_BYTES = 4 << 20
#: Deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: Most YAML nodes, aliases counted as the nodes they stand for.
MAX_NODES = 200_000


class ConfigFileError(ConfigError):
    """A config file that cannot be used: ``file: field.path: what is wrong``, one line.

    :param path: the file as the user named it.
    :param field: dotted path of the offending key (``publish.spool_dir``,
        ``sources[1].kind``), or "" for the file as a whole.
    :param problem: what is wrong, one sentence.
    """

    def __init__(self, path: str | Path, field: str, problem: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}: {field}: {problem}" if field else f"{self.path}: {problem}")


class ConfigExit(click.ClickException):
    """A config error at a command's start-up: one line, exit code 2."""

    exit_code = 2


@contextmanager
def config_errors() -> Iterator[None]:
    """Inside a command: any ``ConfigError`` leaves as ``Error: <one line>`` and exit code 2."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigExit(" ".join(str(exc).split("\n"))) from None


# ---------------------------------------------------------------------------- YAML, bounded
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it: C speed, same rules


class _TooBig(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def _check_shape(text: str) -> None:
    """Walk the YAML events once, before anything is built: depth and node budget (aliases expanded).

    The parser's events are lazy, so a 100,000-deep ``[[[[`` stops at level
    65 after reading 65 characters; PyYAML's composer would recurse (and its
    pure-Python scanner go quadratic) first.
    """
    loader = _Loader(text)
    try:
        depth = 0
        nodes = 0
        open_: list[tuple[str | None, int]] = []  # (anchor, nodes when the collection started)
        sizes: dict[str, int] = {}
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                nodes += sizes.get(event.anchor, 1)
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _TooBig(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
                open_.append((event.anchor, nodes))
                nodes += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                anchor, before = open_.pop()
                if anchor is not None:
                    sizes[anchor] = nodes - before
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            if nodes > MAX_NODES:
                raise _TooBig(f"more than {MAX_NODES} values (aliases expanded)", event.start_mark)
    finally:
        loader.dispose()


def read_bounded_text(path: str | Path, what: str) -> str:
    """A small text file read whole, at most ``MAX_BYTES``: UTF-8 (a BOM is fine), else a one-line error.

    :raises ConfigFileError: unreadable, larger than ``MAX_BYTES`` (``what`` it is not), not UTF-8.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigFileError(path, "", f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigFileError(path, "", f"larger than {MAX_BYTES >> 20} MiB: not {what}")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, "", f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None


def read_yaml(path: str | Path) -> Any:
    """The parsed YAML (or JSON) document at ``path``; None for an empty file.

    :raises ConfigFileError: unreadable, too large, not UTF-8, bad syntax,
        too deep or too many nodes, naming the file (and line, for syntax).
    """
    p = Path(path)
    text = read_bounded_text(p, "a config file")
    try:
        _check_shape(text)
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigFileError(path, "", _yaml_problem(exc)) from None
    except RecursionError:  # only without libyaml: the pure-Python scanner on a pathological file
        raise ConfigFileError(path, "", f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:  # a 40,000-digit integer: Python's int() refuses it
        raise ConfigFileError(path, "", f"a value cannot be read: {str(exc).split(';')[0]}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    if "nesting depth" in problem:  # libyaml >= 0.2.6 stops deep flow collections itself, scanning ahead of our walk
        line = f"line {mark.line + 1}: " if mark is not None else ""
        return f"{line}nested deeper than {MAX_DEPTH} levels"
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    prefix = "" if isinstance(exc, _TooBig) else "YAML syntax: "
    return f"{where}{prefix}{problem}"


# ---------------------------------------------------------------------------- typing
_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]*)`$")


def convert(data: Any, type_: type[T], path: str | Path, *, at: str = "") -> T:
    """``data`` (parsed YAML) as a ``type_`` (a msgspec Struct or a dataclass), or one clear error.

    :param at: field path of ``data`` inside the file, when it is a part of it.
    :raises ConfigFileError: wrong type, out of range, missing or unknown key.
    """
    if data is None:
        data = {}
    _unknown_keys(data, type_, path, at)
    try:
        return msgspec.convert(data, type_, strict=False)
    except msgspec.ValidationError as exc:
        field, problem = _translate(str(exc), type_)
        raise ConfigFileError(path, _join(at, field), problem) from None
    except ConfigFileError:
        raise
    except (ConfigError, TypeError, ValueError) as exc:  # a __post_init__ that checks across fields
        raise ConfigFileError(path, at, str(exc)) from None


def _translate(text: str, type_: type) -> tuple[str, str]:
    """msgspec's sentence -> (field path, problem): ``Expected `float`, got `str` - at `$.a`` -> (a, expected float, got str)."""
    m = _AT.match(text)
    msg, where = (m.group("msg"), m.group("path") or "") if m else (text, "")
    field = where[1:] if where.startswith(".") else where
    unknown = _UNKNOWN.match(msg)
    if unknown:
        return _join(field, unknown.group("key")), "unknown key"
    missing = _MISSING.match(msg)
    if missing:
        return _join(field, missing.group("key")), "required key missing"
    if msg.startswith("Expected `object`, got"):
        msg = msg.replace("Expected `object`", "Expected a mapping")
    msg = msg.replace("`", "")
    return field, msg[:1].lower() + msg[1:]


def _join(parent: str, child: str) -> str:
    if not parent:
        return child
    if not child:
        return parent
    return f"{parent}{child}" if child.startswith("[") else f"{parent}.{child}"


def _field_types(type_: Any) -> dict[str, Any] | None:
    """Field name -> type of a dataclass or a Struct (None for anything else)."""
    if dataclasses.is_dataclass(type_):
        hints = typing.get_type_hints(type_)
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(type_)}
    if isinstance(type_, type) and issubclass(type_, msgspec.Struct):
        hints = typing.get_type_hints(type_)
        return {name: hints.get(name, Any) for name in type_.__struct_fields__}
    return None


def _unknown_keys(data: Any, type_: Any, path: str | Path, at: str) -> None:
    """Refuse keys a dataclass does not have (msgspec ignores them there), with a close match if any."""
    fields = _field_types(type_)
    if fields is None or not isinstance(data, Mapping):
        return
    config = getattr(type_, "__struct_config__", None)
    checked_by_msgspec = config is not None and getattr(config, "forbid_unknown_fields", False)
    for key, value in data.items():
        if key not in fields:
            if checked_by_msgspec:
                continue  # msgspec names it, with its path
            hint = difflib.get_close_matches(str(key), list(fields), n=1)
            raise ConfigFileError(path, _join(at, str(key)), "unknown key" + (f" (did you mean {hint[0]}?)" if hint else ""))
        _unknown_keys(value, fields[key], path, _join(at, str(key)))


def load(path: str | Path, type_: type[T], *, check: Callable[[T], T] | None = None) -> T:
    """Read, type and check the config file at ``path``.

    :param type_: a msgspec Struct or a dataclass (frozen, with defaults).
    :param check: further validation of the typed value (cross-field rules);
        its ``ConfigError`` is reported against the file.
    :raises ConfigFileError: every problem, as one line naming the file and field.
    """
    value = convert(read_yaml(path), type_, path)
    if check is None:
        return value
    try:
        return check(value)
    except ConfigFileError:
        raise
    except ConfigError as exc:
        raise ConfigFileError(path, "", str(exc)) from None


def mapping(path: str | Path) -> dict[str, Any]:
    """The file's top level as a mapping (empty for an empty file), for loaders that post-process keys."""
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(path, "", f"expected a mapping of settings, got a {type(data).__name__}")
    return data


__all__ = [
    "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "ConfigExit", "ConfigFileError", "config_errors", "convert", "load",
    "mapping", "read_yaml",
]
