"""NVML: GPU ECC counters, retired pages, row remapping, GPU and HBM temperature, power, throttling, repairs.

``pynvml`` (the ``nvidia-ml-py`` package) is imported lazily, only when an
``nvml`` source or the inventory asks for it, and any module with the same
names can be injected instead: :class:`fleetepi.agents.telemetry.fakenvml.FakeNvml`
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
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from fleetepi.agents.exceptions import NvmlUnavailable
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.agents.telemetry.dedup import CounterDeltas
from fleetepi.agents.telemetry.power import PowerThresholds, PowerTracker
from fleetepi.agents.telemetry.thermal import ThermalTracker, Thresholds
from fleetepi.agents.telemetry.xid import normalize_pci
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
    "fields": ("nvmlDeviceGetFieldValues",),
    "repair": ("nvmlDeviceGetRepairStatus",),
    "power": ("nvmlDeviceGetPowerUsage",),
    "power_limit": ("nvmlDeviceGetEnforcedPowerLimit",),
}
#: Reasons that are about power, not heat: their events are ``kind: power`` (v1.1).
POWER_REASONS = frozenset({"hw_power_brake"})

#: NVML field ids, read with one ``nvmlDeviceGetFieldValues`` per GPU and poll.
#: Numbers rather than pynvml names: field ids are the driver's ABI, old
#: bindings lack the newer names while the driver may know the ids, and a
#: driver that does not know one answers for that field alone.
FI_MEMORY_TEMP = 82
#: clock-event reason -> field id of its cumulative duration counter (ns since
#: the driver loaded; R555+). The set mask shows a reason only while it is on
#: at the moment of the poll; these counters also catch a 200 ms thermal
#: throttle that began and ended between two polls 30 s apart. The SW power
#: cap (field 74) is left out: a GPU at full load sits on it all the time.
THROTTLE_COUNTERS = {"sw_thermal_slowdown": 269, "hw_thermal_slowdown": 270, "hw_power_brake": 271}
#: the thermal perf-policy violation counter (``nvmlDeviceGetViolationStatus``'s
#: NVML_PERF_POLICY_THERMAL, ns), read only where the driver knows neither
#: thermal reason counter above (older than R555).
FALLBACK_COUNTERS = {"thermal_policy": 75}
THROTTLE_NS_PER_MS = 1_000_000
#: nvmlReturn_t codes in a field value: it answers per field, not with an exception.
_NVML_SUCCESS, _NVML_ERROR_INVALID_ARGUMENT, _NVML_ERROR_NOT_SUPPORTED = 0, 2, 3
#: nvmlValueType_t -> the member of the value union that holds it
_VALUE_MEMBER = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


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


def field_values(fields: Any) -> dict[int, int | float | str]:
    """``nvmlDeviceGetFieldValues``' answer -> field id: value, or the nvmlReturn_t code
    as ``"error N"`` for a field the driver refused (the call itself succeeded)."""
    out: dict[int, int | float | str] = {}
    for f in fields:
        if f.nvmlReturn != _NVML_SUCCESS:
            out[int(f.fieldId)] = f"error {int(f.nvmlReturn)}"
            continue
        vt = int(f.valueType)
        member = _VALUE_MEMBER[vt] if 0 <= vt < len(_VALUE_MEMBER) else "ullVal"
        out[int(f.fieldId)] = getattr(f.value, member)
    return out


def _ms(ns: int) -> str:
    return f"{ns / THROTTLE_NS_PER_MS:.0f}" if ns >= THROTTLE_NS_PER_MS else f"{ns / THROTTLE_NS_PER_MS:.3g}"


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
    mem_thresholds: Thresholds = field(default_factory=Thresholds)
    #: field ids the driver refused on this GPU (NotSupported / unknown id)
    unsupported_fields: set[int] = field(default_factory=set)
    channel_repair_pending: bool = False
    tpc_repair_pending: bool = False

    @property
    def hbm_device(self) -> str:
        """The HBM sensor's device name: its own temperature series and crossing state."""
        return f"{self.device}/hbm"


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


class NvmlOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    sample_interval_s: Annotated[float, Meta(ge=0)] = 300.0
    temp_warn_c: float | None = None
    temp_crit_c: float | None = None
    ecc_counter: Literal["volatile", "aggregate"] = "volatile"
    mem_temp_warn_c: float | None = None
    mem_temp_crit_c: float | None = None
    #: read power draw and the enforced limit (``kind: power``)
    power: bool = True
    #: periodic power sample per GPU; default: ``sample_interval_s``
    power_sample_interval_s: Annotated[float, Meta(ge=0)] | None = None
    #: a reading at this fraction of the enforced limit or above is a crossing
    power_high_fraction: Annotated[float, Meta(gt=0, le=2)] = 0.95
    #: how far (fraction of the limit) below that line a GPU must fall to clear it
    power_hysteresis_fraction: Annotated[float, Meta(ge=0, lt=1)] = 0.05


@register("nvml", NvmlOptions)
class NvmlSource:
    """GPU health from NVML.

    :param nvml: the NVML module (default: ``pynvml``, imported here; tests pass a FakeNvml).
    :param sample_interval_s: periodic temperature sample per GPU (0 = crossings only).
    :param temp_warn_c: warning threshold; default: the GPU's own slowdown threshold minus 5 °C.
    :param temp_crit_c: critical threshold; default: the GPU's slowdown threshold.
    :param mem_temp_warn_c: HBM warning threshold; default: the GPU's memory max threshold minus 5 °C.
    :param mem_temp_crit_c: HBM critical threshold; default: the GPU's memory max threshold.
    :param ecc_counter: "volatile" (since driver load) or "aggregate" (lifetime).
    :param power: read power draw (W) and the enforced power limit.
    :param power_sample_interval_s: periodic power sample per GPU (default: ``sample_interval_s``; 0 = crossings only).
    :param power_thresholds: the crossing line as a fraction of the enforced limit, and its hysteresis.
    """

    kind: ClassVar[str] = "nvml"

    def __init__(self, host: str, nvml: Any | None = None, sample_interval_s: float = 300.0,
                 temp_warn_c: float | None = None, temp_crit_c: float | None = None,
                 ecc_counter: str = "volatile", mem_temp_warn_c: float | None = None,
                 mem_temp_crit_c: float | None = None, power: bool = True,
                 power_sample_interval_s: float | None = None, power_thresholds: PowerThresholds | None = None) -> None:
        if ecc_counter not in ("volatile", "aggregate"):
            raise ValueError("ecc_counter must be 'volatile' or 'aggregate'")
        self.host = host
        self.nvml = start(nvml)
        self.counter_type = self.nvml.NVML_VOLATILE_ECC if ecc_counter == "volatile" else self.nvml.NVML_AGGREGATE_ECC
        self.gpus = gpus(self.nvml)
        for g in self.gpus:
            g.thresholds = self._thresholds(g, self.nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, temp_warn_c, temp_crit_c)
            g.mem_thresholds = self._thresholds(g, getattr(self.nvml, "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", 2),
                                                mem_temp_warn_c, mem_temp_crit_c)
        self.deltas = CounterDeltas()
        self.thermal = ThermalTracker(host, sample_interval_s)
        self.power = PowerTracker(host, sample_interval_s if power_sample_interval_s is None else power_sample_interval_s,
                                  power_thresholds) if power else None
        self._fns: dict[str, tuple[str, ...]] = {}
        self._bad_bits = {name: reason_bit(self.nvml, reason) for reason, name in BAD_THROTTLE.items()}

    @classmethod
    def from_options(cls, options: NvmlOptions, ctx: SourceContext) -> NvmlSource:
        return cls(ctx.host, ctx.nvml, options.sample_interval_s, options.temp_warn_c, options.temp_crit_c,
                   options.ecc_counter, options.mem_temp_warn_c, options.mem_temp_crit_c, options.power,
                   options.power_sample_interval_s,
                   PowerThresholds(options.power_high_fraction, options.power_hysteresis_fraction))

    def _thresholds(self, g: Gpu, which: int, warn: float | None, crit: float | None) -> Thresholds:
        """Configured thresholds, else the GPU's own (``which``: slowdown or memory max) and 5 °C below."""
        limit = None
        try:
            limit = float(self.nvml.nvmlDeviceGetTemperatureThreshold(g.handle, which))
        except self.nvml.NVMLError:
            pass
        return Thresholds(
            warn_c=warn if warn is not None else (limit - 5 if limit else None),
            crit_c=crit if crit is not None else limit,
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
        out += self._repair(now_ms, g)
        temp = self._call(g, "temperature", n.NVML_TEMPERATURE_GPU)
        if temp is not None:
            out += self.thermal.update(g.device, float(temp), g.thresholds, now_ms)
        fields = self._fields(g)
        hbm = fields.get(FI_MEMORY_TEMP)
        if isinstance(hbm, (int, float)) and hbm > 0:  # 0: a board without an HBM sensor that answers anyway
            out += self.thermal.update(g.hbm_device, float(hbm), g.mem_thresholds, now_ms)
        timed = self._throttle_time(now_ms, g, fields)
        out += timed.values()
        mask = self._call(g, "throttle")
        if mask is not None:
            new = int(mask) & ~g.throttle
            g.throttle = int(mask)
            for name, bit in self._bad_bits.items():
                if bit and new & bit and name not in timed:  # the duration event already says it
                    kind = "power" if name in POWER_REASONS else "thermal"
                    out.append(self._event(now_ms, g, kind, f"clocks throttled: {name}", severity="warning"))
        out += self._power(now_ms, g)
        return out

    def _power(self, now_ms: int, g: Gpu) -> list[Telemetry]:
        """Power draw in W (NVML answers mW) against the enforced limit: crossings and samples."""
        if self.power is None:
            return []
        usage_mw = self._call(g, "power")
        if usage_mw is None:
            return []
        limit_mw = self._call(g, "power_limit")
        return self.power.update(g.device, int(usage_mw) / 1000.0,
                                 None if not limit_mw else int(limit_mw) / 1000.0, now_ms)

    def _fields(self, g: Gpu) -> dict[int, int | float | str]:
        """HBM temperature and throttle-time counters in one NVML call; a field the
        driver refuses (NotSupported, or an id it does not know) is not asked again."""
        ids = [FI_MEMORY_TEMP, *THROTTLE_COUNTERS.values()]
        if {THROTTLE_COUNTERS["sw_thermal_slowdown"], THROTTLE_COUNTERS["hw_thermal_slowdown"]} <= g.unsupported_fields:
            ids += FALLBACK_COUNTERS.values()
        ids = [i for i in ids if i not in g.unsupported_fields]
        if not ids:
            return {}
        answer = self._call(g, "fields", ids)
        if answer is None:
            return {}
        values = field_values(answer)
        for fid, v in values.items():
            if v in (f"error {_NVML_ERROR_NOT_SUPPORTED}", f"error {_NVML_ERROR_INVALID_ARGUMENT}"):
                g.unsupported_fields.add(fid)
                log.info("NVML: field %d not supported on GPU %s (%s)", fid, g.device, v)
        return values

    def _throttle_time(self, now_ms: int, g: Gpu, fields: dict[int, int | float | str]) -> dict[str, Telemetry]:
        """Reason -> event, for each thermal / hardware slowdown counter that advanced since the last poll."""
        out = {}
        for name, fid in (*THROTTLE_COUNTERS.items(), *FALLBACK_COUNTERS.items()):
            total = fields.get(fid)
            if not isinstance(total, int):
                continue
            d = self.deltas.update((g.device, f"throttle_ns:{name}"), total)
            if d:
                # A notice, not a reading: no ``value`` (the temperature is its own reading of the
                # same poll), so the detectors count it as one thermal crossing whatever the
                # temperature: a GPU that throttles at 70 °C still throttles.
                kind = "power" if name in POWER_REASONS else "thermal"
                out[name] = self._event(now_ms, g, kind, f"clocks throttled {_ms(d)} ms since last poll: {name}",
                                        severity="warning")
        return out

    def _repair(self, now_ms: int, g: Gpu) -> list[Telemetry]:
        """R575+ channel / TPC repair pending: states like a pending row remap, needing a reset."""
        status = self._call(g, "repair")
        if status is None:
            return []
        channel, tpc = bool(status[0]), bool(status[1])
        out = []
        if channel and not g.channel_repair_pending:
            out.append(self._event(now_ms, g, "other", "memory channel repair pending: reset the GPU",
                                   severity="critical", action="RESET_GPU"))
        if tpc and not g.tpc_repair_pending:
            out.append(self._event(now_ms, g, "other", "TPC repair pending: reset the GPU",
                                   severity="critical", action="RESET_GPU"))
        g.channel_repair_pending, g.tpc_repair_pending = channel, tpc
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


__all__ = ["BAD_THROTTLE", "CALLS", "FALLBACK_COUNTERS", "FI_MEMORY_TEMP", "POWER_REASONS", "THROTTLE_COUNTERS", "Gpu",
           "NvmlOptions", "NvmlSource",
           "field_values", "gpus", "import_nvml", "reason_bit", "start", "text"]
