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

An :class:`Outbreak` names its entity with the alert contract's fields.
``accept`` lists other entities whose alert also counts as finding it (BIOS
2.4 *in rack r17*: either is right); ``related`` lists alerts that are true
consequences but not the finding (the datacenter the rack is in, the GPU model
confounded with the driver, the host_spike of the ECC host): the scorer
counts those neither as detections nor as false alerts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetepi.simulate import catalog
from fleetepi.simulate.background import DAY_MS, HOUR_MS, make_crashes
from fleetepi.simulate.catalog import TK, SignatureInfo
from fleetepi.simulate.config import OutbreakSpec, SimConfig
from fleetepi.simulate.fleet import BIOS_NEW, NEW_DRIVER, Fleet
from fleetepi.simulate.tables import CrashTable, TelemetryTable, concat, telemetry_table

#: (kind, signature, host, attribute, value, telemetry_kind, code): the fields of an alert's identity.
EntityKey = tuple[str, str | None, str | None, str | None, str | None, str | None, int | None]

#: New signatures a driver or firmware defect produces (used before generated ones).
HARDWARE_SIGNATURES = (
    "libcuda.so.1!cuMemcpyHtoDAsync_v2 | libcudart.so.12!cudaMemcpyAsync",
    "libcuda.so.1!cuCtxSynchronize | libtorch_cuda.so!c10::cuda::device_synchronize",
    "libnvidia-ptxjitcompiler.so.1!__nvJitLinkComplete | libcuda.so.1!cuModuleLoadData",
    "libcuda.so.1!cuMemAlloc_v2 | libcudart.so.12!cudaMallocAsync",
    "libnvidia-ml.so.1!nvmlDeviceGetMemoryInfo_v2 | dcgm-exporter!DcgmWatcher::poll",
)


def entity(kind: str, signature: str | None = None, host: str | None = None, attribute: str | None = None,
           value: str | None = None, telemetry_kind: str | None = None, code: int | None = None) -> EntityKey:
    return (kind, signature, host, attribute, value, telemetry_kind, code)


@dataclass(frozen=True)
class Outbreak:
    """One labelled outbreak (ground truth). Entity fields are the alert contract's."""

    id: str
    kind: str
    template: str
    start_ms: int
    end_ms: int
    description: str
    signature: str | None = None
    host: str | None = None
    attribute: str | None = None
    value: str | None = None
    telemetry_kind: str | None = None
    code: int | None = None
    #: Hosts with injected cases.
    hosts: tuple[str, ...] = ()
    #: Injected events (crashes + telemetry).
    n_events: int = 0
    #: The template's rate knob as drawn (see OutbreakSpec.strength).
    strength: float = 0.0
    accept: tuple[EntityKey, ...] = ()
    related: tuple[EntityKey, ...] = field(default=(), repr=False)

    @property
    def key(self) -> EntityKey:
        return entity(self.kind, self.signature, self.host, self.attribute, self.value, self.telemetry_kind,
                      self.code)

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("id", "kind", "template", "start_ms", "end_ms", "description",
                                             "signature", "host", "attribute", "value", "telemetry_kind", "code",
                                             "n_events", "strength")}
        d = {k: v for k, v in d.items() if v is not None}
        d["hosts"] = list(self.hosts)
        d["accept"] = [_key_json(k) for k in self.accept]
        d["related"] = [_key_json(k) for k in self.related]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Outbreak:
        kw = {k: v for k, v in d.items() if k not in ("hosts", "accept", "related", "start", "end")}
        return cls(**kw, hosts=tuple(d.get("hosts", ())), accept=tuple(_key_from(k) for k in d.get("accept", ())),
                   related=tuple(_key_from(k) for k in d.get("related", ())))


_KEY_FIELDS = ("kind", "signature", "host", "attribute", "value", "telemetry_kind", "code")


def _key_json(k: EntityKey) -> dict[str, Any]:
    return {f: v for f, v in zip(_KEY_FIELDS, k) if v is not None}


def _key_from(d: dict[str, Any]) -> EntityKey:
    return entity(**{f: d.get(f) for f in _KEY_FIELDS})  # type: ignore[arg-type]


@dataclass
class Injected:
    crashes: list[CrashTable] = field(default_factory=list)
    telemetry: list[TelemetryTable] = field(default_factory=list)
    truth: list[Outbreak] = field(default_factory=list)


class Injector:
    """Draws every outbreak of a config onto a fleet; keeps entities of different outbreaks apart."""

    def __init__(self, cfg: SimConfig, fleet: Fleet, signatures: list[SignatureInfo], rates: np.ndarray,
                 sig_shape: np.ndarray, rng: np.random.Generator) -> None:
        self.cfg, self.fleet, self.signatures, self.rates, self.rng = cfg, fleet, signatures, rates, rng
        self.sig_shape = list(sig_shape)
        self.used_hosts: set[int] = set()
        self.used_racks: set[int] = set()
        self.used_sigs: set[int] = set()
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
                          accept=(entity("signature_spike", name),)),
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
                          accept=(entity("signature_spike", name),)),
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
                          host=name, hosts=(name,), n_events=len(ct), strength=round(rate, 2),
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
                          accept=(entity("host_spike", host=name),), related=related), ct, tt)  # type: ignore[arg-type]

    def _cohort_cases(self, s: int, e: int, rate: float, eligible_at: Any) -> tuple[np.ndarray, np.ndarray]:
        ts = self.times(rate, s, e)
        keep_t, keep_h = [], []
        for t in ts.tolist():
            pool = eligible_at(t)
            if len(pool):
                keep_t.append(t)
                keep_h.append(int(pool[int(self.rng.integers(len(pool)))]))
        return np.array(keep_t, dtype=np.int64), np.array(keep_h, dtype=np.int64)

    def _hw_related(self, name: str, ts: np.ndarray, hosts: np.ndarray,
                    skip: set[tuple[str, str]]) -> tuple[EntityKey, ...]:
        shared = self.shared_attributes(list(zip(hosts.tolist(), ts.tolist())))
        rel = [entity("hardware_correlation", name, attribute=a, value=v) for a, v in shared if (a, v) not in skip]
        return (*rel, entity("signature_spike", name))

    def hw_bios_rack(self, i: int, spec: OutbreakSpec) -> None:
        f = self.fleet
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
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} only on hosts with bios={BIOS_NEW} in rack {rack}: {len(ts)} crashes on "
                          f"{len(set(hosts.tolist()))} hosts",
                          signature=name, attribute="bios", value=BIOS_NEW, hosts=self._names(hosts),
                          n_events=len(ts), strength=round(rate, 2),
                          accept=(entity("hardware_correlation", name, attribute="bios", value=BIOS_NEW),
                                  entity("hardware_correlation", name, attribute="rack", value=rack)),
                          related=self._hw_related(name, ts, hosts, {("bios", BIOS_NEW), ("rack", rack)})),
                 self.crashes(ts, hosts, sig, self.sig_shape[sig], i))

    def hw_driver(self, i: int, spec: OutbreakSpec) -> None:
        f = self.fleet
        earliest = f.driver_rollout_ms[0] + 12 * HOUR_MS
        s, e = self.window(spec, (24.0, 72.0), earliest_ms=earliest)
        sig = self.existing_signature(0.02, 0.3, modules=("libcuda.so.1", "libnccl.so.2"))
        rate = spec.strength or float(np.exp(self.rng.uniform(np.log(0.5), np.log(2.0))))
        ts, hosts = self._cohort_cases(s, e, rate, lambda t: np.flatnonzero(f.driver_at_ms <= t))
        name = self.signatures[sig].signature
        self.add(Outbreak(f"o{i}", "hardware_correlation", spec.template, s, e,
                          f"{name} on hosts of driver {NEW_DRIVER} (rolled out only to one GPU model): "
                          f"{len(ts)} extra crashes on {len(set(hosts.tolist()))} hosts",
                          signature=name, attribute="driver", value=NEW_DRIVER, hosts=self._names(hosts),
                          n_events=len(ts), strength=round(rate, 2),
                          accept=(entity("hardware_correlation", name, attribute="driver", value=NEW_DRIVER),),
                          related=self._hw_related(name, ts, hosts, {("driver", NEW_DRIVER)})),
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
        names = self._names(hosts)
        rel: list[EntityKey] = [entity("telemetry_spike", telemetry_kind="xid", code=79)]
        for n in names:
            rel += [entity("telemetry_spike", host=n, telemetry_kind="xid", code=79),
                    entity("telemetry_spike", host=n, telemetry_kind="xid"), entity("host_spike", host=n)]
        for a, v in self.shared_attributes([(int(h), s) for h in hosts]):
            if (a, v) != ("rack", rack):
                rel.append(entity("telemetry_spike", attribute=a, value=v, telemetry_kind="xid", code=79))
        self.add(Outbreak(f"o{i}", "telemetry_spike", spec.template, s, e,
                          f"Xid 79 (GPU fallen off the bus) on {k} hosts of rack {rack} ({len(ts)} events, "
                          f"{(e - s) / HOUR_MS:.1f} h): a power or PCIe fault in the rack",
                          attribute="rack", value=rack, telemetry_kind="xid", code=79, hosts=names,
                          n_events=len(ts), strength=float(k),
                          accept=(entity("telemetry_spike", attribute="rack", value=rack, telemetry_kind="xid",
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
                          strength=round(rate, 1),
                          accept=(entity("telemetry_spike", host=name, telemetry_kind="ecc_corrected"),),
                          related=(entity("host_spike", host=name),
                                   entity("telemetry_spike", host=name, telemetry_kind="xid", code=92),
                                   entity("telemetry_spike", host=name, telemetry_kind="xid"),
                                   entity("telemetry_spike", telemetry_kind="ecc_corrected"),
                                   entity("telemetry_spike", attribute="rack", value=rack,
                                          telemetry_kind="ecc_corrected"))),
                 tel=tt)  # type: ignore[arg-type]

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
    }

    def run(self, specs: tuple[OutbreakSpec, ...]) -> Injected:
        for i, spec in enumerate(specs):
            getattr(self, self.TEMPLATE_METHODS[spec.template])(i, spec)
        return self.out


__all__ = ["HARDWARE_SIGNATURES", "EntityKey", "Injected", "Injector", "Outbreak", "entity"]
