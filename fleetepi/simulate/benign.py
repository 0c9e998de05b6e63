"""Benign phenomena: what real fleets do all the time that must NOT page (labelled in the truth).

Each one is a real pattern that fooled the first detectors on fleets they were
not tuned on (issue 9):

* **crash loops**: one pod in Kubernetes CrashLoopBackOff on one host
  (back-off 10 s, 20 s, 40 s ... capped at 5 min) for hours: one signature
  tens to hundreds of times on one host. Expected: one ``host_spike`` ticket,
  ``finding: crash_loop``; no page.
* **job-wide aborts** (``background.job_bursts``): every rank of one job dumps
  core within a minute or two; sometimes the crashes carry no ``job``.
  Expected: no page.
* **chronic hosts**: a GPU with a steady corrected-ECC rate for the whole run,
  or one that re-reports one Xid every few hours. Expected: at most one
  ticket (``finding: chronic``) per host and channel; no page.
* **static associations**: a signature 2-4x more frequent on one cohort from
  day one (workload placement). Expected: at most one ``hardware_correlation``
  ticket (``finding: static_association``); no page.
* **roll-outs**: driver, BIOS, kernel values whose cohorts grow during the
  run (and the driver confounded with one GPU model). Expected: nothing.
* **planned maintenance**: racks rebooted one at a time, announced (or not)
  through ``maintenance=planned-reboot``: link-down NVLink/PCIe events and the
  killed jobs' crashes on every host of the rack. Expected: no page.

A :class:`Benign` names what it explains with the alert contract's fields,
so the scorer can tell a false page *caused* by a benign phenomenon from one
on nothing (``scoring.benign_explains``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetepi.simulate import catalog
from fleetepi.simulate.background import COLLECTIVE_MODULES, DAY_MS, HOUR_MS, JobBurst, job_name, make_crashes
from fleetepi.simulate.catalog import TK, SignatureInfo
from fleetepi.simulate.config import SimConfig
from fleetepi.simulate.fleet import (
    BIOS_NEW,
    NEVER,
    NEW_DRIVER,
    NEW_KERNEL,
    Fleet,
    equivalent_cohorts,
    pick_cohort,
    shared_cohorts,
)
from fleetepi.simulate.tables import (
    BACKGROUND,
    CHRONIC,
    CRASH_LOOP,
    MAINTENANCE,
    STATIC,
    CrashTable,
    TelemetryTable,
    concat,
    telemetry_table,
)
from fleetepi.simulate.truth import Benign, entity

#: Benign phenomenon types, in the order the scorer reports them.
BENIGN_TYPES = ("crash_loop", "job_abort", "chronic_ecc", "chronic_xid", "static_association", "rollout",
                "maintenance")
#: Kubelet's restart back-off: 10 s doubling, capped at 5 min.
BACKOFF_FIRST_S = 10.0
BACKOFF_CAP_S = 300.0
#: Xid codes a GPU with a standing fault keeps re-reporting (row remapping, ECC).
CHRONIC_XIDS = (63, 64, 92, 94)
#: Modules whose signatures a misconfigured pod's crash loop produces.
LOOP_MODULES = ("trainer", "inference-server", "libpython3.11.so.1.0", "libc.so.6", "libstdc++.so.6",
                "libtorch_cpu.so")
#: Attributes a static association may sit on (workload placement follows these).
STATIC_KEYS = ("gpu_model", "sku", "node_pool", "kernel", "nic_firmware", "datacenter")


def from_burst(b: JobBurst, i: int = 0) -> Benign:
    """A background job-wide abort as a benign phenomenon."""
    return Benign(f"burst{i}", "job_abort", b.start_ms, b.end_ms,
                  f"job {b.job or '(no job field)'}: every rank aborted on {len(b.hosts)} hosts", signature=b.signature,
                  job=b.job, hosts=b.hosts, n_events=len(b.hosts))


@dataclass
class BenignDraw:
    """What the benign generators add to the fleet's tables, and their labels."""

    crashes: list[CrashTable] = field(default_factory=list)
    telemetry: list[TelemetryTable] = field(default_factory=list)
    labels: list[Benign] = field(default_factory=list)
    #: Hosts a benign phenomenon lives on, and background signatures it uses (outbreaks pick others).
    hosts: set[int] = field(default_factory=set)
    signatures: set[int] = field(default_factory=set)


class BenignGenerator:
    """Draws every benign phenomenon a config asks for; draws nothing for a knob left at 0."""

    def __init__(self, cfg: SimConfig, fleet: Fleet, signatures: list[SignatureInfo], rates: np.ndarray,
                 shapes: list[int], rng: np.random.Generator) -> None:
        self.cfg, self.fleet, self.signatures, self.rates, self.shapes, self.rng = cfg, fleet, signatures, rates, \
            shapes, rng
        self.out = BenignDraw()
        self.p_host = fleet.propensity / fleet.propensity.sum()

    def run(self, background: CrashTable) -> BenignDraw:
        cfg = self.cfg
        if cfg.static_associations > 0:
            self.static_associations(background)
        if cfg.crash_loops_per_1k_host_day > 0:
            self.crash_loops()
        if cfg.chronic_ecc_share > 0:
            self.chronic_ecc()
        if cfg.chronic_xid_share > 0:
            self.chronic_xid()
        if self.fleet.maint_start_ms is not None:
            self.maintenance()
        self.out.labels.extend(rollouts(cfg, self.fleet))
        return self.out

    # ------------------------------------------------------------------ helpers
    def free_hosts(self, k: int) -> np.ndarray:
        free = np.setdiff1d(np.arange(len(self.fleet)), np.fromiter(self.out.hosts, dtype=np.int64))
        pool = free if len(free) >= k else np.arange(len(self.fleet))
        chosen = self.rng.choice(pool, size=min(k, len(pool)), replace=False)
        self.out.hosts.update(int(h) for h in chosen)
        return np.sort(chosen)

    def add_signature(self, info: SignatureInfo, shape: int) -> int:
        self.signatures.append(info)
        self.shapes.append(shape)
        return len(self.signatures) - 1

    def label(self, b: Benign) -> None:
        self.out.labels.append(b)

    # ------------------------------------------------------------------ phenomena
    def crash_loops(self) -> None:
        cfg, f, rng = self.cfg, self.fleet, self.rng
        n = int(rng.poisson(cfg.crash_loops_per_1k_host_day * len(f) / 1000.0 * cfg.days))
        if n == 0:
            return
        hosts = self.free_hosts(n)
        n = len(hosts)
        lo, hi = cfg.crash_loop_hours
        dur_ms = (np.exp(rng.uniform(np.log(lo), np.log(hi), size=n)) * HOUR_MS).astype(np.int64)
        t0 = cfg.start_ms + rng.integers(0, max(1, int(cfg.days * DAY_MS) - HOUR_MS), size=n)
        app = [i for i, s in enumerate(self.signatures[:len(self.rates)]) if s.frames[0][0] in LOOP_MODULES]
        known = {s.signature for s in self.signatures}
        rows = []
        for j in rng.permutation(n).tolist():  # permuted so that loop order is not host order
            h = int(hosts[j])
            if rng.random() < 0.5 and app:  # a known bug the pod hits at start-up
                sig = app[int(rng.integers(len(app)))]
                self.out.signatures.add(sig)
            else:  # a misconfigured pod: a signature nobody has seen before
                while True:
                    info = catalog.make_signatures(1, rng)[0]
                    if info.signature not in known:
                        break
                known.add(info.signature)
                sig = self.add_signature(info, catalog.SHAPE_INDEX["abort"])
            ts = crash_loop_times(int(t0[j]), int(dur_ms[j]), rng)
            ts = ts[ts < cfg.end_ms]
            if len(ts) == 0:
                continue
            job = 800_000 + j
            rows.append(make_crashes(ts, np.full(len(ts), h), np.full(len(ts), sig), np.full(len(ts), job),
                                     np.full(len(ts), self.shapes[sig]), CRASH_LOOP, rng))
            name = f.names[h]
            e = int(ts[-1])
            self.label(Benign("", "crash_loop", int(ts[0]), e,
                              f"pod {job_name(job)} in CrashLoopBackOff on {name}: {len(ts)} crashes of one "
                              f"signature in {(e - ts[0]) / HOUR_MS:.1f} h",
                              signature=self.signatures[sig].signature, host=name, job=job_name(job), hosts=(name,),
                              n_events=len(ts), finding="crash_loop", expected=(entity("host_spike", host=name),)))
        if rows:
            self.out.crashes.append(concat(rows, CrashTable))  # type: ignore[arg-type]

    def chronic_ecc(self) -> None:
        cfg, f, rng = self.cfg, self.fleet, self.rng
        hosts = self.free_hosts(max(1, int(round(cfg.chronic_ecc_share * len(f)))))
        iv = int(cfg.ecc_interval_s * 1000)
        parts = []
        for h in hosts.tolist():
            rate = float(np.exp(rng.uniform(np.log(20.0), np.log(300.0))))
            ts = np.arange(cfg.start_ms + int(rng.integers(0, iv)), cfg.end_ms, iv, dtype=np.int64)
            count = rng.poisson(rate * iv / HOUR_MS, size=len(ts))
            dev = int(rng.integers(0, catalog.GPUS_PER_HOST))
            if not cfg.ecc_zero_deltas:
                ts, count = ts[count > 0], count[count > 0]
            parts.append(telemetry_table(ts_ms=ts, host=h, kind=TK["ecc_corrected"], code=-1, count=count,
                                         value=np.nan, device=dev, origin=CHRONIC))
            name = f.names[h]
            self.label(Benign("", "chronic_ecc", cfg.start_ms, cfg.end_ms,
                              f"{name}: GPU{dev} with a steady {rate:.0f} corrected ECC errors/h since day one",
                              host=name, telemetry_kind="ecc_corrected", hosts=(name,), n_events=len(ts),
                              strength=round(rate, 1), finding="chronic",
                              expected=(entity("telemetry_spike", host=name, telemetry_kind="ecc_corrected"),
                                        entity("host_spike", host=name)),
                              cohorts=tuple(f.attributes_at(h, cfg.start_ms).items())))
        self.out.telemetry.append(concat(parts, TelemetryTable))  # type: ignore[arg-type]

    def chronic_xid(self) -> None:
        cfg, f, rng = self.cfg, self.fleet, self.rng
        hosts = self.free_hosts(max(1, int(round(cfg.chronic_xid_share * len(f)))))
        parts = []
        for h in hosts.tolist():
            code = int(CHRONIC_XIDS[int(rng.integers(len(CHRONIC_XIDS)))])
            every_h = float(np.exp(rng.uniform(np.log(1.0), np.log(6.0))))
            k = int(cfg.days * 24 / every_h) + 2
            gaps = every_h * HOUR_MS * rng.uniform(0.8, 1.2, size=k)
            ts = cfg.start_ms + int(rng.integers(0, int(every_h * HOUR_MS))) + np.cumsum(gaps).astype(np.int64) \
                - int(gaps[0])
            ts = ts[ts < cfg.end_ms]
            dev = int(rng.integers(0, catalog.GPUS_PER_HOST))
            parts.append(telemetry_table(ts_ms=ts, host=h, kind=TK["xid"], code=code, count=-1, value=np.nan,
                                         device=dev, origin=CHRONIC))
            name = f.names[h]
            self.label(Benign("", "chronic_xid", cfg.start_ms, cfg.end_ms,
                              f"{name}: GPU{dev} re-reports Xid {code} every ~{every_h:.1f} h since day one",
                              host=name, telemetry_kind="xid", code=code, hosts=(name,), n_events=len(ts),
                              strength=round(every_h, 2), finding="chronic",
                              expected=(entity("telemetry_spike", host=name, telemetry_kind="xid", code=code),
                                        entity("telemetry_spike", host=name, telemetry_kind="xid"),
                                        entity("host_spike", host=name)),
                              cohorts=tuple(f.attributes_at(h, cfg.start_ms).items())))
        self.out.telemetry.append(concat(parts, TelemetryTable))  # type: ignore[arg-type]

    def static_associations(self, bg: CrashTable) -> None:
        """Re-place some signatures' background crashes so their cohort holds RR x its share."""
        cfg, f, rng = self.cfg, self.fleet, self.rng
        # signatures frequent enough for a 2-4x ratio to be visible over days (ranks 3-20), not the very top
        cands = np.argsort(-self.rates).tolist()[2:20]
        chosen = rng.choice(cands, size=min(cfg.static_associations, len(cands)), replace=False)
        self.out.signatures.update(int(x) for x in chosen)
        for sig in chosen.tolist():
            cohort, key, value = self.pick_cohort((0.1, 0.45))
            rr = float(rng.uniform(2.0, 4.0))
            self.place(bg, int(sig), cohort, rr)
            self.label(static_label(f, cfg, self.signatures[int(sig)].signature, key, value, cohort, rr,
                                    int((bg.sig == sig).sum())))

    def pick_cohort(self, share: tuple[float, float], keys: tuple[str, ...] = STATIC_KEYS) -> tuple[np.ndarray, str,
                                                                                                       str]:
        """A cohort (hosts, canonical key, value) holding ``share`` of the fleet at the start, from ``keys``."""
        f, rng = self.fleet, self.rng
        return pick_cohort(f, rng, share, keys)

    def place(self, bg: CrashTable, sig: int, cohort: np.ndarray, rr: float) -> None:
        """Move ``sig``'s background crashes so a cohort host is ``rr`` times as likely as another."""
        rows = np.flatnonzero((bg.sig == sig) & (bg.origin == BACKGROUND))
        w = self.fleet.propensity.copy()
        w[cohort] *= rr
        bg.host[rows] = self.rng.choice(len(self.fleet), size=len(rows), p=w / w.sum())
        bg.origin[rows] = STATIC

    def maintenance(self) -> None:
        f, rng = self.fleet, self.rng
        ms, me = f.maint_start_ms, f.maint_end_ms
        assert ms is not None and me is not None
        collective = [i for i, s in enumerate(self.signatures[:len(self.rates)]) if s.frames[0][0] in COLLECTIVE_MODULES]
        crash_parts, tel_parts = [], []
        for k, s in enumerate(sorted(set(ms[ms != NEVER].tolist()))):
            hosts = np.flatnonzero(ms == s)
            e = int(me[hosts[0]])
            # every host reboots once inside the window; its links drop as it goes down
            boot = s + rng.integers(5 * 60_000, e - s - 5 * 60_000, size=len(hosts))
            tel_parts.append(telemetry_table(ts_ms=boot, host=hosts, kind=TK["nvlink"], code=-1,
                                             count=rng.integers(1, 9, size=len(hosts)), value=np.nan,
                                             device=rng.integers(0, catalog.GPUS_PER_HOST, size=len(hosts)),
                                             origin=MAINTENANCE))
            tel_parts.append(telemetry_table(ts_ms=boot + rng.integers(0, 5_000, size=len(hosts)), host=hosts,
                                             kind=TK["pcie"], code=-1, count=rng.integers(1, 4, size=len(hosts)),
                                             value=np.nan, device=-1, origin=MAINTENANCE))
            # the job the rack was running loses its ranks there (drained late: they dump core)
            ranks = hosts[rng.random(len(hosts)) < 0.6]
            sig = collective[int(rng.integers(len(collective)))] if collective else 0
            job = 700_000 + k
            crash_parts.append(make_crashes(boot[np.isin(hosts, ranks)] - rng.integers(0, 30_000, size=len(ranks)),
                                            ranks, np.full(len(ranks), sig), np.full(len(ranks), job),
                                            np.full(len(ranks), catalog.SHAPE_INDEX["abort"]), MAINTENANCE, rng))
            rack = f.racks[int(f.rack_of[hosts[0]])]
            names = tuple(f.names[h] for h in hosts.tolist())
            said = "announced as maintenance=planned-reboot" if f.maint_announced else "NOT announced"
            cohorts = shared_cohorts(f, hosts, s)
            self.label(Benign("", "maintenance", s, e,
                              f"planned reboot of rack {rack} ({len(hosts)} hosts, {said}): link-down NVLink/PCIe "
                              f"events and {len(ranks)} killed ranks", signature=self.signatures[sig].signature,
                              attribute=f.key("rack"), value=rack, job=job_name(job), hosts=names,
                              n_events=3 * len(hosts), cohorts=cohorts))
        self.out.crashes.append(concat(crash_parts, CrashTable))  # type: ignore[arg-type]
        self.out.telemetry.append(concat(tel_parts, TelemetryTable))  # type: ignore[arg-type]


def crash_loop_times(t0_ms: int, duration_ms: int, rng: np.random.Generator) -> np.ndarray:
    """Crash times of a pod in CrashLoopBackOff from ``t0_ms`` for ``duration_ms``.

    Each attempt runs 5-60 s before it crashes; kubelet then waits 10 s,
    20 s, 40 s ... at most 5 min before the next start.
    """
    k = int(duration_ms / 1000 / (BACKOFF_CAP_S + 5.0)) + 12
    backoff = np.minimum(BACKOFF_FIRST_S * 2.0 ** np.arange(k), BACKOFF_CAP_S)
    run = rng.uniform(5.0, 60.0, size=k)
    t = t0_ms + ((np.cumsum(run) + np.concatenate([[0.0], np.cumsum(backoff[:-1])])) * 1000).astype(np.int64)
    return t[t < t0_ms + duration_ms]


def static_label(f: Fleet, cfg: SimConfig, signature: str, key: str, value: str, cohort: np.ndarray, rr: float,
                 n: int) -> Benign:
    attr = f.key(key)
    same = [kv for kv in equivalent_cohorts(f, cohort, cfg.start_ms) if kv != (attr, value)]
    expected = (entity("hardware_correlation", signature, attribute=attr, value=value),
                *(entity("hardware_correlation", signature, attribute=a, value=v) for a, v in same))
    return Benign("", "static_association", cfg.start_ms, cfg.end_ms,
                  f"{signature} is {rr:.1f}x as frequent on {attr}={value} ({len(cohort)} hosts) since day one "
                  f"(workload placement): {n} crashes in the run", signature=signature, attribute=attr, value=value,
                  n_events=n, strength=round(rr, 2), finding="static_association", expected=expected)


def rollouts(cfg: SimConfig, f: Fleet) -> list[Benign]:
    """The roll-outs of the run as labels (they draw nothing; their events are the host re-announcements)."""
    out = []
    for ch in f.changes:
        at = ch.at_ms[ch.at_ms != NEVER]
        if len(at) == 0:
            continue
        value = {"driver": NEW_DRIVER, "bios": BIOS_NEW, "kernel": NEW_KERNEL}.get(ch.key, ch.value)
        note = ""
        if ch.key in ("driver", "cuda"):
            note = f" (only on {cfg.driver_rollout_model}: confounded with gpu_model)"
        out.append(Benign("", "rollout", int(at.min()), cfg.end_ms,
                          f"{f.key(ch.key)}={value} rolled out to {len(at)} hosts between "
                          f"day {(at.min() - cfg.start_ms) / DAY_MS:.1f} and day {(at.max() - cfg.start_ms) / DAY_MS:.1f}"
                          + note, attribute=f.key(ch.key), value=value, n_events=len(at)))
    return out


__all__ = ["BACKOFF_CAP_S", "BACKOFF_FIRST_S", "BENIGN_TYPES", "CHRONIC_XIDS", "STATIC_KEYS", "Benign", "BenignDraw",
           "BenignGenerator", "crash_loop_times", "from_burst", "rollouts", "static_label"]
