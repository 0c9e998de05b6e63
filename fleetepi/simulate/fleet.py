"""The hosts: attributes, nesting, confounding and roll-outs over time.

Layout follows how GPU fleets are built: racks of ~40 hosts inside a few
datacenters, each rack of one GPU model (so ``gpu_model`` and ``sku`` are
nested-ish in ``rack``), clusters of racks inside a datacenter. Two roll-outs
change attributes mid-run, and the hosts are re-announced when they do:

* a GPU driver that goes **only to one GPU model** (``driver`` and
  ``gpu_model`` are confounded: everything on the new driver is on H100);
* a BIOS update that reaches a third of the racks over days.

So the attribute value *at the event's time* matters, and nested or
confounded cohorts make some cohorts look guilty by association.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetepi.simulate.config import SimConfig

GPU_MODELS = ("H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM5-141GB")
GPU_SHARE = (0.6, 0.3, 0.1)
SKUS = {
    "H100-SXM5-80GB": ("hgx-h100-8g-spr", "hgx-h100-8g-emr"),
    "A100-SXM4-80GB": ("hgx-a100-8g-icx",),
    "H200-SXM5-141GB": ("hgx-h200-8g-emr",),
}
INITIAL_DRIVER = {"H100-SXM5-80GB": "550.90.07", "A100-SXM4-80GB": "535.183.01", "H200-SXM5-141GB": "550.90.07"}
#: Driver rolled out mid-run, only to this GPU model.
NEW_DRIVER = "560.35.03"
NEW_DRIVER_MODEL = "H100-SXM5-80GB"
KERNELS = ("5.15.0-105-generic", "6.5.0-35-generic", "6.8.0-45-generic")
KERNEL_SHARE = (0.25, 0.5, 0.25)
BIOS_OLD = ("2.1", "2.3")
BIOS_NEW = "2.4"
#: Share of racks the BIOS roll-out reaches, and of the model's hosts the driver reaches.
BIOS_RACK_SHARE = 0.35
DRIVER_HOST_SHARE = 0.9

ATTRIBUTES = ("gpu_model", "driver", "bios", "kernel", "rack", "datacenter", "sku", "cluster")


@dataclass
class Fleet:
    """Hosts and their attributes over time. Host index ``i`` is ``names[i]``; hosts are rack-ordered."""

    names: list[str]
    #: Attribute -> per-host initial value (numpy object arrays).
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

    def __len__(self) -> int:
        return len(self.names)

    def attributes_at(self, host: int, ts_ms: int) -> dict[str, str]:
        a = {k: str(v[host]) for k, v in self.initial.items()}
        if self.driver_at_ms[host] <= ts_ms:
            a["driver"] = NEW_DRIVER
        if self.bios_at_ms[host] <= ts_ms:
            a["bios"] = BIOS_NEW
        return a

    def announcements(self, start_ms: int) -> list[tuple[int, int, dict[str, str]]]:
        """``(ts_ms, host, attributes)``: every host at the start, then each change (full attributes)."""
        out = [(start_ms, h, self.attributes_at(h, start_ms)) for h in range(len(self))]
        never = np.iinfo(np.int64).max
        for arr in (self.driver_at_ms, self.bios_at_ms):
            for h in np.flatnonzero(arr != never):
                t = int(arr[h])
                out.append((t, int(h), self.attributes_at(int(h), t)))
        out.sort(key=lambda r: (r[0], r[1]))
        return out


def build_fleet(cfg: SimConfig, rng: np.random.Generator) -> Fleet:
    n = cfg.hosts
    n_racks = max(1, -(-n // cfg.hosts_per_rack))
    rack_of = np.minimum(np.arange(n) // cfg.hosts_per_rack, n_racks - 1)
    n_dc = 1 if n_racks < 3 else 3
    # Racks fill datacenters in blocks (dc1 the largest), so a rack is nested in one datacenter.
    dc_cut = np.floor(np.cumsum([0.5, 0.3, 0.2][:n_dc]) / sum([0.5, 0.3, 0.2][:n_dc]) * n_racks).astype(int)
    rack_dc_idx = np.searchsorted(dc_cut, np.arange(n_racks), side="right")
    rack_dc = [f"dc{i + 1}" for i in rack_dc_idx]
    racks = [f"r{i + 1:02d}" for i in range(n_racks)]
    gpu_idx = rng.choice(len(GPU_MODELS), size=n_racks, p=GPU_SHARE)
    if n_racks >= len(GPU_MODELS):
        gpu_idx[rng.choice(n_racks, size=len(GPU_MODELS), replace=False)] = np.arange(len(GPU_MODELS))
    rack_gpu = [GPU_MODELS[i] for i in gpu_idx]
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
    sku = np.array([SKUS[g][int(rng.integers(len(SKUS[g])))] for g in gpu], dtype=object)
    kernel = np.array(KERNELS, dtype=object)[rng.choice(len(KERNELS), size=n, p=KERNEL_SHARE)]
    bios = np.array(BIOS_OLD, dtype=object)[rng.choice(2, size=n, p=(0.15, 0.85))]
    initial = {
        "gpu_model": gpu,
        "driver": np.array([INITIAL_DRIVER[g] for g in gpu], dtype=object),
        "bios": bios,
        "kernel": kernel,
        "rack": np.array([racks[r] for r in rack_of], dtype=object),
        "datacenter": np.array([rack_dc[r] for r in rack_of], dtype=object),
        "sku": sku,
        "cluster": np.array([cluster[r] for r in rack_of], dtype=object),
    }
    start = cfg.start_ms
    day = 86_400_000
    never = np.iinfo(np.int64).max
    # Driver roll-out to one GPU model, during 25-45 % of the run.
    d0 = start + int(0.25 * cfg.days * day)
    d1 = start + int(0.45 * cfg.days * day)
    driver_at = np.full(n, never, dtype=np.int64)
    eligible = np.flatnonzero(gpu == NEW_DRIVER_MODEL)
    chosen = eligible[rng.random(len(eligible)) < DRIVER_HOST_SHARE]
    driver_at[chosen] = rng.integers(d0, d1, size=len(chosen))
    # BIOS roll-out rack by rack, during 10-50 % of the run; a rack's hosts within 2 hours.
    rack_bios = np.full(n_racks, never, dtype=np.int64)
    n_up = max(1, int(round(BIOS_RACK_SHARE * n_racks)))
    up = rng.choice(n_racks, size=n_up, replace=False)
    rack_bios[up] = rng.integers(start + int(0.1 * cfg.days * day), start + int(0.5 * cfg.days * day), size=n_up)
    bios_at = np.full(n, never, dtype=np.int64)
    in_up = rack_bios[rack_of] != never
    bios_at[in_up] = rack_bios[rack_of[in_up]] + rng.integers(0, 2 * 3_600_000, size=int(in_up.sum()))
    propensity = rng.lognormal(0.0, cfg.host_propensity_sigma, size=n)
    propensity /= propensity.mean()
    return Fleet(names=names, initial=initial, rack_of=rack_of, racks=racks, rack_dc=rack_dc, rack_gpu=rack_gpu,
                 propensity=propensity, driver_at_ms=driver_at, bios_at_ms=bios_at, rack_bios_at_ms=rack_bios,
                 driver_rollout_ms=(d0, d1))


__all__ = ["ATTRIBUTES", "BIOS_NEW", "NEW_DRIVER", "NEW_DRIVER_MODEL", "Fleet", "build_fleet"]
