"""NVML source against the shipped FakeNvml, and the real pynvml path on a host without a GPU."""

from __future__ import annotations

import pytest

from fleetepi.agents.exceptions import NvmlUnavailable, SourceUnavailable
from fleetepi.agents.telemetry import fakenvml
from fleetepi.agents.telemetry.fakenvml import FakeGpu, FakeNvml
from fleetepi.agents.telemetry.nvml import NvmlSource, start


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
    assert [(e.kind, e.device, e.value) for e in src.poll(0)] == [
        ("thermal", "0000:18:00", 50.0), ("thermal", "0000:18:00/hbm", 37.0),  # GPU, then HBM sample
        ("power", "0000:18:00", 71.2)]  # the idle H100's captured draw, 71156 mW
    fake.gpus[0].temperature_c = 88
    fake.gpus[0].throttle = fake.nvmlClocksThrottleReasonHwThermalSlowdown | fake.nvmlClocksThrottleReasonGpuIdle
    got = {e.message: e for e in src.poll(30_000)}
    assert got["temperature above critical threshold (88 C, threshold 87 C)"].severity == "critical"
    assert got["clocks throttled: hw_thermal_slowdown"].value is None  # a notice: counted whatever the temperature
    assert len(got) == 2  # GPU idle is not worth an event
    assert [e.message for e in src.poll(60_000)] == []  # same reasons still set: no repeat


def test_unsupported_features_are_skipped_per_gpu():
    off = {"ecc", "retired_pages", "remapped_rows", "throttle", "fields", "repair"}
    fake = FakeNvml([FakeGpu(unsupported=off)])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    assert src.gpus[0].unsupported == off


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


@pytest.mark.parametrize(("capture", "missing", "temperature_fn", "unsupported"), [
    ("h100-capture.json", set(), "nvmlDeviceGetTemperatureV", {"retired_pages"}),
    # old bindings: no TemperatureV (falls back), no RepairStatus (off)
    ("h100-capture-nvml-py12.json", {"nvmlDeviceGetTemperatureV", "nvmlDeviceGetRepairStatus"}, "nvmlDeviceGetTemperature",
     {"retired_pages", "repair"}),
])
def test_real_h100_capture_through_the_agent(data_dir, tmp_path, capture, missing, temperature_fn, unsupported):
    """The whole agent (config -> sources -> JSON lines) against what a real H100 answered."""
    import json

    from fleetepi.agents.agent import Agent
    from fleetepi.agents.config import parse_config
    from fleetepi.agents.publish import JsonlPublisher

    cap = h100(data_dir, capture)
    fake = FakeNvml.from_capture(cap)
    assert fake.missing == missing
    cfg = parse_config({"host": "gpu-h100-001", "sources": [
        {"kind": "inventory", "dmi_root": str(tmp_path / "no-dmi"), "cpuinfo": str(tmp_path / "no-cpuinfo"),
         "kernel": "6.18.44-fc-v657-gpu"},
        {"kind": "nvml"},
    ]})
    out = tmp_path / "events.jsonl"
    agent = Agent(cfg, JsonlPublisher(out), nvml=fake)
    agent.run_once()
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert docs[0]["schema"] == "fleetepi.host/v1"
    assert docs[0]["attributes"] == {"driver": "580.159.04", "gpu_count": "1", "gpu_family": "H100",
                                     "gpu_model": "H100 80GB HBM3", "kernel": "6.18.44-fc-v657-gpu",
                                     "vbios": "96.00.DA.00.0C"}
    # an idle, healthy H100: one GPU and one HBM temperature sample and one power sample
    # (captured: 71156 mW against a 700000 mW limit); ECC, remap and throttle-time totals are
    # baselines, the GPU-idle clock reason is not worth an event
    temp = float(cap["gpus"][0]["nvmlDeviceGetTemperature(GPU)"]["ok"])
    watts = round(cap["gpus"][0]["nvmlDeviceGetPowerUsage"]["ok"] / 1000, 1)
    assert 60 < watts < 80 and cap["gpus"][0]["nvmlDeviceGetEnforcedPowerLimit"]["ok"] == 700_000
    assert [(d["kind"], d["device"], d.get("value"), d["message"]) for d in docs[1:]] == [
        ("thermal", "0000:00:06", temp, "temperature sample"), ("thermal", "0000:00:06/hbm", 37.0, "temperature sample"),
        ("power", "0000:00:06", watts, "power sample")]
    for d in docs:
        assert d["host"] == "gpu-h100-001"
    assert fake.calls[temperature_fn] >= 1
    nvml = next(s.source for s in agent.slots if s.name == "nvml")
    (gpu,) = nvml.gpus
    assert gpu.unsupported == unsupported  # Hopper remaps rows instead of retiring pages
    assert gpu.unsupported_fields == set()  # HBM temperature and every throttle-time counter answered
    assert (gpu.thresholds.warn_c, gpu.thresholds.crit_c) == (84.0, 89.0)  # slowdown threshold 89 °C
    assert (gpu.mem_thresholds.warn_c, gpu.mem_thresholds.crit_c) == (90.0, 95.0)  # memory max 95 °C
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
    assert got["clocks throttled: hw_thermal_slowdown"].value is None


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
    used = {fn for fn, n in fake.calls.items() if n == 2 and ("Temperature" in fn or "Clocks" in fn)}
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
    (key,) = [k for k in cap if k.startswith("nvmlDeviceGetFieldValues(")]
    ids = [int(i) for i in key[key.index("(") + 1:-1].split(",")]
    assert [(f.fieldId, f.valueType, f.nvmlReturn, f.value.uiVal if f.valueType == 1 else f.value.ullVal)
            for f in fake.nvmlDeviceGetFieldValues(0, ids)] == [
        (f["fieldId"], f["valueType"], f["nvmlReturn"], f["value"]["uiVal" if f["valueType"] == 1 else "ullVal"])
        for f in cap[key]["ok"]]
    assert fake.nvmlDeviceGetRepairStatus(0) == cap["nvmlDeviceGetRepairStatus"]["ok"]


def test_gpu_model_names():
    from fleetepi.agents.inventory import gpu_family, gpu_model

    assert [(gpu_model(n), gpu_family(gpu_model(n))) for n in (
        "NVIDIA H100 80GB HBM3", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090",
    )] == [("H100 80GB HBM3", "H100"), ("A100-SXM4-80GB", "A100"), ("A100-SXM4-80GB", "A100"),
           ("GH200 480GB", "GH200"), ("GeForce RTX 4090", None)]


def test_capture_of_the_replayed_h100_gives_back_the_capture(data_dir):
    """capture() (what gpu-check.sh CAPTURE=... saves) and from_capture() are inverses on what the agent reads."""
    from fleetepi.agents.telemetry.fakenvml import capture

    real = h100(data_dir)
    again = capture(FakeNvml.from_capture(real))
    assert again["system"]["nvmlSystemGetDriverVersion"] == real["system"]["nvmlSystemGetDriverVersion"]
    keys = ["nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetVbiosVersion", "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperature(GPU)", "nvmlDeviceGetRepairStatus",
            "nvmlDeviceGetRetiredPages(DOUBLE_BIT)", "nvmlDeviceGetTotalEccErrors(UNCORRECTED,VOLATILE)",
            *(f"nvmlDeviceGetTemperatureThreshold({k})" for k in range(9))]
    assert {k: again["gpus"][0][k] for k in keys} == {k: real["gpus"][0][k] for k in keys}
    fv = "nvmlDeviceGetFieldValues(82,74,75,76,269,270,271)"

    def typed(f):
        return f["fieldId"], f["valueType"], f["nvmlReturn"], f["value"]["uiVal" if f["valueType"] == 1 else "ullVal"]

    assert [typed(f) for f in again["gpus"][0][fv]["ok"]] == [typed(f) for f in real["gpus"][0][fv]["ok"]]
    assert again["gpus"][0]["nvmlDeviceGetPciInfo"]["ok"]["busId"] == "00000000:00:06.0"


# --- HBM temperature, throttle-time counters, repair pending -------------------------------------

def test_hbm_temperature_crossings_against_the_memory_max_threshold(data_dir, validate):
    """The H100's HBM: its own device name and level, thresholds from NVML_TEMPERATURE_THRESHOLD_MEM_MAX (95 °C)."""
    fake = FakeNvml.from_capture(h100(data_dir))
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    g = fake.gpus[0]
    g.memory_temperature_c = 91
    (warn,) = src.poll(1000)
    assert (warn.device, warn.message, warn.severity, warn.value) == (
        "0000:00:06/hbm", "temperature above warning threshold (91 C, threshold 90 C)", "warning", 91.0)
    g.memory_temperature_c = 96
    (crit,) = src.poll(2000)
    assert (crit.message, crit.severity) == ("temperature above critical threshold (96 C, threshold 95 C)", "critical")
    g.memory_temperature_c = 94  # within the 2 °C hysteresis: still critical, no flapping
    assert list(src.poll(3000)) == []
    g.memory_temperature_c = 60
    (back,) = src.poll(4000)
    assert (back.message, back.severity) == ("temperature back to normal from critical (60 C, threshold 95 C)", "info")
    for e in (warn, crit, back):
        validate(e)
    # the GPU's own sensor kept its level: nothing happened to it
    assert src.thermal._level["0000:00:06"] == "normal"


def test_hbm_thresholds_can_be_configured():
    src = NvmlSource("h", nvml=FakeNvml(), sample_interval_s=0, mem_temp_warn_c=80, mem_temp_crit_c=85)
    assert (src.gpus[0].mem_thresholds.warn_c, src.gpus[0].mem_thresholds.crit_c) == (80, 85)


def test_short_thermal_throttle_between_two_polls_is_not_missed(data_dir, validate):
    """A 200 ms HW thermal slowdown that ended before the next poll: the mask is back to idle,
    the duration counter (ns) remembers it. The SW power cap, on all the time under load, is no event."""
    fake = FakeNvml.from_capture(h100(data_dir))
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    g = fake.gpus[0]
    g.throttle_ns[270] += 200_000_000
    g.throttle_ns[74] += 29_000_000_000  # SW power cap
    (ev,) = src.poll(30_000)
    assert (ev.kind, ev.device, ev.message, ev.severity, ev.value) == (
        "thermal", "0000:00:06", "clocks throttled 200 ms since last poll: hw_thermal_slowdown", "warning", None)
    validate(ev)
    assert list(src.poll(60_000)) == []  # counters still: nothing
    g.throttle_ns[269] += 1_500_000_000
    g.throttle_ns[271] += 250_000
    assert sorted(e.message for e in src.poll(90_000)) == [
        "clocks throttled 0.25 ms since last poll: hw_power_brake",
        "clocks throttled 1500 ms since last poll: sw_thermal_slowdown"]
    g.throttle_ns[270] = 50_000_000  # driver reloaded: the counter restarted from 0
    assert [e.message for e in src.poll(120_000)] == ["clocks throttled 50 ms since last poll: hw_thermal_slowdown"]


def test_throttle_still_on_at_the_poll_is_said_once():
    """Mask bit and counter both show hw_thermal_slowdown: one event (with its duration), not two;
    hw_slowdown has no counter of its own and still comes from the mask."""
    fake = FakeNvml([FakeGpu(temperature_c=70)])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    src.poll(0)
    g = fake.gpus[0]
    g.throttle = fake.nvmlClocksEventReasonHwThermalSlowdown | fake.nvmlClocksEventReasonHwSlowdown
    g.throttle_ns[270] += 4_000_000_000
    assert sorted(e.message for e in src.poll(30_000)) == [
        "clocks throttled 4000 ms since last poll: hw_thermal_slowdown", "clocks throttled: hw_slowdown"]
    g.throttle_ns[270] += 30_000_000_000  # still throttling a poll later: the duration says for how long
    assert [e.message for e in src.poll(60_000)] == ["clocks throttled 30000 ms since last poll: hw_thermal_slowdown"]


def test_fields_a_driver_refuses_are_switched_off_and_the_thermal_policy_counter_stands_in():
    """A driver older than R555 knows neither reason counter (NotSupported / InvalidArgument per
    field, the call itself succeeds): they are not asked again, the thermal policy counter is read."""
    fake = FakeNvml([FakeGpu(field_errors={269: 3, 270: 2, 271: 3, 82: 3})])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    assert src.gpus[0].unsupported_fields == {82, 269, 270, 271}
    assert list(src.poll(1000)) == []  # thermal policy baseline
    fake.gpus[0].throttle_ns[75] += 300_000_000
    assert [e.message for e in src.poll(2000)] == ["clocks throttled 300 ms since last poll: thermal_policy"]
    assert src.gpus[0].unsupported == set()


def test_field_values_of_the_real_bindings():
    """field_values reads the real ctypes structs: the union member by value type, refusals per field."""
    pynvml = pytest.importorskip("pynvml")
    from fleetepi.agents.telemetry.nvml import field_values

    arr = (pynvml.c_nvmlFieldValue_t * 3)()
    arr[0].fieldId, arr[0].valueType, arr[0].value.uiVal = 82, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 51
    arr[1].fieldId, arr[1].valueType, arr[1].value.ullVal = 74, pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 20_310_505_568
    arr[2].fieldId, arr[2].nvmlReturn = 270, pynvml.NVML_ERROR_NOT_SUPPORTED
    assert field_values(arr) == {82: 51, 74: 20_310_505_568, 270: "error 3"}


def test_repair_pending_is_a_state_reported_once():
    fake = FakeNvml([FakeGpu(tpc_repair_pending=True)])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    (tpc,) = src.poll(0)
    assert (tpc.kind, tpc.message, tpc.severity, tpc.action) == (
        "other", "TPC repair pending: reset the GPU", "critical", "RESET_GPU")
    assert list(src.poll(1000)) == []
    fake.gpus[0].channel_repair_pending = True
    assert [e.message for e in src.poll(2000)] == ["memory channel repair pending: reset the GPU"]


def test_old_driver_without_repair_status_turns_it_off():
    fake = FakeNvml([FakeGpu(channel_repair_pending=True)], missing={"nvmlDeviceGetRepairStatus"})
    src = NvmlSource("h", nvml=fake, sample_interval_s=0)
    assert list(src.poll(0)) == []
    assert src.gpus[0].unsupported == {"repair"}


def test_real_h100_under_load_replayed(data_dir):
    """What the source saw every 0.5 s through 20 s of bf16 matmuls at 700 W on the H100:
    the SW power cap counter ran for 20.3 s, the thermal ones stayed 0, so only samples came out."""
    import json

    load = json.loads((data_dir / "nvml" / "h100-load.json").read_text())
    cal = load["calibration"]
    assert cal["d_field"]["74"] == cal["d_viol_power"][1] > 0  # field 74 and the violation status: same ns counter
    fake = FakeNvml.from_capture(h100(data_dir))
    src = NvmlSource("h", nvml=fake, sample_interval_s=5)
    g = fake.gpus[0]
    events = []
    for r in load["samples"]:
        g.temperature_c, g.memory_temperature_c, g.throttle = r["temp"], r["hbm"], int(r["reasons"], 16)
        g.throttle_ns = {int(k): v for k, v in r["fields"].items()}
        events += src.poll(int(r["t"] * 1000))
    assert {e.message for e in events if e.kind == "thermal"} == {"temperature sample"}
    hbm = [e.value for e in events if e.device == "0000:00:06/hbm"]
    assert hbm[0] == 37.0 and max(hbm) >= 55.0


def test_power_under_the_real_h100_load_crosses_the_limit_line_once(data_dir, validate):
    """Captured readings (h100-load.json: 71 W idle, 698-714 W against the 700 W limit under bf16 matmuls):
    one crossing of 95 % of the enforced limit, no flapping while the GPU sits on its cap, samples otherwise."""
    import json

    load = json.loads((data_dir / "nvml" / "h100-load.json").read_text())
    fake = FakeNvml.from_capture(h100(data_dir))
    assert (fake.gpus[0].power_mw, fake.gpus[0].power_limit_mw) == (71156, 700000)  # captured, idle
    src = NvmlSource("h", nvml=fake, sample_interval_s=0, power_sample_interval_s=10)
    g = fake.gpus[0]
    power = []
    for r in load["samples"]:
        g.temperature_c, g.memory_temperature_c, g.throttle = r["temp"], r["hbm"], int(r["reasons"], 16)
        g.throttle_ns = {int(k): v for k, v in r["fields"].items()}
        g.power_mw = int(r["power_w"] * 1000)
        power += [e for e in src.poll(int(r["t"] * 1000)) if e.kind == "power"]
    crossings = [e for e in power if e.message != "power sample"]
    peak = max(r["power_w"] for r in load["samples"])
    first_high = next(r for r in load["samples"] if r["power_w"] >= 665)
    assert [(e.severity, e.value, e.count) for e in crossings][:1] == [("warning", round(first_high["power_w"], 1), 1)]
    assert all(e.count == 0 for e in crossings[1:] if e.severity == "info")  # the fall is no crossing
    assert all(e.value is not None for e in power)  # readings in watts
    assert peak > 700 and len([e for e in crossings if e.severity == "warning"]) == 1
    for e in power:
        validate(e)


def test_power_limit_change_and_power_brake_are_power_events(validate):
    fake = FakeNvml([FakeGpu()])
    src = NvmlSource("h", nvml=fake, sample_interval_s=0, power_sample_interval_s=0)
    assert list(src.poll(0)) == []
    g = fake.gpus[0]
    g.power_limit_mw = 500_000  # a facility controller capped the GPU
    g.throttle = fake.nvmlClocksEventReasonHwPowerBrakeSlowdown
    got = {e.message: e for e in src.poll(30_000)}
    assert got["enforced power limit changed from 700 W to 500 W"].kind == "power"
    brake = got["clocks throttled: hw_power_brake"]
    assert (brake.kind, brake.value) == ("power", None)
    g.throttle_ns[271] += 40_000_000
    (timed,) = src.poll(60_000)
    assert (timed.kind, timed.message) == ("power", "clocks throttled 40 ms since last poll: hw_power_brake")
    for e in [*got.values(), timed]:
        validate(e)
    # a GPU without power readings: off for that GPU, nothing else changes
    off = NvmlSource("h", nvml=FakeNvml([FakeGpu(unsupported={"power"})]), sample_interval_s=0)
    assert list(off.poll(0)) == [] and off.gpus[0].unsupported == {"power"}
    # and the option to turn it off
    assert [e for e in NvmlSource("h", nvml=FakeNvml(), sample_interval_s=300, power=False).poll(0) if e.kind == "power"] == []
