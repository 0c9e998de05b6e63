"""The hosts: attributes, nesting, confounding and roll-outs over time.

Layout follows how GPU fleets are built: racks of 16-64 hosts inside a few
datacenters, each rack of one GPU model (so ``gpu_model`` and ``sku`` are
nested-ish in ``rack``), clusters of racks inside a datacenter. Roll-outs
change attributes mid-run, and the hosts are re-announced when they do:

* a GPU driver that goes **only to one GPU model** (``driver`` and
  ``gpu_model`` are confounded: everything on the new driver is on that model;
  ``cuda``, where reported, follows the driver exactly);
* a BIOS update that reaches a third of the racks over days;
* (some presets) a kernel update host by host;
* (some presets) planned maintenance: whole racks announced with
  ``maintenance=planned-reboot`` while they reboot.

So the attribute value *at the event's time* matters, and nested or
confounded cohorts make some cohorts look guilty by association.

Attribute *keys* differ between fleets (``bios`` may be announced as
``firmware``, ``datacenter`` as ``site``), some fleets report extra keys
(``node_pool``, ``pdu``, ``switch``, ``nic_firmware``, ``cuda``) or fewer,
and some hosts leave an attribute out. Internally everything uses the
canonical keys of :data:`fleetepi.simulate.config.ATTRIBUTE_KEYS`;
:meth:`Fleet.attributes_at` returns what the host message carries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from fleetepi.simulate.config import SimConfig


@dataclass(frozen=True)
class GpuModel:
    """What a GPU model brings to a host's inventory and telemetry."""

    skus: tuple[str, ...]
    driver: str
    short: str
    #: Board power limit, watts (power readings sit below it, a stuck kernel near it).
    tdp_w: float


#: GPU models a preset can mix (classic: the first three, in this order).
GPU_CATALOG: dict[str, GpuModel] = {
    "H100-SXM5-80GB": GpuModel(("hgx-h100-8g-spr", "hgx-h100-8g-emr"), "550.90.07", "h100", 700.0),
    "A100-SXM4-80GB": GpuModel(("hgx-a100-8g-icx",), "535.183.01", "a100", 400.0),
    "H200-SXM5-141GB": GpuModel(("hgx-h200-8g-emr",), "550.90.07", "h200", 700.0),
    "B200-SXM6-180GB": GpuModel(("hgx-b200-8g-emr", "dgx-b200"), "570.86.15", "b200", 1000.0),
    "L40S-PCIe-48GB": GpuModel(("pcie-l40s-4g-spr",), "550.90.07", "l40s", 350.0),
    "GH200-480GB": GpuModel(("mgx-gh200-1g",), "560.35.03", "gh200", 900.0),
}
# Kept for readers of the first simulator (classic values).
GPU_MODELS = ("H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM5-141GB")
SKUS = {m: GPU_CATALOG[m].skus for m in GPU_MODELS}
INITIAL_DRIVER = {m: GPU_CATALOG[m].driver for m in GPU_MODELS}
#: Driver rolled out mid-run, only to ``SimConfig.driver_rollout_model``.
NEW_DRIVER = "560.35.03"
NEW_DRIVER_MODEL = "H100-SXM5-80GB"
#: CUDA version each driver ships (``cuda`` is confounded with ``driver`` by construction).
CUDA_OF = {"535.183.01": "12.2", "550.90.07": "12.4", "560.35.03": "12.6", "570.86.15": "12.8"}
KERNELS = ("5.15.0-105-generic", "6.5.0-35-generic", "6.8.0-45-generic")
KERNEL_SHARE = (0.25, 0.5, 0.25)
NEW_KERNEL = "6.8.0-51-generic"
BIOS_OLD = ("2.1", "2.3")
BIOS_NEW = "2.4"
NIC_FIRMWARE = ("28.39.1002", "28.41.1000", "28.42.1000")
NIC_FIRMWARE_SHARE = (0.5, 0.35, 0.15)
NODE_POOLS = ("train", "infer", "batch")
NODE_POOL_SHARE = (0.6, 0.25, 0.15)
MAINTENANCE_VALUE = "planned-reboot"
#: Share of racks the BIOS roll-out reaches, and of the model's hosts the driver reaches.
BIOS_RACK_SHARE = 0.35
DRIVER_HOST_SHARE = 0.9
#: Hours a planned rack reboot lasts (announced at its start, cleared at its end).
MAINTENANCE_HOURS = 2.0

ATTRIBUTES = ("gpu_model", "driver", "bios", "kernel", "rack", "datacenter", "sku", "cluster")
NEVER = np.iinfo(np.int64).max
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Change:
    """An attribute changed mid-run: host ``h`` gets ``value`` (or ``values[h]``) at ``at_ms[h]``."""

    key: str
    at_ms: np.ndarray
    value: str = ""
    values: np.ndarray | None = None

    def value_of(self, host: int) -> str:
        return self.value if self.values is None else str(self.values[host])


@dataclass
class Fleet:
    """Hosts and their attributes over time. Host index ``i`` is ``names[i]``; hosts are rack-ordered."""

    names: list[str]
    #: Canonical attribute -> per-host initial value (numpy object arrays), reported keys only.
    initial: dict[str, np.ndarray]
    rack_of: np.ndarray  # int, rack index per host
    racks: list[str]
    rack_dc: list[str]
    rack_gpu: list[str]
    propensity: np.ndarray  # float, crash propensity per host (mean 1)
    #: Event time (ms) each host gets the new driver / BIOS 2.4 (int64 max: never).
    driver_at_ms: np.ndarray
    bios_at_ms: np.ndarray
    #: Event time each rack's BIOS roll-out begins (max: never).
    rack_bios_at_ms: np.ndarray
    driver_rollout_ms: tuple[int, int]
    #: Every mid-run change, in announcement order (driver and BIOS first, as in the first simulator).
    changes: list[Change] = field(default_factory=list)
    #: Canonical key -> announced key (identity where absent).
    key_names: dict[str, str] = field(default_factory=dict)
    #: Canonical key -> per-host "leaves it out" flags.
    absent: dict[str, np.ndarray] = field(default_factory=dict)
    #: Planned maintenance per host: start and end (NEVER: none), and whether it is announced.
    maint_start_ms: np.ndarray | None = None
    maint_end_ms: np.ndarray | None = None
    maint_announced: bool = True
    #: Kernel roll-out window (ms), when there is one.
    kernel_rollout_ms: tuple[int, int] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def key(self, canonical: str) -> str:
        """The key hosts announce for a canonical attribute."""
        return self.key_names.get(canonical, canonical)

    def has(self, canonical: str) -> bool:
        return canonical in self.initial

    def canonical_at(self, host: int, ts_ms: int) -> dict[str, str]:
        """Attributes of ``host`` at ``ts_ms`` under their canonical keys (left-out ones missing)."""
        a = {k: str(v[host]) for k, v in self.initial.items()
             if k not in self.absent or not self.absent[k][host]}
        for ch in self.changes:
            if ch.at_ms[host] <= ts_ms and ch.key in a:
                a[ch.key] = ch.value_of(host)
        return a

    def attributes_at(self, host: int, ts_ms: int) -> dict[str, str]:
        """What an announcement of ``host`` at ``ts_ms`` carries (announced keys)."""
        a = self.canonical_at(host, ts_ms)
        if self.key_names:
            a = {self.key_names.get(k, k): v for k, v in a.items()}
        if (self.maint_start_ms is not None and self.maint_announced
                and self.maint_start_ms[host] <= ts_ms < self.maint_end_ms[host]):  # type: ignore[index]
            a["maintenance"] = MAINTENANCE_VALUE
        return a

    def values_at(self, canonical: str, ts_ms: int) -> np.ndarray:
        """Every host's value of ``canonical`` at ``ts_ms`` (object array; None where left out)."""
        vals = self.initial[canonical].copy()
        for ch in self.changes:
            if ch.key == canonical:
                m = ch.at_ms <= ts_ms
                vals[m] = ch.value if ch.values is None else ch.values[m]
        if canonical in self.absent:
            vals[self.absent[canonical]] = None
        return vals

    def hosts_with(self, canonical: str, value: str, ts_ms: int) -> np.ndarray:
        """Indices of the hosts whose ``canonical`` attribute is ``value`` at ``ts_ms``."""
        if canonical not in self.initial:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.values_at(canonical, ts_ms) == value).astype(np.int64)

    def announcements(self, start_ms: int) -> list[tuple[int, int, dict[str, str]]]:
        """``(ts_ms, host, attributes)``: every host at the start, then each change (full attributes)."""
        out = [(start_ms, h, self.attributes_at(h, start_ms)) for h in range(len(self))]
        arrays: list[np.ndarray] = []
        for ch in self.changes:  # cuda changes with the driver: one announcement for both
            if not any(ch.at_ms is a for a in arrays):
                arrays.append(ch.at_ms)
        if self.maint_start_ms is not None and self.maint_announced:
            arrays += [self.maint_start_ms, self.maint_end_ms]  # type: ignore[list-item]
        for arr in arrays:
            for h in np.flatnonzero(arr != NEVER):
                t = int(arr[h])
                out.append((t, int(h), self.attributes_at(int(h), t)))
        out.sort(key=lambda r: (r[0], r[1]))
        return out


def _p(shares: tuple[float, ...] | list[float]) -> np.ndarray | tuple[float, ...]:
    """Probabilities from shares (as given when they already sum to 1, so classic draws stay identical)."""
    w = np.asarray(shares, dtype=float)
    return tuple(shares) if abs(w.sum() - 1.0) < 1e-9 else w / w.sum()


def build_fleet(cfg: SimConfig, rng: np.random.Generator) -> Fleet:
    n = cfg.hosts
    n_racks = max(1, -(-n // cfg.hosts_per_rack))
    rack_of = np.minimum(np.arange(n) // cfg.hosts_per_rack, n_racks - 1)
    shares = list(cfg.datacenter_shares)
    n_dc = 1 if n_racks < len(shares) else len(shares)
    # Racks fill datacenters in blocks (dc1 the largest), so a rack is nested in one datacenter.
    dc_cut = np.floor(np.cumsum(shares[:n_dc]) / sum(shares[:n_dc]) * n_racks).astype(int)
    rack_dc_idx = np.searchsorted(dc_cut, np.arange(n_racks), side="right")
    rack_dc = [f"dc{i + 1}" for i in rack_dc_idx]
    racks = [f"r{i + 1:02d}" for i in range(n_racks)]
    models = [m for m, _ in cfg.gpu_mix]
    gpu_idx = rng.choice(len(models), size=n_racks, p=_p([w for _, w in cfg.gpu_mix]))
    if n_racks >= len(models):
        gpu_idx[rng.choice(n_racks, size=len(models), replace=False)] = np.arange(len(models))
    rack_gpu = [models[i] for i in gpu_idx]
    names = []
    per_rack_count: dict[int, int] = {}
    for h in range(n):
        r = int(rack_of[h])
        k = per_rack_count.get(r, 0) + 1
        per_rack_count[r] = k
        names.append(f"{rack_dc[r]}-{racks[r]}-n{k:02d}")

    gpu = np.array([rack_gpu[r] for r in rack_of], dtype=object)
    # Clusters: the racks of a datacenter split into two halves.
    cluster = []
    for r in range(n_racks):
        same = [i for i in range(n_racks) if rack_dc[i] == rack_dc[r]]
        half = "a" if same.index(r) < max(1, len(same) // 2) else "b"
        cluster.append(f"{rack_dc[r]}-{half}")
    sku = np.array([GPU_CATALOG[g].skus[int(rng.integers(len(GPU_CATALOG[g].skus)))] for g in gpu], dtype=object)
    kernel = np.array(KERNELS, dtype=object)[rng.choice(len(KERNELS), size=n, p=KERNEL_SHARE)]
    bios = np.array(BIOS_OLD, dtype=object)[rng.choice(2, size=n, p=(0.15, 0.85))]
    driver = np.array([GPU_CATALOG[g].driver for g in gpu], dtype=object)
    initial = {
        "gpu_model": gpu,
        "driver": driver,
        "bios": bios,
        "kernel": kernel,
        "rack": np.array([racks[r] for r in rack_of], dtype=object),
        "datacenter": np.array([rack_dc[r] for r in rack_of], dtype=object),
        "sku": sku,
        "cluster": np.array([cluster[r] for r in rack_of], dtype=object),
    }
    start = cfg.start_ms
    day = DAY_MS
    # Driver roll-out to one GPU model, during (by default) 25-45 % of the run.
    d0 = start + int(cfg.driver_rollout[0] * cfg.days * day)
    d1 = start + int(cfg.driver_rollout[1] * cfg.days * day)
    driver_at = np.full(n, NEVER, dtype=np.int64)
    eligible = np.flatnonzero(gpu == cfg.driver_rollout_model)
    chosen = eligible[rng.random(len(eligible)) < DRIVER_HOST_SHARE]
    driver_at[chosen] = rng.integers(d0, d1, size=len(chosen))
    # BIOS roll-out rack by rack, during (by default) 10-50 % of the run; a rack's hosts within 2 hours.
    rack_bios = np.full(n_racks, NEVER, dtype=np.int64)
    n_up = max(1, int(round(BIOS_RACK_SHARE * n_racks)))
    up = rng.choice(n_racks, size=n_up, replace=False)
    rack_bios[up] = rng.integers(start + int(cfg.bios_rollout[0] * cfg.days * day),
                                 start + int(cfg.bios_rollout[1] * cfg.days * day), size=n_up)
    bios_at = np.full(n, NEVER, dtype=np.int64)
    in_up = rack_bios[rack_of] != NEVER
    bios_at[in_up] = rack_bios[rack_of[in_up]] + rng.integers(0, 2 * 3_600_000, size=int(in_up.sum()))
    propensity = rng.lognormal(0.0, cfg.host_propensity_sigma, size=n)
    propensity /= propensity.mean()
    changes = [Change("driver", driver_at, NEW_DRIVER), Change("bios", bios_at, BIOS_NEW)]
    fleet = Fleet(names=names, initial=initial, rack_of=rack_of, racks=racks, rack_dc=rack_dc, rack_gpu=rack_gpu,
                  propensity=propensity, driver_at_ms=driver_at, bios_at_ms=bios_at, rack_bios_at_ms=rack_bios,
                  driver_rollout_ms=(d0, d1), changes=changes)
    # ---- everything below draws only when a preset asks for it (classic draws stop here) ----
    _extend(cfg, fleet, rng)
    return fleet


def _extend(cfg: SimConfig, f: Fleet, rng: np.random.Generator) -> None:
    """Kernel roll-out, extra attributes, renamed/dropped/missing keys, planned maintenance."""
    n, n_racks = len(f), len(f.racks)
    start, span = cfg.start_ms, int(cfg.days * DAY_MS)
    if cfg.kernel_rollout_share > 0:
        k0, k1 = start + int(cfg.kernel_rollout[0] * span), start + int(cfg.kernel_rollout[1] * span)
        at = np.full(n, NEVER, dtype=np.int64)
        chosen = np.flatnonzero(rng.random(n) < cfg.kernel_rollout_share)
        at[chosen] = rng.integers(k0, k1, size=len(chosen))
        f.changes.append(Change("kernel", at, NEW_KERNEL))
        f.kernel_rollout_ms = (k0, k1)
    extra = set(cfg.extra_attributes)
    if "node_pool" in extra:  # a pool per rack: its purpose and GPU model (partly confounded with gpu_model)
        purpose = rng.choice(len(NODE_POOLS), size=n_racks, p=NODE_POOL_SHARE)
        pool = [f"{NODE_POOLS[purpose[r]]}-{GPU_CATALOG[f.rack_gpu[r]].short}" for r in range(n_racks)]
        f.initial["node_pool"] = np.array([pool[r] for r in f.rack_of], dtype=object)
    if "pdu" in extra:  # two power strips per rack: a cohort nested in the rack
        pos = np.arange(n) - np.searchsorted(f.rack_of, f.rack_of)
        size = np.bincount(f.rack_of, minlength=n_racks)[f.rack_of]
        f.initial["pdu"] = np.array([f"{f.racks[r]}-pdu-{'a' if p < s / 2 else 'b'}"
                                     for r, p, s in zip(f.rack_of.tolist(), pos.tolist(), size.tolist())],
                                    dtype=object)
    if "switch" in extra:  # one leaf switch per two racks of a datacenter: crosses racks
        f.initial["switch"] = np.array([f"leaf-{f.rack_dc[r]}-{r // 2 + 1:02d}" for r in f.rack_of], dtype=object)
    if "nic_firmware" in extra:
        f.initial["nic_firmware"] = np.array(NIC_FIRMWARE, dtype=object)[
            rng.choice(len(NIC_FIRMWARE), size=n, p=NIC_FIRMWARE_SHARE)]
    if "cuda" in extra:
        f.initial["cuda"] = np.array([CUDA_OF[d] for d in f.initial["driver"]], dtype=object)
        f.changes.append(Change("cuda", f.driver_at_ms, CUDA_OF[NEW_DRIVER]))
    for k in cfg.dropped_attributes:
        f.initial.pop(k, None)
    f.changes = [c for c in f.changes if c.key in f.initial]
    if cfg.missing_attribute_share > 0:
        for k in cfg.optional_attributes:
            if k in f.initial:
                f.absent[k] = rng.random(n) < cfg.missing_attribute_share
    f.key_names = {k: v for k, v in cfg.attribute_names if k != v}
    if cfg.maintenance_rack_share > 0:
        _maintenance(cfg, f, rng)


def _maintenance(cfg: SimConfig, f: Fleet, rng: np.random.Generator) -> None:
    """Planned reboots rack by rack, one rack at a time, spread over the middle of the run."""
    n_racks = len(f.racks)
    k = max(1, int(round(cfg.maintenance_rack_share * n_racks)))
    chosen = rng.choice(n_racks, size=k, replace=False)
    lo = cfg.start_ms + int(0.3 * cfg.days * DAY_MS)
    hi = cfg.end_ms - int(MAINTENANCE_HOURS * HOUR_MS) - HOUR_MS
    starts = np.sort(rng.integers(lo, max(hi, lo + 1), size=k))
    f.maint_start_ms = np.full(len(f), NEVER, dtype=np.int64)
    f.maint_end_ms = np.full(len(f), NEVER, dtype=np.int64)
    for r, s in zip(chosen.tolist(), starts.tolist()):
        hosts = f.rack_of == r
        f.maint_start_ms[hosts] = s
        f.maint_end_ms[hosts] = s + int(MAINTENANCE_HOURS * HOUR_MS)
    f.maint_announced = cfg.maintenance_announced


def pick_cohort(f: Fleet, rng: np.random.Generator, share: tuple[float, float],
                keys: tuple[str, ...]) -> tuple[np.ndarray, str, str]:
    """Hosts, canonical key and value of a cohort holding a ``share`` of the fleet (closest if none does)."""
    n = len(f)
    options: list[tuple[str, str, np.ndarray]] = []
    for k in keys:
        if k not in f.initial:
            continue
        vals = f.initial[k]
        present = ~f.absent[k] if k in f.absent else np.ones(n, dtype=bool)
        for v in sorted(set(vals.tolist())):
            options.append((k, str(v), np.flatnonzero((vals == v) & present)))
    lo, hi = share
    inside = [o for o in options if lo * n <= len(o[2]) <= hi * n]
    if not inside:
        mid = (lo + hi) / 2 * n
        inside = sorted(options, key=lambda o: abs(len(o[2]) - mid))[:1]
    k, v, hosts = inside[int(rng.integers(len(inside)))]
    return hosts, k, v


def shared_cohorts(f: Fleet, hosts: np.ndarray, ts_ms: int, share: float = 0.75) -> tuple[tuple[str, str], ...]:
    """Announced attribute values held by at least ``share`` of ``hosts`` at ``ts_ms``."""
    out = []
    for k in f.initial:
        vals = f.values_at(k, ts_ms)[hosts]
        for v in set(vals.tolist()) - {None}:
            if (vals == v).sum() >= share * len(hosts):
                out.append((f.key(k), str(v)))
    return tuple(sorted(out))


def _overlaps(f: Fleet, cohort: np.ndarray, ts_ms: int) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """(key, value, the value's hosts, the cohort's) for every announced value some host of ``cohort`` holds."""
    want = np.zeros(len(f), dtype=bool)
    want[cohort] = True
    for k in f.initial:
        vals = f.values_at(k, ts_ms)
        for v in sorted(set(vals[want].tolist()) - {None}):
            yield f.key(k), str(v), vals == v, want


def equivalent_cohorts(f: Fleet, cohort: np.ndarray, ts_ms: int, min_jaccard: float = 0.9) -> list[tuple[str, str]]:
    """Announced attribute values whose hosts are (nearly) the same set as ``cohort`` (a GPU model and its SKU).

    Jaccard >= 0.9: a model and its only SKU, a driver and its CUDA version; not a SKU holding 80 % of a model.
    """
    return sorted((k, v) for k, v, m, want in _overlaps(f, cohort, ts_ms)
                  if (m & want).sum() / (m | want).sum() >= min_jaccard)


def inner_cohorts(f: Fleet, cohort: np.ndarray, ts_ms: int, min_inside: float = 0.9) -> list[tuple[str, str]]:
    """Announced attribute values whose hosts lie (nearly) all inside ``cohort`` and are fewer (a rack's PDUs).

    An alert on one of them localises the outbreak too narrowly, not wrongly:
    the scorer counts it as a related finding, neither a detection nor a false page.
    """
    return sorted((k, v) for k, v, m, want in _overlaps(f, cohort, ts_ms)
                  if 2 <= m.sum() < min_inside * len(cohort) and (m & want).sum() >= min_inside * m.sum())


def dense_cohorts(f: Fleet, hosts: np.ndarray, ts_ms: int, min_share: float) -> list[tuple[str, str]]:
    """Announced attribute values at least ``min_share`` of whose hosts are among ``hosts`` (two at least).

    A deadlocked job's surge on half a rack that holds a sixth of the job
    is concentrated there as surely as on the racks the job fills: a page
    on that power strip is a finer location of the same event, not a false
    one (the rack around it, with a third of its hosts in the job, is an
    accepted finding).
    """
    return sorted((k, v) for k, v, m, want in _overlaps(f, hosts, ts_ms)
                  if (m & want).sum() >= max(2, min_share * m.sum()))


__all__ = ["ATTRIBUTES", "BIOS_NEW", "CUDA_OF", "GPU_CATALOG", "MAINTENANCE_VALUE", "NEVER", "NEW_DRIVER",
           "NEW_DRIVER_MODEL", "NEW_KERNEL", "Change", "Fleet", "GpuModel", "build_fleet", "dense_cohorts",
           "equivalent_cohorts", "inner_cohorts", "pick_cohort", "shared_cohorts"]
