"""Dedup at the source: a flood of identical lines becomes a few counted events.

Used for telemetry (key: kind, device, code, message template) and for
crashes read from logs (key: signature, origin, job: a traceback printed by
all 64 ranks of a job, or a training loop that logs one exception a
thousand times, is one event and a count). A real report had 800k Xid
lines with 29 distinct messages; publishing each
would swamp the broker and the detectors for no information. Within one
interval, the first event of a key ``(kind, device, code, message
template)`` goes out at once (an on-call sees the first Xid without delay);
the repeats are only counted and leave as one event with ``count`` = the
number of repeats when the interval closes. The counts always add up to the
number of lines, so rates computed downstream stay exact.

The template replaces numbers and hex words, so "GPC 7, TPC 7" and "GPC 1,
TPC 0" are one key. Distinct keys per interval are capped; past the cap,
new keys of a (kind, device, code) fold into one ``*`` key so memory stays
bounded under any flood.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

import msgspec

from fleetepi.contract import Crash, Telemetry, ts_from_ms

_HEXNUM = re.compile(r"0x[0-9a-fA-F]+")
_HEXWORD = re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{6,}\b")
_NUM = re.compile(r"\d+")

OVERFLOW_TEMPLATE = "*"


@lru_cache(maxsize=4096)
def template(message: str | None) -> str:
    """The message with numbers, hex values and ids replaced: the dedup key part."""
    if not message:
        return ""
    return _NUM.sub("#", _HEXWORD.sub("?", _HEXNUM.sub("<hex>", message)))


Key = tuple[Hashable, ...]
E = TypeVar("E", Telemetry, Crash)


def telemetry_key(event: Telemetry) -> Key:
    """Telemetry repeats: same kind, device, code and message template."""
    return (event.kind, event.device, event.code, template(event.message))


def telemetry_overflow(key: Key) -> Key:
    """Past the key cap, new telemetry keys of one (kind, device, code) fold into one ``*`` key."""
    return (*key[:3], OVERFLOW_TEMPLATE)


def crash_key(event: Crash) -> Key:
    """Crash repeats: one failure (signature, origin) of one job, e.g. the same traceback from every rank."""
    return (event.signature, event.origin, event.job)


def _n(event: Any) -> int:
    count = getattr(event, "count", None)
    return 1 if count is None else int(count)


@dataclass
class _Slot(Generic[E]):
    first: E
    repeats: int = 0
    last_ms: int = 0


class Deduplicator(Generic[E]):
    """Counts repeats of an event per key and interval.

    :param interval_s: length of one counting interval (seconds).
    :param max_keys: distinct keys kept per interval before folding into ``*``.
    :param key: what makes two events repeats (default: telemetry's).
    :param overflow: the key a new event gets past ``max_keys`` (None: such events are not deduplicated).
    """

    def __init__(self, interval_s: float = 10.0, max_keys: int = 1024, key: Callable[[Any], Key] = telemetry_key,
                 overflow: Callable[[Key], Key] | None = telemetry_overflow) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_ms = int(interval_s * 1000)
        self.max_keys = max_keys
        self.key = key
        self.overflow = overflow
        self._slots: dict[Key, _Slot[E]] = {}
        self._window_start_ms: int | None = None
        self.suppressed_total = 0

    def offer(self, event: E, now_ms: int) -> E | None:
        """The event to publish now, or None when it only adds to a count."""
        if self._window_start_ms is None:
            self._window_start_ms = now_ms
        key = self.key(event)
        slot = self._slots.get(key)
        n = _n(event)
        if slot is None and len(self._slots) >= self.max_keys:
            if self.overflow is None:
                return event
            key = self.overflow(key)
            slot = self._slots.get(key)
            if slot is None:
                self._slots[key] = _Slot(first=event, repeats=n, last_ms=now_ms)
                self.suppressed_total += n
                return None
        if slot is None:
            self._slots[key] = _Slot(first=event, last_ms=now_ms)
            return event
        slot.repeats += n
        slot.last_ms = now_ms
        self.suppressed_total += n
        return None

    def count_repeat(self, key: Key, now_ms: int, n: int = 1) -> bool:
        """Count ``n`` more repeats of ``key`` if it is open in this interval (True), without an event."""
        slot = self._slots.get(key)
        if slot is None:
            return False
        slot.repeats += n
        slot.last_ms = now_ms
        self.suppressed_total += n
        return True

    def due(self, now_ms: int) -> bool:
        return self._window_start_ms is not None and now_ms - self._window_start_ms >= self.interval_ms

    def flush(self, now_ms: int, force: bool = False) -> list[E]:
        """Counted events for the repeats of a closed interval (``force``: close it now)."""
        if not self._slots or not (force or self.due(now_ms)):
            if not self._slots and self.due(now_ms):
                self._window_start_ms = None
            return []
        out = [
            msgspec.structs.replace(slot.first, count=slot.repeats, ts=ts_from_ms(slot.last_ms))
            for slot in self._slots.values()
            if slot.repeats > 0
        ]
        self._slots.clear()
        self._window_start_ms = None
        return out


@dataclass
class CounterDeltas:
    """Deltas of monotonic hardware counters (EDAC, NVML ECC, remapped rows).

    The first reading of a counter is a baseline and yields nothing: a total
    that accumulated before the agent started has no event time, and
    publishing it as "now" would fake a spike. A reading below the previous
    one means the counter was reset (driver reload, reboot, ``echo 0 >
    reset_counters``); the new value is then the delta since the reset.
    """

    def __post_init__(self) -> None:
        self._last: dict[tuple[str, ...], int] = {}
        self.resets = 0

    def update(self, key: tuple[str, ...], value: int) -> int | None:
        """Increase since the last reading of ``key`` (None on the first reading)."""
        last = self._last.get(key)
        self._last[key] = value
        if last is None:
            return None
        if value < last:
            self.resets += 1
            return value
        return value - last


__all__ = ["CounterDeltas", "Deduplicator", "OVERFLOW_TEMPLATE", "crash_key", "telemetry_key", "telemetry_overflow", "template"]
