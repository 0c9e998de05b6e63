"""A fake NVML module for tests and demos on hosts without a GPU.

It has the names of ``pynvml`` that the agent uses, with the same constant
values and error classes, and GPUs whose counters a test changes between
polls (``fake.gpus[0].ecc_corrected += 3``). Shipped in the package, like
httpx's ``MockTransport``, so other projects can test against it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    def __init__(self, message: str = "") -> None:
        super().__init__(message or type(self).__name__)


class NVMLError_LibraryNotFound(NVMLError): ...
class NVMLError_DriverNotLoaded(NVMLError): ...
class NVMLError_NoPermission(NVMLError): ...
class NVMLError_NotSupported(NVMLError): ...
class NVMLError_GpuIsLost(NVMLError): ...
class NVMLError_Unknown(NVMLError): ...


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    bus_id: str = "00000000:18:00.0"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    vbios: str = "96.00.89.00.01"
    temperature_c: int = 40
    slowdown_c: int = 87
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    retired_sbe: int = 0
    retired_dbe: int = 0
    remapped_corr: int = 0
    remapped_unc: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    throttle: int = 0
    lost: bool = False
    unsupported: set[str] = field(default_factory=set)


class FakeNvml:
    """Stands in for the ``pynvml`` module.

    :param gpus: the GPUs it reports.
    :param driver: driver version string.
    :param init_error: an NVMLError subclass ``nvmlInit`` raises (e.g. no driver).
    """

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    nvmlClocksThrottleReasonGpuIdle = 0x1
    nvmlClocksThrottleReasonSwPowerCap = 0x4
    nvmlClocksThrottleReasonHwSlowdown = 0x8
    nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
    nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
    nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80

    def __init__(self, gpus: list[FakeGpu] | None = None, driver: str = "550.54.15",
                 init_error: type[NVMLError] | None = None) -> None:
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.driver = driver
        self.init_error = init_error
        self.initialized = False

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
        return self._gpu(h, "temperature").temperature_c

    def nvmlDeviceGetTemperatureThreshold(self, h: int, which: int) -> int:
        return self._gpu(h, "temperature").slowdown_c

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
        return self._gpu(h, "throttle").throttle


__all__ = ["FakeGpu", "FakeNvml", "NVMLError", "NVMLError_GpuIsLost", "NVMLError_LibraryNotFound",
           "NVMLError_NotSupported"]
