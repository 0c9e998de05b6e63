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


# --- Replays of a real H100 (tests/agents/data/nvml/h100-capture.json) -----------------------------

def h100(data_dir, name="h100-capture.json"):
    import json

    return json.loads((data_dir / "nvml" / name).read_text())


@pytest.mark.parametrize(("capture", "missing", "temperature_fn"), [
    ("h100-capture.json", set(), "nvmlDeviceGetTemperatureV"),
    ("h100-capture-nvml-py12.json", {"nvmlDeviceGetTemperatureV"}, "nvmlDeviceGetTemperature"),  # old bindings
])
def test_real_h100_capture_through_the_agent(data_dir, tmp_path, capture, missing, temperature_fn):
    """The whole agent (config -> sources -> JSON lines) against what a real H100 answered."""
    import json

    from agents.agent import Agent
    from agents.config import parse_config
    from agents.publish import JsonlPublisher

    cap = h100(data_dir, capture)
    fake = FakeNvml.from_capture(cap)
    assert fake.missing == missing
    cfg = parse_config({"host": "gpu-h100-001", "sources": [
        {"kind": "inventory", "dmi_root": str(tmp_path / "no-dmi"), "cpuinfo": str(tmp_path / "no-cpuinfo"),
         "nvml": fake, "kernel": "6.18.44-fc-v657-gpu"},
        {"kind": "nvml", "nvml": fake},
    ]})
    out = tmp_path / "events.jsonl"
    agent = Agent(cfg, JsonlPublisher(out))
    agent.run_once()
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert docs[0]["schema"] == "fleetepi.host/v1"
    assert docs[0]["attributes"] == {"driver": "580.159.04", "gpu_count": "1", "gpu_family": "H100",
                                     "gpu_model": "H100 80GB HBM3", "kernel": "6.18.44-fc-v657-gpu",
                                     "vbios": "96.00.DA.00.0C"}
    # an idle, healthy H100: one temperature sample; ECC and remap totals are baselines,
    # the GPU-idle clock reason is not worth an event
    temp = float(cap["gpus"][0]["nvmlDeviceGetTemperature(GPU)"]["ok"])
    assert [(d["kind"], d["device"], d["value"], d["message"]) for d in docs[1:]] == [
        ("thermal", "0000:00:06", temp, "temperature sample")]
    for d in docs:
        assert d["host"] == "gpu-h100-001"
    assert fake.calls[temperature_fn] >= 1
    nvml = next(s.source for s in agent.slots if s.name == "nvml")
    (gpu,) = nvml.gpus
    assert gpu.unsupported == {"retired_pages"}  # Hopper remaps rows instead of retiring pages
    assert (gpu.thresholds.warn_c, gpu.thresholds.crit_c) == (84.0, 89.0)  # slowdown threshold 89 °C
    assert gpu.throttle == 0x1  # GPU idle


def test_real_h100_capture_then_memory_errors(data_dir, validate):
    """On the replayed H100: a row remap that needs a reset, and ECC growth, become events."""
    fake = FakeNvml.from_capture(h100(data_dir))
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    g = fake.gpus[0]
    g.ecc_corrected, g.ecc_uncorrected, g.remapped_unc, g.remap_pending = 12, 1, 1, True
    got = by(src.poll(30_000))
    dev = "0000:00:06"
    assert got[("ecc_corrected", dev, "NVML corrected ECC errors")].count == 12
    assert got[("ecc_uncorrected", dev, "row remapped (uncorrectable error)")].severity == "critical"
    assert got[("other", dev, "row remapping pending: reset the GPU")].action == "RESET_GPU"
    assert len(got) == 4
    for e in got.values():
        validate(e)
    g.temperature_c, g.throttle = 90, fake.nvmlClocksEventReasonHwThermalSlowdown
    got = {e.message: e for e in src.poll(60_000)}
    assert got["temperature above critical threshold (90 C, threshold 89 C)"].severity == "critical"
    assert got["clocks throttled: hw_thermal_slowdown"].value == 90.0


def test_remap_pending_before_the_agent_started_is_reported():
    """A pending remap is a state that still needs its reset, not a counter to baseline."""
    fake = FakeNvml([FakeGpu(remap_pending=True)])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    (pending,) = src.poll(0)
    assert (pending.message, pending.action) == ("row remapping pending: reset the GPU", "RESET_GPU")
    assert list(src.poll(1000)) == []  # still pending: said once
    fake.gpus[0].remap_pending = False  # GPU reset
    assert list(src.poll(2000)) == []
    fake.gpus[0].remap_pending = True
    assert [e.action for e in src.poll(3000)] == ["RESET_GPU"]


@pytest.mark.parametrize("missing", [
    {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV"},  # new bindings, old driver
    set(),
])
def test_old_driver_without_the_new_nvml_functions_falls_back(missing):
    """nvidia-ml-py 12.2+ calls nvmlDeviceGetCurrentClocksEventReasons; a driver without it
    raises NVMLError_FunctionNotFound, and throttling must not go silently dark."""
    fake = FakeNvml([FakeGpu(temperature_c=50, throttle=0)], missing=missing)
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    src.poll(0)
    fake.gpus[0].throttle = fake.nvmlClocksThrottleReasonHwSlowdown
    assert [e.message for e in src.poll(1000)] == ["clocks throttled: hw_slowdown"]
    assert src.gpus[0].unsupported == set()
    old = {"nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetTemperature"}
    used = {fn for fn, n in fake.calls.items() if n == 2}
    assert used == (old if missing else {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV"})


def test_old_bindings_with_only_throttle_names():
    """nvidia-ml-py from before the CUDA 12.2 rename has neither the Event function nor the Event constants."""
    class OldBindings(FakeNvml):
        def __getattribute__(self, name: str):
            if "ClocksEventReason" in name:
                raise AttributeError(name)
            return super().__getattribute__(name)

    fake = OldBindings([FakeGpu(throttle=0)])
    assert not hasattr(fake, "nvmlDeviceGetCurrentClocksEventReasons")
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    src.poll(0)
    fake.gpus[0].throttle = fake.nvmlClocksThrottleReasonHwPowerBrakeSlowdown
    assert [e.message for e in src.poll(1000)] == ["clocks throttled: hw_power_brake"]


def test_fake_answers_like_the_real_h100(data_dir):
    """The defaults of FakeNvml/FakeGpu are the H100's answers, errors included."""
    cap = h100(data_dir)["gpus"][0]
    fake = FakeNvml()
    for k in range(9):
        want = cap[f"nvmlDeviceGetTemperatureThreshold({k})"]
        try:
            got = {"ok": fake.nvmlDeviceGetTemperatureThreshold(0, k)}
        except fakenvml.NVMLError as exc:
            got = {"error": type(exc).__name__, "message": str(exc)}
        assert got == want, k
    with pytest.raises(fakenvml.NVMLError_NotSupported, match="^Not Supported$"):
        FakeNvml([FakeGpu(unsupported={"retired_pages"})]).nvmlDeviceGetRetiredPages(0, 0)
    assert fake.nvmlDeviceGetCurrentClocksEventReasons(0) == cap["nvmlDeviceGetCurrentClocksEventReasons"]["ok"]


def test_gpu_model_names():
    from agents.inventory import gpu_family, gpu_model

    assert [(gpu_model(n), gpu_family(gpu_model(n))) for n in (
        "NVIDIA H100 80GB HBM3", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090",
    )] == [("H100 80GB HBM3", "H100"), ("A100-SXM4-80GB", "A100"), ("A100-SXM4-80GB", "A100"),
           ("GH200 480GB", "GH200"), ("GeForce RTX 4090", None)]


def test_capture_of_the_replayed_h100_gives_back_the_capture(data_dir):
    """capture() (what gpu-check.sh CAPTURE=... saves) and from_capture() are inverses on what the agent reads."""
    from agents.telemetry.fakenvml import capture

    real = h100(data_dir)
    again = capture(FakeNvml.from_capture(real))
    assert again["system"]["nvmlSystemGetDriverVersion"] == real["system"]["nvmlSystemGetDriverVersion"]
    keys = ["nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetVbiosVersion", "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperature(GPU)",
            "nvmlDeviceGetRetiredPages(DOUBLE_BIT)", "nvmlDeviceGetTotalEccErrors(UNCORRECTED,VOLATILE)",
            *(f"nvmlDeviceGetTemperatureThreshold({k})" for k in range(9))]
    assert {k: again["gpus"][0][k] for k in keys} == {k: real["gpus"][0][k] for k in keys}
    assert again["gpus"][0]["nvmlDeviceGetPciInfo"]["ok"]["busId"] == "00000000:00:06.0"
