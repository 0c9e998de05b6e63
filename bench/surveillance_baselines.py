"""The two baselines the detectors are measured against, fed the same events in the same pass.

* :class:`ThresholdBaseline`: the fixed thresholds an on-call team writes on
  day one (a signature with more than 20 crashes in an hour, a host with more
  than 5 crashes in a day, a rack with more than 3 of one Xid in an hour, a
  host with more than 100 corrected ECC errors in an hour, a signature whose
  recent hosts mostly share one small cohort). Each rule fires once and
  re-arms when its count falls to half the threshold.
* :class:`HourlySeries` + :func:`run_surveillance`: hourly count series per
  signature and per telemetry code (Xid per rack, ECC counters per host),
  scored by the R package ``surveillance`` (``earsC`` C1-C3 and
  ``farringtonFlexible``, ``glrpois``) in ONE ``Rscript`` call per benchmark; an alarm hour
  becomes an alert at the end of that hour (when the count is known); alarms
  of one series less than ``merge_gap_h`` apart are one episode (one page).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import tempfile
from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fleetepi.contract import Alert, Crash, Host, Telemetry, ts_from_ms
from fleetepi.detectors.windows import Windows
from fleetepi.simulate.exceptions import BaselineError

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
#: The R script, beside the benchmark that uses it.
R_SCRIPT = Path(__file__).resolve().parent / "baselines" / "surveillance.R"
SURVEILLANCE_METHODS = ("C1", "C2", "C3", "farrington", "glrpois")


def _alert(kind: str, ts_ms: int, score: float, **entity: object) -> Alert:
    return Alert(ts=ts_from_ms(ts_ms), kind=kind, score=float(score), **entity)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ThresholdConfig:
    """Day-one thresholds (what a team sets after looking at a quiet week)."""

    sig_per_h: int = 20
    host_per_day: int = 5
    rack_xid_per_h: int = 3
    host_errors_per_h: int = 100
    corr_window_s: float = 24 * 3600.0
    corr_min_hosts: int = 5
    corr_min_share: float = 0.8
    corr_max_cohort_share: float = 0.25


class _Window:
    """A fixed-threshold rule over a sliding sum: fire once, re-arm at half.

    The sum is the detectors' own window type (one-minute buckets), so the
    naive baseline and fleetepi count a window the same way.
    """

    __slots__ = ("sums", "firing")

    def __init__(self) -> None:
        self.sums: Windows | None = None
        self.firing = False

    def add(self, ts: int, n: int, width_ms: int, threshold: int) -> bool:
        if self.sums is None:
            self.sums = Windows.new((max(1, width_ms // MINUTE_MS),))
        self.sums.add(ts // MINUTE_MS, float(n))
        total = self.sums.totals[0]
        if self.firing and total <= threshold / 2:
            self.firing = False
        if not self.firing and total > threshold:
            self.firing = True
            return True
        return False

    @property
    def total(self) -> float:
        return self.sums.totals[0] if self.sums is not None else 0.0


class ThresholdBaseline:
    """Fixed thresholds over the event stream (the naive baseline)."""

    name = "thresholds"
    kinds = ("signature_spike", "host_spike", "hardware_correlation", "telemetry_spike")

    def __init__(self, config: ThresholdConfig | None = None, rack_key: str = "rack") -> None:
        self.cfg = config or ThresholdConfig()
        #: The attribute that names a host's rack in this fleet (a day-one rule knows its own fleet).
        self.rack_key = rack_key
        self.attrs: dict[str, dict[str, str]] = {}
        self.cohort: Counter[tuple[str, str]] = Counter()
        self.sig: dict[str, _Window] = defaultdict(_Window)
        self.host: dict[str, _Window] = defaultdict(_Window)
        self.rack_xid: dict[tuple[str, int], _Window] = defaultdict(_Window)
        self.host_err: dict[tuple[str, str], _Window] = defaultdict(_Window)
        self.corr: dict[str, _SigHosts] = {}
        self.corr_firing: dict[tuple[str, str, str], int] = {}

    def process(self, ev: object, ts_ms: int | None = None) -> list[Alert]:
        """Fold one event in; ``ts_ms`` saves recomputing the event time when the caller has it."""
        c = self.cfg
        if isinstance(ev, Telemetry):
            if ev.kind == "thermal" or (ev.count == 0):
                return []  # readings are not counts; a zero delta changes no window
            ts = ev.ts_ms if ts_ms is None else ts_ms
            if ev.kind == "xid" and ev.code is not None:
                rack = self.attrs.get(ev.host, {}).get(self.rack_key)
                if rack is not None and self.rack_xid[(rack, ev.code)].add(ts, 1, HOUR_MS, c.rack_xid_per_h):
                    return [_alert("telemetry_spike", ts, self.rack_xid[(rack, ev.code)].total, telemetry_kind="xid",
                                   code=ev.code, attribute="rack", value=rack)]
            elif ev.kind in ("ecc_corrected", "ecc_uncorrected", "nvlink", "pcie"):
                w = self.host_err[(ev.host, ev.kind)]
                if w.add(ts, ev.n, HOUR_MS, c.host_errors_per_h):
                    return [_alert("telemetry_spike", ts, w.total, telemetry_kind=ev.kind, host=ev.host)]
            return []
        if isinstance(ev, Crash):
            ts = ev.ts_ms if ts_ms is None else ts_ms
            out = []
            if self.sig[ev.signature].add(ts, 1, HOUR_MS, c.sig_per_h):
                out.append(_alert("signature_spike", ts, self.sig[ev.signature].total, signature=ev.signature))
            if self.host[ev.host].add(ts, 1, 24 * HOUR_MS, c.host_per_day):
                out.append(_alert("host_spike", ts, self.host[ev.host].total, host=ev.host))
            out.extend(self._correlation(ev, ts))
            return out
        if isinstance(ev, Host):
            old = self.attrs.get(ev.host)
            if old is not None:
                self.cohort.subtract(old.items())
            self.attrs[ev.host] = dict(ev.attributes)
            self.cohort.update(ev.attributes.items())
        return []

    def _correlation(self, ev: Crash, ts: int) -> list[Alert]:
        """Distinct hosts of the signature in the window, counted per attribute value (incrementally)."""
        c = self.cfg
        st = self.corr.get(ev.signature)
        if st is None:
            st = self.corr[ev.signature] = _SigHosts()
        st.add(ts, ev.host, self.attrs.get(ev.host, {}), int(c.corr_window_s * 1000))
        n = len(st.host_attrs)
        out = []
        if n >= c.corr_min_hosts:
            fleet = max(1, len(self.attrs))
            need = c.corr_min_share * n
            for (a, v), k in st.attr_count.items():
                if k < need:
                    continue
                key = (ev.signature, a, v)
                if key not in self.corr_firing and self.cohort[(a, v)] <= c.corr_max_cohort_share * fleet:
                    self.corr_firing[key] = ts
                    out.append(_alert("hardware_correlation", ts, k / n, signature=ev.signature, attribute=a,
                                      value=v))
        if st.firing_since is None and out:
            st.firing_since = ts
        # re-arm a signature's pairs one window after they fired
        if st.firing_since is not None and ts - st.firing_since > c.corr_window_s * 1000:
            for key in [k for k in self.corr_firing if k[0] == ev.signature]:
                del self.corr_firing[key]
            st.firing_since = None
        return out


class _SigHosts:
    """Distinct hosts of one signature in a sliding window, and their attribute-value counts."""

    __slots__ = ("items", "host_n", "host_attrs", "attr_count", "firing_since")

    def __init__(self) -> None:
        self.items: deque[tuple[int, str]] = deque()
        self.host_n: Counter[str] = Counter()
        self.host_attrs: dict[str, tuple[tuple[str, str], ...]] = {}
        self.attr_count: Counter[tuple[str, str]] = Counter()
        self.firing_since: int | None = None

    def add(self, ts: int, host: str, attrs: dict[str, str], width_ms: int) -> None:
        self.items.append((ts, host))
        if self.host_n[host] == 0:
            kv = tuple(attrs.items())
            self.host_attrs[host] = kv
            self.attr_count.update(kv)
        self.host_n[host] += 1
        while self.items and self.items[0][0] <= ts - width_ms:
            _, h = self.items.popleft()
            self.host_n[h] -= 1
            if self.host_n[h] == 0:
                del self.host_n[h]
                self.attr_count.subtract(self.host_attrs.pop(h))


class HourlySeries:
    """Hourly count series, built in the same pass as the detectors run.

    Series keys: ``sig|<signature>`` (crashes), ``xid|<code>|<rack>`` (Xid
    events per rack), ``<kind>|<host>`` (ECC error counts per host). Thermal
    readings are not counts; NVLink and PCIe counters are left out (no
    outbreak lives there, and their multi-error events would only add false
    alarms to the baselines' side).
    """

    COUNTED = ("ecc_corrected", "ecc_uncorrected")

    def __init__(self, start_ms: int, end_ms: int, rack_key: str = "rack") -> None:
        self.start_ms = start_ms
        self.n_hours = max(1, -(-(end_ms - start_ms) // HOUR_MS))
        self.counts: Counter[tuple[str, int]] = Counter()
        self.rack: dict[str, str] = {}
        self.rack_key = rack_key

    def process(self, ev: object, ts_ms: int | None = None) -> None:
        if isinstance(ev, Telemetry):
            if ev.kind == "thermal" or ev.count == 0:
                return
            h = ((ev.ts_ms if ts_ms is None else ts_ms) - self.start_ms) // HOUR_MS
            if ev.kind == "xid":
                if ev.code is not None:
                    self.counts[(f"xid|{ev.code}|{self.rack.get(ev.host, '')}", h)] += 1
            elif ev.kind in self.COUNTED and ev.n > 0:
                self.counts[(f"{ev.kind}|{ev.host}", h)] += ev.n
        elif isinstance(ev, Crash):
            ts = ev.ts_ms if ts_ms is None else ts_ms
            self.counts[(f"sig|{ev.signature}", (ts - self.start_ms) // HOUR_MS)] += 1
        elif isinstance(ev, Host):
            self.rack[ev.host] = ev.attributes.get(self.rack_key, "")

    def write_csv(self, path: Path, prefix: str = "") -> None:
        with open(path, "a", newline="") as f:
            w = csv.writer(f)
            for (series, hour), n in self.counts.items():
                if 0 <= hour < self.n_hours:
                    w.writerow((prefix + series, hour, n))


def series_alert(series: str, ts_ms: int, score: float) -> Alert:
    """The alert an alarm on ``series`` stands for (same entity fields as the detectors')."""
    head, _, rest = series.partition("|")
    if head == "sig":
        return _alert("signature_spike", ts_ms, score, signature=rest)
    if head == "xid":
        code, _, rack = rest.partition("|")
        return _alert("telemetry_spike", ts_ms, score, telemetry_kind="xid", code=int(code),
                      **({"attribute": "rack", "value": rack} if rack else {}))
    return _alert("telemetry_spike", ts_ms, score, telemetry_kind=head, host=rest)


def alarms_to_alerts(alarms: Iterable[tuple[str, int]], start_ms: int, merge_gap_h: int = 3) -> list[Alert]:
    """One firing alert per episode of alarm hours (gaps < ``merge_gap_h`` hours join episodes)."""
    by_series: dict[str, list[int]] = defaultdict(list)
    for series, hour in alarms:
        by_series[series].append(hour)
    out = []
    for series, hours in by_series.items():
        last = None
        for h in sorted(set(hours)):
            if last is None or h - last >= merge_gap_h:
                out.append(series_alert(series, start_ms + (h + 1) * HOUR_MS - 1, 1.0))
            last = h
    out.sort(key=lambda a: a.ts)
    return out


@dataclass(frozen=True)
class SurveillanceConfig:
    """Settings of the R baselines.

    ``alpha`` is earsC's C1/C2 default, used for C3 and farrington too (hourly
    series run 24x the tests of the daily data their defaults were set for);
    ``min_sigma`` floors earsC's standard deviation (sparse series); farrington
    uses days as seasons (``frequency`` 24, ``farrington_b`` days back, +-``farrington_w`` hours).
    ``glr_c`` is glrpois's ``c.ARL``; its in-control mean is learned from the first
    ``warmup_h`` hours (see bench/baselines/surveillance.R for why both are set so).
    """

    alpha: float = 0.001
    farrington_b: int = 3
    farrington_w: int = 1
    frequency: int = 24
    min_sigma: float = 1.0
    merge_gap_h: int = 3
    glr_c: float = 7.0
    warmup_h: int = 72


def run_surveillance(runs: list[tuple[str, HourlySeries]], config: SurveillanceConfig | None = None,
                     methods: tuple[str, ...] = SURVEILLANCE_METHODS, script: Path = R_SCRIPT,
                     rscript: str = "Rscript", timeout_s: float = 1800.0) -> dict[str, dict[str, list[Alert]]]:
    """Run every method on every run's series in ONE Rscript call.

    :param runs: ``(run_id, series)``; run ids must not contain ``|`` and all
        runs must have the same number of hours.
    :returns: ``{method: {run_id: alerts}}``.
    :raises BaselineError: Rscript missing, the package missing, or the script failed.
    """
    cfg = config or SurveillanceConfig()
    exe = shutil.which(rscript)
    if exe is None:
        raise BaselineError(f"{rscript} not found: install r-cran-surveillance (scripts/install-services.sh)")
    if not script.is_file():
        raise BaselineError(f"R script not found: {script}")
    n_hours = max(s.n_hours for _, s in runs)
    with tempfile.TemporaryDirectory(prefix="fleetepi-surv-") as tmp:
        inp, outp = Path(tmp) / "series.csv", Path(tmp) / "alarms.csv"
        inp.write_text("series,hour,count\n")
        for run_id, s in runs:
            s.write_csv(inp, prefix=f"{run_id}|")
        cmd = [exe, str(script), str(inp), str(outp), str(n_hours), ",".join(methods), str(cfg.alpha),
               str(cfg.farrington_b), str(cfg.farrington_w), str(cfg.frequency), str(cfg.min_sigma),
               str(cfg.glr_c), str(cfg.warmup_h)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BaselineError(f"Rscript took longer than {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            raise BaselineError(f"Rscript failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        raw: dict[str, dict[str, list[tuple[str, int]]]] = {m: defaultdict(list) for m in methods}
        with open(outp, newline="") as f:
            for row in csv.DictReader(f):
                run_id, _, series = row["series"].partition("|")
                raw[row["method"]][run_id].append((series, int(row["hour"])))
    starts = {run_id: s.start_ms for run_id, s in runs}
    return {m: {run_id: alarms_to_alerts(raw[m].get(run_id, []), starts[run_id], cfg.merge_gap_h)
                for run_id, _ in runs} for m in methods}


__all__ = ["R_SCRIPT", "SURVEILLANCE_METHODS", "HourlySeries", "SurveillanceConfig", "ThresholdBaseline",
           "ThresholdConfig", "alarms_to_alerts", "run_surveillance", "series_alert"]
