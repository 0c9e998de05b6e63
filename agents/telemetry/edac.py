"""EDAC memory-controller counters (``/sys/devices/system/edac/mc/mc*/``).

The kernel keeps running totals of corrected (``ce_count``) and
uncorrected (``ue_count``) host-memory errors per controller, and per DIMM
where the driver knows the slot (``dimm*/dimm_ce_count``, ``dimm_label``).
Totals are turned into deltas (:class:`~fleetepi.agents.telemetry.dedup.CounterDeltas`):
a DIMM that corrects ten errors an hour is one event an interval with
``count=10``, and a counter reset is not a negative spike.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

import msgspec

from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.agents.telemetry.dedup import CounterDeltas
from fleetepi.agents.telemetry.hwmon import read_int, read_str
from fleetepi.contract import Telemetry, ts_from_ms

_KINDS = (("ce", "ecc_corrected", "info", "corrected"), ("ue", "ecc_uncorrected", "critical", "uncorrected"))


class EdacOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    root: str = "/sys/devices/system/edac/mc"
    per_dimm: bool = True


@register("edac", EdacOptions)
class EdacSource:
    """Deltas of EDAC CE/UE counters, per DIMM when the driver reports DIMMs.

    :param root: EDAC ``mc`` directory (a fixture tree in tests).
    :param per_dimm: publish per-DIMM counters where present (else per controller).
    """

    kind: ClassVar[str] = "edac"

    def __init__(self, host: str, root: str = "/sys/devices/system/edac/mc", per_dimm: bool = True) -> None:
        self.host = host
        self.root = Path(root)
        self.per_dimm = per_dimm
        if not self.root.is_dir():
            raise SourceUnavailable(f"no EDAC driver loaded ({self.root} missing)")
        self.controllers = sorted(p for p in self.root.glob("mc[0-9]*") if p.is_dir())
        if not self.controllers:
            raise SourceUnavailable(f"EDAC reports no memory controllers under {self.root}")
        self.deltas = CounterDeltas()

    @classmethod
    def from_options(cls, options: EdacOptions, ctx: SourceContext) -> EdacSource:
        return cls(ctx.host, options.root, options.per_dimm)

    def _counters(self) -> list[tuple[str, str, int]]:
        """(device, ce|ue, total) for every counter readable now."""
        rows: list[tuple[str, str, int]] = []
        for mc in self.controllers:
            dimms = sorted(mc.glob("dimm[0-9]*")) + sorted(mc.glob("rank[0-9]*")) if self.per_dimm else []
            dimm_rows = []
            for d in dimms:
                label = read_str(d / "dimm_label") or d.name
                for short, *_ in _KINDS:
                    v = read_int(d / f"dimm_{short}_count")
                    if v is not None:
                        dimm_rows.append((f"{mc.name}/{label}", short, v))
            if dimm_rows:
                rows.extend(dimm_rows)
                for short, *_ in _KINDS:  # errors the driver could not pin to a DIMM
                    v = read_int(mc / f"{short}_noinfo_count")
                    if v is not None:
                        rows.append((f"{mc.name}/noinfo", short, v))
            else:
                for short, *_ in _KINDS:
                    v = read_int(mc / f"{short}_count")
                    if v is not None:
                        rows.append((mc.name, short, v))
        return rows

    def poll(self, now_ms: int) -> Iterable[Telemetry]:
        ts = ts_from_ms(now_ms)
        out: list[Telemetry] = []
        names = {short: (kind, sev, word) for short, kind, sev, word in _KINDS}
        for device, short, total in self._counters():
            delta = self.deltas.update((device, short), total)
            if not delta:
                continue
            kind, sev, word = names[short]
            out.append(Telemetry(ts=ts, host=self.host, kind=kind, device=device, count=delta,  # type: ignore[arg-type]
                                 message=f"EDAC {word} memory errors", severity=sev))
        return out

    def close(self) -> None:
        pass


__all__ = ["EdacSource"]
