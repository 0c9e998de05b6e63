"""NVML source against the shipped FakeNvml, and the real pynvml path on a host without a GPU."""

from __future__ import annotations

import pytest

from agents.exceptions import NvmlUnavailable, SourceUnavailable
from agents.telemetry import fakenvml
from agents.telemetry.fakenvml import FakeGpu, FakeNvml
from agents.telemetry.nvml import NvmlSource, start


def by(events):
    return {(e.kind, e.device, e.message): e for e in events}


def test_ecc_deltas_retired_pages_and_row_remapping(validate):
    fake = FakeNvml([FakeGpu(ecc_corrected=100, remapped_corr=1)])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []  # totals are baselines
    g = fake.gpus[0]
    g.ecc_corrected, g.ecc_uncorrected, g.retired_dbe, g.remapped_unc, g.remap_pending = 107, 1, 2, 1, True
    got = by(src.poll(30_000))
    dev = "0000:18:00"
    assert got[("ecc_corrected", dev, "NVML corrected ECC errors")].count == 7
    assert got[("ecc_uncorrected", dev, "NVML uncorrected ECC errors")].count == 1
    assert got[("ecc_uncorrected", dev, "page retired (double-bit ECC)")].count == 2
    assert got[("ecc_uncorrected", dev, "row remapped (uncorrectable error)")].count == 1
    assert got[("other", dev, "row remapping pending: reset the GPU")].action == "RESET_GPU"
    assert len(got) == 5
    for e in got.values():
        validate(e)
    g.ecc_corrected = 3  # driver reloaded: volatile counters restart
    (reset,) = src.poll(60_000)
    assert reset.count == 3


def test_temperature_thresholds_from_the_gpu_and_throttle_reasons():
    fake = FakeNvml([FakeGpu(temperature_c=50, slowdown_c=87)])
    src = NvmlSource("h", nvml=fake, sample_interval_s=300)
    (sample,) = src.poll(0)
    assert (sample.kind, sample.value) == ("thermal", 50.0)
    fake.gpus[0].temperature_c = 88
    fake.gpus[0].throttle = fake.nvmlClocksThrottleReasonHwThermalSlowdown | fake.nvmlClocksThrottleReasonGpuIdle
    got = {e.message: e for e in src.poll(30_000)}
    assert got["temperature above critical threshold (88 C, threshold 87 C)"].severity == "critical"
    assert got["clocks throttled: hw_thermal_slowdown"].value == 88.0
    assert len(got) == 2  # GPU idle is not worth an event
    assert [e.message for e in src.poll(60_000)] == []  # same reasons still set: no repeat


def test_unsupported_features_are_skipped_per_gpu():
    fake = FakeNvml([FakeGpu(unsupported={"ecc", "retired_pages", "remapped_rows", "throttle"})])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    assert src.gpus[0].unsupported == {"ecc", "retired_pages", "remapped_rows", "throttle"}


def test_lost_gpu_is_an_xid79_event_once():
    fake = FakeNvml([FakeGpu(), FakeGpu(bus_id="00000000:CB:00.0")])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    src.poll(0)
    fake.gpus[1].lost = True
    (lost,) = src.poll(1000)
    assert (lost.kind, lost.code, lost.device, lost.severity) == ("xid", 79, "0000:cb:00", "critical")
    assert list(src.poll(2000)) == []


@pytest.mark.parametrize(("error", "why"), [
    (fakenvml.NVMLError_LibraryNotFound, "libnvidia-ml.so not found"),
    (fakenvml.NVMLError_DriverNotLoaded, "driver not loaded"),
    (fakenvml.NVMLError_NoPermission, "no permission"),
])
def test_no_gpu_reasons(error, why):
    with pytest.raises(NvmlUnavailable, match=why):
        NvmlSource("h", nvml=FakeNvml(init_error=error))


def test_zero_gpus():
    with pytest.raises(SourceUnavailable, match="sees no GPU"):
        NvmlSource("h", nvml=FakeNvml(gpus=[]))


def test_real_pynvml_without_driver_is_unavailable_not_a_crash():
    """The real code path: pynvml imported lazily, NVMLError_LibraryNotFound translated."""
    pynvml = pytest.importorskip("pynvml")
    try:
        nvml = start(None)
    except NvmlUnavailable as exc:
        assert "libnvidia-ml.so not found" in str(exc) or "driver" in str(exc)
        with pytest.raises(pynvml.NVMLError_LibraryNotFound):
            pynvml.nvmlInit()  # the error we translated is the real library's
        return
    nvml.nvmlShutdown()
    pytest.skip("this host has a working NVIDIA driver; scripts/gpu-check.sh covers it")
