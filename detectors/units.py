"""Cases to units: what one independent case of a key is, for the fleet-level detectors.

A crash count is a poor measure of how many things went wrong: one job
dying on 256 hosts dumps 256 cores, one crash-looping pod dumps hundreds on
one host. The signature and cohort detectors therefore count *units*:

* a job counts once per key within ``job_span_s`` (its first host stands for it),
  except a *restart* that fails the same way again on other hosts: a
  deadlocked job that the collective watchdog aborts, that restarts and
  hangs again, is a new case at each restart once a second host of the
  restart reports it (a crash-looping pod on one host stays one case);
* a (key, host) counts once per ``unit_span_s`` (a crash loop is one unit an hour);
* the units of one key within one step are capped at what the key's own
  recent rate makes plausible at ``burst_alpha``: a job-wide abort *without* a
  job id adds a few units, while a real rise (which is spread over steps)
  keeps nearly all of its own.

Events reach the filter at fold time in canonical order (``Engine``), so two
runs that saw the same events decide the same units.
"""

from __future__ import annotations

import math

from msgspec import Struct, field

from fleetepi.detectors.stats import nb_threshold
from fleetepi.detectors.windows import HOUR_MS

#: Time constant of the key rate behind the burst cap (a day).
RATE_TAU_MS = 86_400_000.0
#: A job's case that comes this long after its previous one is a restart, not the same abort.
RESTART_GAP_MS = 180_000
#: A capped burst that goes on into the next step with no gap longer than this is the same burst
#: (a job abort straddling a step boundary); a slower spread (a new crash reaching host after host
#: minutes apart) is not held back.
BURST_GAP_MS = 90_000


class _KeyUnits(Struct):
    #: host -> ms of its last counted unit
    hosts: dict[str, int] = field(default_factory=dict)
    #: job -> ms it was first counted
    jobs: dict[str, int] = field(default_factory=dict)
    #: job -> [ms of its last case, first host of its current restart ("" once the restart counted)]
    restarts: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: decayed units (time constant a day) and when last decayed
    rate: float = 0.0
    rate_ms: int = 0
    #: step the cap applies to, and units counted in it
    step: int = -1
    in_step: int = 0
    cap: int = 1 << 30
    #: when the last case beyond a step's cap came: a burst still going on adds nothing
    overflow_ms: int = -(1 << 62)
    last_ms: int = 0


class UnitFilter(Struct):
    """Per key: which cases are new units. ``unit(...)`` returns 1.0 or 0.0."""

    unit_span_ms: int
    job_span_ms: int
    step_ms: int
    burst_alpha: float
    keys: dict[str, _KeyUnits] = field(default_factory=dict)
    #: cases dropped as repeats of a job, of a host, or beyond a step's cap
    dropped_job: int = 0
    dropped_host: int = 0
    dropped_burst: int = 0

    @classmethod
    def new(cls, unit_span_s: float, job_span_s: float, step_s: float, burst_alpha: float) -> UnitFilter:
        return cls(int(unit_span_s * 1000), int(job_span_s * 1000), int(step_s * 1000), burst_alpha)

    def unit(self, key: str, host: str, job: str | None, ts_ms: int) -> float:
        st = self.keys.get(key)
        if st is None:
            st = self.keys[key] = _KeyUnits()
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        if job:
            first = st.jobs.get(job)
            if first is not None and ts_ms - first < self.job_span_ms and not self._restart(st, job, host, ts_ms):
                self.dropped_job += 1
                return 0.0
        last = st.hosts.get(host)
        if last is not None and ts_ms - last < self.unit_span_ms:
            self.dropped_host += 1
            return 0.0
        if not self.burst_alpha:
            st.hosts[host] = ts_ms  # no cap (hardware events: a rack-wide burst is the news)
            return 1.0
        step = ts_ms // self.step_ms
        if step != st.step:
            # the cap of a step: what the key's recent rate makes plausible in one step
            rate_h = self._rate_at(st, ts_ms) * HOUR_MS / RATE_TAU_MS
            st.cap = nb_threshold(rate_h * self.step_ms / HOUR_MS, math.inf, self.burst_alpha)
            st.step, st.in_step = step, 0
        # a case without a job id is held to what the rate makes plausible (the tail threshold is the
        # first count it does not): a job-wide abort that names no job is one case in a burst, not a few
        if st.in_step >= (st.cap if job else max(st.cap - 1, 1)) or ts_ms - st.overflow_ms < BURST_GAP_MS:
            self.dropped_burst += 1
            st.overflow_ms = ts_ms
            return 0.0
        st.in_step += 1
        st.hosts[host] = ts_ms
        if job:
            st.jobs[job] = ts_ms
        st.rate = self._rate_at(st, ts_ms) + 1.0
        st.rate_ms = max(st.rate_ms, ts_ms)
        return 1.0

    def _restart(self, st: _KeyUnits, job: str, host: str, ts_ms: int) -> bool:
        """Is this repeat of a counted job the second host of a new restart (a new case)?"""
        last_ms, lead = st.restarts.get(job, (st.jobs[job], ""))
        if ts_ms - last_ms >= RESTART_GAP_MS:
            st.restarts[job] = (ts_ms, host)  # a restart's first report: counted if another host follows
            return False
        last_ms = max(last_ms, ts_ms)
        recent = st.hosts.get(host)
        if lead and lead != host and (recent is None or ts_ms - recent >= self.unit_span_ms):
            st.restarts[job] = (last_ms, "")
            return True
        st.restarts[job] = (last_ms, lead)
        return False

    @staticmethod
    def _rate_at(st: _KeyUnits, ts_ms: int) -> float:
        if ts_ms <= st.rate_ms:
            return st.rate
        return st.rate * math.exp(-(ts_ms - st.rate_ms) / RATE_TAU_MS)

    def sweep(self, now_ms: int, ttl_ms: int) -> None:
        """Forget hosts and jobs past their spans, and keys idle past ``ttl_ms``."""
        h_cut, j_cut = now_ms - self.unit_span_ms, now_ms - self.job_span_ms
        for key in [k for k, st in self.keys.items() if st.last_ms < now_ms - ttl_ms]:
            del self.keys[key]
        for st in self.keys.values():
            if st.hosts:
                st.hosts = {h: t for h, t in st.hosts.items() if t > h_cut}
            if st.jobs:
                st.jobs = {j: t for j, t in st.jobs.items() if t > j_cut}
                st.restarts = {j: r for j, r in st.restarts.items() if j in st.jobs}


__all__ = ["UnitFilter"]
