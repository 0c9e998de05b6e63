"""Labelled outbreaks: what to inject, and the ground truth the benchmark scores against.

Each template injects one kind of trouble an SRE wants to be paged for, with
strength, duration and timing drawn from the seed (ranges chosen so that
most outbreaks are detectable within hours, none in seconds):

==================================  ==========================================================
template                            what happens
==================================  ==========================================================
``signature_spike/existing``        a known signature's fleet rate x8-30 for 2-12 h
``signature_spike/new``             a new signature (first: the libunwind NULL-return race)
``host_spike/bit_flip``             the founding case: one host, many signatures, bit flips
``host_spike/bad_memory``           one host: SIGBUS/wild pointers plus Xid 48/94, uncorrected ECC
``hardware_correlation/bios_rack``  a new signature only on hosts with BIOS 2.4 in one rack
``hardware_correlation/driver``     a signature on hosts of the new driver (only on one GPU model)
``telemetry_spike/xid79_rack``      Xid 79 (fallen off the bus) on several hosts of one rack
``telemetry_spike/ecc_host``        an ECC corrected-error storm on one host
==================================  ==========================================================

and, for fleets unlike the classic one (what the first detectors missed, issue 9):

======================================  ======================================================
template                                what happens
======================================  ======================================================
``hardware_correlation/rack_existing``  a common signature confined to one rack: RR 9-38,
                                        80-200 extra crashes a day
``hardware_correlation/large_cohort``   a signature rising on the largest GPU model (about half
                                        the fleet) at RR 3-15
``hardware_correlation/new_driver_sig`` a new signature on one driver version
``hardware_correlation/rising_static``  a 2x association present from day one (benign) turns 6-15x
``hardware_correlation/wearout``        a signature's rate on one cohort rising over weeks
``telemetry_spike/wearout``             a cohort's Xid 63/94 rate rising over weeks (HBM wear)
``host_spike/sick_pcie``                one host: PCIe/NVLink errors, Xid 79/119, CUDA crashes in
                                        many signatures
``signature_spike/deploy_regression``   a fleet-wide x2-x5 of an existing signature from one
                                        instant (a deploy) to the end of the run
``signature_spike/deadlock_job``        a job deadlocked on 64 hosts: a new hang signature from
                                        the collective watchdog (origin ``watchdog``), again at
                                        every restart, and a power/thermal surge on its rack(s);
                                        two truth records (the spike and the rack telemetry)
======================================  ======================================================

An :class:`Outbreak` names its entity with the alert contract's fields.
``accept`` lists other entities whose alert also counts as finding it (BIOS
2.4 *in rack r17*: either is right); ``related`` lists alerts that are true
consequences but not the finding (the datacenter the rack is in, the GPU model
confounded with the driver, the host_spike of the ECC host): the scorer
counts those neither as detections nor as false alerts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetepi.simulate import catalog
from fleetepi.simulate.background import DAY_MS, HOUR_MS, job_name, make_crashes, peak_share
from fleetepi.simulate.benign import static_label
from fleetepi.simulate.catalog import TK, SignatureInfo
from fleetepi.simulate.config import OutbreakSpec, SimConfig
from fleetepi.simulate.exceptions import SimulationConfigError
from fleetepi.simulate.fleet import (
    BIOS_NEW,
    CUDA_OF,
    GPU_CATALOG,
    NEW_DRIVER,
    Fleet,
    dense_cohorts,
    equivalent_cohorts,
    inner_cohorts,
    pick_cohort,
    shared_cohorts,
)
from fleetepi.simulate.tables import SOURCE_INDEX, STATIC, CrashTable, TelemetryTable, concat, telemetry_table
from fleetepi.simulate.truth import EntityKey, Outbreak, entity, key_from_json, key_to_json

#: New signatures a driver or firmware defect produces (used before generated ones).
HARDWARE_SIGNATURES = (
    "libcuda.so.1!cuMemcpyHtoDAsync_v2 | libcudart.so.12!cudaMemcpyAsync",
    "libcuda.so.1!cuCtxSynchronize | libtorch_cuda.so!c10::cuda::device_synchronize",
    "libnvidia-ptxjitcompiler.so.1!__nvJitLinkComplete | libcuda.so.1!cuModuleLoadData",
    "libcuda.so.1!cuMemAlloc_v2 | libcudart.so.12!cudaMallocAsync",
    "libnvidia-ml.so.1!nvmlDeviceGetMemoryInfo_v2 | dcgm-exporter!DcgmWatcher::poll",
)
#: What the collective watchdog reports for a rank stuck in an all-reduce that never completes.
HANG_SIGNATURE = ("libnccl.so.2!ncclKernel_AllReduce_RING_LL_Sum_bf16 | "
                  "libtorch_cuda.so!c10d::ProcessGroupNCCL::WorkNCCL::synchronizeStream | "
                  "libtorch_cuda.so!c10d::ProcessGroupNCCL::watchdogHandler")
#: Modules of the crashes a host with a failing PCIe link or GPU produces (CUDA errors surface there).
CUDA_MODULES = ("libcuda.so.1", "libnccl.so.2", "libtorch_cuda.so")
#: Cohort keys a wear-out can sit on (a batch of parts: SKU, firmware, pool, model, kernel).
WEAROUT_KEYS = ("sku", "nic_firmware", "node_pool", "gpu_model", "kernel", "pdu", "switch")


@dataclass
class Injected:
    crashes: list[CrashTable] = field(default_factory=list)
    telemetry: list[TelemetryTable] = field(default_factory=list)
    truth: list[Outbreak] = field(default_factory=list)
    #: Benign phenomena an outbreak brings with it (the static history of a rising association).
    benign: list[Any] = field(default_factory=list)


class Injector:
    """Draws every outbreak of a config onto a fleet; keeps entities of different outbreaks apart.

    :param sig_shape: each signature's usual shape; a list is extended in place as signatures are added.
    :param background: the background crash table (``rising_static`` re-places rows of it).
    :param avoid_hosts: hosts a benign phenomenon lives on (host outbreaks pick others).
    :param avoid_signatures: background signatures a benign phenomenon uses (outbreaks pick others).
    """

    def __init__(self, cfg: SimConfig, fleet: Fleet, signatures: list[SignatureInfo], rates: np.ndarray,
                 sig_shape: np.ndarray | list[int], rng: np.random.Generator, background: CrashTable | None = None,
                 avoid_hosts: set[int] | None = None, avoid_signatures: set[int] | None = None) -> None:
        self.cfg, self.fleet, self.signatures, self.rates, self.rng = cfg, fleet, signatures, rates, rng
        self.sig_shape = sig_shape if isinstance(sig_shape, list) else list(sig_shape)
        self.background = background
        self.used_hosts: set[int] = set(avoid_hosts or ())
        self.used_racks: set[int] = set()
        self.used_sigs: set[int] = set(avoid_signatures or ())
        self.warmup_ms = int(min(cfg.warmup_days, 0.3 * cfg.days) * DAY_MS)
        self.out = Injected()
        self.p_host = fleet.propensity / fleet.propensity.sum()

    # ------------------------------------------------------------------ helpers
    def window(self, spec: OutbreakSpec, dur_h: tuple[float, float], earliest_ms: int | None = None) -> tuple[int, int]:
        cfg = self.cfg
        start0, end = cfg.start_ms, cfg.end_ms
        lo = max(start0 + self.warmup_ms, earliest_ms or 0)
        dur = spec.duration_h if spec.duration_h is not None else float(self.rng.uniform(*dur_h))
        dur_ms = int(dur * HOUR_MS)
        if spec.start_day is not None:
            s = start0 + int(spec.start_day * DAY_MS)
        else:
            hi = max(lo, end - dur_ms - HOUR_MS)
            s = int(self.rng.integers(lo, hi + 1)) if hi > lo else min(lo, end - HOUR_MS)
        return s, min(s + dur_ms, end - 1)

    def fresh_host(self, pool: np.ndarray | None = None) -> int:
        pool = np.arange(len(self.fleet)) if pool is None else pool
        free = [int(h) for h in pool if int(h) not in self.used_hosts] or [int(h) for h in pool]
        h = free[int(self.rng.integers(len(free)))]
        self.used_hosts.add(h)
        return h

    def jobs(self, ts: np.ndarray) -> np.ndarray:
        return (ts - self.cfg.start_ms) // DAY_MS * 1000 + self.rng.integers(0, 600, size=len(ts))

    def times(self, rate_per_h: float, s: int, e: int) -> np.ndarray:
        n = int(self.rng.poisson(rate_per_h * (e - s) / HOUR_MS))
        return np.sort(self.rng.integers(s, max(e, s + 1), size=n))

    def new_signature(self, preferred: tuple[str, ...] = (), shape: str | None = None) -> int:
        known = {s.signature for s in self.signatures}
        for cand in preferred:
            if cand not in known:
                mods = [p.split("!", 1) for p in cand.split(" | ")]
                frames = tuple((m, f, f"0x{int(self.rng.integers(0x40, 0x4000)):x}") for m, f in mods)
                info = SignatureInfo(cand, "trainer", frames)
                break
        else:
            while True:
                info = catalog.make_signatures(1, self.rng)[0]
                if info.signature not in known:
                    break
        self.signatures.append(info)
        idx = len(self.signatures) - 1
        if shape is not None:
            self.sig_shape.append(catalog.SHAPE_INDEX[shape])
        else:
            w = catalog.BACKGROUND_SHAPE_WEIGHTS / catalog.BACKGROUND_SHAPE_WEIGHTS.sum()
            self.sig_shape.append(int(self.rng.choice(len(w), p=w)))
        self.used_sigs.add(idx)
        return idx

    def existing_signature(self, lo: float, hi: float, modules: tuple[str, ...] = ()) -> int:
        n_bg = len(self.rates)
        ok = [i for i in range(n_bg) if lo <= self.rates[i] <= hi and i not in self.used_sigs
              and (not modules or self.signatures[i].frames[0][0] in modules)]
        if not ok:
            ok = [i for i in range(n_bg) if i not in self.used_sigs] or list(range(n_bg))
            target = (lo + hi) / 2
            ok = sorted(ok, key=lambda i: abs(np.log(self.rates[i] / target)))[:5]
        i = ok[int(self.rng.integers(len(ok)))]
        self.used_sigs.add(i)
        return i

    def shared_attributes(self, cases: list[tuple[int, int]], share: float = 0.75) -> list[tuple[str, str]]:
        """Attribute values held (at case time) by at least ``share`` of the cases' distinct hosts."""
        seen: dict[int, dict[str, str]] = {}
        for h, t in cases:
            seen.setdefault(h, self.fleet.attributes_at(h, t))
        c: Counter[tuple[str, str]] = Counter(kv for a in seen.values() for kv in a.items())
        return sorted(kv for kv, k in c.items() if len(seen) and k >= share * len(seen))

    def add(self, o: Outbreak, crashes: CrashTable | None = None, tel: TelemetryTable | None = None) -> None:
        if crashes is not None:
            self.out.crashes.append(crashes)
        if tel is not None:
            self.out.telemetry.append(tel)
        self.out.truth.append(o)

    def crashes(self, ts: np.ndarray, hosts: np.ndarray, sig: np.ndarray | int, shape: np.ndarray | int,
                origin: int) -> CrashTable:
        n = len(ts)
        return make_crashes(ts, hosts, np.broadcast_to(sig, n), self.jobs(ts), np.broadcast_to(shape, n), origin,
                            self.rng)

    def tel(self, ts: np.ndarray, hosts: np.ndarray | int, kind: str, code: int, count: np.ndarray | int,
            origin: int) -> TelemetryTable:
        n = len(ts)
        return telemetry_table(ts_ms=ts, host=np.broadcast_to(hosts, n), kind=TK[kind], code=code,
                               count=np.broadcast_to(count, n), value=np.nan,
                               device=self.rng.integers(0, catalog.GPUS_PER_HOST, size=n), origin=origin)

    # ------------------------------------------------------------------ templates
    def signature_existing(self, i: int, spec: OutbreakSpec) -> None:
        s, e = self.window(spec, (2.0, 12.0))
        sig = self.existing_signature(0.2, 2.0)
        base = float(self.rates[sig])
        k = spec.strength or float(np.exp(self.rng.uniform(np.log(8), np.log(30))))
        extra = (k - 1) * base if spec.strength else max((k - 1) * base, 3.0)
        ts = self.times(extra, s, e)
        hosts = self.rng.choice(len(self.fleet), size=len(ts), p=self.p_host)
        name = self.signatures[sig].signature
        self.add(Outbreak(f"o{i}", "signature_spike", spec.template, s, e,
                          f"{name}: fleet rate x{1 + extra / base:.0f} ({base:.2f}/h -> {base + extra:.1f}/h) "
                          f"for {(e - s) / HOUR_MS:.1f} h, {len(ts)} extra crashes",
                          signature=name, hosts=self._names(hosts), n_events=len(ts), strength=round(k, 2),
                          origin=i, accept=(entity("signature_spike", name),)),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def signature_new(self, i: int, spec: OutbreakSpec) -> None:
        s, e = self.window(spec, (2.0, 12.0))
        first = catalog.UNWIND_RACE_SIGNATURE not in {x.signature for x in self.signatures}
        if first:
            self.signatures.append(catalog.unwind_race_info())
            self.sig_shape.append(catalog.SHAPE_INDEX["return_to_null"])
            sig = len(self.signatures) - 1
            self.used_sigs.add(sig)
        else:
            sig = self.new_signature()
        rate = spec.strength or float(np.exp(self.rng.uniform(np.log(2), np.log(8))))
        ts = self.times(rate, s, e)
        hosts = self.rng.choice(len(self.fleet), size=len(ts), p=self.p_host)
        name = self.signatures[sig].signature
        what = "libunwind race: returns to NULL on many hosts" if first else "a new signature"
        self.add(Outbreak(f"o{i}", "signature_spike", spec.template, s, e,
                          f"{what}: {name} at {rate:.1f}/h for {(e - s) / HOUR_MS:.1f} h, {len(ts)} crashes on "
                          f"{len(set(hosts.tolist()))} hosts",
                          signature=name, hosts=self._names(hosts), n_events=len(ts), strength=round(rate, 2),
                          origin=i, accept=(entity("signature_spike", name),)),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def _sick_host(self, i: int, spec: OutbreakSpec, rate_range: tuple[float, float], shape_w: np.ndarray,
                   what: str) -> tuple[int, int, int, CrashTable, float]:
        s, e = self.window(spec, (6.0, 48.0))
        h = self.fresh_host()
        rate = spec.strength or float(np.exp(self.rng.uniform(np.log(rate_range[0]), np.log(rate_range[1]))))
        ts = self.times(rate, s, e)
        n_bg = len(self.rates)
        sigs = self.rng.integers(0, n_bg, size=len(ts))  # silent corruption crashes whatever runs there
        shapes = self.rng.choice(len(shape_w), size=len(ts), p=shape_w / shape_w.sum())
        return s, e, h, self.crashes(ts, np.full(len(ts), h), sigs, shapes, i), rate

    def host_bit_flip(self, i: int, spec: OutbreakSpec) -> None:
        s, e, h, ct, rate = self._sick_host(i, spec, (0.5, 3.0), catalog.SICK_SHAPE_WEIGHTS, "bit flips")
        name = self.fleet.names[h]
        n_sigs = len(set(ct.sig.tolist()))
        self.add(Outbreak(f"o{i}", "host_spike", spec.template, s, e,
                          f"{name} miscomputes (silent CPU corruption): {len(ct)} crashes in {n_sigs} signatures, "
                          f"misaligned stack pointers and bit-flipped addresses, {rate:.1f}/h",
                          host=name, hosts=(name,), n_events=len(ct), strength=round(rate, 2), origin=i,
                          accept=(entity("host_spike", host=name),)), ct)

    def host_bad_memory(self, i: int, spec: OutbreakSpec) -> None:
        w = np.zeros(len(catalog.SHAPES))
        w[catalog.SHAPE_INDEX["bus_error"]], w[catalog.SHAPE_INDEX["wild_pointer"]] = 0.4, 0.3
        w[catalog.SHAPE_INDEX["bit_flip"]] = 0.3
        s, e, h, ct, rate = self._sick_host(i, spec, (0.3, 1.5), w, "bad memory")
        name = self.fleet.names[h]
        tts = self.times(0.3, s, e)
        pick = self.rng.integers(0, 3, size=len(tts))
        tels = [self.tel(tts[pick == 0], h, "xid", 48, -1, i), self.tel(tts[pick == 1], h, "xid", 94, -1, i),
                self.tel(tts[pick == 2], h, "ecc_uncorrected", -1, 1, i)]
        tt = concat(tels, TelemetryTable)
        related = (entity("telemetry_spike", host=name, telemetry_kind="xid", code=48),
                   entity("telemetry_spike", host=name, telemetry_kind="xid", code=94),
                   entity("telemetry_spike", host=name, telemetry_kind="xid"),
                   entity("telemetry_spike", host=name, telemetry_kind="ecc_uncorrected"))
        self.add(Outbreak(f"o{i}", "host_spike", spec.template, s, e,
                          f"{name} has failing memory: {len(ct)} crashes (SIGBUS, wild pointers) at {rate:.1f}/h "
                          f"and {len(tts)} Xid 48/94 or uncorrected ECC events",
                          host=name, hosts=(name,), n_events=len(ct) + len(tts), strength=round(rate, 2),
                          origin=i, accept=(entity("host_spike", host=name),), related=related), ct, tt)  # type: ignore[arg-type]

    def _cohort_cases(self, s: int, e: int, rate: float, eligible_at: Any) -> tuple[np.ndarray, np.ndarray]:
        ts = self.times(rate, s, e)
        keep_t, keep_h = [], []
        for t in ts.tolist():
            pool = eligible_at(t)
            if len(pool):
                keep_t.append(t)
                keep_h.append(int(pool[int(self.rng.integers(len(pool)))]))
        return np.array(keep_t, dtype=np.int64), np.array(keep_h, dtype=np.int64)

    def _hw_related(self, name: str, ts: np.ndarray, hosts: np.ndarray, skip: set[tuple[str, str]],
                    pool: np.ndarray | None = None, at_ms: int = 0) -> tuple[EntityKey, ...]:
        """Cohorts most of the cases share (the rack's datacenter), and those inside the outbreak's ``pool``."""
        shared = self.shared_attributes(list(zip(hosts.tolist(), ts.tolist())))
        if pool is not None:
            shared = sorted({*shared, *inner_cohorts(self.fleet, pool, at_ms)})
        rel = [entity("hardware_correlation", name, attribute=a, value=v) for a, v in shared if (a, v) not in skip]
        return (*rel, entity("signature_spike", name))

    def hw_bios_rack(self, i: int, spec: OutbreakSpec) -> None:
        f = self.fleet
        if not f.has("bios"):
            raise SimulationConfigError(f"{spec.template} needs the bios attribute, which this fleet drops")
        never = np.iinfo(np.int64).max
        up = [r for r in np.argsort(f.rack_bios_at_ms).tolist() if f.rack_bios_at_ms[r] != never]
        # a rack upgraded early enough to leave a day of outbreak before the end (else the earliest one)
        cands = [r for r in up if r not in self.used_racks
                 and f.rack_bios_at_ms[r] + 4 * HOUR_MS < self.cfg.end_ms - 24 * HOUR_MS] or up[:1]
        r = cands[int(self.rng.integers(len(cands)))]
        self.used_racks.add(r)
        earliest = int(f.rack_bios_at_ms[r]) + 4 * HOUR_MS
        s, e = self.window(spec, (12.0, 48.0), earliest_ms=earliest)
        in_rack = np.flatnonzero(f.rack_of == r)
        rate = spec.strength or float(np.exp(self.rng.uniform(np.log(0.5), np.log(2.0))))
        ts, hosts = self._cohort_cases(s, e, rate, lambda t: in_rack[f.bios_at_ms[in_rack] <= t])
        sig = self.new_signature(HARDWARE_SIGNATURES, shape="bus_error")
        name = self.signatures[sig].signature
        rack = f.racks[r]
        bios, rk = f.key("bios"), f.key("rack")
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} only on hosts with {bios}={BIOS_NEW} in rack {rack}: {len(ts)} crashes on "
                          f"{len(set(hosts.tolist()))} hosts",
                          signature=name, attribute=bios, value=BIOS_NEW, hosts=self._names(hosts),
                          n_events=len(ts), strength=round(rate, 2), origin=i,
                          accept=(entity("hardware_correlation", name, attribute=bios, value=BIOS_NEW),
                                  entity("hardware_correlation", name, attribute=rk, value=rack)),
                          related=self._hw_related(name, ts, hosts, {(bios, BIOS_NEW), (rk, rack)}, in_rack, s)),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def hw_driver(self, i: int, spec: OutbreakSpec) -> None:
        f = self.fleet
        earliest = f.driver_rollout_ms[0] + 12 * HOUR_MS
        s, e = self.window(spec, (24.0, 72.0), earliest_ms=earliest)
        sig = self.existing_signature(0.02, 0.3, modules=("libcuda.so.1", "libnccl.so.2"))
        rate = spec.strength or float(np.exp(self.rng.uniform(np.log(0.5), np.log(2.0))))
        ts, hosts = self._cohort_cases(s, e, rate, lambda t: np.flatnonzero(f.driver_at_ms <= t))
        name = self.signatures[sig].signature
        drv = f.key("driver")
        accept = [entity("hardware_correlation", name, attribute=drv, value=NEW_DRIVER)]
        if f.has("cuda"):  # cuda follows the driver exactly: the same hosts, an equally right finding
            accept.append(entity("hardware_correlation", name, attribute=f.key("cuda"), value=CUDA_OF[NEW_DRIVER]))
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} on hosts of driver {NEW_DRIVER} (rolled out only to one GPU model): "
                          f"{len(ts)} extra crashes on {len(set(hosts.tolist()))} hosts",
                          signature=name, attribute=drv, value=NEW_DRIVER, hosts=self._names(hosts),
                          n_events=len(ts), strength=round(rate, 2), origin=i, accept=tuple(accept),
                          related=self._hw_related(name, ts, hosts, {k[3:5] for k in accept},  # type: ignore[misc]
                                                   np.flatnonzero(f.driver_at_ms <= e), e)),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def tel_xid79_rack(self, i: int, spec: OutbreakSpec) -> None:
        f = self.fleet
        free = [r for r in range(len(f.racks)) if r not in self.used_racks] or list(range(len(f.racks)))
        r = free[int(self.rng.integers(len(free)))]
        self.used_racks.add(r)
        s, e = self.window(spec, (0.5, 3.0))
        in_rack = np.flatnonzero(f.rack_of == r)
        k = int(spec.strength) if spec.strength else int(self.rng.integers(3, 11))
        k = max(1, min(k, len(in_rack)))
        hosts = self.rng.choice(in_rack, size=k, replace=False)
        per = self.rng.integers(1, 4, size=k)
        hh = np.repeat(hosts, per)
        ts = self.rng.integers(s, max(e, s + 1), size=len(hh))
        rack = f.racks[r]
        rk = f.key("rack")
        names = self._names(hosts)
        rel: list[EntityKey] = [entity("telemetry_spike", telemetry_kind="xid", code=79)]
        for n in names:
            rel += [entity("telemetry_spike", host=n, telemetry_kind="xid", code=79),
                    entity("telemetry_spike", host=n, telemetry_kind="xid"), entity("host_spike", host=n)]
        for a, v in self.shared_attributes([(int(h), s) for h in hosts]):
            if (a, v) != (rk, rack):
                rel.append(entity("telemetry_spike", attribute=a, value=v, telemetry_kind="xid", code=79))
        self.add(Outbreak(f"o{i}", "telemetry_spike", spec.template, s, e,
                          f"Xid 79 (GPU fallen off the bus) on {k} hosts of rack {rack} ({len(ts)} events, "
                          f"{(e - s) / HOUR_MS:.1f} h): a power or PCIe fault in the rack",
                          attribute=rk, value=rack, telemetry_kind="xid", code=79, hosts=names,
                          n_events=len(ts), strength=float(k), origin=i,
                          accept=(entity("telemetry_spike", attribute=rk, value=rack, telemetry_kind="xid",
                                         code=79),), related=tuple(rel)),
                 tel=self.tel(ts, hh, "xid", 79, -1, i))

    def tel_ecc_host(self, i: int, spec: OutbreakSpec) -> None:
        s, e = self.window(spec, (2.0, 24.0))
        h = self.fresh_host()
        rate = spec.strength or float(self.rng.lognormal(np.log(300.0), 0.6))
        step = 5 * 60_000
        ts = np.arange(s + int(self.rng.integers(0, step)), e, step, dtype=np.int64)
        counts = self.rng.poisson(rate * step / HOUR_MS, size=len(ts))
        ts, counts = ts[counts > 0], counts[counts > 0]
        x92 = np.sort(self.rng.integers(s, e, size=int(self.rng.integers(1, 3))))
        tt = concat([self.tel(ts, h, "ecc_corrected", -1, counts, i), self.tel(x92, h, "xid", 92, -1, i)],
                    TelemetryTable)
        name = self.fleet.names[h]
        rack = str(self.fleet.initial["rack"][h])
        self.add(Outbreak(f"o{i}", "telemetry_spike", spec.template, s, e,
                          f"ECC storm on {name}: {int(counts.sum())} corrected errors at ~{rate:.0f}/h for "
                          f"{(e - s) / HOUR_MS:.1f} h (a failing HBM stack)",
                          host=name, telemetry_kind="ecc_corrected", hosts=(name,), n_events=len(tt),
                          strength=round(rate, 1), origin=i,
                          accept=(entity("telemetry_spike", host=name, telemetry_kind="ecc_corrected"),),
                          related=(entity("host_spike", host=name),
                                   entity("telemetry_spike", host=name, telemetry_kind="xid", code=92),
                                   entity("telemetry_spike", host=name, telemetry_kind="xid"),
                                   entity("telemetry_spike", telemetry_kind="ecc_corrected"),
                                   entity("telemetry_spike", attribute=self.fleet.key("rack"), value=rack,
                                          telemetry_kind="ecc_corrected"))),
                 tel=tt)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ extended templates
    def pick_rack(self) -> int:
        f = self.fleet
        free = [r for r in range(len(f.racks)) if r not in self.used_racks] or list(range(len(f.racks)))
        r = free[int(self.rng.integers(len(free)))]
        self.used_racks.add(r)
        return r

    def by_propensity(self, pool: np.ndarray, k: int) -> np.ndarray:
        """``k`` case hosts from ``pool``, crashier hosts more often (as in the background)."""
        if k == 0 or len(pool) == 0:
            return np.zeros(0, dtype=np.int64)
        w = self.fleet.propensity[pool]
        return pool[self.rng.choice(len(pool), size=k, p=w / w.sum())]

    def share_of(self, pool: np.ndarray) -> float:
        """Share of the fleet's background crashes that land on ``pool`` (propensity-weighted)."""
        return float(self.fleet.propensity[pool].sum() / self.fleet.propensity.sum())

    def ramp_times(self, peak_per_h: float, s: int, e: int) -> np.ndarray:
        """Case times of a rate rising linearly from 0 at ``s`` to ``peak_per_h`` at ``e`` (wear-out)."""
        n = int(self.rng.poisson(peak_per_h * (e - s) / HOUR_MS / 2))
        return np.sort(s + ((e - s) * np.sqrt(self.rng.random(n))).astype(np.int64))

    def long_window(self, spec: OutbreakSpec) -> tuple[int, int]:
        """A window of days to weeks: 30-70 % of the run after the warm-up (at least 2-4 days)."""
        span_h = (self.cfg.end_ms - self.cfg.start_ms - self.warmup_ms) / HOUR_MS
        lo = min(max(48.0, 0.3 * span_h), 0.9 * span_h)
        hi = min(max(96.0, 0.7 * span_h), 0.95 * span_h)
        return self.window(spec, (lo, max(lo, hi)))

    def cohort_accept(self, kind: str, pool: np.ndarray, ts_ms: int, key: str, value: str,
                      make: Callable[[str, str], EntityKey]) -> tuple[EntityKey, ...]:
        """The cohort's entity first, then every attribute value naming (nearly) the same hosts."""
        attr = self.fleet.key(key)
        same = [kv for kv in equivalent_cohorts(self.fleet, pool, ts_ms) if kv != (attr, value)]
        return (make(attr, value), *(make(a, v) for a, v in same))

    def hw_rack_existing(self, i: int, spec: OutbreakSpec) -> None:
        """A common, existing signature confined to one rack (issue 9: raised no alert at all)."""
        f, rng = self.fleet, self.rng
        full = [x for x in range(len(f.racks)) if (f.rack_of == x).sum() == self.cfg.hosts_per_rack
                and x not in self.used_racks] or list(range(len(f.racks)))
        r = full[int(rng.integers(len(full)))]
        self.used_racks.add(r)
        s, e = self.window(spec, (12.0, 48.0))
        in_rack = np.flatnonzero(f.rack_of == r)
        target = float(rng.uniform(9.0, 38.0))
        share = self.share_of(in_rack)
        cands = np.array([j for j in range(len(self.rates)) if j not in self.used_sigs])
        base_day = self.rates[cands] * 24 * share  # the signature's own crashes in this rack per day
        need = (target - 1) * base_day
        # a signature common enough that 80-200 extra crashes a day make the drawn relative risk
        miss = np.maximum(80.0 - need, 0) + np.maximum(need - 200.0, 0)
        best = np.flatnonzero(miss == miss.min())
        sig = int(cands[int(best[int(rng.integers(len(best)))])])
        self.used_sigs.add(sig)
        b = float(self.rates[sig]) * 24 * share
        extra_day = spec.strength or float(np.clip((target - 1) * b, 80.0, 200.0))
        rr = 1 + extra_day / b
        ts = self.times(extra_day / 24, s, e)
        hosts = self.by_propensity(in_rack, len(ts))
        name, rack = self.signatures[sig].signature, f.racks[r]
        accept = self.cohort_accept("hardware_correlation", in_rack, s, "rack", rack,
                                    lambda a, v: entity("hardware_correlation", name, attribute=a, value=v))
        related = (*self._hw_related(name, ts, hosts, {k[3:5] for k in accept}, in_rack, s),  # type: ignore[misc]
                   *(entity("host_spike", host=f.names[h]) for h in in_rack.tolist()))
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} confined to rack {rack}: +{extra_day:.0f} crashes/day on its {len(in_rack)} hosts "
                          f"(fleet rate {self.rates[sig] * 24:.0f}/day), relative risk {rr:.0f}, {len(ts)} extra crashes",
                          signature=name, attribute=f.key("rack"), value=rack, hosts=self._names(hosts),
                          n_events=len(ts), strength=round(rr, 1), origin=i, accept=accept, related=related),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def hw_large_cohort(self, i: int, spec: OutbreakSpec) -> None:
        """A signature rising on the GPU model that holds the most hosts (about half the fleet), RR 3-15."""
        f, rng = self.fleet, self.rng
        models, counts = np.unique(f.initial["gpu_model"].astype(str), return_counts=True)
        model = str(models[int(np.argmax(counts))])
        cohort = np.flatnonzero(f.initial["gpu_model"] == model)
        s, e = self.window(spec, (12.0, 48.0))
        rr = spec.strength or float(np.exp(rng.uniform(np.log(3.0), np.log(15.0))))
        sig = self.existing_signature(1.0, 5.0)
        share = self.share_of(cohort)
        # extra cases make the cohort's per-host rate rr times the rest's
        extra = float(self.rates[sig]) * share * (rr - 1)
        ts = self.times(extra, s, e)
        hosts = self.by_propensity(cohort, len(ts))
        name = self.signatures[sig].signature
        accept = self.cohort_accept("hardware_correlation", cohort, s, "gpu_model", model,
                                    lambda a, v: entity("hardware_correlation", name, attribute=a, value=v))
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} rising on {model} ({len(cohort) / len(f):.0%} of the fleet) at relative risk "
                          f"{rr:.1f}: {len(ts)} extra crashes in {(e - s) / HOUR_MS:.0f} h",
                          signature=name, attribute=f.key("gpu_model"), value=model, hosts=self._names(hosts),
                          n_events=len(ts), strength=round(rr, 2), origin=i, accept=accept,
                          related=self._hw_related(name, ts, hosts, {k[3:5] for k in accept}, cohort, s)),  # type: ignore[misc]
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def hw_new_driver_sig(self, i: int, spec: OutbreakSpec) -> None:
        """A signature nobody has seen, on the hosts of one driver version (a driver bug)."""
        f, rng = self.fleet, self.rng
        s, e = self.window(spec, (12.0, 48.0))
        vals = f.values_at("driver", s)
        drivers, counts = np.unique(vals.astype(str), return_counts=True)
        share = counts / len(f)
        ok = [d for d, x in zip(drivers.tolist(), share.tolist()) if 0.08 <= x <= 0.6] or \
            [str(drivers[int(np.argmin(np.abs(share - 0.3)))])]
        drv = ok[int(rng.integers(len(ok)))]
        sig = self.new_signature(HARDWARE_SIGNATURES[1:] + HARDWARE_SIGNATURES[:1], shape="abort")
        rate = spec.strength or float(np.exp(rng.uniform(np.log(0.5), np.log(3.0))))
        ts, hosts = self._cohort_cases(s, e, rate, lambda t: f.hosts_with("driver", drv, t))
        name = self.signatures[sig].signature
        pool = f.hosts_with("driver", drv, s)
        accept = self.cohort_accept("hardware_correlation", pool, s, "driver", drv,
                                    lambda a, v: entity("hardware_correlation", name, attribute=a, value=v))
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"a new signature {name} only on driver {drv} ({len(pool)} hosts): {len(ts)} crashes at "
                          f"{rate:.1f}/h", signature=name, attribute=f.key("driver"), value=drv,
                          hosts=self._names(hosts), n_events=len(ts), strength=round(rate, 2), origin=i,
                          accept=accept,
                          related=self._hw_related(name, ts, hosts, {k[3:5] for k in accept}, pool, s)),  # type: ignore[misc]
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def hw_rising_static(self, i: int, spec: OutbreakSpec) -> None:
        """A static association (2x from day one: benign, one ticket) that turns 6-15x: page on the change."""
        f, rng, bg = self.fleet, self.rng, self.background
        if bg is None:
            raise SimulationConfigError(f"{spec.template} needs the background crash table")
        s, e = self.window(spec, (24.0, 72.0))
        cohort, key, value = pick_cohort(f, rng, (0.1, 0.4), ("gpu_model", "sku", "node_pool", "kernel",
                                                               "nic_firmware"))
        sig = self.existing_signature(1.0, 5.0)
        rr0 = float(rng.uniform(1.8, 2.5))
        rr1 = spec.strength or float(rng.uniform(6.0, 15.0))
        rows = np.flatnonzero(bg.sig == sig)
        w = f.propensity.copy()
        w[cohort] *= rr0
        bg.host[rows] = rng.choice(len(f), size=len(rows), p=w / w.sum())
        bg.origin[rows] = STATIC
        cohort_rate = float(self.rates[sig] * w[cohort].sum() / w.sum())
        # at least one extra crash every two hours: a rise nobody could see in weeks is not this template
        extra = max(cohort_rate * (rr1 / rr0 - 1), 0.5)
        rr1 = rr0 * (1 + extra / cohort_rate)
        ts = self.times(extra, s, e)
        hosts = self.by_propensity(cohort, len(ts))
        name, attr = self.signatures[sig].signature, f.key(key)
        self.out.benign.append(static_label(f, self.cfg, name, key, value, cohort, rr0, len(rows)))
        accept = self.cohort_accept("hardware_correlation", cohort, s, key, value,
                                    lambda a, v: entity("hardware_correlation", name, attribute=a, value=v))
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} on {attr}={value}: {rr0:.1f}x since day one (placement, benign), rising to "
                          f"{rr1:.0f}x: {len(ts)} extra crashes", signature=name, attribute=attr, value=value,
                          hosts=self._names(hosts), n_events=len(ts), strength=round(rr1, 1), origin=i,
                          accept=accept,
                          related=self._hw_related(name, ts, hosts, {k[3:5] for k in accept}, cohort, s)),  # type: ignore[misc]
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def hw_wearout(self, i: int, spec: OutbreakSpec) -> None:
        """A signature's rate on one cohort rising linearly over days to weeks (parts wearing out)."""
        f, rng = self.fleet, self.rng
        s, e = self.long_window(spec)
        cohort, key, value = pick_cohort(f, rng, (0.08, 0.3), WEAROUT_KEYS)
        sig = self.existing_signature(0.5, 3.0)
        rr_end = spec.strength or float(rng.uniform(8.0, 25.0))
        peak = float(self.rates[sig]) * self.share_of(cohort) * (rr_end - 1)
        ts = self.ramp_times(peak, s, e)
        hosts = self.by_propensity(cohort, len(ts))
        name, attr = self.signatures[sig].signature, f.key(key)
        accept = self.cohort_accept("hardware_correlation", cohort, s, key, value,
                                    lambda a, v: entity("hardware_correlation", name, attribute=a, value=v))
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} wearing in on {attr}={value} ({len(cohort)} hosts): relative risk rising from 1 to "
                          f"{rr_end:.0f} over {(e - s) / DAY_MS:.1f} days, {len(ts)} extra crashes",
                          signature=name, attribute=attr, value=value, hosts=self._names(hosts), n_events=len(ts),
                          strength=round(rr_end, 1), origin=i, accept=accept,
                          related=self._hw_related(name, ts, hosts, {k[3:5] for k in accept}, cohort, s)),  # type: ignore[misc]
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def tel_wearout(self, i: int, spec: OutbreakSpec) -> None:
        """A cohort's row-remapping / contained-ECC Xid rate rising over weeks (HBM of one batch wearing out)."""
        f, rng = self.fleet, self.rng
        s, e = self.long_window(spec)
        cohort, key, value = pick_cohort(f, rng, (0.08, 0.3), WEAROUT_KEYS)
        code = int(rng.choice(np.array([63, 94])))
        base = next(x.rate_per_host_day for x in catalog.XID_CODES if x.code == code) * self.cfg.xid_rate_scale
        rr_end = spec.strength or float(rng.uniform(15.0, 50.0))
        peak = len(cohort) * base / 24 * (rr_end - 1)
        ts = self.ramp_times(peak, s, e)
        w = rng.lognormal(0.0, 1.0, size=len(cohort))  # some parts of the batch wear faster
        hosts = cohort[rng.choice(len(cohort), size=len(ts), p=w / w.sum())]
        attr = f.key(key)
        accept = self.cohort_accept("telemetry_spike", cohort, s, key, value,
                                    lambda a, v: entity("telemetry_spike", attribute=a, value=v,
                                                        telemetry_kind="xid", code=code))
        rel: list[EntityKey] = [entity("telemetry_spike", telemetry_kind="xid", code=code),
                                entity("telemetry_spike", telemetry_kind="xid")]
        for n in self._names(hosts):
            rel += [entity("telemetry_spike", host=n, telemetry_kind="xid", code=code),
                    entity("telemetry_spike", host=n, telemetry_kind="xid"), entity("host_spike", host=n)]
        for a, v in shared_cohorts(f, np.unique(hosts), s):
            rel.append(entity("telemetry_spike", attribute=a, value=v, telemetry_kind="xid", code=code))
        self.add(Outbreak(f"o{i}", "telemetry_spike", spec.template, s, e,
                          f"Xid {code} wearing in on {attr}={value} ({len(cohort)} hosts): rate rising to {rr_end:.0f}x "
                          f"over {(e - s) / DAY_MS:.1f} days, {len(ts)} events", attribute=attr, value=value,
                          telemetry_kind="xid", code=code, hosts=self._names(hosts), n_events=len(ts),
                          strength=round(rr_end, 1), origin=i, accept=accept,
                          related=tuple(k for k in rel if k not in accept)),
                 tel=self.tel(ts, hosts, "xid", code, -1, i))

    def host_sick_pcie(self, i: int, spec: OutbreakSpec) -> None:
        """A host whose GPU link is failing: PCIe/NVLink errors, Xid 79/119/74, CUDA crashes in many signatures."""
        f, rng = self.fleet, self.rng
        s, e = self.window(spec, (6.0, 48.0))
        h = self.fresh_host()
        rate = spec.strength or float(np.exp(rng.uniform(np.log(0.3), np.log(2.0))))
        ts = self.times(rate, s, e)
        cuda = [j for j in range(len(self.rates)) if self.signatures[j].frames[0][0] in CUDA_MODULES] or [0]
        sigs = np.array(cuda)[rng.integers(0, len(cuda), size=len(ts))]
        w = np.zeros(len(catalog.SHAPES))
        w[catalog.SHAPE_INDEX["abort"]], w[catalog.SHAPE_INDEX["null_deref"]] = 0.6, 0.2
        w[catalog.SHAPE_INDEX["wild_pointer"]] = 0.2
        shapes = rng.choice(len(w), size=len(ts), p=w)
        ct = self.crashes(ts, np.full(len(ts), h), sigs, shapes, i)
        pcie_t, nvl_t = self.times(float(rng.uniform(2, 6)), s, e), self.times(float(rng.uniform(1, 3)), s, e)
        x79 = np.sort(rng.integers(s, e, size=int(rng.integers(1, 3))))
        x119 = np.sort(rng.integers(s, e, size=int(rng.integers(1, 4))))
        x74 = self.times(0.2, s, e)
        tt = concat([self.tel(pcie_t, h, "pcie", -1, rng.integers(1, 21, size=len(pcie_t)), i),
                     self.tel(nvl_t, h, "nvlink", -1, rng.integers(1, 11, size=len(nvl_t)), i),
                     self.tel(x79, h, "xid", 79, -1, i), self.tel(x119, h, "xid", 119, -1, i),
                     self.tel(x74, h, "xid", 74, -1, i)], TelemetryTable)
        name = f.names[h]
        rack = str(f.initial["rack"][h])
        rel = [entity("telemetry_spike", host=name, telemetry_kind=k) for k in ("pcie", "nvlink", "xid")]
        rel += [entity("telemetry_spike", host=name, telemetry_kind="xid", code=c) for c in (79, 119, 74)]
        rel += [entity("telemetry_spike", telemetry_kind=k) for k in ("pcie", "nvlink")]
        rel += [entity("telemetry_spike", attribute=f.key("rack"), value=rack, telemetry_kind=k, code=c)
                for k, c in (("pcie", None), ("nvlink", None), ("xid", 79), ("xid", 119), ("xid", 74))]
        self.add(Outbreak(f"o{i}", "host_spike", spec.template, s, e,
                          f"{name} has a failing GPU link: {len(ct)} CUDA crashes in {len(set(sigs.tolist()))} "
                          f"signatures at {rate:.1f}/h, {len(pcie_t)} PCIe and {len(nvl_t)} NVLink error reports, "
                          f"Xid 79/119/74", host=name, hosts=(name,), n_events=len(ct) + len(tt),
                          strength=round(rate, 2), origin=i, accept=(entity("host_spike", host=name),),
                          related=tuple(rel)), ct, tt)  # type: ignore[arg-type]

    def sig_deploy_regression(self, i: int, spec: OutbreakSpec) -> None:
        """A deploy doubles-to-quintuples an existing signature fleet-wide, from one instant to the end of the run."""
        cfg, rng = self.cfg, self.rng
        lo = cfg.start_ms + self.warmup_ms
        tail = max(6 * HOUR_MS, int(0.25 * (cfg.end_ms - lo)))
        if spec.start_day is not None:
            s = cfg.start_ms + int(spec.start_day * DAY_MS)
        else:
            s = int(rng.integers(lo, max(lo + 1, cfg.end_ms - tail)))
        e = cfg.end_ms - 1
        sig = self.existing_signature(0.3, 3.0)
        k = spec.strength or float(rng.uniform(2.0, 5.0))
        base = float(self.rates[sig])
        amp = cfg.daily_amplitude
        ts = self.times((k - 1) * base * (1 + amp), s, e)
        ts = ts[rng.random(len(ts)) < peak_share(ts, cfg)]  # the jobs' daily cycle, like the base
        hosts = rng.choice(len(self.fleet), size=len(ts), p=self.p_host)
        name = self.signatures[sig].signature
        self.add(Outbreak(f"o{i}", "signature_spike", spec.template, s, e,
                          f"a deploy at day {(s - cfg.start_ms) / DAY_MS:.2f} makes {name} x{k:.1f} fleet-wide "
                          f"({base:.2f}/h -> {k * base:.2f}/h) until the end: {len(ts)} extra crashes",
                          signature=name, hosts=self._names(hosts), n_events=len(ts), strength=round(k, 2),
                          origin=i, accept=(entity("signature_spike", name),)),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def sig_deadlock_job(self, i: int, spec: OutbreakSpec) -> None:
        """A job deadlocked on 64 hosts: watchdog hang reports at every restart, a power/thermal surge on its racks."""
        f, rng = self.fleet, self.rng
        s, e = self.window(spec, (2.0, 6.0))
        r = self.pick_rack()
        dc = f.rack_dc[r]
        in_dc = np.flatnonzero(np.array([f.rack_dc[x] for x in f.rack_of]) == dc)
        first = int(np.searchsorted(in_dc, np.flatnonzero(f.rack_of == r)[0]))
        size = min(64, len(in_dc))
        lo = max(0, min(first, len(in_dc) - size))
        hosts = in_dc[lo:lo + size]
        if HANG_SIGNATURE in {x.signature for x in self.signatures}:
            sig = self.new_signature()
        else:
            frames = tuple((m, fn, f"0x{int(rng.integers(0x40, 0x4000)):x}")
                           for m, fn in (p.split("!", 1) for p in HANG_SIGNATURE.split(" | ")))
            self.signatures.append(SignatureInfo(HANG_SIGNATURE, "python3.11", frames))
            self.sig_shape.append(catalog.SHAPE_INDEX["abort"])
            sig = len(self.signatures) - 1
            self.used_sigs.add(sig)
        # hang -> watchdog timeout (10 min) -> every rank reports -> restart from checkpoint -> hangs again
        reports, t = [], s
        while t < e:
            rep = t + 600_000 + rng.integers(0, 60_000, size=len(hosts))
            reports.append(rep)
            t = int(rep.max()) + int(rng.uniform(4, 8) * 60_000) + int(rng.uniform(3, 10) * 60_000)
        ts = np.concatenate(reports)
        hh = np.tile(hosts, len(reports))
        keep = ts < e
        ts, hh = ts[keep], hh[keep]
        job = 950_000 + i
        ct = make_crashes(ts, hh, np.full(len(ts), sig), np.full(len(ts), job),
                          np.full(len(ts), catalog.SHAPE_INDEX["abort"]), i, rng)
        ct.source[:] = SOURCE_INDEX["watchdog"]
        # the stuck kernels spin: power near the board limit, temperature up 10-15 degrees, every 5 min
        step = 5 * 60_000
        grid = np.arange(s + int(rng.integers(0, step)), e, step, dtype=np.int64)
        gt, gh = np.repeat(grid, len(hosts)), np.tile(hosts, len(grid))
        tdp = np.array([GPU_CATALOG[str(g)].tdp_w for g in f.initial["gpu_model"][gh]])
        watts = (tdp * rng.uniform(0.95, 1.0, size=len(gt))).round(0)
        temp = rng.uniform(86.0, 95.0, size=len(gt)).round(1)
        dev = rng.integers(0, catalog.GPUS_PER_HOST, size=len(gt))
        # the agent reports each GPU's rise past 95 % of its limit as one crossing (count 1), then samples
        crossed = np.full(len(gt), -1)
        crossed[:len(hosts)] = 1
        tt = concat([telemetry_table(ts_ms=gt, host=gh, kind=TK["power"], code=-1, count=crossed, value=watts,
                                     device=dev, origin=i),
                     telemetry_table(ts_ms=gt + 1000, host=gh, kind=TK["thermal"], code=-1, count=-1, value=temp,
                                     device=dev, origin=i)], TelemetryTable)
        name = self.signatures[sig].signature
        names = self._names(hosts)
        per_rack = Counter(int(f.rack_of[h]) for h in hosts.tolist())
        main = max(per_rack, key=lambda x: (per_rack[x], -x))
        racks = [x for x, k in per_rack.items() if k >= min(16, per_rack[main])]
        rk = f.key("rack")
        # every cohort holding a quarter of the job's hosts (its racks, their leaf switch, power strips): the
        # surge and the hang are really concentrated there, consequences of the job, not false alerts
        shared = shared_cohorts(f, hosts, s, share=0.25)
        # and every cohort a third of whose hosts are the job's (a power strip of a rack the job half fills),
        # as a rack with a third of its hosts in the job is accepted below
        shared = tuple(sorted({*shared, *dense_cohorts(f, hosts, s, 1 / 3)}))
        rel_a: list[EntityKey] = [entity("hardware_correlation", name, attribute=a, value=v) for a, v in shared]
        rel_a += [entity("hardware_correlation", name, attribute=rk, value=f.racks[x]) for x in per_rack]
        rel_a += [entity("host_spike", host=n) for n in names]
        self.add(Outbreak(f"o{i}", "signature_spike", spec.template, s, e,
                          f"job {job_name(job)} deadlocked on {len(hosts)} hosts: the collective watchdog reports "
                          f"{name} on every rank at each of {len(reports)} restarts ({len(ts)} hang reports)",
                          signature=name, hosts=names, n_events=len(ts), strength=float(len(reports)), origin=i,
                          accept=(entity("signature_spike", name),), related=tuple(rel_a)), ct)
        accept_b = tuple(entity("telemetry_spike", attribute=rk, value=f.racks[x], telemetry_kind=k)
                         for x in sorted(racks, key=lambda x: x != main) for k in ("power", "thermal"))
        # a cohort naming (nearly) the job's hosts, as the leaf switch of the two racks it fills does, is as
        # right a location as its racks (the detectors name the switch then, its racks in the notes)
        accept_b += tuple(entity("telemetry_spike", attribute=a, value=v, telemetry_kind=k)
                          for a, v in equivalent_cohorts(f, hosts, s) if a != rk for k in ("power", "thermal"))
        rel_b: list[EntityKey] = [entity("telemetry_spike", telemetry_kind=k) for k in ("power", "thermal")]
        rel_b += [entity("telemetry_spike", attribute=a, value=v, telemetry_kind=k) for a, v in shared
                  for k in ("power", "thermal")]
        rel_b += [entity("telemetry_spike", attribute=rk, value=f.racks[x], telemetry_kind=k) for x in per_rack
                  for k in ("power", "thermal")]
        rel_b += [entity("telemetry_spike", host=n, telemetry_kind=k) for n in names for k in ("power", "thermal")]
        rel_b += [entity("host_spike", host=n) for n in names]
        self.add(Outbreak(f"o{i}-rack", "telemetry_spike", spec.template, s, e,
                          f"power and temperature surge on rack {f.racks[main]} ({per_rack[main]} of the deadlocked "
                          f"job's hosts): GPUs spinning near their power limit, {len(tt)} readings",
                          attribute=rk, value=f.racks[main], telemetry_kind="power", hosts=names, n_events=len(tt),
                          strength=float(len(hosts)), origin=i, accept=accept_b,
                          related=tuple(k for k in rel_b if k not in accept_b)), tel=tt)


    def _names(self, hosts: np.ndarray) -> tuple[str, ...]:
        return tuple(sorted({self.fleet.names[int(h)] for h in hosts}))

    TEMPLATE_METHODS = {
        "signature_spike/existing": "signature_existing",
        "signature_spike/new": "signature_new",
        "host_spike/bit_flip": "host_bit_flip",
        "host_spike/bad_memory": "host_bad_memory",
        "hardware_correlation/bios_rack": "hw_bios_rack",
        "hardware_correlation/driver": "hw_driver",
        "telemetry_spike/xid79_rack": "tel_xid79_rack",
        "telemetry_spike/ecc_host": "tel_ecc_host",
        "hardware_correlation/rack_existing": "hw_rack_existing",
        "hardware_correlation/large_cohort": "hw_large_cohort",
        "hardware_correlation/new_driver_sig": "hw_new_driver_sig",
        "hardware_correlation/rising_static": "hw_rising_static",
        "hardware_correlation/wearout": "hw_wearout",
        "telemetry_spike/wearout": "tel_wearout",
        "host_spike/sick_pcie": "host_sick_pcie",
        "signature_spike/deploy_regression": "sig_deploy_regression",
        "signature_spike/deadlock_job": "sig_deadlock_job",
    }

    def run(self, specs: tuple[OutbreakSpec, ...]) -> Injected:
        for i, spec in enumerate(specs):
            getattr(self, self.TEMPLATE_METHODS[spec.template])(i, spec)
        return self.out


__all__ = ["HANG_SIGNATURE", "HARDWARE_SIGNATURES", "EntityKey", "Injected", "Injector", "Outbreak", "entity",
           "key_from_json", "key_to_json"]
