"""What keeps the hook from emptying the fleet: host checks, lists, a breaker.

The breaker *latches*: once a quarantine would exceed ``max_hosts`` or
``max_percent`` % of the fleet within ``window_s``, every further quarantine
is refused until a person resets it (``POST /breaker/reset`` or a restart).
A detector that misfires fleet-wide looks exactly like a fleet-wide outbreak;
the hook cannot tell them apart, so it stops and pages (the
``fleetepi_hook_circuit_open`` gauge drives FleetepiQuarantineCircuitOpen).
Releases stay allowed while it is open: giving capacity back cannot empty
the fleet.

If the fleet size cannot be known (scrape failed, no static fallback) the
percentage cannot be checked, and that trips the breaker too: fail closed.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fleetepi.hook.config import Breaker
from fleetepi.hook.exceptions import InvalidHost

log = logging.getLogger(__name__)


def check_host(host: str, pattern: re.Pattern[str]) -> str:
    """The host if it is a plain host name; otherwise InvalidHost (never passed to any tool)."""
    if not host or not pattern.fullmatch(host):
        raise InvalidHost(f"host {host!r} does not match the host-name pattern")
    return host


@dataclass(frozen=True)
class HostFilter:
    """Deny globs win over allow globs; an empty allow list allows every host."""

    allow: Sequence[str] = ()
    deny: Sequence[str] = ()

    def reason_to_refuse(self, host: str) -> str | None:
        for pat in self.deny:
            if fnmatchcase(host, pat):
                return f"host matches deny pattern {pat!r}"
        if self.allow and not any(fnmatchcase(host, pat) for pat in self.allow):
            return "host matches no allow pattern"
        return None


class FleetSize:
    """Fleet size for the percentage limit: scraped ``fleetepi_hosts`` or the static value.

    :param fetch: ``url -> exposition text``; httpx by default, injectable for tests.
    """

    def __init__(self, cfg: Breaker, fetch: Callable[[str], str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._static = cfg.fleet_size
        self._url = cfg.fleet_size_url
        self._ttl_s = cfg.fleet_size_ttl_s
        self._fetch = fetch or _http_get
        self._clock = clock
        self._cached: tuple[float, int] | None = None

    def get(self) -> int | None:
        if self._url is None:
            return self._static
        now = self._clock()
        if self._cached is not None and now - self._cached[0] < self._ttl_s:
            return self._cached[1]
        try:
            size = hosts_gauge(self._fetch(self._url))
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
            log.warning("fleet size: cannot scrape %s (%s); using %s", self._url, exc, self._static)
            return self._static
        self._cached = (now, size)
        return size


def _http_get(url: str) -> str:
    resp = httpx.get(url, timeout=5.0)
    resp.raise_for_status()
    return resp.text


def hosts_gauge(exposition: str) -> int:
    """Value of ``fleetepi_hosts`` in a Prometheus text exposition (summed over series)."""
    total: float | None = None
    for family in text_string_to_metric_families(exposition):
        if family.name == "fleetepi_hosts":
            total = sum(s.value for s in family.samples)
    if total is None or total < 1:
        raise ValueError("no positive fleetepi_hosts in the exposition")
    return int(total)


@dataclass
class CircuitBreaker:
    """Counts quarantines in a sliding window; latches open at the first one too many."""

    cfg: Breaker
    clock: Callable[[], float] = time.monotonic
    open_reason: str | None = None
    _recent: dict[str, float] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        return self.open_reason is not None

    def in_window(self) -> int:
        # _recent is in admission order (a host is added once per window), so
        # expiry pops from the front: amortized O(1), not a scan per decision.
        cutoff = self.clock() - self.cfg.window_s
        recent = self._recent
        while recent:
            host = next(iter(recent))
            if recent[host] >= cutoff:
                break
            del recent[host]
        return len(recent)

    def limit(self, fleet_size: int | None) -> tuple[int, str] | None:
        """Hosts allowed per window and why, or None if the fleet size is unknown."""
        if fleet_size is None:
            return None
        by_percent = math.floor(fleet_size * self.cfg.max_percent / 100.0 + 1e-9)
        if by_percent < self.cfg.max_hosts:
            return by_percent, f"{self.cfg.max_percent:g} % of {fleet_size} hosts"
        return self.cfg.max_hosts, f"max_hosts {self.cfg.max_hosts}"

    def admit(self, host: str, fleet_size: int | None) -> str | None:
        """None if ``host`` may be quarantined now (and count it); else why the breaker is open."""
        if self.open_reason is not None:
            return self.open_reason
        if host in self._recent:
            return None  # already counted in this window
        limit = self.limit(fleet_size)
        if limit is None:
            return self._trip("fleet size unknown: cannot enforce the percentage limit")
        allowed, why = limit
        count = self.in_window()
        if count + 1 > allowed:
            return self._trip(f"{count} hosts quarantined in {self.cfg.window_s:g} s; limit {allowed} ({why})")
        self._recent[host] = self.clock()
        return None

    def _trip(self, reason: str) -> str:
        self.open_reason = reason
        log.critical("QUARANTINE CIRCUIT BREAKER OPEN: %s; no host will be quarantined until reset", reason)
        return reason

    def reset(self) -> None:
        log.warning("quarantine circuit breaker reset by operator")
        self.open_reason = None
        self._recent.clear()


__all__ = ["CircuitBreaker", "FleetSize", "HostFilter", "check_host", "hosts_gauge"]
