"""Background: what a healthy fleet emits, including the noise that looks like trouble.

* Crashes: a few hundred signatures whose fleet rates follow a Zipf law
  (with lognormal noise), a daily cycle, and a gamma day-to-day multiplier per
  signature, so hourly counts are overdispersed like real ones (a Poisson
  test on them would page every day).
* Job bursts: one job's ranks all abort within a minute or two (an NCCL
  timeout) on 32-256 rack-packed hosts, with one signature and one ``job``.
  Counted in crashes this is a huge spike, and a rack-concentrated one; counted
  in jobs or distinct-host cohorts it is one event. Not an outbreak.
* Telemetry: Xid codes at their usual rates, an hourly ECC corrected counter
  and a thermal reading every 30 minutes per host (most of the volume).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetepi.simulate import catalog
from fleetepi.simulate.catalog import TK
from fleetepi.simulate.config import SimConfig
from fleetepi.simulate.fleet import GPU_CATALOG, Fleet
from fleetepi.simulate.tables import (
    BACKGROUND,
    BURST,
    CrashTable,
    TelemetryTable,
    concat,
    crash_table,
    take,
    telemetry_table,
)

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
#: Modules whose signatures a job-wide abort produces.
COLLECTIVE_MODULES = ("libnccl.so.2", "libtorch_cuda.so")


@dataclass(frozen=True)
class JobBurst:
    """One job's crash on many hosts at once: background noise the benchmark reports separately."""

    #: The job name its crashes carry (None: they carry none).
    job: str | None
    signature: str
    hosts: tuple[str, ...]
    start_ms: int
    end_ms: int


def job_name(job: int) -> str:
    """Scheduler job name of a job number (names look like real Slurm/K8s jobs)."""
    prefixes = ("pretrain-llm", "finetune-sft", "eval-harness", "rlhf-ppo", "inference-batch", "data-tokenize")
    return f"{prefixes[job % len(prefixes)]}-{job}"


def daily_factor(ts_ms: np.ndarray, cfg: SimConfig) -> np.ndarray:
    """Load of the fleet over the day (mean 1 on weekdays, peak in the afternoon UTC), ``cfg.weekend_load`` times
    it on Saturdays and Sundays (UTC): people launch fewer jobs then, and Monday brings them back.

    Everything that follows the jobs reads it from here, so a fleet's daily and weekly cycles are one setting
    each, never a caller's to pass on."""
    hour = (ts_ms % DAY_MS) / HOUR_MS
    load = 1.0 + cfg.daily_amplitude * np.sin(2 * np.pi * (hour - 9.0) / 24.0)
    if cfg.weekend_load != 1.0:
        weekday = (np.asarray(ts_ms) // DAY_MS + 3) % 7  # 1970-01-01 was a Thursday; Monday is 0
        load = np.where(weekday >= 5, load * cfg.weekend_load, load)
    return load


def peak_share(ts_ms: np.ndarray, cfg: SimConfig) -> np.ndarray:
    """``daily_factor`` as a share of a weekday's peak (at most 1): the chance that an event drawn at the peak
    rate is kept (thinning), or a device's load between idle and full."""
    return daily_factor(ts_ms, cfg) / (1 + cfg.daily_amplitude)


def signature_rates(cfg: SimConfig, rng: np.random.Generator) -> np.ndarray:
    """Fleet crash rate per hour of each background signature (heavy-tailed, sums to the fleet rate)."""
    ranks = np.arange(1, cfg.signatures + 1, dtype=float)
    w = ranks ** (-cfg.zipf_exponent) * rng.lognormal(0.0, 0.5, size=cfg.signatures)
    w /= w.sum()
    return w * cfg.hosts * cfg.crash_rate_per_host_day / 24.0


def _shape_columns(shape: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Fault address and bit-flip score for crashes of the given shapes."""
    n = len(shape)
    address = np.zeros(n, dtype=np.uint64)
    bitflip = np.full(n, np.nan, dtype=np.float32)
    user = (np.uint64(0x7F00_0000_0000) + rng.integers(0, 0xFF_FFFF_FFFF, size=n).astype(np.uint64)) & ~np.uint64(7)
    for i, s in enumerate(catalog.SHAPES):
        m = shape == i
        k = int(m.sum())
        if k == 0:
            continue
        if s.address == "null":
            address[m] = rng.choice(np.array([0, 0, 0, 8, 0x10, 0x18, 0x28, 0x1f8], dtype=np.uint64), size=k)
        elif s.address == "user":
            address[m] = user[m]
        elif s.address == "noncanonical":
            bit = rng.integers(47, 63, size=k).astype(np.uint64)
            address[m] = user[m] ^ (np.uint64(1) << bit)
        if s.bitflip is not None:
            bitflip[m] = rng.uniform(s.bitflip[0], s.bitflip[1], size=k)
    return address, bitflip


def make_crashes(ts_ms: np.ndarray, host: np.ndarray, sig: np.ndarray, job: np.ndarray, shape: np.ndarray,
                 origin: int, rng: np.random.Generator) -> CrashTable:
    address, bitflip = _shape_columns(np.asarray(shape), rng)
    return crash_table(ts_ms=ts_ms, host=host, sig=sig, job=job, shape=shape, address=address, bitflip=bitflip,
                       origin=origin)


def signature_shapes(n_sigs: int, rng: np.random.Generator) -> np.ndarray:
    """The usual shape of each signature's crashes (a software bug crashes one way)."""
    w = catalog.BACKGROUND_SHAPE_WEIGHTS / catalog.BACKGROUND_SHAPE_WEIGHTS.sum()
    return rng.choice(len(w), size=n_sigs, p=w).astype(np.int8)


def background_crashes(cfg: SimConfig, fleet: Fleet, rates: np.ndarray, sig_shape: np.ndarray,
                       rng: np.random.Generator) -> CrashTable:
    start, n_hours = cfg.start_ms, int(np.ceil(cfg.days * 24))
    hour_start = start + np.arange(n_hours, dtype=np.int64) * HOUR_MS
    daily = daily_factor(hour_start + HOUR_MS // 2, cfg)
    n_days = int(np.ceil(cfg.days)) + 1
    k = cfg.day_to_day_shape
    day_mult = rng.gamma(k, 1.0 / k, size=(len(rates), n_days)) if np.isfinite(k) else np.ones((len(rates), n_days))
    day_of_hour = (np.arange(n_hours) // 24).astype(int)
    lam = rates[:, None] * daily[None, :] * day_mult[:, day_of_hour]
    counts = rng.poisson(lam)
    sig_idx, hour_idx = np.nonzero(counts)
    reps = counts[sig_idx, hour_idx]
    sig = np.repeat(sig_idx, reps).astype(np.int32)
    ts = np.repeat(hour_start[hour_idx], reps) + rng.integers(0, HOUR_MS, size=int(reps.sum()))
    keep = ts < cfg.end_ms
    sig, ts = sig[keep], ts[keep]
    p = fleet.propensity / fleet.propensity.sum()
    host = rng.choice(len(fleet), size=len(ts), p=p).astype(np.int32)
    # Each crash belongs to some job of the day: job numbers rotate daily.
    job = (ts - start) // DAY_MS * 1000 + rng.integers(0, 600, size=len(ts))
    table = make_crashes(ts, host, sig, job, sig_shape[sig], BACKGROUND, rng)
    if cfg.job_share < 1.0:  # daemons, notebooks, work outside the scheduler: no job
        table.job[rng.random(len(table)) >= cfg.job_share] = -1
    return table


def job_bursts(cfg: SimConfig, fleet: Fleet, signatures: list[catalog.SignatureInfo],
               rng: np.random.Generator) -> tuple[CrashTable, TelemetryTable, list[JobBurst]]:
    """Job-wide aborts on contiguous (rack-packed) blocks of hosts of one datacenter."""
    n = int(rng.poisson(cfg.job_bursts_per_day * cfg.days))
    collective = [i for i, s in enumerate(signatures) if s.frames[0][0] in COLLECTIVE_MODULES] or [0]
    crashes, tels, bursts = [], [], []
    dcs = np.array([fleet.rack_dc[r] for r in fleet.rack_of])
    for b in range(n):
        size = int(np.exp(rng.uniform(np.log(cfg.burst_min_hosts), np.log(cfg.burst_max_hosts + 1))))
        size = min(size, len(fleet))
        first = int(rng.integers(0, len(fleet)))
        in_dc = np.flatnonzero(dcs == dcs[first])
        pos = int(np.searchsorted(in_dc, first))
        lo = max(0, min(pos, len(in_dc) - size))
        hosts = in_dc[lo:lo + size]
        t0 = cfg.start_ms + int(rng.uniform(0, cfg.days * DAY_MS - 10 * 60_000))
        ts = t0 + rng.exponential(45_000, size=len(hosts)).astype(np.int64)
        sig_i = collective[int(rng.integers(len(collective)))]
        job = 900_000 + b
        shape = np.full(len(hosts), catalog.SHAPE_INDEX["abort"], dtype=np.int8)
        crashes.append(make_crashes(ts, hosts, np.full(len(hosts), sig_i), np.full(len(hosts), job), shape, BURST,
                                    rng))
        # The killed ranks leave Xid 43/45 on about half of the GPUs' hosts.
        xm = rng.random(len(hosts)) < 0.5
        xcode = rng.choice(np.array([43, 45]), size=int(xm.sum()))
        tels.append(telemetry_table(ts_ms=ts[xm] + rng.integers(0, 5_000, size=int(xm.sum())), host=hosts[xm],
                                    kind=TK["xid"], code=xcode, count=-1, value=np.nan,
                                    device=rng.integers(0, catalog.GPUS_PER_HOST, size=int(xm.sum())), origin=BURST))
        bursts.append(JobBurst(job_name(job), signatures[sig_i].signature, tuple(fleet.names[h] for h in hosts),
                               int(ts.min()), int(ts.max())))
    ct = concat(crashes, CrashTable) if crashes else make_crashes(*([np.zeros(0, dtype=np.int64)] * 5), BURST, rng)
    tt = concat(tels, TelemetryTable) if tels else _empty_telemetry()
    if cfg.burst_job_share < 1.0 and bursts:  # some schedulers leave the job out of the core's environment
        keep = rng.random(len(bursts)) < cfg.burst_job_share
        for b in np.flatnonzero(~keep).tolist():
            ct.job[ct.job == 900_000 + b] = -1
            bursts[b] = JobBurst(None, bursts[b].signature, bursts[b].hosts, bursts[b].start_ms, bursts[b].end_ms)
    return ct, tt, bursts  # type: ignore[return-value]


def _empty_telemetry() -> TelemetryTable:
    z = np.zeros(0, dtype=np.int64)
    return telemetry_table(ts_ms=z, host=z, kind=z, code=z, count=z, value=z, device=z, origin=z)


def _periodic(interval_s: float, n: int, start: int, end: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A sample per host every ``interval_s`` in [start, end), each host at its own random phase."""
    iv = int(interval_s * 1000)
    phase = rng.integers(0, iv, size=n)
    k = int(np.ceil((end - start) / iv))
    ts = (start + phase[:, None] + iv * np.arange(k)[None, :]).ravel()
    host = np.repeat(np.arange(n, dtype=np.int32), k)
    keep = ts < end
    return ts[keep], host[keep]


def background_telemetry(cfg: SimConfig, fleet: Fleet, rng: np.random.Generator) -> TelemetryTable:
    n, start, end = len(fleet), cfg.start_ms, cfg.end_ms
    span = end - start
    parts = []
    # Thermal: hottest GPU of the host, every interval, at a per-host phase.
    ts, host = _periodic(cfg.thermal_interval_s, n, start, end, rng)
    offset = rng.normal(0.0, 3.0, size=n)
    level = 40.0 + 28.0 * peak_share(ts, cfg) + offset[host]
    temp = level + rng.normal(0.0, 1.5, size=len(ts))
    temp = np.clip(temp, 25.0, 88.5).round(1)
    thermal = telemetry_table(ts_ms=ts, host=host, kind=TK["thermal"], code=-1, count=-1, value=temp,
                              device=rng.integers(0, catalog.GPUS_PER_HOST, size=len(ts)), origin=BACKGROUND)
    if cfg.thermal_mode == "on_change":
        thermal = take(thermal, on_change(thermal.ts_ms, thermal.host, level, THERMAL_BAND_C, start,
                                          cfg.heartbeat_s))  # type: ignore[assignment]
    parts.append(thermal)
    # ECC corrected counter delta, every interval; a few hosts have degrading memory.
    ts, host = _periodic(cfg.ecc_interval_s, n, start, end, rng)
    ecc_rate = rng.lognormal(np.log(0.03), 1.2, size=n) * (cfg.ecc_interval_s / 3600.0)
    count = rng.poisson(ecc_rate[host])
    dev = rng.integers(0, catalog.GPUS_PER_HOST, size=n)
    if not cfg.ecc_zero_deltas:  # exporters that send a delta only when errors happened
        nz = count > 0
        ts, host, count = ts[nz], host[nz], count[nz]
    parts.append(telemetry_table(ts_ms=ts, host=host, kind=TK["ecc_corrected"], code=-1, count=count, value=np.nan,
                                 device=dev[host], origin=BACKGROUND))
    # Xid codes and other hardware events: Poisson over the run, uniform over hosts.
    days = span / DAY_MS

    def scatter(rate_per_host_day: float, kind: str, code: int, extra_count: float | None = None,
                load_shaped: bool = False) -> None:
        m = int(rng.poisson(rate_per_host_day * n * days))
        if m == 0:
            return
        t = start + rng.integers(0, span, size=m)
        if load_shaped:  # application faults follow the jobs' daily cycle (thinning)
            t = t[rng.random(m) < peak_share(t, cfg)]
            m = len(t)
        c = -1 if extra_count is None else 1 + rng.poisson(extra_count, size=m)
        parts.append(telemetry_table(ts_ms=t, host=rng.integers(0, n, size=m), kind=TK[kind], code=code, count=c,
                                     value=np.nan, device=rng.integers(0, catalog.GPUS_PER_HOST, size=m),
                                     origin=BACKGROUND))

    for x in catalog.XID_CODES:
        app = x.code in (13, 31, 43, 45)
        scatter(x.rate_per_host_day * cfg.xid_rate_scale * (1.6 if app else 1.0), "xid", x.code, load_shaped=app)
    scatter(0.002, "ecc_uncorrected", -1, extra_count=0.0)
    scatter(0.01, "nvlink", -1, extra_count=2.0)
    scatter(0.005, "pcie", -1, extra_count=1.0)
    if cfg.power_interval_s > 0:
        parts.append(background_power(cfg, fleet, rng))
    return concat(parts, TelemetryTable)  # type: ignore[return-value]


#: Width of the bands an on-change exporter reports (degrees C, watts).
THERMAL_BAND_C = 5.0
POWER_BAND_W = 50.0


def on_change(ts: np.ndarray, host: np.ndarray, level: np.ndarray, band: float, start_ms: int,
              heartbeat_s: float) -> np.ndarray:
    """Rows an on-change exporter sends: a host's first sample, a change of band, and a heartbeat.

    ``level`` is the reading without its sample noise: exporters report with
    hysteresis, so noise around a band edge does not make them chatter. Rows
    must be grouped by host and time-ordered within a host (as ``_periodic``
    makes them).
    """
    b = np.floor(level / band)
    slot = (ts - start_ms) // int(heartbeat_s * 1000)
    first = np.ones(len(ts), dtype=bool)
    first[1:] = host[1:] != host[:-1]
    keep = first.copy()
    keep[1:] |= (b[1:] != b[:-1]) | (slot[1:] != slot[:-1])
    return keep


def background_power(cfg: SimConfig, fleet: Fleet, rng: np.random.Generator) -> TelemetryTable:
    """Board power of the busiest GPU per host, watts, following the jobs' daily cycle."""
    n = len(fleet)
    ts, host = _periodic(cfg.power_interval_s, n, cfg.start_ms, cfg.end_ms, rng)
    tdp = np.array([GPU_CATALOG[g].tdp_w for g in fleet.initial["gpu_model"]])
    load = peak_share(ts, cfg)
    watts = tdp[host] * (0.45 + 0.35 * load + rng.normal(0.0, 0.04, size=len(ts)))
    watts = np.clip(watts, 0.1 * tdp[host], 0.92 * tdp[host]).round(0)
    table = telemetry_table(ts_ms=ts, host=host, kind=TK["power"], code=-1, count=-1, value=watts,
                            device=rng.integers(0, catalog.GPUS_PER_HOST, size=len(ts)), origin=BACKGROUND)
    if cfg.thermal_mode == "on_change":
        table = take(table, on_change(ts, host, tdp[host] * (0.45 + 0.35 * load),  # type: ignore[assignment]
                                      POWER_BAND_W, cfg.start_ms, cfg.heartbeat_s))
    return table


__all__ = ["POWER_BAND_W", "THERMAL_BAND_C", "JobBurst", "background_crashes", "background_power",
           "background_telemetry", "daily_factor", "job_bursts", "job_name", "make_crashes", "on_change",
           "peak_share", "signature_rates", "signature_shapes"]
