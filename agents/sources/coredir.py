"""Source ``coredir``: crash events from core files appearing in a directory.

Watches what ``core_pattern`` (``/var/crash/core.%e.%p``) or
systemd-coredump (``/var/lib/systemd/coredump/core.*.zst``) writes. A file
is taken once its size and mtime are unchanged between two polls (a core
still being written grows), is analyzed into one ``Crash`` event, and is
remembered in a small JSON state file so an agent restart does not publish
it again. Each poll analyzes at most ``max_per_poll`` cores, so a burst of
crashes (a whole job dying) is spread over polls instead of stalling the
agent's other sources.

Config (one entry, one instance)::

    - kind: coredir
      directory: /var/lib/systemd/coredump
      state_path: /var/lib/fleetepi/coredir.state.json
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import Meta

from fleetepi.agents.core.limits import CoreLimits, GiB
from fleetepi.agents.core.rules import load_rules
from fleetepi.agents.core.signature import CoreAnalyzer
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.contract import Crash
from fleetepi.exceptions import SourceUnavailable

log = logging.getLogger(__name__)

DEFAULT_PATTERNS = ("core", "core.*", "*.core")
#: Processed files remembered at most (oldest forgotten first; their files are long gone).
_STATE_CAP = 10_000


class CoreDirOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    directory: str = "/var/lib/systemd/coredump"
    state_path: str | None = None
    patterns: Annotated[list[str], Meta(min_length=1)] = msgspec.field(default_factory=lambda: list(DEFAULT_PATTERNS))
    max_per_poll: Annotated[int, Meta(ge=1)] = 2
    delete_after: bool = False
    rules_dir: str | None = None
    max_core_gib: Annotated[float, Meta(gt=0)] = 32.0
    timeout_s: Annotated[float, Meta(gt=0)] = 10.0
    pyspy: bool = True
    tmp_dir: str | None = None


@register("coredir", CoreDirOptions)
class CoreDirSource:
    """Turns each new, complete core file in ``directory`` into one crash event.

    :param host: host name for the events.
    :param directory: the watched directory.
    :param state_path: JSON file remembering processed cores across restarts
        (default: ``.fleetepi-coredir.json`` inside ``directory``).
    :param patterns: file name globs that are cores (names starting with ``.``
        are temp files of systemd-coredump and are never taken).
    :param max_per_poll: cores analyzed per poll at most.
    :param delete_after: remove a core once its event is built (disk-tight hosts).
    :param tmp_dir: where compressed cores are decompressed (bounded by
        ``max_core_gib``; default ``$TMPDIR``): put it on a disk with room.
    :param analyzer: a shared :class:`CoreAnalyzer` (tests, the agent); built from
        ``rules_dir``/``max_core_gib``/``timeout_s``/``pyspy``/``tmp_dir`` otherwise.
    :param registry: prometheus registry for ``fleetepi_agent_cores_total``.
    """

    kind: ClassVar[str] = "coredir"

    def __init__(
        self,
        host: str,
        directory: str = "/var/lib/systemd/coredump",
        state_path: str | None = None,
        patterns: Sequence[str] = DEFAULT_PATTERNS,
        max_per_poll: int = 2,
        delete_after: bool = False,
        rules_dir: str | None = None,
        max_core_gib: float = 32.0,
        timeout_s: float = 10.0,
        pyspy: bool = True,
        tmp_dir: str | None = None,
        analyzer: CoreAnalyzer | None = None,
        registry: Any = None,
    ) -> None:
        if max_per_poll < 1:
            raise ValueError("max_per_poll must be >= 1")
        self.host = host
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise SourceUnavailable(f"core directory {self.directory} does not exist")
        self.state_path = Path(state_path) if state_path else self.directory / ".fleetepi-coredir.json"
        self.patterns = tuple(patterns)
        self.max_per_poll = max_per_poll
        self.delete_after = delete_after
        self.analyzer = analyzer or CoreAnalyzer(
            load_rules(rules_dir),
            CoreLimits(max_core_bytes=int(max_core_gib * GiB), parse_timeout_s=timeout_s),
            use_pyspy=pyspy,
            tmp_dir=tmp_dir,
        )
        self._own_analyzer = analyzer is None
        self._last: dict[str, tuple[int, int]] = {}
        self._done: dict[str, str] = self._load_state()
        self._cores_total = _cores_counter(registry) if registry is not None else None

    @classmethod
    def from_options(cls, options: CoreDirOptions, ctx: SourceContext) -> CoreDirSource:
        kw = msgspec.structs.asdict(options)
        return cls(ctx.host, registry=ctx.registry, **kw)

    # --- state ----------------------------------------------------------------
    def _load_state(self) -> dict[str, str]:
        try:
            data = json.loads(self.state_path.read_text())
            done = data.get("done", {})
            return {str(k): str(v) for k, v in done.items()} if isinstance(done, dict) else {}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("coredir: state file %s unreadable (%s); starting afresh", self.state_path, exc)
            return {}

    def _save_state(self) -> None:
        if len(self._done) > _STATE_CAP:
            for key in list(self._done)[: len(self._done) - _STATE_CAP]:
                del self._done[key]
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        try:
            tmp.write_text(json.dumps({"done": self._done}, sort_keys=False))
            os.replace(tmp, self.state_path)
        except OSError as exc:  # a read-only state dir must not stop crash reporting
            log.warning("coredir: cannot write state %s (%s)", self.state_path, exc)

    @staticmethod
    def _key(size: int, mtime_ns: int) -> str:
        return f"{size}:{mtime_ns}"

    # --- polling --------------------------------------------------------------
    def _candidates(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        try:
            entries = list(os.scandir(self.directory))
        except OSError as exc:
            log.warning("coredir: cannot list %s (%s)", self.directory, exc)
            return out
        for entry in entries:
            name = entry.name
            if name.startswith(".") or not any(fnmatch.fnmatch(name, p) for p in self.patterns):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_file(follow_symlinks=False) and st.st_size > 0:
                out[name] = (st.st_size, st.st_mtime_ns)
        return out

    def poll(self, now_ms: int) -> Iterable[Crash]:
        """Events for cores that were complete (stable) since the last poll."""
        current = self._candidates()
        ready = sorted(
            (st[1], name)
            for name, st in current.items()
            if self._last.get(name) == st and self._done.get(name) != self._key(*st)
        )
        self._last = current
        events: list[Crash] = []
        for _mtime, name in ready[: self.max_per_poll]:
            size, mtime_ns = current[name]
            path = self.directory / name
            outcome = "ok"
            try:
                report = self.analyzer.analyze(
                    path, host=self.host, ts=datetime.fromtimestamp(mtime_ns / 1e9, tz=UTC)
                )
                events.append(report.crash)
                outcome = "partial" if report.crash.partial else "ok"
            except Exception as exc:  # noqa: BLE001 - never lose the loop to one core; the next poll moves on
                outcome = "failed"
                log.warning("coredir: %s could not be analyzed: %s", path, exc)
            self._done[name] = self._key(size, mtime_ns)
            if self._cores_total is not None:
                self._cores_total.labels(outcome=outcome).inc()
            if self.delete_after and outcome != "failed":
                try:
                    path.unlink()
                except OSError:
                    pass
        if ready:
            for gone in [n for n in self._done if n not in current and not (self.directory / n).exists()]:
                del self._done[gone]
            self._save_state()
        return events

    def close(self) -> None:
        if self._own_analyzer:
            self.analyzer.close()


def _cores_counter(registry: Any) -> Any:
    """``fleetepi_agent_cores_total{outcome}`` in ``registry``, created once (every outcome at 0).

    Two coredir instances (two directories) share one registry, so an
    existing series is reused rather than registered twice.
    """
    from prometheus_client import Counter

    try:
        counter = Counter("fleetepi_agent_cores", "Core dumps turned into crash events.", ["outcome"], registry=registry)
    except ValueError:  # already registered by another instance
        counter = registry._names_to_collectors["fleetepi_agent_cores_total"]  # noqa: SLF001
    for outcome in ("ok", "partial", "failed"):
        counter.labels(outcome=outcome)
    return counter


__all__ = ["DEFAULT_PATTERNS", "CoreDirOptions", "CoreDirSource"]
