"""Damaged, compressed and piped cores: every input gives an event, never an agent crash."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import jsonschema
import lz4.frame
import pytest
import zstandard
from click.testing import CliRunner

from fleetepi.agents.core.cli import core_handler_command, signature_command
from fleetepi.agents.core.limits import CoreLimits
from fleetepi.agents.core.signature import CoreAnalyzer
from fleetepi.contract.codec import decode_event

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "fleetepi/contract/schemas/crash.schema.json").read_text())
SEGV = "crashy!segv_leaf | crashy!segv_mid | crashy!segv_top"


def _compress(src: Path, dst: Path, kind: str) -> Path:
    data = src.read_bytes()
    if kind == "zst":
        dst.write_bytes(zstandard.ZstdCompressor(level=3).compress(data))
    elif kind == "lz4":
        dst.write_bytes(lz4.frame.compress(data))
    else:
        dst.write_bytes(lzma.compress(data, preset=0))
    return dst


@pytest.mark.parametrize("kind", ["zst", "lz4", "xz"])
def test_compressed_core_gives_the_same_signature(analyzer, core_factory, tmp_path, kind):  # type: ignore[no-untyped-def]
    core = core_factory("pie_fp_g", "segv")
    packed = _compress(core, tmp_path / f"core.crashy.0.boot.{kind}", kind)
    crash = analyzer.analyze(packed, host="h").crash
    assert crash.signature == SEGV
    assert not crash.partial


def test_compressed_core_over_the_limit_is_cut_and_partial(core_factory, tmp_path):  # type: ignore[no-untyped-def]
    core = core_factory("pie_fp_g", "segv")
    packed = _compress(core, tmp_path / "core.zst", "zst")
    small = CoreAnalyzer(limits=CoreLimits(max_core_bytes=64 * 1024))
    try:
        crash = small.analyze(packed, host="h").crash
    finally:
        small.close()
    assert crash.partial is True
    assert any("size limit" in n for n in crash.notes or [])


@pytest.mark.parametrize(
    ("keep_fraction", "comment"),
    [
        (0.5, "notes intact, later segments (stack) cut: registers but fewer frames"),
        (0.02, "cut inside the first segments: notes maybe, no stack"),
        (0.0005, "cut inside the program headers"),
    ],
)
def test_truncated_core_gives_a_partial_event_with_a_reason(analyzer, core_factory, tmp_path, keep_fraction, comment):  # type: ignore[no-untyped-def]
    core = core_factory("pie_fp_g", "segv")
    data = core.read_bytes()
    cut = tmp_path / "core.cut"
    cut.write_bytes(data[: max(80, int(len(data) * keep_fraction))])
    crash = analyzer.analyze(cut, host="h").crash
    assert crash.partial is True, comment
    assert any(n.startswith("partial:") for n in crash.notes or []), crash.notes
    assert crash.signature  # a signature, at worst unknown!...


def test_a_file_that_is_not_a_core_gives_an_unreadable_core_event(analyzer, tmp_path):  # type: ignore[no-untyped-def]
    junk = tmp_path / "core.junk"
    junk.write_bytes(b"this is not an ELF file at all" * 10)
    crash = analyzer.analyze(junk, host="h").crash
    assert crash.signature == "unknown!unreadable-core"
    assert crash.partial is True


def test_an_executable_is_not_a_core(analyzer, programs):  # type: ignore[no-untyped-def]
    crash = analyzer.analyze(programs["pie_fp_g"], host="h").crash
    assert crash.signature == "unknown!unreadable-core"
    assert any("not a core dump" in n for n in crash.notes or [])


def test_core_handler_reads_stdin_and_publishes_a_valid_event(core_factory, tmp_path):  # type: ignore[no-untyped-def]
    core = core_factory("pie_fp_g", "segv")
    out = tmp_path / "events.jsonl"
    keep = tmp_path / "kept"
    result = CliRunner().invoke(
        core_handler_command,
        ["4242", "11", "crashy", "1763800000", "--publish", str(out), "--host", "gpu-r17-03", "--keep-dir", str(keep)],
        input=core.read_bytes(),
    )
    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert len(lines) == 1
    event = json.loads(lines[0])
    jsonschema.validate(event, SCHEMA)
    crash = decode_event(lines[0])
    assert crash.signature == SEGV and crash.host == "gpu-r17-03"
    assert crash.core_sha256 and len(crash.core_sha256) == 64
    assert event["ts"].startswith("2025-11-22T08:26:40")
    assert (keep / "core.crashy.4242.1763800000").stat().st_size == core.stat().st_size


def test_core_handler_keeps_nothing_by_default(core_factory, tmp_path):  # type: ignore[no-untyped-def]
    core = core_factory("pie_fp_g", "abort")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "events.jsonl"
    result = CliRunner().invoke(
        core_handler_command,
        ["7", "6", "crashy", "0", "--publish", str(out), "--tmp-dir", str(scratch), "--no-pyspy"],
        input=core.read_bytes(),
    )
    assert result.exit_code == 0, result.output
    assert list(scratch.iterdir()) == []
    assert decode_event(out.read_bytes().splitlines()[0]).signature.startswith("crashy!abort_leaf")


def test_core_handler_with_garbage_on_stdin_still_publishes(tmp_path):  # type: ignore[no-untyped-def]
    out = tmp_path / "events.jsonl"
    result = CliRunner().invoke(core_handler_command, ["1", "11", "x", "0", "--publish", str(out)], input=b"\0" * 100)
    assert result.exit_code == 0, result.output
    event = json.loads(out.read_bytes().splitlines()[0])
    jsonschema.validate(event, SCHEMA)
    assert event["signature"] == "unknown!unreadable-core" and event["partial"] is True


def test_signature_command_json_is_a_valid_event(core_factory):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(signature_command, [str(core_factory("nopie_nofp", "null")), "--json", "--host", "h1"])
    assert result.exit_code == 0, result.output
    event = json.loads(result.output)
    jsonschema.validate(event, SCHEMA)
    assert "ip_zero" in event["shape_flags"]


def test_signature_command_prints_for_humans(core_factory):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(signature_command, [str(core_factory("pie_fp_g", "flip"))])
    assert result.exit_code == 0, result.output
    assert "crashy!flip_leaf" in result.output
    assert "fault_bitflip" in result.output
    assert "bit 44 away" in result.output
    assert "silicon?   yes: bit-flip score" in result.output  # what host_spike will make of it


def test_signature_command_says_a_return_to_null_is_software(core_factory):  # type: ignore[no-untyped-def]
    """The runbook's check on a host's core: the libunwind race's shape is no evidence against the host."""
    result = CliRunner().invoke(signature_command, [str(core_factory("pie_fp_g", "null"))])
    assert result.exit_code == 0, result.output
    assert "ip_zero" in result.output and "silicon?   no:" in result.output


def test_signature_help_teaches():  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(signature_command, ["--help"])
    assert result.exit_code == 0
    for word in ("--json", "bit-flip", "Examples", ".zst"):
        assert word in result.output


def test_executable_override_symbolizes_a_moved_binary(tmp_path):  # type: ignore[no-untyped-def]
    from agents_core_cores import VARIANTS, compile_program, make_core  # type: ignore[import-not-found]

    exe = compile_program(VARIANTS["nopie_nofp"], tmp_path / "gone")
    core = make_core([str(exe), "segv"], tmp_path / "run")
    moved = tmp_path / "bin" / "crashy"
    moved.parent.mkdir()
    shutil.move(exe, moved)  # the path recorded in the core no longer exists
    fresh = CoreAnalyzer()  # a fresh symbol cache: this build id was never seen
    try:
        lost = fresh.analyze(core, host="h").crash
        found = fresh.analyze(core, host="h", executable=str(moved)).crash
    finally:
        fresh.close()
    assert lost.signature.startswith("crashy!0x")
    assert any("no symbols for crashy" in n for n in lost.notes or [])
    assert found.signature == SEGV


def test_corrupted_cores_never_raise(analyzer, core_factory, tmp_path):  # type: ignore[no-untyped-def]
    """Bytes overwritten in the headers, the notes and the stack: an event every time, never an exception."""
    import random

    from fleetepi.contract import Crash

    data = bytearray(core_factory("pie_fp_g", "segv").read_bytes())
    rng = random.Random(4242)
    target = tmp_path / "core.bad"
    for trial in range(40):
        bad = bytearray(data)
        region = rng.choice([(0, 64), (64, 4096), (4096, 12288), (len(data) - 65536, len(data))])
        for _ in range(rng.randint(1, 64)):
            bad[rng.randrange(*region)] = rng.randrange(256)
        target.write_bytes(bytes(bad))
        crash = analyzer.analyze(target, host="h").crash
        assert isinstance(crash, Crash) and crash.signature, trial
