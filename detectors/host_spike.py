"""host_spike: one host crashes far above its peers (a sick host).

Keyed by host (partition key ``host``). The count is the host's crashes in
the window, any signature; a crash with an *odd shape* (a bit-flip score, a
non-canonical fault address, a misaligned stack pointer: ``Crash.shape_flags``)
weighs ``host_odd_weight`` units, because silent CPU or memory corruption
shows exactly that: many different signatures, odd shapes, on one host. The
peers are the fleet and the hosts sharing each attribute value (see
``fleetepi.detectors.peers``), so a fleet-wide or rack-wide wave pages nobody here.

Hardware errors of the host (hardware Xids, uncorrectable ECC, NVLink,
PCIe; not the application Xids 13/31/43/45 that job bursts leave) count
``host_hw_weight`` units each: failing memory shows as SIGBUS crashes *and*
Xid 48/94 on the same host, and neither alone may be enough within a day.
``telemetry_host`` pages on a storm of one code.
"""

from __future__ import annotations

from typing import Any, ClassVar

from fleetepi.contract import Alert, Crash, Telemetry, ts_from_ms
from fleetepi.detectors.common import CoreDetector
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.peers import peer_spike_from_config
from fleetepi.detectors.stats import score_of
from fleetepi.detectors.windows import Ring

#: Fault classes that no ordinary software bug produces on x86-64.
ODD_FAULT_CLASSES = frozenset({"non_canonical"})


def odd_shape(crash: Crash, bitflip_min: float) -> bool:
    """Does this crash look like bad silicon rather than bad code?

    The founding case: stack pointers not 16-byte aligned and fault
    addresses one bit from a valid pointer, all from one host whose CPU
    miscomputed. The agent flags them (``misaligned_sp``, ``bit_flip_address``),
    scores bit flips, and classes non-canonical addresses.
    """
    if crash.shape_flags:
        for f in crash.shape_flags:
            if f != "return_to_null":  # a return to NULL is the software race, not silicon
                return True
    if crash.bitflip_score is not None and crash.bitflip_score >= bitflip_min:
        return True
    return crash.fault_class in ODD_FAULT_CLASSES


class HostSpike(CoreDetector):
    """Fires once per episode when a host's (odd-weighted) crash count stands out against its peers."""

    name: ClassVar[str] = "host_spike"
    state_version: ClassVar[str] = "host_spike/1"
    event_types: ClassVar[tuple[type, ...]] = (Crash, Telemetry)

    def __init__(self, config: DetectorConfig) -> None:
        c = config
        self.config = c
        self.core = peer_spike_from_config(c, windows_s=c.host_windows_s, alpha=c.host_alpha,
                                           resolve_alpha=c.host_resolve_alpha, min_count=c.host_min_crashes,
                                           min_ratio=c.host_min_ratio, floor_per_h=c.host_floor_per_h,
                                           min_events=c.host_min_events, make_alert=self._alert)
        self._hw_kinds = frozenset(c.hw_error_kinds)
        self._app_xids = frozenset(c.app_xid_codes)
        self._bucket_ms = int(c.bucket_s * 1000)
        self._n = self.core.n
        #: host -> hardware errors in the window (evidence only).
        self.hw: dict[str, Ring] = {}
        self._next_hw_sweep_ms = 0

    def route(self, event: Crash | Telemetry) -> str | None:
        if type(event) is Crash:
            return event.host
        kind = event.kind  # type: ignore[union-attr]
        if kind in self._hw_kinds and not (kind == "xid" and event.code in self._app_xids):  # type: ignore[union-attr,operator]
            return event.host
        return None

    def update(self, event: Crash | Telemetry, ts_ms: int, inventory: Inventory) -> list[Alert]:
        self.begin(inventory, ts_ms)
        if type(event) is Crash:
            w = self.config.host_odd_weight if odd_shape(event, self.config.host_bitflip_min) else 1.0
            return self.core.observe(event.host, "crash", w, ts_ms, inventory, label=event.signature,
                                     odd=w if w != 1.0 else 0.0)
        # A hardware error (Xid 48/79/94, uncorrectable ECC, NVLink, PCIe) is evidence
        # against the host too: it counts ``host_hw_weight`` units, whatever its count field.
        ring = self.hw.get(event.host)
        if ring is None:
            ring = self.hw[event.host] = Ring(self._n)
        ring.add(ts_ms // self._bucket_ms, 1.0)
        return self.core.observe(event.host, "crash", self.config.host_hw_weight, ts_ms, inventory)

    def _alert(self, host: str, channel: str, state: str, ts_ms: int, p: float | None, obs: float, exp: float,
               notes: list[str], evidence: dict[str, Any]) -> Alert:
        w = float(evidence.get("window_s", self.core.window_s))
        if state == "firing":
            ring = self.hw.get(host)
            hw = ring.total_at(ts_ms // self._bucket_ms) if ring is not None else 0.0
            n_sigs, odd = int(evidence.get("labels", 0)), evidence.get("odd", 0.0)
            odd_n = odd / self.config.host_odd_weight if self.config.host_odd_weight else 0.0
            sick = n_sigs >= 3 and odd_n >= 2
            if sick:
                what = "likely silent CPU/memory corruption: drain and test it"
            elif hw >= 2:
                what = "crashing with hardware errors (failing memory/GPU?): drain and test it"
            else:
                what = "crashing far above its peers"
            day_h = self.core.windows_s[-1] / 3600.0
            summary = (f"host {host} {what}: {obs:g} crash/error units in {w / 60:g} min vs {exp:.2g} expected; "
                       f"last {day_h:g} h: {n_sigs} distinct signatures, {odd_n:g} odd-shaped crashes, "
                       f"{hw:g} hardware errors")
            notes = notes + [f"evidence over the last {day_h:g} h: {n_sigs} distinct signatures; {odd_n:g} crashes with odd "
                             f"shapes (bit flips, non-canonical address, misaligned stack) weighted "
                             f"x{self.config.host_odd_weight:g}; {hw:g} hardware errors "
                             f"({', '.join(sorted(self._hw_kinds))})"]
        else:
            summary = f"host {host} back in line with its peers"
        return Alert(ts=ts_from_ms(ts_ms), kind="host_spike", state=state,  # type: ignore[arg-type]
                     host=host, score=score_of(p) if p is not None else 0.0, p_value=p, observed=obs,
                     expected=round(exp, 6), relative_risk=(obs / exp if exp > 0 else None), window_s=w,
                     summary=summary, notes=notes)

    def advance(self, watermark_ms: int, inventory: Inventory) -> list[Alert]:
        out = self.core.advance(watermark_ms, inventory)
        if watermark_ms >= self._next_hw_sweep_ms:  # O(hosts): hourly, not every step
            self._next_hw_sweep_ms = watermark_ms + 3_600_000
            cutoff = watermark_ms // self._bucket_ms - self._n
            for h in [h for h, r in self.hw.items() if r.head <= cutoff]:
                del self.hw[h]
        return out

    def snapshot(self) -> dict[str, Any]:
        return {"core": self.core.dump(), "hw": {h: r.dump() for h, r in self.hw.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        self.core.load(state["core"])
        self.hw = {str(h): Ring.load(r) for h, r in state["hw"].items()}

    def counts(self) -> dict[str, float]:
        return self.core.counts()


__all__ = ["HostSpike", "odd_shape"]
