"""NVML: GPU ECC counters, retired pages, row remapping, temperature, throttle reasons.

``pynvml`` (the ``nvidia-ml-py`` package) is imported lazily, only when an
``nvml`` source or the inventory asks for it, and any module with the same
names can be injected instead: :class:`agents.telemetry.fakenvml.FakeNvml`
in tests, since CI has no GPU. Every NVML failure is translated here, once:
no library / no driver / no GPU turns the source off with one message
(:class:`NvmlUnavailable`); a feature a GPU does not support
(``NVMLError_NotSupported``) is switched off for that GPU only; a GPU that
falls off the bus (``NVMLError_GpuIsLost``) is itself an event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agents.exceptions import NvmlUnavailable
from agents.sources.registry import register
from agents.telemetry.dedup import CounterDeltas
from agents.telemetry.thermal import ThermalTracker, Thresholds
from agents.telemetry.xid import normalize_pci
from fleetepi.contract import Telemetry, ts_from_ms

log = logging.getLogger(__name__)

#: Clock-event ("throttle") reasons worth an event (the rest: idle, app clocks,
#: power cap, sync boost). NVML 12.2 renamed ``nvmlClocksThrottleReason*`` to
#: ``nvmlClocksEventReason*`` (same bits) and nvidia-ml-py 13 marks the old
#: names for removal in CUDA 14, so each bit is looked up under both names.
BAD_THROTTLE = {
    "HwSlowdown": "hw_slowdown",
    "SwThermalSlowdown": "sw_thermal_slowdown",
    "HwThermalSlowdown": "hw_thermal_slowdown",
    "HwPowerBrakeSlowdown": "hw_power_brake",
}

#: feature -> NVML functions that answer it, newest first. The new name can be
#: missing from the bindings (old nvidia-ml-py: AttributeError) or from the
#: driver (new bindings on an old libnvidia-ml: NVMLError_FunctionNotFound);
#: then the next one is used, and remembered.
CALLS = {
    "ecc": ("nvmlDeviceGetTotalEccErrors",),
    "retired_pages": ("nvmlDeviceGetRetiredPages",),
    "remapped_rows": ("nvmlDeviceGetRemappedRows",),
    "temperature": ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
    "throttle": ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
}


def reason_bit(nvml: Any, reason: str) -> int:
    """The bit of a clock-event reason under its new or its old NVML name (0 if neither)."""
    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
        bit = getattr(nvml, prefix + reason, None)
        if bit:
            return int(bit)
    return 0


def import_nvml() -> Any:
    """The real ``pynvml`` module, or :class:`NvmlUnavailable` saying why not."""
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
    return pynvml


def text(value: Any) -> str:
    """NVML strings are ``bytes`` in old bindings and ``str`` in new ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def start(nvml: Any | None) -> Any:
    """``nvmlInit`` with every "no GPU here" error turned into :class:`NvmlUnavailable`."""
    nvml = nvml if nvml is not None else import_nvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError_LibraryNotFound:
        raise NvmlUnavailable("no NVIDIA driver: libnvidia-ml.so not found") from None
    except nvml.NVMLError_DriverNotLoaded:
        raise NvmlUnavailable("NVIDIA driver not loaded") from None
    except nvml.NVMLError_NoPermission:
        raise NvmlUnavailable("no permission to use NVML") from None
    except nvml.NVMLError as exc:
        raise NvmlUnavailable(f"nvmlInit failed: {exc}") from None
    try:
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as exc:
        raise NvmlUnavailable(f"cannot count GPUs: {exc}") from None
    if count == 0:
        nvml.nvmlShutdown()
        raise NvmlUnavailable("NVML sees no GPU")
    return nvml


def _function_not_found(nvml: Any, exc: Exception) -> bool:
    cls = getattr(nvml, "NVMLError_FunctionNotFound", None)
    return cls is not None and isinstance(exc, cls)


@dataclass
class Gpu:
    index: int
    handle: Any
    device: str
    unsupported: set[str] = field(default_factory=set)
    lost: bool = False
    throttle: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    thresholds: Thresholds = field(default_factory=Thresholds)


def gpus(nvml: Any) -> list[Gpu]:
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        try:
            device = normalize_pci(text(nvml.nvmlDeviceGetPciInfo(h).busId))
        except nvml.NVMLError:
            device = f"gpu{i}"
        out.append(Gpu(i, h, device))
    return out


@register("nvml")
class NvmlSource:
    """GPU health from NVML.

    :param nvml: the NVML module (default: ``pynvml``, imported here; tests pass a FakeNvml).
    :param sample_interval_s: periodic temperature sample per GPU (0 = crossings only).
    :param temp_warn_c: warning threshold; default: the GPU's own slowdown threshold minus 5 °C.
    :param temp_crit_c: critical threshold; default: the GPU's slowdown threshold.
    :param ecc_counter: "volatile" (since driver load) or "aggregate" (lifetime).
    """

    kind: ClassVar[str] = "nvml"

    def __init__(self, host: str, nvml: Any | None = None, sample_interval_s: float = 300.0,
                 temp_warn_c: float | None = None, temp_crit_c: float | None = None,
                 ecc_counter: str = "volatile") -> None:
        if ecc_counter not in ("volatile", "aggregate"):
            raise ValueError("ecc_counter must be 'volatile' or 'aggregate'")
        self.host = host
        self.nvml = start(nvml)
        self.counter_type = self.nvml.NVML_VOLATILE_ECC if ecc_counter == "volatile" else self.nvml.NVML_AGGREGATE_ECC
        self.gpus = gpus(self.nvml)
        for g in self.gpus:
            g.thresholds = self._thresholds(g, temp_warn_c, temp_crit_c)
        self.deltas = CounterDeltas()
        self.thermal = ThermalTracker(host, sample_interval_s)
        self._fns: dict[str, tuple[str, ...]] = {}
        self._bad_bits = {name: reason_bit(self.nvml, reason) for reason, name in BAD_THROTTLE.items()}

    def _thresholds(self, g: Gpu, warn: float | None, crit: float | None) -> Thresholds:
        slowdown = None
        try:
            slowdown = float(self.nvml.nvmlDeviceGetTemperatureThreshold(g.handle, self.nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN))
        except self.nvml.NVMLError:
            pass
        return Thresholds(
            warn_c=warn if warn is not None else (slowdown - 5 if slowdown else None),
            crit_c=crit if crit is not None else slowdown,
        )

    def _call(self, g: Gpu, feature: str, *args: Any) -> Any:
        """One NVML call for one GPU; None when unsupported (remembered) or failed."""
        if feature in g.unsupported:
            return None
        names = self._fns.get(feature, CALLS[feature])
        for i, fn in enumerate(names):
            try:
                value = getattr(self.nvml, fn)(g.handle, *args)
            except AttributeError:
                continue
            except self.nvml.NVMLError_NotSupported:
                g.unsupported.add(feature)
                log.info("NVML: %s not supported on GPU %s", feature, g.device)
            except self.nvml.NVMLError_GpuIsLost:
                raise
            except self.nvml.NVMLError as exc:
                if _function_not_found(self.nvml, exc):
                    continue
                log.debug("NVML: %s failed on GPU %s: %s", fn, g.device, exc)
            else:
                if i:
                    self._fns[feature] = names[i:]
                    log.info("NVML: %s: using %s (this driver or nvidia-ml-py lacks %s)", feature, fn, ", ".join(names[:i]))
                return value
            return None
        g.unsupported.add(feature)
        log.info("NVML: %s: none of %s exists here", feature, ", ".join(names))
        return None

    def _event(self, now_ms: int, g: Gpu, kind: str, message: str, **kw: Any) -> Telemetry:
        return Telemetry(ts=ts_from_ms(now_ms), host=self.host, kind=kind, device=g.device, message=message, **kw)  # type: ignore[arg-type]

    def _delta(self, now_ms: int, g: Gpu, key: str, total: int | None, kind: str, message: str, sev: str) -> list[Telemetry]:
        if total is None:
            return []
        d = self.deltas.update((g.device, key), int(total))
        return [self._event(now_ms, g, kind, message, count=d, severity=sev)] if d else []

    def poll_gpu(self, g: Gpu, now_ms: int) -> list[Telemetry]:
        n = self.nvml
        out: list[Telemetry] = []
        out += self._delta(now_ms, g, "ecc_ce", self._call(g, "ecc", n.NVML_MEMORY_ERROR_TYPE_CORRECTED, self.counter_type),
                           "ecc_corrected", "NVML corrected ECC errors", "info")
        out += self._delta(now_ms, g, "ecc_ue", self._call(g, "ecc", n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, self.counter_type),
                           "ecc_uncorrected", "NVML uncorrected ECC errors", "critical")
        for cause, key, kind in ((n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, "sbe", "ecc_corrected"),
                                 (n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, "dbe", "ecc_uncorrected")):
            pages = self._call(g, "retired_pages", cause)
            out += self._delta(now_ms, g, f"retired_{key}", None if pages is None else len(pages), kind,
                               f"page retired ({'multiple single-bit' if key == 'sbe' else 'double-bit'} ECC)", "warning")
        rows = self._call(g, "remapped_rows")
        if rows is not None:
            corr, unc, pending, failure = rows
            out += self._delta(now_ms, g, "remap_corr", corr, "ecc_corrected", "row remapped (correctable error)", "warning")
            out += self._delta(now_ms, g, "remap_unc", unc, "ecc_uncorrected", "row remapped (uncorrectable error)", "critical")
            # States, not counters: a remap already pending (or failed) when the
            # agent starts still needs its reset, so it is reported at the first poll too.
            if pending and not g.remap_pending:
                out.append(self._event(now_ms, g, "other", "row remapping pending: reset the GPU", severity="critical", action="RESET_GPU"))
            if failure and not g.remap_failure:
                out.append(self._event(now_ms, g, "other", "row remapping failed", severity="critical", action="CONTACT_SUPPORT"))
            g.remap_pending, g.remap_failure = bool(pending), bool(failure)
        temp = self._call(g, "temperature", n.NVML_TEMPERATURE_GPU)
        if temp is not None:
            out += self.thermal.update(g.device, float(temp), g.thresholds, now_ms)
        mask = self._call(g, "throttle")
        if mask is not None:
            new = int(mask) & ~g.throttle
            g.throttle = int(mask)
            for name, bit in self._bad_bits.items():
                if bit and new & bit:
                    out.append(self._event(now_ms, g, "thermal", f"clocks throttled: {name}", severity="warning",
                                           value=float(temp) if temp is not None else None))
        return out

    def poll(self, now_ms: int) -> Iterable[Telemetry]:
        out: list[Telemetry] = []
        for g in self.gpus:
            try:
                out.extend(self.poll_gpu(g, now_ms))
                g.lost = False
            except self.nvml.NVMLError_GpuIsLost:
                if not g.lost:
                    g.lost = True
                    out.append(self._event(now_ms, g, "xid", "NVML: GPU is lost (fallen off the bus)", code=79,
                                           severity="critical", action="RESTART_BM"))
        return out

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # shutdown of a dead driver must not stop the agent  # noqa: BLE001
            pass


__all__ = ["BAD_THROTTLE", "CALLS", "Gpu", "NvmlSource", "gpus", "import_nvml", "reason_bit", "start", "text"]
