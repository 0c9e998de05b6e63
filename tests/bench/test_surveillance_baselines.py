"""The baselines: fixed thresholds on hand-made events, and the R surveillance script on a tiny series."""

from __future__ import annotations

import shutil

import pytest

from fleetepi.contract import Crash, Host, Telemetry, ts_from_ms

from .conftest import load_bench

_sb = load_bench("surveillance_baselines")  # a benchmark tool under bench/, not part of the runtime package
HourlySeries, ThresholdBaseline, ThresholdConfig = _sb.HourlySeries, _sb.ThresholdBaseline, _sb.ThresholdConfig
alarms_to_alerts, run_surveillance, series_alert = _sb.alarms_to_alerts, _sb.run_surveillance, _sb.series_alert

H = 3_600_000
T0 = 1_800_000_000_000 - 1_800_000_000_000 % H


def host(name: str, rack: str, ts: int = T0, **extra: str) -> Host:
    return Host(ts=ts_from_ms(ts), host=name, attributes={"rack": rack, "datacenter": "dc1", **extra})


def crash(h: str, sig: str, ts: int) -> Crash:
    return Crash(ts=ts_from_ms(ts), host=h, signature=sig)


def xid(h: str, code: int, ts: int) -> Telemetry:
    return Telemetry(ts=ts_from_ms(ts), host=h, kind="xid", code=code)


def fleet(n: int = 40) -> list[Host]:
    return [host(f"h{i}", f"r{i // 10}", bios="2.4" if i < 5 else "2.3") for i in range(n)]


class TestThresholds:
    def test_signature_fires_once_then_rearms(self):
        b = ThresholdBaseline(ThresholdConfig(sig_per_h=3))
        for e in fleet():
            b.process(e)
        fired = []
        for k in range(6):  # 6 crashes in 6 minutes: fires at the 4th only
            fired += b.process(crash(f"h{10 + k}", "s!f | g!h", T0 + k * 60_000))
        fired = [a for a in fired if a.kind == "signature_spike"]
        assert len(fired) == 1
        assert fired[0].signature == "s!f | g!h" and fired[0].ts_ms == T0 + 3 * 60_000
        # two hours later the window has emptied: a new wave pages again
        again = []
        for k in range(5):
            again += b.process(crash(f"h{20 + k}", "s!f | g!h", T0 + 3 * H + k * 1000))
        assert [a.kind for a in again if a.kind == "signature_spike"] == ["signature_spike"]

    def test_rack_xid_and_host_rules(self):
        b = ThresholdBaseline(ThresholdConfig(rack_xid_per_h=2, host_per_day=2))
        for e in fleet():
            b.process(e)
        out = [a for k in range(3) for a in b.process(xid(f"h{k}", 79, T0 + k * 1000))]
        assert [(a.kind, a.telemetry_kind, a.code, a.attribute, a.value) for a in out] == \
            [("telemetry_spike", "xid", 79, "rack", "r0")]
        out = [a for k in range(3) for a in b.process(crash("h30", f"s{k}!f | g!h", T0 + k * H))]
        assert [(a.kind, a.host) for a in out] == [("host_spike", "h30")]

    def test_correlation_on_distinct_hosts_of_a_small_cohort(self):
        b = ThresholdBaseline(ThresholdConfig(corr_min_hosts=4, corr_max_cohort_share=0.25))
        for e in fleet():
            b.process(e)
        out = [a for k in range(5) for a in b.process(crash(f"h{k}", "bad!fw | x!y", T0 + k * 60_000))]
        pairs = {(a.attribute, a.value) for a in out if a.kind == "hardware_correlation"}
        # hosts h0-h4: bios=2.4 (5 of 40 hosts) and rack r0 (10 of 40); datacenter dc1 is the whole fleet
        assert pairs == {("bios", "2.4"), ("rack", "r0")}


class TestSeries:
    def test_hourly_series_keys(self):
        s = HourlySeries(T0, T0 + 48 * H)
        for e in fleet():
            s.process(e)
        s.process(crash("h1", "a!b | c!d", T0 + 5 * H + 10))
        s.process(xid("h12", 79, T0 + 7 * H))
        s.process(Telemetry(ts=ts_from_ms(T0 + H), host="h3", kind="ecc_corrected", count=40))
        s.process(Telemetry(ts=ts_from_ms(T0 + H), host="h3", kind="thermal", value=80.0))
        assert dict(s.counts) == {("sig|a!b | c!d", 5): 1, ("xid|79|r1", 7): 1, ("ecc_corrected|h3", 1): 40}
        assert s.n_hours == 48

    def test_series_to_alert_entities(self):
        a = series_alert("xid|79|r1", T0, 1.0)
        assert (a.kind, a.telemetry_kind, a.code, a.attribute, a.value) == ("telemetry_spike", "xid", 79, "rack", "r1")
        a = series_alert("ecc_corrected|h3", T0, 1.0)
        assert (a.telemetry_kind, a.host) == ("ecc_corrected", "h3")
        assert series_alert("sig|a!b | c!d", T0, 1.0).signature == "a!b | c!d"

    def test_alarm_hours_merge_into_episodes(self):
        alerts = alarms_to_alerts([("sig|s", 10), ("sig|s", 11), ("sig|s", 12), ("sig|s", 20), ("xid|79|r1", 11)],
                                  T0, merge_gap_h=3)
        got = [(a.signature or a.value, (a.ts_ms + 1 - T0) // H) for a in alerts]
        # an alarm at hour h is known at the end of that hour
        assert got == [("s", 11), ("r1", 12), ("s", 21)]


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("Rscript") is None, reason="Rscript not installed (scripts/install-services.sh)")
def test_surveillance_script_flags_a_spike():
    n_hours = 24 * 5
    s = HourlySeries(T0, T0 + n_hours * H)
    for h in range(n_hours):  # a steady 2 crashes an hour, then 30 in hour 100
        for k in range(2 + (h % 3 == 0)):
            s.process(crash("h1", "steady!f | g!h", T0 + h * H + k * 60_000))
    for k in range(30):
        s.process(crash("h1", "steady!f | g!h", T0 + 100 * H + k * 1000))
    res = run_surveillance([("1", s)])
    for method in ("C1", "C2", "C3", "farrington", "glrpois"):
        hours = [(a.ts_ms + 1 - T0) // H - 1 for a in res[method]["1"]]
        assert 100 in hours or 101 in hours, (method, hours)
        assert all(a.signature == "steady!f | g!h" for a in res[method]["1"])


BRUTE_R = r"""
suppressPackageStartupMessages(library(surveillance))
a <- commandArgs(trailingOnly = TRUE)
d <- read.csv(a[1], colClasses = c("character", "integer", "numeric"))
n <- as.integer(a[3]); ids <- sort(unique(d$series))
m <- matrix(0, nrow = n, ncol = length(ids)); m[cbind(d$hour + 1L, match(d$series, ids))] <- d$count
rows <- list()
for (meth in c("C1", "C2", "C3")) {
  r <- earsC(sts(observed = m, frequency = 24, start = c(1, 1)),
             control = list(method = meth, baseline = 7, alpha = 0.001, minSigma = 1, range = 12:n))
  hit <- matrix(which(alarms(r) == 1, arr.ind = TRUE), ncol = 2)
  if (nrow(hit)) rows[[length(rows) + 1]] <- data.frame(method = meth, series = ids[hit[, 2]],
                                                        hour = (12:n)[hit[, 1]] - 1L)
}
for (j in seq_along(ids)) {
  r <- suppressWarnings(farringtonFlexible(sts(observed = matrix(m[, j], ncol = 1), frequency = 24, start = c(1, 1)),
        control = list(range = 75:n, b = 3, w = 1, alpha = 0.001, noPeriods = 1, populationOffset = FALSE,
                       pastWeeksNotIncluded = 1, limit54 = c(5, 4), thresholdMethod = "delta")))
  hit <- which(as.vector(alarms(r)) == 1)
  if (length(hit)) rows[[length(rows) + 1]] <- data.frame(method = "farrington", series = ids[j],
                                                          hour = (75:n)[hit] - 1L)
}
# glrpois on EVERY series (no skip), with the script's in-control mean
warm <- 72L; t_mon <- (warm + 1L):n; hh <- seq_len(n)
X <- cbind(1, sin(2 * pi * hh / 24), cos(2 * pi * hh / 24))
for (j in seq_along(ids)) {
  y <- m[, j]; yw <- y[1:warm]; shape <- rep(1, length(t_mon))
  if (sum(yw) >= 24) {
    fit <- suppressWarnings(glm.fit(X[1:warm, ], yw, family = poisson()))
    if (fit$converged && all(is.finite(fit$coefficients))) {
      shape <- as.vector(exp(X[t_mon, ] %*% fit$coefficients)) / mean(exp(X[1:warm, ] %*% fit$coefficients))
    }
  }
  r <- glrpois(sts(observed = matrix(y, ncol = 1), frequency = 24, start = c(1, 1)),
               control = list(range = t_mon, c.ARL = 7, mu0 = shape * qgamma(0.95, sum(yw) + 1) / warm, Mtilde = 1,
                              M = -1, change = "intercept", theta = NULL, dir = "inc", ret = "value"))
  hit <- which(as.vector(alarms(r)) == 1)
  if (length(hit)) rows[[length(rows) + 1]] <- data.frame(method = "glrpois", series = ids[j], hour = t_mon[hit] - 1L)
}
write.csv(do.call(rbind, rows), a[2], row.names = FALSE)
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("Rscript") is None, reason="Rscript not installed (scripts/install-services.sh)")
def test_screened_script_gives_the_alarms_of_a_full_run(tmp_path):
    """The script evaluates only hours where a method can alarm; a full run must give the very same alarms."""
    import csv
    import subprocess

    import numpy as np

    R_SCRIPT = _sb.R_SCRIPT

    rng = np.random.default_rng(7)
    n = 24 * 5
    inp = tmp_path / "in.csv"
    with open(inp, "w") as f:
        f.write("series,hour,count\n")
        for j, lam in enumerate((0.05, 0.3, 1.0, 3.0, 3.0, 0.1, 0.5)):
            y = rng.poisson(lam * (1 + 0.5 * np.sin(np.arange(n) * 2 * np.pi / 24)))
            if j in (1, 3, 5):
                y[90:93] += rng.integers(4, 15, size=3)  # an outbreak
            if j == 6:
                y[72:] = 0  # silent after the warm-up: glrpois is skipped there, and must not alarm in a full run
            for h in np.flatnonzero(y):
                f.write(f"s{j},{h},{y[h]}\n")
    brute = tmp_path / "brute.R"
    brute.write_text(BRUTE_R)

    def alarms(path):
        with open(path) as f:
            return sorted((r["method"], r["series"], int(r["hour"])) for r in csv.DictReader(f))

    subprocess.run(["Rscript", str(brute), str(inp), str(tmp_path / "full.csv"), str(n)], check=True,
                   capture_output=True)
    subprocess.run(["Rscript", str(R_SCRIPT), str(inp), str(tmp_path / "fast.csv"), str(n),
                    "C1,C2,C3,farrington,glrpois", "0.001", "3", "1", "24", "1", "7", "72"], check=True,
                   capture_output=True)
    full, fast = alarms(tmp_path / "full.csv"), alarms(tmp_path / "fast.csv")
    assert full and {m for m, _, _ in full} == {"C1", "C2", "C3", "farrington", "glrpois"}
    assert fast == full
    # glrpois finds the injected outbreaks (hours 90-92) and nothing on the series silent after the warm-up
    glr = {(s, h) for m, s, h in fast if m == "glrpois"}
    assert {s for s, h in glr if 90 <= h <= 95} >= {"s1", "s3", "s5"} and not {s for s, _ in glr} & {"s6"}
