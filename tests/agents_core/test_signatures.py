"""Signatures of real crashes: stable where the crash is the same, distinct where it is not."""

from __future__ import annotations

import pytest

from fleetepi.contract import Crash

SYMBOLIZED = ["pie_fp_g", "nopie_nofp"]
STRIPPED = ["pie_nofp_stripped", "nopie_fp_stripped"]
ALL = SYMBOLIZED + STRIPPED


def crash_of(analyzer, core) -> Crash:  # type: ignore[no-untyped-def]
    return analyzer.analyze(core, host="node-1").crash


# (mode, expected signature of the symbolized builds): one row per crash kind.
EXPECTED = [
    # plain NULL store three named frames down
    ("segv", "crashy!segv_leaf | crashy!segv_mid | crashy!segv_top"),
    # a different crash site
    ("other", "crashy!other_leaf | crashy!other_top | crashy!main"),
    # abort(): raise/abort/pthread_kill are crash machinery and skipped
    ("abort", "crashy!abort_leaf | crashy!abort_top | crashy!main"),
    # assert(): __assert_fail and __assert_fail_base.cold skipped too
    ("assert", "crashy!assert_leaf | crashy!assert_top | crashy!main"),
    # call through a NULL function pointer: NULL leads, then the caller
    ("null", "NULL | crashy!null_leaf | crashy!null_top"),
    # a crash handler that aborts: unwound through the kernel's signal frame
    # to the faulting function (__restore_rt is machinery and skipped)
    ("handler", "crashy!on_crash | crashy!segv_leaf | crashy!segv_mid"),
]


@pytest.mark.parametrize("variant", SYMBOLIZED)
@pytest.mark.parametrize(("mode", "expected"), EXPECTED)
def test_symbolized_signature(analyzer, core_factory, variant, mode, expected):  # type: ignore[no-untyped-def]
    assert crash_of(analyzer, core_factory(variant, mode)).signature == expected


@pytest.mark.parametrize("variant", ALL)
def test_same_crash_twice_gives_byte_identical_signature(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    first = crash_of(analyzer, core_factory(variant, "segv", 0))
    second = crash_of(analyzer, core_factory(variant, "segv", 1))
    assert first.signature == second.signature
    # module-relative offsets too, not only names: no ASLR address leaks in
    assert [f.offset for f in first.frames or []][:4] == [f.offset for f in second.frames or []][:4]


def test_same_crash_in_two_build_directories(analyzer, core_factory):  # type: ignore[no-untyped-def]
    here = crash_of(analyzer, core_factory("pie_fp_g", "segv"))
    there = crash_of(analyzer, core_factory("pie_fp_g@2", "segv"))
    assert here.signature == there.signature
    assert "/" not in here.signature


@pytest.mark.parametrize("variant", ALL)
def test_different_crash_sites_differ(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    sigs = {mode: crash_of(analyzer, core_factory(variant, mode)).signature for mode in ("segv", "other", "abort", "null")}
    assert len(set(sigs.values())) == len(sigs), sigs


@pytest.mark.parametrize("variant", STRIPPED)
def test_stripped_builds_fall_back_to_module_offsets(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    sig = crash_of(analyzer, core_factory(variant, "segv")).signature
    parts = sig.split(" | ")
    assert len(parts) == 3
    assert all(p.startswith("crashy!0x") for p in parts), sig
    # offsets are small module offsets, never absolute ASLR addresses
    assert all(int(p.split("!")[1], 16) < 0x100000 for p in parts)


def test_event_carries_shape_and_build_ids(analyzer, core_factory):  # type: ignore[no-untyped-def]
    crash = crash_of(analyzer, core_factory("pie_fp_g", "segv"))
    assert crash.signal == "SIGSEGV"
    assert crash.si_code == 1  # SEGV_MAPERR
    assert crash.fault_address == "0x0"
    assert crash.fault_class == "null_page"
    assert crash.bitflip_score == 0.0
    assert crash.executable == "crashy"
    names = {m.name: m.build_id for m in crash.modules or []}
    assert names["crashy"] and len(names["crashy"]) == 40
    assert names["libc.so.6"]
    first = (crash.frames or [])[0]
    assert (first.module, first.function, first.language) == ("crashy", "segv_leaf", "native")


@pytest.mark.parametrize("variant", ALL)
def test_null_jump_has_ip_zero_shape(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    crash = crash_of(analyzer, core_factory(variant, "null"))
    assert "ip_zero" in (crash.shape_flags or [])
    assert crash.fault_class == "null_page"
    assert crash.signature.startswith("NULL | ")


@pytest.mark.parametrize("variant", ["pie_fp_g", "nopie_nofp"])
def test_flipped_pointer_scores_as_bitflip(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    crash = crash_of(analyzer, core_factory(variant, "flip"))
    assert crash.bitflip_score is not None and crash.bitflip_score > 0
    assert "fault_bitflip" in (crash.shape_flags or [])
    assert crash.fault_class == "unmapped"
    assert crash.signature == "crashy!flip_leaf | crashy!flip_top | crashy!main"


@pytest.mark.parametrize("mode", ["segv", "abort", "null", "other"])
def test_ordinary_crashes_score_no_bitflip(analyzer, core_factory, mode):  # type: ignore[no-untyped-def]
    crash = crash_of(analyzer, core_factory("pie_fp_g", mode))
    assert crash.bitflip_score == 0.0
    assert not {"fault_bitflip", "reg_bitflip", "sp_misaligned"} & set(crash.shape_flags or [])


def test_abort_event_has_no_fault_address(analyzer, core_factory):  # type: ignore[no-untyped-def]
    crash = crash_of(analyzer, core_factory("pie_fp_g", "abort"))
    assert crash.signal == "SIGABRT"
    assert crash.fault_address is None and crash.fault_class == "none"
    assert any("SkipCrashMachinery" in n for n in crash.notes or [])


def test_gcore_of_a_live_process(core_tmp, programs, analyzer):  # type: ignore[no-untyped-def]
    import shutil

    from agents_core_cores import gcore_live  # type: ignore[import-not-found]

    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed (scripts/install-services.sh installs it)")
    try:
        core = gcore_live([str(programs["pie_fp_g"]), "wait"], core_tmp / "gcore")
    except RuntimeError as exc:
        pytest.skip(f"gcore unavailable here: {exc}")
    crash = crash_of(analyzer, core)
    assert "crashy!wait_top" in crash.signature
    assert crash.fault_class == "none"


@pytest.fixture(scope="module")
def no_cfi():  # type: ignore[no-untyped-def]
    from fleetepi.agents.core.signature import CoreAnalyzer

    a = CoreAnalyzer(use_cfi=False)
    yield a
    a.close()


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("mode", ["segv", "abort", "assert", "null"])
def test_cfi_and_frame_pointer_scanning_agree(analyzer, no_cfi, core_factory, variant, mode):  # type: ignore[no-untyped-def]
    """Two independent unwinders, one answer: .eh_frame, and frame pointers + stack scanning."""
    core = core_factory(variant, mode)
    assert analyzer.analyze(core, host="h").crash.signature == no_cfi.analyze(core, host="h").crash.signature


def test_scanning_drops_stale_return_addresses_in_every_stack_layout(no_cfi, core_factory):  # type: ignore[no-untyped-def]
    """abort()'s big frame keeps a return address into ld.so's init_cpu_features from start-up.

    Whether the scan met it moved with the stack's ASLR alignment: in about one
    run in three the scanned signature began with ``ld-linux-x86-64.so.2!
    init_cpu_features`` (the flaky ``test_cfi_and_frame_pointer_scanning_agree[
    abort-nopie_nofp]``). The later slot whose ``call`` enters ``abort`` (through
    the PLT) proves it stale; eight fresh crashes, eight stack layouts, one signature.
    """
    signatures = {no_cfi.analyze(core_factory("nopie_nofp", "abort", run), host="h").crash.signature for run in range(1, 9)}
    assert signatures == {"crashy!abort_leaf | crashy!abort_top | crashy!main"}


@pytest.mark.parametrize("variant", ALL)
def test_cfi_unwinds_the_whole_stack(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    report = analyzer.analyze(core_factory(variant, "abort"), host="h")
    # context, then every caller from .eh_frame down to _start (the CFI marks it outermost)
    assert report.frame_trust[0] == "context"
    assert set(report.frame_trust[1:]) == {"cfi"}
    names = [f.function for f in report.crash.frames or [] if f.module == "libc.so.6"]
    assert "abort" in names and "__libc_start_main" in names[-2:]


def test_null_call_resumes_cfi_after_the_pushed_return_address(analyzer, core_factory):  # type: ignore[no-untyped-def]
    report = analyzer.analyze(core_factory("nopie_nofp", "null"), host="h")
    assert report.frame_trust[:3] == ["context", "scan", "cfi"]


def test_core_written_by_gdb_at_the_signal_matches_the_kernels(core_tmp, programs, analyzer, core_factory):  # type: ignore[no-untyped-def]
    """The helper's fallback where core_pattern is a pipe: gdb's generate-core-file at the SIGSEGV."""
    import shutil

    from agents_core_cores import _core_under_gdb  # type: ignore[import-not-found]

    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed (scripts/install-services.sh installs it)")
    gdb_core = _core_under_gdb([str(programs["nopie_nofp"]), "segv"], core_tmp / "gdbcore", 120)
    by_gdb = analyzer.analyze(gdb_core, host="h").crash
    by_kernel = analyzer.analyze(core_factory("nopie_nofp", "segv"), host="h").crash
    assert by_gdb.signature == by_kernel.signature
    assert by_gdb.signal == "SIGSEGV" and by_gdb.fault_class == "null_page"


@pytest.mark.parametrize("variant", ALL)
def test_unwinds_through_the_signal_frame(analyzer, core_factory, variant):  # type: ignore[no-untyped-def]
    report = analyzer.analyze(core_factory(variant, "handler"), host="h")
    functions = [f.function for f in report.crash.frames or []]
    assert "__restore_rt" in functions
    assert "signal" in report.frame_trust
    after = report.frame_trust[report.frame_trust.index("signal"):]
    assert set(after[1:]) == {"cfi"}  # exact all the way down again


def test_a_project_rule_skips_its_own_crash_handler(core_factory, tmp_path):  # type: ignore[no-untyped-def]
    """The rules are data: one line in skip_frames.txt and the handler's crashes
    group with the plain segfault they report."""
    from fleetepi.agents.core.rules import DEFAULT_RULES_DIR, load_rules
    from fleetepi.agents.core.signature import CoreAnalyzer

    for name in ("skip_frames.txt", "interpreter_frames.txt"):
        (tmp_path / name).write_text((DEFAULT_RULES_DIR / name).read_text())
    with (tmp_path / "skip_frames.txt").open("a") as fh:
        fh.write("# our service's crash handler (logs, then abort())\ncrashy!on_crash\n")
    custom = CoreAnalyzer(rules=load_rules(tmp_path))
    try:
        crash = custom.analyze(core_factory("pie_fp_g", "handler"), host="h").crash
    finally:
        custom.close()
    assert crash.signature == "crashy!segv_leaf | crashy!segv_mid | crashy!segv_top"


@pytest.mark.parametrize(
    ("mode", "fault_class", "bitflip"),
    [
        # the handler caught a NULL store: shape of the SIGSEGV, not of the abort
        ("handler", "null_page", False),
        # the founding case behind a crash handler: the flipped pointer still shows
        ("handler_flip", "unmapped", True),
    ],
)
def test_shape_of_the_fault_a_handler_caught(analyzer, core_factory, mode, fault_class, bitflip):  # type: ignore[no-untyped-def]
    crash = analyzer.analyze(core_factory("nopie_nofp", mode), host="h").crash
    assert crash.signal == "SIGABRT"  # what the process died of
    assert crash.fault_class == fault_class
    assert "in_signal_handler" in (crash.shape_flags or [])
    assert ((crash.bitflip_score or 0) > 0) is bitflip
    assert any("signal handler caught" in n for n in crash.notes or [])


def test_uncaught_cpp_exception_is_demangled_and_skips_terminate(analyzer, core_tmp):  # type: ignore[no-untyped-def]
    import shutil
    import subprocess

    from agents_core_cores import PROGRAMS, make_core  # type: ignore[import-not-found]

    from fleetepi.agents.core.demangle import available

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed (scripts/install.d/agents-core.sh installs it)")
    exe = core_tmp / "cpp" / "thrower"
    exe.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["g++", "-O2", "-g", "-o", str(exe), str(PROGRAMS / "thrower.cpp")], check=True, capture_output=True)
    crash = analyzer.analyze(make_core([str(exe)], core_tmp / "cpp" / "run"), host="h").crash
    if available():
        assert crash.signature == "thrower!svc::parse_header(int) | thrower!svc::handle_request(int) | thrower!main"
    else:
        assert crash.signature == "thrower!_ZN3svc12parse_headerEi | thrower!_ZN3svc14handle_requestEi | thrower!main"
    # libstdc++ frames were skipped whatever their version suffix
    assert any(f.module == "libstdc++.so.6" for f in crash.frames or [])


@pytest.mark.parametrize(("mode", "odd"), [
    ("null", False),   # a return to NULL, the libunwind race's shape: software on many hosts
    ("segv", False),   # a NULL store
    ("abort", False),
    ("flip", True),    # a heap pointer one bit off: what a miscomputing CPU leaves
    ("mce", True),     # SIGBUS BUS_MCEERR_AR: the kernel says a machine check poisoned the page it read
])
def test_the_host_detector_reads_the_agent_s_shapes(analyzer, core_factory, mode, odd):  # type: ignore[no-untyped-def]
    """Real cores through ``host_spike``'s shape test: the agent's flag names are the detector's.

    The detector knew only the simulator's names and counted every other
    flag as silicon: a real core's ``ip_zero`` (the founding case's software
    population) was evidence against its host.
    """
    from fleetepi.detectors import DetectorConfig
    from fleetepi.detectors.host_spike import odd_shape

    crash = crash_of(analyzer, core_factory("pie_fp_g", mode))
    assert odd_shape(crash, DetectorConfig().host_bitflip_min) is odd, (crash.shape_flags, crash.bitflip_score)


def test_a_sigbus_for_poisoned_memory_is_the_machine_s_fault(analyzer, core_factory):  # type: ignore[no-untyped-def]
    """A process that read a page a machine check had poisoned: the kernel's SIGBUS carries
    ``BUS_MCEERR_AR`` and the address, and the core's siginfo keeps both. The agent flags it; a SIGBUS
    of a bad mapping (``BUS_ADRERR``) is software's."""
    crash = crash_of(analyzer, core_factory("pie_fp_g", "mce"))
    assert (crash.signal, crash.si_code) == ("SIGBUS", 4)
    assert crash.fault_address is not None and crash.fault_class == "mapped"
    assert "memory_poisoned" in (crash.shape_flags or [])
    assert "crashy!mce_leaf" in crash.signature


def test_only_the_machine_check_codes_of_sigbus_are_poisoned_memory() -> None:
    import signal

    from fleetepi.agents.core.notes import SigInfo
    from fleetepi.agents.core.shape import crash_shape

    def mapped(addr: int) -> bool:
        return True

    for code, poisoned in ((2, False), (3, False), (4, True), (5, True)):  # ADRERR, OBJERR, MCEERR_AR, MCEERR_AO
        shape = crash_shape(None, SigInfo(signal.SIGBUS, 0, code, 0x7F0000001000), mapped, mapped)
        assert ("memory_poisoned" in shape.flags) is poisoned, code
    segv = crash_shape(None, SigInfo(signal.SIGSEGV, 0, 4, 0x7F0000001000), mapped, mapped)
    assert "memory_poisoned" not in segv.flags  # si_code 4 of SIGSEGV is SEGV_PKUERR, not a machine check
