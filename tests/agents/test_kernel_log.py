"""Every real log line in tests/agents/data/ gets an outcome, and the interesting ones the right one."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fleetepi.agents.exceptions import RuleFileError
from fleetepi.agents.telemetry.kmsg import LogFileSource, to_crash, to_telemetry
from fleetepi.agents.telemetry.logparse import CrashLine, KernelLogParser, Parsed, Rejected, strip_prefix
from fleetepi.agents.telemetry.rules import load_rules, reasons
from fleetepi.agents.telemetry.xid import RULES_DIR, load_catalog, normalize_pci
from fleetepi.contract import Crash, ts_from_ms
from fleetepi.detectors.host_spike import odd_shape

DATA = Path(__file__).parent / "data"
LOG_FILES = ("xid.txt", "ecc.txt", "misc.txt", "nccl.txt", "oom.txt")


def real_lines(name: str) -> list[tuple[int, str, str]]:
    """(line number, attribution, log line) of one shared-data file (``SOURCE<TAB>LINE``)."""
    out = []
    for i, row in enumerate((DATA / name).read_text(encoding="utf-8").splitlines(), 1):
        source, _, line = row.partition("\t")
        assert source, f"{name}:{i} lost its attribution column"
        out.append((i, source, line))
    return out


def outcomes(name: str) -> dict[int, Parsed | Rejected]:
    parser = KernelLogParser()  # one parser per file: the files are separate streams
    return {i: parser.parse(line) for i, _, line in real_lines(name)}


def label(o: Parsed | Rejected | CrashLine) -> str:
    if isinstance(o, CrashLine):
        return f"crash:{o.origin}"
    return f"{o.kind}:{o.code}" if isinstance(o, Parsed) else o.reason


# Whole-file outcome counts: any change in how a real line is read shows here.
EXPECTED_SUMMARY = {
    "xid.txt": {"fallen_off_bus_after_xid79": 2, "gpu_tool_log": 1, "nvlink:20034": 4, "nvrm_followup": 10,
                "nvrm_info": 11, "other:None": 11, "sxid_detail": 4, "xid:109": 2, "xid:13": 14, "xid:145": 7,
                "xid:149": 14, "xid:154": 4, "xid:31": 5, "xid:32": 1, "xid:38": 1, "xid:62": 1, "xid:74": 1,
                "xid:79": 3, "xid_without_code": 1},
    "ecc.txt": {"boot_info": 1, "ecc_corrected:None": 1, "ecc_uncorrected:None": 1, "edac_mce_detail": 7,
                "ghes_detail": 10, "mce_detail": 2, "mce_summary": 3, "mcelog_record": 10, "other:None": 1,
                "pcie:None": 1, "rasdaemon_summary": 1},
    "misc.txt": {"cuda_runtime_log": 7, "gpu_tool_log": 3, "other:None": 1, "crash:kernel_log": 1,
                 "stack_trace": 8, "thermal:None": 1},
    # application output in the kernel log: named, and read by the applog source instead (tests/agents/test_applog.py)
    "nccl.txt": {"nccl_log": 34},
    # the OOM killer's kill lines are crash events (origin oom_kill); the lines around them are detail
    "oom.txt": {"cuda_runtime_log": 5, "crash:oom_kill": 3, "oom_kill_detail": 3},
}

# (file, line number, a piece of the line) -> expected outcome:
#   a rejection reason, or (kind, code, device, severity, start of message).
EXPECTED = [
    # Xid 13 with pid='<unknown>', name=<unknown>: pid/name are not part of the message
    (("xid.txt", 2, "Xid (PCI:0000:cb:00): 13"), ("xid", 13, "0000:cb:00", "warning", "Graphics SM Warp Exception")),
    # Xid 109 with a real pid and process name
    (("xid.txt", 5, "CTX SWITCH TIMEOUT"), ("xid", 109, "0000:cb:00", "critical", "Ch 00000008")),
    # driver banner and GPU identity lines are information, not errors
    (("xid.txt", 6, "loading NVIDIA UNIX"), "nvrm_info"),
    (("xid.txt", 7, "GPU at PCI:0000:01:00"), "nvrm_info"),
    # MMU fault (Xid 31) in the long modern format
    (("xid.txt", 9, "MMU Fault"), ("xid", 31, "0000:01:00", "warning", "channel 0x0000000c")),
    # GSP firmware init failure: kind other with a reason
    (("xid.txt", 10, "Cannot initialize GSP firmware"), ("other", None, None, "critical", "gsp_init_failed: ")),
    # RmInitAdapter failure with the GPU's PCI address (function dropped)
    (("xid.txt", 11, "RmInitAdapter failed!"), ("other", None, "0000:98:00", "critical", "rm_init_adapter_failed: ")),
    # its companion line is a follow-up, not a second failure
    (("xid.txt", 12, "rm_init_adapter failed, device minor"), "nvrm_followup"),
    (("xid.txt", 13, "GFW_BOOT"), ("other", None, None, "critical", "gfw_boot_timeout: ")),
    # RmInitAdapter without a device (old driver format)
    (("xid.txt", 15, "RmInitAdapter failed! (0x26"), ("other", None, None, "critical", "rm_init_adapter_failed: ")),
    # old-format Xid without pid/name
    (("xid.txt", 22, "32, Channel ID"), ("xid", 32, "0000:01:00", "warning", "Channel ID 00000000")),
    # syslog-prefixed RmInitAdapter (fedora journal)
    (("xid.txt", 27, "fedora kernel: NVRM: GPU 0000:09:00.0: RmInitAdapter"), ("other", None, "0000:09:00", "critical", "rm_init_adapter_failed: ")),
    # a lone SXid data line (its headline was cut from the report): detail only
    (("xid.txt", 28, "SXid (PCI:0000:84:00.0): 12028, Data"), "sxid_detail"),
    # gpud's own summary format counts as Xid 79
    (("xid.txt", 29, "XID 79(GPU has fallen off the bus)"), ("xid", 79, "0000:ae:00", "critical", "GPU has fallen off the bus")),
    # multi-line fallen-off-the-bus: the Xid 79 line counts...
    (("xid.txt", 32, "Xid (PCI:0000:06:00): 79"), ("xid", 79, "0000:06:00", "critical", "GPU has fallen off the bus")),
    # ...and the "GPU has fallen off the bus" line right after it does not count twice
    (("xid.txt", 33, "GPU 0000:06:00.0: GPU has fallen off the bus"), "fallen_off_bus_after_xid79"),
    (("xid.txt", 35, "RC all channels for critical error 79"), "nvrm_followup"),
    # GSP RPC failures
    (("xid.txt", 36, "API_GPU_ATTACHED_SANITY_CHECK"), ("other", None, None, "critical", "gpu_attached_sanity_check_failed: ")),
    (("xid.txt", 37, "rpcSendMessage failed"), ("other", None, None, "critical", "gsp_rpc_timeout: ")),
    # NVLink Xid 74 on a non-zero PCI domain
    (("xid.txt", 38, "NVLink: fatal error"), ("xid", 74, "0003:00:00", "critical", "NVLink: fatal error")),
    # syslog + dmesg double prefix
    (("xid.txt", 39, "Gipfeli kernel: [82659.755847]"), ("xid", 13, "0000:41:00", "warning", "Graphics Exception: ESR")),
    # DCGM's summary has no Xid code: named, not guessed
    (("xid.txt", 53, "Detected Critical Xid Error"), "xid_without_code"),
    # Polish month name in the syslog prefix
    (("xid.txt", 55, "kwi 15 07:56:59"), ("xid", 38, "0000:07:00", "info", "channel 0x00000003")),
    (("xid.txt", 59, "PmuHalted"), ("other", None, None, "critical", "gsp_pmu_halted: ")),
    (("xid.txt", 62, "Xid (PCI:0000:91:00): 79, pid='<unknown>'"), ("xid", 79, "0000:91:00", "critical", "GPU has fallen off the bus")),
    (("xid.txt", 63, "GPU 0000:91:00.0: GPU has fallen off the bus"), "fallen_off_bus_after_xid79"),
    # NVSwitch SXid headline: nvlink, fatal
    (("xid.txt", 65, "20034, Fatal, Link 48"), ("nvlink", 20034, "0000:06:00", "critical", "nvidia-nvswitch1: Fatal, Link 48")),
    (("xid.txt", 67, "Severity 1 Engine instance 60"), "sxid_detail"),
    (("xid.txt", 72, "Unable to determine the device handle"), "gpu_tool_log"),
    # GB200 NVLink5 Xids (PCI domain 0008) with the catalog's workflow action
    (("xid.txt", 73, "145, RLW_SRC_TRACK"), ("xid", 145, "0008:01:00", "critical", "RLW_SRC_TRACK Nonfatal")),
    (("xid.txt", 76, "149, NETIR Fatal"), ("xid", 149, "0008:01:00", "critical", "NETIR Fatal")),
    # a truncated line still parses
    (("xid.txt", 88, "Link -1 (0x000fe406"), ("xid", 149, "0018:01:00", "critical", "NETIR Fatal XC0 i0 Link -1")),
    (("xid.txt", 81, "154, GPU recovery action"), ("xid", 154, "0008:01:00", "warning", "GPU recovery action changed")),
    # host memory: EDAC UE / CE with counts and DIMM location
    (("ecc.txt", 1, "1 UE memory read error"), ("ecc_uncorrected", None, "mc3/CPU_SrcID#1_MC#1_Chan#2_DIMM#0", "critical", "memory read error")),
    (("ecc.txt", 29, "1 CE memory scrubbing error"), ("ecc_corrected", None, "mc1/CPU_SrcID#1_Ha#0_Chan#0_DIMM#0", "info", "memory scrubbing error")),
    # APEI/GHES block: the section type is the event, the rest is detail
    (("ecc.txt", 2, "APEI Generic Hardware Error Source"), "ghes_detail"),
    (("ecc.txt", 5, "section_type: PCIe error"), ("pcie", None, None, "warning", "ghes_pcie_error: PCIe error")),
    (("ecc.txt", 11, "Machine check events logged"), "mce_summary"),
    (("ecc.txt", 14, "HANDLING MCE MEMORY ERROR"), "edac_mce_detail"),
    (("ecc.txt", 15, "5539"), "rasdaemon_summary"),
    (("ecc.txt", 16, "CPU supports 7 MCE banks"), "boot_info"),
    # a raw machine check from the kernel: an event on that CPU
    (("ecc.txt", 18, "Machine Check: 0 Bank 4"), ("other", None, "cpu0", "warning", "machine_check: CPU 0")),
    (("ecc.txt", 19, "TSC 0 ADDR"), "mce_detail"),
    # mcelog's decoding repeats what the kernel logged
    (("ecc.txt", 30, "MCA: Internal unclassified error"), "mcelog_record"),
    (("ecc.txt", 34, "GEN_CHANNELunspecified_ERR"), "mcelog_record"),
    # DCGM thermal and power violations
    (("misc.txt", 12, "thermal violation in GPU 2"), ("thermal", None, "gpu2", "warning", "thermal_violation: ")),
    (("misc.txt", 13, "power violation"), ("other", None, "0000:0f:00", "info", "power_violation: ")),
    (("misc.txt", 3, "illegal memory access"), "cuda_runtime_log"),
    (("nccl.txt", 1, "Watchdog caught collective operation timeout"), "nccl_log"),
    (("oom.txt", 7, "oom_reaper: reaped process 15784"), "oom_kill_detail"),
]

# Kernel lines about a process that died: crash events (file, line, piece) -> (origin, signature, cpu, fault_class).
EXPECTED_CRASHES = [
    # a user-space segfault: libnccl at a module-relative offset, the address not mapped (error 4: read, not present)
    (("misc.txt", 14, "segfault at 7f797fe00000"), ("kernel_log", "libnccl.so.2!0x69996", None, "unmapped")),
    # the OOM killer: named by the process (python3 -> python), one case per kill
    (("oom.txt", 6, "Out of memory: Killed process 15784"), ("oom_kill", "oom_kill!python", None, None)),
    (("oom.txt", 8, "Killed process 25315"), ("oom_kill", "oom_kill!python", None, None)),
    (("oom.txt", 11, "Killed process 7899 (python)"), ("oom_kill", "oom_kill!python", None, None)),
]


@pytest.mark.parametrize("name", LOG_FILES)
def test_every_real_line_has_a_known_outcome(name):
    rules = load_rules()
    allowed = reasons(rules)
    got = outcomes(name)
    assert len(got) == len(real_lines(name))
    for i, o in got.items():
        if isinstance(o, Rejected):
            assert o.reason in allowed, (name, i)
        elif isinstance(o, CrashLine):
            assert o.origin in {"kernel_log", "oom_kill"}
        else:
            assert o.kind in {"xid", "ecc_corrected", "ecc_uncorrected", "thermal", "nvlink", "pcie", "other"}
    assert dict(Counter(label(o) for o in got.values())) == EXPECTED_SUMMARY[name]


@pytest.mark.parametrize(("where", "expected"), EXPECTED, ids=lambda v: f"{v[0]}:{v[1]}" if isinstance(v, tuple) and len(v) == 3 else None)
def test_interesting_lines(where, expected):
    name, lineno, piece = where
    line = real_lines(name)[lineno - 1][2]
    assert piece in line, f"{name}:{lineno} is not the line the table means"
    o = outcomes(name)[lineno]
    if isinstance(expected, str):
        assert isinstance(o, Rejected) and o.reason == expected, o
        return
    kind, code, device, severity, msg = expected
    assert isinstance(o, Parsed), o
    assert (o.kind, o.code, o.device, o.severity) == (kind, code, device, severity)
    assert o.message.startswith(msg), o.message


@pytest.mark.parametrize(("where", "expected"), EXPECTED_CRASHES, ids=lambda v: f"{v[0]}:{v[1]}" if isinstance(v, tuple) and len(v) == 3 else None)
def test_kernel_lines_of_dead_processes_are_crash_events(where, expected, validate):
    name, lineno, piece = where
    assert piece in real_lines(name)[lineno - 1][2]
    o = outcomes(name)[lineno]
    assert isinstance(o, CrashLine), o
    crash = to_crash(o, "gpu-a-001", ts_from_ms(1_700_000_000_000))
    assert (crash.origin, crash.signature, crash.cpu, crash.fault_class) == expected
    validate(crash)


@pytest.mark.parametrize("name", LOG_FILES)
def test_events_from_real_lines_validate_against_the_schema(name, validate):
    for o in outcomes(name).values():
        if isinstance(o, Parsed):
            doc = validate(to_telemetry(o, "gpu-a-001", ts_from_ms(1_700_000_000_000)))
            assert doc["host"] == "gpu-a-001"
        elif isinstance(o, CrashLine):
            doc = validate(to_crash(o, "gpu-a-001", ts_from_ms(1_700_000_000_000)))
            assert doc["schema"] == "fleetepi.crash/v1"


def test_xid_events_carry_catalog_severity_and_action():
    o = KernelLogParser().parse("NVRM: Xid (PCI:0000:cb:00): 48, pid=1, name=x, DBE (double bit error) ECC error")
    assert isinstance(o, Parsed)
    assert (o.kind, o.code, o.severity) == ("xid", 48, "critical")
    assert o.action == "WORKFLOW_XID_48"  # immediate == investigatory: said once
    unknown = KernelLogParser().parse("NVRM: Xid (PCI:0000:cb:00): 999, something new")
    assert isinstance(unknown, Parsed) and unknown.code == 999 and unknown.severity is None


def test_fallen_off_bus_alone_counts_as_xid79():
    o = KernelLogParser().parse("[  9.1] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.")
    assert isinstance(o, Parsed) and (o.kind, o.code, o.device) == ("xid", 79, "0000:3b:00")


@pytest.mark.parametrize(("raw", "text"), [
    ("6,1234,5678901,-;NVRM: Xid (PCI:0000:01:00): 31, x", "NVRM: Xid (PCI:0000:01:00): 31, x"),  # /dev/kmsg record
    ("[Fri Aug 30 11:43:09 2024] NVRM: hi", "NVRM: hi"),  # dmesg -T
    ("11月 15 14:15:47 leon nv-fabricmanager[4177]: request", "request"),  # CJK month, program with pid
    ("kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid", "nvidia-nvswitch1: SXid"),
])
def test_prefixes_are_stripped(raw, text):
    assert strip_prefix(raw) == text


@pytest.mark.parametrize(("given", "want"), [("00000000:CB:00.0", "0000:cb:00"), ("PCI:0008:01:00", "0008:01:00"),
                                             ("0000:98:00.0", "0000:98:00"), ("gpu0", "gpu0")])
def test_pci_addresses_are_normalized(given, want):
    assert normalize_pci(given) == want


def test_shipped_catalog_loads_all_codes():
    cat = load_catalog()
    assert len(cat) == 172
    assert cat.get(79).mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"


class TestRuleFileErrors:
    """Bad rule and catalog files fail at load time with file:line."""

    def _copy(self, tmp_path: Path) -> Path:
        for f in ("rules.json", "xid-catalog.tsv", "severity.tsv"):
            (tmp_path / f).write_bytes((RULES_DIR / f).read_bytes())
        return tmp_path

    def test_bad_regex_names_file_and_line(self, tmp_path):
        d = self._copy(tmp_path)
        doc = json.loads((d / "rules.json").read_text())
        doc["rules"][2]["pattern"] = "NVRM: (unclosed"
        (d / "rules.json").write_text(json.dumps(doc, indent=1))
        with pytest.raises(RuleFileError) as err:
            load_rules(d)
        line = next(i for i, t in enumerate((d / "rules.json").read_text().splitlines(), 1) if '"fallen_off_bus"' in t)
        assert err.value.line == line and "bad regular expression" in str(err.value)
        assert str(err.value).startswith(f"{d / 'rules.json'}:{line}:")

    def test_rule_that_misses_its_sample(self, tmp_path):
        d = self._copy(tmp_path)
        doc = json.loads((d / "rules.json").read_text())
        doc["rules"][0]["samples"] = ["not an xid line"]
        (d / "rules.json").write_text(json.dumps(doc, indent=1))
        with pytest.raises(RuleFileError, match="does not match its sample"):
            load_rules(d)

    def test_unknown_kind_and_field(self, tmp_path):
        d = self._copy(tmp_path)
        doc = json.loads((d / "rules.json").read_text())
        doc["rules"][0]["kind"] = "cosmic"
        (d / "rules.json").write_text(json.dumps(doc, indent=1))
        with pytest.raises(RuleFileError, match="kind 'cosmic'"):
            load_rules(d)
        doc["rules"][0]["kind"] = "xid"
        doc["rules"][0]["colour"] = "red"
        (d / "rules.json").write_text(json.dumps(doc, indent=1))
        with pytest.raises(RuleFileError, match="unknown field"):
            load_rules(d)

    def test_invalid_json_names_the_line(self, tmp_path):
        d = self._copy(tmp_path)
        (d / "rules.json").write_text('{\n "rules": [\n  {"name": "x",}\n ]\n}\n')
        with pytest.raises(RuleFileError) as err:
            load_rules(d)
        assert err.value.line == 3

    def test_catalog_row_errors(self, tmp_path):
        d = self._copy(tmp_path)
        lines = (d / "xid-catalog.tsv").read_text().splitlines()
        lines[5] = "five\tX\tY\tRESTART_APP\t"
        (d / "xid-catalog.tsv").write_text("\n".join(lines) + "\n")
        with pytest.raises(RuleFileError, match=r"xid-catalog.tsv:6: code 'five'"):
            load_catalog(d)
        lines[5] = "5\tX\tY\tREBOOT_THE_MOON\t"
        (d / "xid-catalog.tsv").write_text("\n".join(lines) + "\n")
        with pytest.raises(RuleFileError, match=r"xid-catalog.tsv:6: immediate resolution 'REBOOT_THE_MOON'"):
            load_catalog(d)
        lines[5] = "4\tX\tY\tRESTART_APP\t"
        (d / "xid-catalog.tsv").write_text("\n".join(lines) + "\n")
        with pytest.raises(RuleFileError, match="duplicate code 4"):
            load_catalog(d)
        lines[5] = "5\tX\tY"
        (d / "xid-catalog.tsv").write_text("\n".join(lines) + "\n")
        with pytest.raises(RuleFileError, match="expected 5 tab-separated columns, got 3"):
            load_catalog(d)


def test_every_shipped_rule_matches_its_samples_and_is_reachable():
    """Each sample is classified by its own rule (an earlier rule does not shadow it)."""
    rules = load_rules()
    for rule in rules:
        for sample in rule.samples:
            o = KernelLogParser(rules).parse(sample)
            assert o.rule == rule.name, (rule.name, sample, o)


class TestLinesMissedBefore:
    """Issue 12's list of kernel-log lines that fleetepi did not read; each in the form the tool writes it."""

    def test_syslog_without_host_keeps_nvrm(self):
        # rsyslog with a template without %HOSTNAME%: "NVRM:" sits where the program name would be
        o = KernelLogParser().parse("Feb 15 17:37:45 NVRM: Xid (PCI:0000:41:00): 13, Graphics Exception: ESR 0x5067b0=0x9")
        assert isinstance(o, Parsed) and (o.kind, o.code, o.device) == ("xid", 13, "0000:41:00")
        o = KernelLogParser().parse("Sep 16 19:51:15 mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 4: a600000000020408")
        assert isinstance(o, Parsed) and o.device == "cpu3"

    def test_edac_ce_without_an_error_type_word(self):
        o = KernelLogParser().parse("[ 1234.5] EDAC MC0: 4 CE error on CPU#0Channel#2_DIMM#0 (channel:2 slot:0 page:0x0 offset:0x0 grain:8 syndrome:0x0)")
        assert isinstance(o, Parsed)
        assert (o.kind, o.count, o.device) == ("ecc_corrected", 4, "mc0/CPU#0Channel#2_DIMM#0")

    def test_three_line_fallen_off_the_bus_counts_once_as_xid79(self):
        p = KernelLogParser()
        got = [p.parse(line) for line in (
            "[ 812.1] NVRM: The NVIDIA GPU 0000:3b:00.0",
            "[ 812.1] NVRM: (PCI ID: 10de:20b0) installed in this system has",
            "[ 812.1] NVRM: fallen off the bus and is not responding to commands.",
        )]
        assert [label(o) for o in got] == ["off_bus_banner", "off_bus_banner", "xid:79"]
        assert got[2].device == "0000:3b:00" and got[2].severity == "critical"
        # after an Xid 79 line for the same GPU, the banner does not count again
        p = KernelLogParser()
        first = p.parse("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
        again = [p.parse(line) for line in ("NVRM: The NVIDIA GPU 0000:3b:00.0",
                                            "NVRM: (PCI ID: 10de:20b0) installed in this system has",
                                            "NVRM: fallen off the bus and is not responding to commands.")]
        assert label(first) == "xid:79" and label(again[2]) == "fallen_off_bus_after_xid79"

    def test_gsp_reset_required(self):
        o = KernelLogParser().parse("NVRM: GPU0 _kgspRpcRecvPoll: GSP RPC failed with status 0x00000067 (NV_ERR_RESET_REQUIRED)")
        assert isinstance(o, Parsed) and (o.kind, o.severity, o.action) == ("other", "critical", "RESET_GPU")
        assert o.message.startswith("gpu_reset_required: ")

    def test_rasdaemon_rows(self):
        ue = KernelLogParser().parse("1 2024-03-02 10:11:12 +0000 1 Uncorrected error(s): memory read error at "
                                     "CPU_SrcID#0_MC#0_Chan#0_DIMM#0 location: 0:0:0:-1, addr 8589934592, grain 5, syndrome 0")
        assert isinstance(ue, Parsed) and (ue.kind, ue.count, ue.device) == ("ecc_uncorrected", 1, "CPU_SrcID#0_MC#0_Chan#0_DIMM#0")
        # the error-count summary is a running total without a time: still no event
        assert label(KernelLogParser().parse("CPU_SrcID#1_Ha#0_Chan#0_DIMM#0\t5539\t0")) == "rasdaemon_summary"

    def test_mcelog_uncorrected_error_on_the_records_cpu(self):
        p = KernelLogParser()
        record = ["Hardware event. This is not a software error.", "MCE 0", "CPU 7 BANK 4 ", "MISC 2000000000000000 ADDR 1000",
                  "TIME 1537152664 Sun Sep 16 19:51:04 2018", "Uncorrected error", "MCA: Internal parity error",
                  "STATUS b200000000000405 MCGSTATUS 7"]
        got = [p.parse(line) for line in record]
        events = [o for o in got if isinstance(o, Parsed)]
        assert len(events) == 1 and (events[0].kind, events[0].device, events[0].severity) == ("other", "cpu7", "critical")
        assert events[0].message.startswith("mce_uncorrected: ")

    def test_a_process_killed_for_poisoned_memory_is_a_sigbus_of_the_machine(self, tmp_path, validate):
        """The memory-failure handler's kill line in each kernel's wording: a crash whether or not a core came."""
        log = tmp_path / "kern.log"
        log.write_text("\n".join([
            # 4.x-5.2 wording (a real line from the patch that reworded it), the x86 fault path (a real syslog line),
            # 5.3 on, and the handler's other lines, which say what it did with the page
            "[188988.765862] Memory failure: 0x1840200: Killing cellsrv:33395 due to hardware memory corruption",
            "Mar  9 19:48:24 defiant kernel: [77187.055103] MCE: Killing uffd-unit-tests:1321817 due to hardware memory "
            "corruption fault at 4631e000",
            "[88690.498473] Memory failure: 0x40272d: Sending SIGBUS to pt_main_thread:2536443 due to hardware memory corruption",
            "[88690.498619] Memory failure: 0x40272d: recovery action for dirty LRU page: Recovered",
            "[88690.498619] Memory failure: 0x40272d: unhandlable page.",
        ]) + "\n")
        src = LogFileSource("h1", str(log))
        crashes = [e for e in src.poll(0) + src.drain(0) if isinstance(e, Crash)]
        by_sig = {c.signature: c for c in crashes}
        assert sorted(by_sig) == ["memory_failure!cellsrv", "memory_failure!pt_main_thread", "memory_failure!uffd-unit-tests"]
        for c in crashes:
            assert (c.signal, c.origin, c.shape_flags) == ("SIGBUS", "kernel_log", ["memory_poisoned"])
            assert odd_shape(c, 0.5), "the host detector counts it among the machine's signs"
            validate(c)
        fault = by_sig["memory_failure!uffd-unit-tests"]
        assert (fault.fault_address, fault.fault_class) == ("0x4631e000", "mapped")
        assert any("physical page 0x1840200" in n for n in by_sig["memory_failure!cellsrv"].notes)
        assert src.outcomes["memory_failure_detail"] == 2 and src.outcomes["no_rule"] == 0

    def test_trap_and_segfault_with_cpu(self, validate):
        seg = KernelLogParser().parse("python3[5521]: segfault at 0 ip 00007f3a1b2c4d5e sp 00007ffd3a1b2c40 error 6 in "
                                      "libtorch_cuda.so[7f3a1a000000+2000000] likely on CPU 42 (core 10, socket 1)")
        assert isinstance(seg, CrashLine)
        assert (seg.fields.signature, seg.fields.cpu, seg.fields.fault_class) == ("libtorch_cuda.so!0x12c4d5e", 42, "null_page")
        gp = KernelLogParser().parse("traps: python3[12345] general protection fault ip:7f1c2b3a4d5e sp:7ffd1c2b3a40 error:0 in "
                                     "libc.so.6[7f1c2b300000+195000]")
        assert isinstance(gp, CrashLine) and gp.fields.signal == "SIGSEGV" and "gp_fault" in gp.fields.shape_flags
        for o in (seg, gp):
            validate(to_crash(o, "h", ts_from_ms(0)))
