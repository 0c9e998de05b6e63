"""Cores built to break the agent (issue 10, item 6): every one still gives a contract-valid crash event.

A damaged ``NT_FILE`` note (module bases below zero), an absurd ``%t``, a
FIFO where a core should be, and a decompression bomb. Each case asserts the
clear outcome and that the crash is still published, valid against the
contract's JSON Schema.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from pathlib import Path

import jsonschema
import pytest
import zstandard
from click.testing import CliRunner

from fleetepi.agents.core.cli import core_handler_command, signature_command
from fleetepi.agents.core.decompress import copy_limited
from fleetepi.agents.core.limits import CoreLimits, Deadline
from fleetepi.agents.core.signature import CoreAnalyzer
from fleetepi.agents.exceptions import PublishError
from fleetepi.agents.publish.conform import conforming_bytes
from fleetepi.contract import Crash, Module, Telemetry, ts_from_ms
from fleetepi.contract.codec import decode_event

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "fleetepi/contract/schemas/crash.schema.json").read_text())
NT_FILE = 0x46494C45


def _nt_file_entries(core: bytes) -> tuple[int, int]:
    """(file offset of the first NT_FILE triple, number of entries) in an ELF64 core."""
    phoff, = struct.unpack_from("<Q", core, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", core, 0x36)
    for i in range(phnum):
        p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from("<IIQQQQ", core, phoff + i * phentsize)
        if p_type != 4:
            continue
        at = p_offset
        while at < p_offset + p_filesz:
            namesz, descsz, n_type = struct.unpack_from("<III", core, at)
            desc = at + 12 + ((namesz + 3) & ~3)
            if n_type == NT_FILE:
                count, = struct.unpack_from("<Q", core, desc)
                return desc + 16, count
            at = desc + ((descsz + 3) & ~3)
    raise AssertionError("no NT_FILE note")


def test_a_damaged_page_offset_never_gives_a_negative_module_base(analyzer, core_factory, tmp_path):  # type: ignore[no-untyped-def]
    """Issue 10: mutated cores gave ``"base": "0x-3fffff80b43d296000"`` and the replay then dropped the crash."""
    data = bytearray(core_factory("pie_fp_g", "segv").read_bytes())
    first, count = _nt_file_entries(bytes(data))
    for i in range(count):  # every mapping claims to start 2^50 pages into its file
        struct.pack_into("<Q", data, first + 24 * i + 16, 1 << 50)
    bad = tmp_path / "core"
    bad.write_bytes(bytes(data))
    report = analyzer.analyze(bad, host="h")
    event = json.loads(conforming_bytes(report.crash))
    jsonschema.validate(event, SCHEMA)
    assert all(not m["base"].startswith("0x-") and 0 <= m["size"] < 1 << 64 for m in event["modules"])
    assert report.crash.signature.startswith("crashy!")  # the stack is still walked


def test_an_event_that_breaks_the_contract_is_reduced_not_lost():
    crash = Crash(ts=ts_from_ms(1_700_000_000_000), host="h1", signature="a!b", signal="SIGSEGV",
                  modules=[Module(name="m", base="0x-1", size=10**22)], notes=["n"])
    event = decode_event(conforming_bytes(crash))
    assert isinstance(event, Crash) and event.signature == "a!b" and event.signal == "SIGSEGV"
    assert event.partial and event.modules is None and any("broke the contract" in n for n in event.notes or [])
    with pytest.raises(PublishError, match="breaks the contract"):
        conforming_bytes(Telemetry(ts=ts_from_ms(0), host="h1", kind="xid", count=-1))


@pytest.mark.parametrize("crash_time", ["99999999999999999999", "18446744073709551615", "0", "9" * 5000, "soon"])
def test_an_absurd_crash_time_still_publishes_with_the_receive_time(core_factory, tmp_path, crash_time):  # type: ignore[no-untyped-def]
    out = tmp_path / "events.jsonl"
    before = time.time()
    result = CliRunner().invoke(core_handler_command, ["4242", "11", "crashy", crash_time, "--publish", str(out), "--host", "h1",
                                                       "--no-pyspy"], input=core_factory("pie_fp_g", "segv").read_bytes())
    assert result.exit_code == 0, result.output
    crash = decode_event(out.read_bytes().splitlines()[0])
    assert isinstance(crash, Crash) and crash.signature.startswith("crashy!")
    assert before - 1 <= crash.ts.timestamp() <= time.time() + 1
    assert any("the time the handler received the core is used" in n for n in crash.notes or [])


def test_a_fifo_is_not_a_core_and_does_not_block(tmp_path):
    fifo = tmp_path / "core.fifo"
    os.mkfifo(fifo)
    done: list[object] = []

    def run() -> None:
        done.append(CliRunner().invoke(signature_command, [str(fifo), "--json", "--no-pyspy"]))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert done, "signature blocked on a FIFO"
    result = done[0]
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    crash = decode_event(result.output.strip().encode())  # type: ignore[attr-defined]
    assert isinstance(crash, Crash) and crash.signature == "unknown!unreadable-core"
    assert any("is a FIFO" in n for n in crash.notes or [])


def _zst_of_zeros(path: Path, gib: float) -> None:
    cctx = zstandard.ZstdCompressor(level=1)
    block = bytes(1 << 20)
    with open(path, "wb") as fh, cctx.stream_writer(fh) as w:
        for _ in range(int(gib * 1024)):
            w.write(block)


def test_a_decompression_bomb_is_bounded_in_time_and_disk(tmp_path):
    """Issue 10: a 110 KB .zst expanding to 3 GB ran past --timeout and wrote a 3 GB temporary file."""
    bomb = tmp_path / "core.bomb.zst"
    _zst_of_zeros(bomb, 3)
    assert bomb.stat().st_size < 1 << 20
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    analyzer = CoreAnalyzer(limits=CoreLimits(parse_timeout_s=1.0), use_pyspy=False, tmp_dir=str(tmp))
    t0 = time.monotonic()
    try:
        crash = analyzer.analyze(bomb, host="h").crash
    finally:
        analyzer.close()
    assert time.monotonic() - t0 < 15  # a generous bound on a loaded machine; unbounded it took minutes
    assert crash.partial and crash.signature.startswith("unknown!")
    jsonschema.validate(json.loads(conforming_bytes(crash)), SCHEMA)
    assert list(tmp.iterdir()) == []  # the temporary copy is gone


def test_zero_blocks_are_holes_in_the_temporary_core(tmp_path):
    import io

    src = io.BytesIO(b"\x7fELF" + bytes(256 << 20) + b"tail")
    out = tmp_path / "plain"
    with open(out, "wb") as fh:
        written, cut, error = copy_limited(src, fh, 1 << 40, Deadline(60), sparse=True)  # type: ignore[arg-type]
    assert (written, cut, error) == ((256 << 20) + 8, False, None)
    st = out.stat()
    assert st.st_size == written
    assert st.st_blocks * 512 < 16 << 20  # data only: a few MiB, not 256
    with open(out, "rb") as fh:
        assert fh.read(4) == b"\x7fELF"
        fh.seek(-4, 2)
        assert fh.read() == b"tail"
