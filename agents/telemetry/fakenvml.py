"""A fake NVML module for tests and demos on hosts without a GPU.

It has the names of ``pynvml`` that the agent uses, with the same constant
values, error classes and error texts, and GPUs whose counters a test
changes between polls (``fake.gpus[0].ecc_corrected += 3``). Defaults are
what a real H100 80GB HBM3 answered (driver 580.159.04, nvidia-ml-py 13;
``tests/agents/data/nvml/h100-capture.json``), and
:meth:`FakeNvml.from_capture` replays such a capture, so CI, which has no
GPU, runs the agent against real answers. ``missing`` names NVML functions
the "driver" lacks (``NVMLError_FunctionNotFound``, as new bindings on an
old libnvidia-ml raise). Shipped in the package, like httpx's
``MockTransport``, so other projects can test against it too.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    #: what ``str()`` of the real pynvml error says (nvmlErrorString)
    text = "Unknown Error"

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.text)


class NVMLError_LibraryNotFound(NVMLError):
    text = "NVML Shared Library Not Found"
class NVMLError_DriverNotLoaded(NVMLError):
    text = "Driver Not Loaded"
class NVMLError_NoPermission(NVMLError):
    text = "Insufficient Permissions"
class NVMLError_NotSupported(NVMLError):
    text = "Not Supported"
class NVMLError_InvalidArgument(NVMLError):
    text = "Invalid Argument"
class NVMLError_FunctionNotFound(NVMLError):
    text = "Function Not Found"
class NVMLError_GpuIsLost(NVMLError):
    text = "GPU is lost"
class NVMLError_Unknown(NVMLError): ...


#: nvmlDeviceGetFieldValues on the real H100, idle: field id -> ns spent in a
#: clock-event reason since the driver loaded (74 SW power cap, 75 thermal
#: policy, 76 sync boost, 269 SW thermal, 270 HW thermal, 271 HW power brake).
H100_THROTTLE_NS = {74: 0, 75: 0, 76: 0, 269: 0, 270: 0, 271: 0}
#: nvmlValueType_t per field id, as the H100 answered (1 unsigned int, 3 unsigned long long)
FIELD_VALUE_TYPES = {82: 1}
_VALUE_MEMBER = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

#: NVML_TEMPERATURE_THRESHOLD_* -> °C on the real H100 (SHUTDOWN, SLOWDOWN,
#: MEM_MAX, GPU_MAX); 4..7 (acoustic, GPS) are NotSupported there.
H100_THRESHOLDS = {0: 95, 1: 89, 2: 95, 3: 87}


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    bus_id: str = "00000000:18:00.0"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    vbios: str = "96.00.89.00.01"
    temperature_c: int = 40
    slowdown_c: int = 89
    #: the other thresholds (index -> °C); indexes 0..7 not here are NotSupported
    thresholds: dict[int, int] = field(default_factory=lambda: dict(H100_THRESHOLDS))
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    retired_sbe: int = 0
    retired_dbe: int = 0
    remapped_corr: int = 0
    remapped_unc: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    #: current clock-event reasons; 0x1 (GPU idle) is what an idle H100 says
    throttle: int = 0x1
    #: NVML_FI_DEV_MEMORY_TEMP (HBM), °C
    memory_temperature_c: int = 37
    #: throttle-duration field id -> ns; a test adds to one (``g.throttle_ns[270] += 200_000_000``)
    throttle_ns: dict[int, int] = field(default_factory=lambda: dict(H100_THROTTLE_NS))
    #: field id -> nvmlReturn_t the driver answers for it; an id neither here nor
    #: answered above gets 3 (NVML_ERROR_NOT_SUPPORTED)
    field_errors: dict[int, int] = field(default_factory=dict)
    channel_repair_pending: bool = False
    tpc_repair_pending: bool = False
    #: nvmlDeviceGetPowerUsage, mW: what the idle H100 drew (captured: 71156)
    power_mw: int = 71156
    #: nvmlDeviceGetEnforcedPowerLimit, mW (captured: 700000)
    power_limit_mw: int = 700000
    lost: bool = False
    #: features answered with NVMLError_NotSupported: name, uuid, vbios, pci,
    #: temperature, ecc, retired_pages, remapped_rows, throttle, fields, repair, power, power_limit
    unsupported: set[str] = field(default_factory=set)


class FakeNvml:
    """Stands in for the ``pynvml`` module.

    :param gpus: the GPUs it reports.
    :param driver: driver version string.
    :param init_error: an NVMLError subclass ``nvmlInit`` raises (e.g. no driver).
    :param missing: NVML function names the driver lacks (they raise NVMLError_FunctionNotFound).
    """

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    nvmlClocksThrottleReasonGpuIdle = 0x1
    nvmlClocksThrottleReasonSwPowerCap = 0x4
    nvmlClocksThrottleReasonHwSlowdown = 0x8
    nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
    nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
    nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80
    # the same bits under the names NVML 12.2 introduced
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonSwThermalSlowdown = 0x20
    nvmlClocksEventReasonHwThermalSlowdown = 0x40
    nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80

    def __init__(self, gpus: list[FakeGpu] | None = None, driver: str = "550.54.15",
                 init_error: type[NVMLError] | None = None, missing: set[str] | None = None) -> None:
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.driver = driver
        self.init_error = init_error
        self.missing = set(missing or ())
        self.initialized = False
        self.calls: dict[str, int] = {}

    @classmethod
    def from_capture(cls, capture: Mapping[str, Any]) -> FakeNvml:
        """A fake that answers as the GPUs of a capture did (``tests/agents/data/nvml/*.json``).

        A call the capture saw fail with NotSupported makes that feature
        unsupported; a call whose function was missing from the bindings
        stays missing here.
        """
        system = capture["system"]
        gpus, missing = [], set()
        for calls in capture["gpus"]:
            def ok(key: str, default: Any = None, calls: Mapping[str, Any] = calls) -> Any:
                return calls.get(key, {}).get("ok", default)

            feature_keys = {
                "name": ["nvmlDeviceGetName"], "uuid": ["nvmlDeviceGetUUID"], "vbios": ["nvmlDeviceGetVbiosVersion"],
                "pci": ["nvmlDeviceGetPciInfo"], "temperature": ["nvmlDeviceGetTemperature(GPU)"],
                "ecc": [k for k in calls if k.startswith("nvmlDeviceGetTotalEccErrors(")],
                "retired_pages": [k for k in calls if k.startswith("nvmlDeviceGetRetiredPages(")],
                "remapped_rows": ["nvmlDeviceGetRemappedRows"],
                "throttle": ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"],
                "fields": [k for k in calls if k.startswith("nvmlDeviceGetFieldValues(")],
                "repair": ["nvmlDeviceGetRepairStatus"],
                "power": ["nvmlDeviceGetPowerUsage"], "power_limit": ["nvmlDeviceGetEnforcedPowerLimit"],
            }
            unsupported = {f for f, keys in feature_keys.items()
                           if any(calls.get(k, {}).get("error") == "NVMLError_NotSupported" for k in keys)}
            missing |= {k.split("(")[0] for k, v in calls.items() if v.get("missing")}
            thresholds = {}
            for k, v in calls.items():
                if k.startswith("nvmlDeviceGetTemperatureThreshold(") and "ok" in v:
                    thresholds[int(k[k.index("(") + 1:-1])] = int(v["ok"])
            rows = ok("nvmlDeviceGetRemappedRows", [0, 0, 0, 0])
            answered, errors = _captured_fields(calls)
            repair = ok("nvmlDeviceGetRepairStatus", [0, 0])
            gpus.append(FakeGpu(
                name=ok("nvmlDeviceGetName", ""), uuid=ok("nvmlDeviceGetUUID", ""), vbios=ok("nvmlDeviceGetVbiosVersion", ""),
                bus_id=(ok("nvmlDeviceGetPciInfo") or {}).get("busId", ""),
                temperature_c=int(ok("nvmlDeviceGetTemperature(GPU)", 0)),
                slowdown_c=thresholds.pop(1, 0), thresholds=thresholds,
                ecc_corrected=int(ok("nvmlDeviceGetTotalEccErrors(CORRECTED,VOLATILE)", 0)),
                ecc_uncorrected=int(ok("nvmlDeviceGetTotalEccErrors(UNCORRECTED,VOLATILE)", 0)),
                retired_sbe=len(ok("nvmlDeviceGetRetiredPages(MULTIPLE_SINGLE_BIT)", [])),
                retired_dbe=len(ok("nvmlDeviceGetRetiredPages(DOUBLE_BIT)", [])),
                remapped_corr=rows[0], remapped_unc=rows[1], remap_pending=bool(rows[2]), remap_failure=bool(rows[3]),
                throttle=int(ok("nvmlDeviceGetCurrentClocksEventReasons", ok("nvmlDeviceGetCurrentClocksThrottleReasons", 0))),
                memory_temperature_c=int(answered.pop(82, 0)), throttle_ns=answered, field_errors=errors,
                channel_repair_pending=bool(repair[0]), tpc_repair_pending=bool(repair[1]),
                power_mw=int(ok("nvmlDeviceGetPowerUsage", 0)), power_limit_mw=int(ok("nvmlDeviceGetEnforcedPowerLimit", 0)),
                unsupported=unsupported,
            ))
        return cls(gpus, driver=system["nvmlSystemGetDriverVersion"]["ok"], missing=missing)

    def _need(self, fn: str) -> None:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if fn in self.missing:
            raise NVMLError_FunctionNotFound()

    def _gpu(self, handle: int, feature: str) -> FakeGpu:
        g = self.gpus[handle]
        if g.lost:
            raise NVMLError_GpuIsLost()
        if feature in g.unsupported:
            raise NVMLError_NotSupported()
        return g

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.initialized = False

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "name").name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "uuid").uuid

    def nvmlDeviceGetVbiosVersion(self, h: int) -> str:
        return self._gpu(h, "vbios").vbios

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._gpu(h, "pci").bus_id.encode())

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        self._need("nvmlDeviceGetTemperature")
        return self._gpu(h, "temperature").temperature_c

    def nvmlDeviceGetTemperatureV(self, h: int, sensor: int) -> int:
        self._need("nvmlDeviceGetTemperatureV")
        return self._gpu(h, "temperature").temperature_c

    def nvmlDeviceGetTemperatureThreshold(self, h: int, which: int) -> int:
        g = self._gpu(h, "temperature")
        if which == self.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN and g.slowdown_c:
            return g.slowdown_c
        if which in g.thresholds:
            return g.thresholds[which]
        raise NVMLError_NotSupported() if 0 <= which < 8 else NVMLError_InvalidArgument()

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        g = self._gpu(h, "ecc")
        return g.ecc_corrected if error_type == self.NVML_MEMORY_ERROR_TYPE_CORRECTED else g.ecc_uncorrected

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        g = self._gpu(h, "retired_pages")
        n = g.retired_sbe if cause == self.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS else g.retired_dbe
        return [0x1000 * (i + 1) for i in range(n)]

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        g = self._gpu(h, "remapped_rows")
        return g.remapped_corr, g.remapped_unc, int(g.remap_pending), int(g.remap_failure)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        self._need("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._gpu(h, "throttle").throttle

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._need("nvmlDeviceGetCurrentClocksEventReasons")
        return self._gpu(h, "throttle").throttle

    def nvmlDeviceGetFieldValues(self, h: int, field_ids: list[int]) -> list[SimpleNamespace]:
        """Like the real one: the call succeeds and each field carries its own nvmlReturn."""
        self._need("nvmlDeviceGetFieldValues")
        g = self._gpu(h, "fields")
        out = []
        for fid in field_ids:
            value = g.memory_temperature_c if fid == 82 else g.throttle_ns.get(fid)
            ret = 0 if value is not None and fid not in g.field_errors else g.field_errors.get(fid, 3)
            vt = FIELD_VALUE_TYPES.get(fid, 3)
            union = SimpleNamespace(**dict.fromkeys(_VALUE_MEMBER, 0))
            if ret == 0:  # the integer members of the real union share their bytes
                union.__dict__.update(dict.fromkeys(_VALUE_MEMBER[1:], value))
            out.append(SimpleNamespace(fieldId=fid, scopeId=0, timestamp=0, latencyUsec=0, valueType=vt,
                                       nvmlReturn=ret, value=union))
        return out

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._need("nvmlDeviceGetPowerUsage")
        return self._gpu(h, "power").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        self._need("nvmlDeviceGetEnforcedPowerLimit")
        return self._gpu(h, "power_limit").power_limit_mw

    def nvmlDeviceGetRepairStatus(self, h: int) -> list[int]:
        self._need("nvmlDeviceGetRepairStatus")
        g = self._gpu(h, "repair")
        return [int(g.channel_repair_pending), int(g.tpc_repair_pending)]


def _captured_fields(calls: Mapping[str, Any]) -> tuple[dict[int, int], dict[int, int]]:
    """A capture's field values -> (field id -> value, field id -> nvmlReturn of a refused field)."""
    answered: dict[int, int] = {}
    errors: dict[int, int] = {}
    for key, v in calls.items():
        if not key.startswith("nvmlDeviceGetFieldValues(") or "ok" not in v:
            continue
        for f in v["ok"]:
            if f["nvmlReturn"]:
                errors[f["fieldId"]] = f["nvmlReturn"]
            else:
                answered[f["fieldId"]] = f["value"][_VALUE_MEMBER[f["valueType"]]]
    return answered, errors


_FIELD_IDS = (82, 74, 75, 76, 269, 270, 271)

#: What :func:`capture` asks each GPU: the calls the agent and the inventory
#: make, plus neighbours that tell why one is unsupported (ECC mode, MIG,
#: virtualization). ``(label, function, args)``; labels are the capture's keys.
_GPU_CALLS: tuple[tuple[str, str, tuple[Any, ...]], ...] = (
    *((fn, fn, ()) for fn in (
        "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetSerial", "nvmlDeviceGetVbiosVersion",
        "nvmlDeviceGetBrand", "nvmlDeviceGetArchitecture", "nvmlDeviceGetBoardPartNumber",
        "nvmlDeviceGetVirtualizationMode", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetEccMode",
        "nvmlDeviceGetRemappedRows", "nvmlDeviceGetRowRemapperHistogram", "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetSupportedClocksThrottleReasons", "nvmlDeviceGetSupportedClocksEventReasons",
        "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPerformanceState",
        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetInforomImageVersion", "nvmlDeviceGetMinorNumber",
        "nvmlDeviceGetGpuOperationMode", "nvmlDeviceGetMigMode", "nvmlDeviceGetPciInfo")),
    ("nvmlDeviceGetTemperature(GPU)", "nvmlDeviceGetTemperature", (0,)),
    ("nvmlDeviceGetTemperatureV(GPU)", "nvmlDeviceGetTemperatureV", (0,)),
    *((f"nvmlDeviceGetTemperatureThreshold({k})", "nvmlDeviceGetTemperatureThreshold", (k,)) for k in range(9)),
    *((f"nvmlDeviceGetTotalEccErrors({en},{cn})", "nvmlDeviceGetTotalEccErrors", (et, ct))
      for et, en in ((0, "CORRECTED"), (1, "UNCORRECTED")) for ct, cn in ((0, "VOLATILE"), (1, "AGGREGATE"))),
    ("nvmlDeviceGetRetiredPages(MULTIPLE_SINGLE_BIT)", "nvmlDeviceGetRetiredPages", (0,)),
    ("nvmlDeviceGetRetiredPages(DOUBLE_BIT)", "nvmlDeviceGetRetiredPages", (1,)),
    # HBM temperature and the clock-event reason duration counters (see H100_THROTTLE_NS)
    (f"nvmlDeviceGetFieldValues({','.join(map(str, _FIELD_IDS))})", "nvmlDeviceGetFieldValues", (list(_FIELD_IDS),)),
    *((f"nvmlDeviceGetViolationStatus({name})", "nvmlDeviceGetViolationStatus", (policy,))
      for policy, name in ((0, "POWER"), (1, "THERMAL"))),
    ("nvmlDeviceGetRepairStatus", "nvmlDeviceGetRepairStatus", ()),
)
_SYSTEM_CALLS = ("nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion",
                 "nvmlDeviceGetCount")


def _plain(value: Any) -> Any:
    """ctypes structs, arrays and bytes -> JSON-able values."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [_plain(v) for v in value]
    if hasattr(value, "_fields_"):
        return {f[0]: _plain(getattr(value, f[0])) for f in value._fields_}
    if isinstance(value, SimpleNamespace):  # this module's own PCI info
        return {k: _plain(v) for k, v in vars(value).items()}
    return value


def _answer(nvml: Any, fn: str, *args: Any) -> dict[str, Any]:
    f = getattr(nvml, fn, None)
    if f is None:
        return {"missing": True}
    try:
        return {"ok": _plain(f(*args))}
    except nvml.NVMLError as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    except (TypeError, ValueError, OSError) as exc:  # bindings that disagree with this library
        return {"exception": type(exc).__name__, "message": str(exc)}


def capture(nvml: Any) -> dict[str, Any]:
    """What a real NVML answers, in the format :meth:`FakeNvml.from_capture` replays.

    ``nvml`` must be initialised. UUIDs and serial numbers are zeroed: a
    capture is meant to be committed.
    """
    gpus = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        calls = {label: _answer(nvml, fn, h, *args) for label, fn, args in _GPU_CALLS}
        for key in ("nvmlDeviceGetUUID", "nvmlDeviceGetSerial"):
            if "ok" in calls[key]:
                calls[key]["ok"] = re.sub(r"[0-9a-fA-F]", "0", str(calls[key]["ok"]))
        gpus.append(calls)
    return {"system": {fn: _answer(nvml, fn) for fn in _SYSTEM_CALLS}, "gpus": gpus}



__all__ = ["H100_THRESHOLDS", "H100_THROTTLE_NS", "FakeGpu", "FakeNvml", "NVMLError", "NVMLError_FunctionNotFound",
           "NVMLError_GpuIsLost", "NVMLError_InvalidArgument", "NVMLError_LibraryNotFound", "NVMLError_NotSupported", "capture"]
