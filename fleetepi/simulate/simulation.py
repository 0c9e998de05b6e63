"""``simulate(cfg)``: draw a fleet, its background and its outbreaks; stream them as contract events.

Generation is vectorized (numpy columns, seconds for ~2 M events);
conversion to :mod:`fleetepi.contract` structs happens lazily, chunk by
chunk, in event-time order, so a consumer (the detectors, ``write_jsonl``)
never holds more than one chunk of Python objects.

Determinism: one ``numpy.random.Generator`` seeded by ``cfg.seed`` feeds
every draw in a fixed order, so equal configs give byte-identical output.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np

from fleetepi.contract import Crash, Event, Frame, Host, Telemetry
from fleetepi.simulate import catalog
from fleetepi.simulate.background import (
    JobBurst,
    background_crashes,
    background_telemetry,
    job_bursts,
    job_name,
    signature_rates,
    signature_shapes,
)
from fleetepi.simulate.benign import BenignGenerator, from_burst
from fleetepi.simulate.catalog import SignatureInfo
from fleetepi.simulate.config import SimConfig
from fleetepi.simulate.fleet import Fleet, build_fleet
from fleetepi.simulate.outbreaks import Injector
from fleetepi.simulate.tables import CRASH_SOURCES, CrashTable, TelemetryTable, concat, take
from fleetepi.simulate.truth import Benign, Outbreak

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Rows turned into structs at a time by ``events()``.
CHUNK = 65_536
_HOST, _CRASH, _TEL = 0, 1, 2


def ts_datetime(ts_ms: int) -> datetime:
    """Exact UTC datetime of integer epoch milliseconds (no float rounding)."""
    return _EPOCH + timedelta(milliseconds=ts_ms)


@dataclass
class Simulation:
    """A drawn fleet: columnar tables, ground truth, and the event stream they make.

    :ivar truth: the labelled outbreaks (what a detector should find).
    :ivar bursts: background job bursts (noise a detector should *not* page on).
    :ivar benign: every benign phenomenon (job bursts included), with the tickets it should get.
    """

    config: SimConfig
    fleet: Fleet
    signatures: list[SignatureInfo]
    crashes: CrashTable
    telemetry: TelemetryTable
    announcements: list[tuple[int, int, dict[str, str]]]
    truth: list[Outbreak]
    bursts: list[JobBurst]
    benign: list[Benign] = field(default_factory=list)
    _frames: list[list[Frame]] = field(default_factory=list, repr=False)

    @property
    def hosts(self) -> list[str]:
        return self.fleet.names

    @property
    def start_ms(self) -> int:
        return self.config.start_ms

    @property
    def end_ms(self) -> int:
        return self.config.end_ms

    def __len__(self) -> int:
        return len(self.announcements) + len(self.crashes) + len(self.telemetry)

    def counts(self) -> Counter[str]:
        """Events per contract kind (``host``, ``crash``, ``telemetry``) and per telemetry kind."""
        c: Counter[str] = Counter(host=len(self.announcements), crash=len(self.crashes),
                                  telemetry=len(self.telemetry))
        kinds, n = np.unique(self.telemetry.kind, return_counts=True)
        for k, v in zip(kinds.tolist(), n.tolist()):
            c[f"telemetry.{catalog.TELEMETRY_KINDS[k]}"] = v
        return c

    @cached_property
    def _order(self) -> tuple[np.ndarray, np.ndarray]:
        ann_ts = np.array([a[0] for a in self.announcements], dtype=np.int64)
        ts = np.concatenate([ann_ts, self.crashes.ts_ms, self.telemetry.ts_ms])
        typ = np.concatenate([np.full(len(ann_ts), _HOST, np.int8), np.full(len(self.crashes), _CRASH, np.int8),
                              np.full(len(self.telemetry), _TEL, np.int8)])
        idx = np.concatenate([np.arange(len(ann_ts)), np.arange(len(self.crashes)), np.arange(len(self.telemetry))])
        order = np.lexsort((idx, typ, ts))  # by time; hosts first at equal times; stable
        return typ[order], idx[order]

    def events(self) -> Iterator[Event]:
        """Contract events in non-decreasing ``ts`` (hosts announced before anything at their time)."""
        typ, idx = self._order
        frames = self._frames or [[Frame(module=m, function=f, offset=o, language="native") for m, f, o in s.frames]
                                  for s in self.signatures]
        self._frames = frames
        names = self.fleet.names
        sigs = self.signatures
        shapes = catalog.SHAPES
        kinds = catalog.TELEMETRY_KINDS
        devices = catalog.DEVICES
        xid_msg = catalog.XID_MESSAGE
        sources = CRASH_SOURCES
        ann = self.announcements
        ct, tt = self.crashes, self.telemetry
        for lo in range(0, len(typ), CHUNK):
            t_c, i_c = typ[lo:lo + CHUNK], idx[lo:lo + CHUNK]
            ci = i_c[t_c == _CRASH]
            ti = i_c[t_c == _TEL]
            c_cols = [ct.ts_ms[ci].tolist(), ct.host[ci].tolist(), ct.sig[ci].tolist(), ct.job[ci].tolist(),
                      ct.shape[ci].tolist(), ct.address[ci].tolist(), ct.bitflip[ci].tolist(),
                      ct.source[ci].tolist()]
            t_cols = [tt.ts_ms[ti].tolist(), tt.host[ti].tolist(), tt.kind[ti].tolist(), tt.code[ti].tolist(),
                      tt.count[ti].tolist(), tt.value[ti].tolist(), tt.device[ti].tolist()]
            c_rows = zip(*c_cols)
            t_rows = zip(*t_cols)
            for t, i in zip(t_c.tolist(), i_c.tolist()):
                if t == _TEL:
                    ts, h, k, code, count, value, dev = next(t_rows)
                    kind = kinds[k]
                    yield Telemetry(
                        ts=_EPOCH + timedelta(milliseconds=ts), host=names[h], kind=kind,  # type: ignore[arg-type]
                        device=devices[dev] if dev >= 0 else None,
                        code=code if code >= 0 else None,
                        count=count if count >= 0 else None,
                        value=value if value == value else None,
                        message=xid_msg.get(code) if kind == "xid" else None,
                    )
                elif t == _CRASH:
                    ts, h, s, job, shp, addr, bf, src = next(c_rows)
                    shape = shapes[shp]
                    info = sigs[s]
                    yield Crash(
                        ts=_EPOCH + timedelta(milliseconds=ts), host=names[h], signature=info.signature,
                        signal=shape.signal, executable=info.executable,
                        fault_address=hex(addr) if shape.address else None,
                        frames=frames[s], job=job_name(job) if job >= 0 else None,
                        si_code=shape.si_code, fault_class=shape.fault_class,  # type: ignore[arg-type]
                        shape_flags=list(shape.flags) if shape.flags else None,
                        bitflip_score=round(bf, 3) if bf == bf else None,
                        origin=sources[src] if src >= 0 else None,  # type: ignore[arg-type]
                    )
                else:
                    ts, h, attrs = ann[i]
                    yield Host(ts=_EPOCH + timedelta(milliseconds=ts), host=names[h], attributes=dict(attrs))

    def origin_of(self, kind: str) -> np.ndarray:
        """``origin`` column of the crash or telemetry table (tests, benchmark)."""
        return (self.crashes if kind == "crash" else self.telemetry).origin


def simulate(cfg: SimConfig | None = None) -> Simulation:
    """Draw the fleet of ``cfg`` (defaults: 2,000 hosts, 14 days, seed 1, one outbreak of each template)."""
    cfg = cfg or SimConfig()
    rng = np.random.default_rng(cfg.seed)
    fleet = build_fleet(cfg, rng)
    signatures = catalog.make_signatures(cfg.signatures, rng)
    rates = signature_rates(cfg, rng)
    sig_shape = signature_shapes(len(signatures), rng)
    bg_c = background_crashes(cfg, fleet, rates, sig_shape, rng)
    burst_c, burst_t, bursts = job_bursts(cfg, fleet, signatures, rng)
    bg_t = background_telemetry(cfg, fleet, rng)
    shapes = list(sig_shape)  # grows as benign phenomena and outbreaks add signatures
    benign = BenignGenerator(cfg, fleet, signatures, rates, shapes, rng).run(bg_c)
    injected = Injector(cfg, fleet, signatures, rates, shapes, rng, background=bg_c,
                        avoid_hosts=benign.hosts, avoid_signatures=benign.signatures).run(cfg.outbreaks)
    crashes = concat([bg_c, burst_c, *benign.crashes, *injected.crashes], CrashTable)
    telemetry = concat([bg_t, burst_t, *benign.telemetry, *injected.telemetry], TelemetryTable)
    # Nothing past the end of the run (bursts and storms near the end are cut).
    crashes = _clip(crashes, cfg.start_ms, cfg.end_ms)
    telemetry = _clip(telemetry, cfg.start_ms, cfg.end_ms)
    labels = [from_burst(b) for b in bursts] + benign.labels + injected.benign
    labels = [dataclasses.replace(b, id=f"b{k}") for k, b in enumerate(labels)]
    return Simulation(config=cfg, fleet=fleet, signatures=signatures, crashes=crashes,  # type: ignore[arg-type]
                      telemetry=telemetry, announcements=fleet.announcements(cfg.start_ms),  # type: ignore[arg-type]
                      truth=injected.truth, bursts=bursts, benign=labels)


def _clip(table: object, start: int, end: int) -> object:
    ts = table.ts_ms  # type: ignore[attr-defined]
    m = (ts >= start) & (ts < end)
    return table if m.all() else take(table, m)


__all__ = ["CHUNK", "Simulation", "simulate", "ts_datetime"]
