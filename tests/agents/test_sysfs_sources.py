"""EDAC, hwmon and DMI read from fixture trees under tests/agents/data/sysfs/."""

from __future__ import annotations

import pytest

from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.inventory import InventorySource
from fleetepi.agents.telemetry.edac import EdacSource
from fleetepi.agents.telemetry.hwmon import HwmonSource
from fleetepi.agents.telemetry.thermal import Thresholds


def write(path, value):
    path.write_text(f"{value}\n")


class TestEdac:
    def test_deltas_per_dimm_and_controller(self, sysfs, validate):
        mc = sysfs / "edac" / "mc"
        src = EdacSource("h", root=str(mc))
        assert list(src.poll(0)) == []  # baseline only
        write(mc / "mc0" / "dimm0" / "dimm_ce_count", 15)
        write(mc / "mc0" / "dimm1" / "dimm_ue_count", 1)
        write(mc / "mc1" / "ce_count", 4)
        events = {(e.kind, e.device): e for e in src.poll(60_000)}
        assert {k: e.count for k, e in events.items()} == {
            ("ecc_corrected", "mc0/CPU_SrcID#0_MC#0_Chan#0_DIMM#0"): 5,
            ("ecc_uncorrected", "mc0/CPU_SrcID#0_MC#0_Chan#1_DIMM#0"): 1,
            ("ecc_corrected", "mc1"): 4,
        }
        assert events[("ecc_uncorrected", "mc0/CPU_SrcID#0_MC#0_Chan#1_DIMM#0")].severity == "critical"
        for e in events.values():
            validate(e)
        assert list(src.poll(120_000)) == []  # nothing new: no event

    def test_counter_reset_is_not_negative(self, sysfs):
        mc = sysfs / "edac" / "mc"
        src = EdacSource("h", root=str(mc), per_dimm=False)
        src.poll(0)
        write(mc / "mc0" / "ce_count", 3)  # 12 -> 3: reset_counters was written
        (e,) = src.poll(1000)
        assert (e.device, e.count) == ("mc0", 3)

    def test_no_edac_is_said_clearly(self, tmp_path):
        with pytest.raises(SourceUnavailable, match="no EDAC driver loaded"):
            EdacSource("h", root=str(tmp_path / "missing"))
        (tmp_path / "mc").mkdir()
        with pytest.raises(SourceUnavailable, match="no memory controllers"):
            EdacSource("h", root=str(tmp_path / "mc"))


class TestHwmon:
    def test_crossings_and_samples(self, sysfs, validate):
        hw = sysfs / "hwmon"
        src = HwmonSource("h", root=str(hw), sample_interval_s=300)
        first = {e.device: e for e in src.poll(0)}
        assert set(first) == {"coretemp/Package id 0", "coretemp/Core 0", "nvme/Composite", "acpitz/temp1"}
        assert first["nvme/Composite"].value == 38.9 and first["nvme/Composite"].message == "temperature sample"
        assert list(src.poll(10_000)) == []  # samples are slow
        write(hw / "hwmon0" / "temp1_input", 81000)  # above temp1_max (80 C)
        (warn,) = src.poll(20_000)
        assert (warn.device, warn.severity, warn.value) == ("coretemp/Package id 0", "warning", 81.0)
        validate(warn)
        write(hw / "hwmon0" / "temp1_input", 100500)  # above temp1_crit
        (crit,) = src.poll(30_000)
        assert crit.severity == "critical"
        write(hw / "hwmon0" / "temp1_input", 99000)  # within hysteresis: still critical, no event
        assert list(src.poll(40_000)) == []
        write(hw / "hwmon0" / "temp1_input", 60000)
        (back,) = src.poll(50_000)
        assert back.severity == "info" and "back to normal" in back.message
        samples = list(src.poll(400_000))
        assert len(samples) == 4

    def test_config_thresholds_override_sysfs(self, sysfs):
        src = HwmonSource("h", root=str(sysfs / "hwmon"), warn_c=40, crit_c=None)
        events = {e.device: e for e in src.poll(0)}
        assert events["coretemp/Package id 0"].severity == "warning"  # 45 C >= 40 C
        assert events["acpitz/temp1"].message == "temperature sample"

    def test_unreadable_sensor_is_skipped(self, sysfs):
        src = HwmonSource("h", root=str(sysfs / "hwmon"), sample_interval_s=1)
        (sysfs / "hwmon" / "hwmon2" / "temp1_input").unlink()
        assert {e.device for e in src.poll(0)} == {"coretemp/Package id 0", "coretemp/Core 0", "nvme/Composite"}

    def test_no_sensors(self, tmp_path):
        with pytest.raises(SourceUnavailable, match="no hwmon"):
            HwmonSource("h", root=str(tmp_path / "none"))
        with pytest.raises(SourceUnavailable, match="no hwmon temperature sensors"):
            HwmonSource("h", root=str(tmp_path))

    def test_hysteresis_levels(self):
        t = Thresholds(warn_c=80, crit_c=90, hysteresis_c=2)
        assert t.level(79.9, "normal") == "normal"
        assert t.level(80, "normal") == "warning"
        assert t.level(78.5, "warning") == "warning"
        assert t.level(77.9, "warning") == "normal"
        assert t.level(88.5, "critical") == "critical"


class TestInventory:
    def test_dmi_cpu_kernel_and_labels(self, sysfs, validate):
        src = InventorySource("gpu-a-001", labels={"rack": "r17", "datacenter": "dc1"}, dmi_root=str(sysfs / "dmi" / "id"),
                              cpuinfo=str(sysfs / "cpuinfo"), nvml=None, kernel="6.8.0-45-generic")
        (host,) = src.poll(0)
        validate(host)
        assert host.attributes == {
            "bios": "2.4", "bios_date": "03/14/2024", "bios_vendor": "American Megatrends International, LLC.",
            "board": "X13DEG-OAD", "board_vendor": "Supermicro", "board_version": "1.01",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_sockets": "2", "microcode": "0x2b0004d0",
            "datacenter": "dc1", "kernel": "6.8.0-45-generic", "product": "SYS-821GE-TNHR", "rack": "r17",
            "vendor": "Supermicro",
        }  # no serial number; the "0123456789" placeholder version is dropped

    def test_sent_again_only_on_change(self, sysfs):
        src = InventorySource("h", dmi_root=str(sysfs / "dmi" / "id"), cpuinfo=str(sysfs / "cpuinfo"), nvml=None, kernel="6.8")
        assert len(list(src.poll(0))) == 1
        assert list(src.poll(300_000)) == []
        write(sysfs / "dmi" / "id" / "bios_version", "2.5")  # BIOS upgrade
        (again,) = src.poll(600_000)
        assert again.attributes["bios"] == "2.5"

    def test_gpu_attributes_from_nvml(self, sysfs):
        from fleetepi.agents.telemetry.fakenvml import FakeGpu, FakeNvml

        nvml = FakeNvml([FakeGpu(), FakeGpu(bus_id="00000000:2A:00.0")], driver="550.54.15")
        src = InventorySource("h", dmi_root=str(sysfs / "missing"), cpuinfo=str(sysfs / "missing"), nvml=nvml, kernel="6.8")
        (host,) = src.poll(0)
        assert host.attributes == {"driver": "550.54.15", "gpu_count": "2", "gpu_family": "H100", "gpu_model": "H100 80GB HBM3",
                                   "kernel": "6.8", "vbios": "96.00.89.00.01"}
