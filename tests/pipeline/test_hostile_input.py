"""Hostile replay input (issue 10): each bad line gets a clear reason, and nothing else is lost.

Every case mixes the bad input into the recorded stream
(``data/recorded.jsonl.gz``) and holds the run to its golden alerts
(``data/recorded.alerts.jsonl``): the bad line is counted, the alerts are
byte for byte those of the clean run.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest

from fleetepi.contract import decode_event
from fleetepi.exceptions import InvalidMessage
from fleetepi.jsonl import OverlongLine, bounded_lines, gunzip_lines

from .conftest import DATA, FLEETEPI, host_line, ts


def recorded() -> list[bytes]:
    return gzip.decompress((DATA / "recorded.jsonl.gz").read_bytes()).splitlines()


GOLDEN = (DATA / "recorded.alerts.jsonl").read_bytes()


def replay(path: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([FLEETEPI, "replay", "-i", str(path), "-o", "-", "--no-progress", *extra],
                          capture_output=True, timeout=300, check=False)


def replay_measured(path: Path) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """``replay`` run by a fresh Python whose only child it is: that parent's RUSAGE_CHILDREN is the replay's peak RSS."""
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "sys.stdout.buffer.write(r.stdout); sys.stderr.buffer.write(r.stderr); "
             "sys.stderr.write(f'\\nPEAK-KIB {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}'); sys.exit(r.returncode)")
    run = subprocess.run([sys.executable, "-c", probe, FLEETEPI, "replay", "-i", str(path), "-o", "-", "--no-progress"],
                         capture_output=True, timeout=300, check=False)
    err, _, peak = run.stderr.rpartition(b"\nPEAK-KIB ")
    return subprocess.CompletedProcess(run.args, run.returncode, run.stdout, err), int(peak) / 1024


def deep(n: int) -> bytes:
    """A host announcement with an unknown field nested ``n`` arrays deep (2 KB for n = 1,000)."""
    return (b'{"schema":"fleetepi.host/v1","ts":"' + ts(0).encode() + b'","host":"h9","attributes":{},"x":'
            + b"[" * n + b"]" * n + b"}")


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_json_is_too_large_not_a_recursion_error(depth):
    with pytest.raises(InvalidMessage) as info:
        decode_event(deep(depth))
    assert info.value.reason in ("too_large",)


def test_a_host_with_65_attributes_is_an_invalid_field():
    line = orjson.dumps({"schema": "fleetepi.host/v1", "ts": ts(0), "host": "h1",
                         "attributes": {f"a{i}": "v" for i in range(65)}})
    with pytest.raises(InvalidMessage) as info:
        decode_event(line)
    assert info.value.reason == "invalid_field"
    with pytest.raises(InvalidMessage) as info:
        decode_event(b"[1]")
    assert info.value.reason == "not_an_object"


def identities(alerts: bytes) -> list[tuple]:
    """What an alert says happened, without its numbers: kind, entity, state and time."""
    out = []
    for line in alerts.splitlines():
        a = json.loads(line)
        out.append(tuple(a.get(k) for k in ("kind", "signature", "host", "attribute", "value", "telemetry_kind",
                                            "code", "state", "ts", "severity", "finding")))
    return out


def host_at(line: bytes, name: str) -> bytes:
    """A host announcement named ``name`` at the time of a recorded line (so no clock moves)."""
    return orjson.dumps({"schema": "fleetepi.host/v1", "ts": orjson.loads(line)["ts"], "host": name, "attributes": {}})


def test_replay_counts_hostile_lines_and_keeps_the_golden_alerts(tmp_path):
    lines = recorded()
    hostile = [deep(1_000), deep(5_000), b"\xef\xbb\xbf" + lines[0], host_at(lines[199], "[/x]"),
               host_at(lines[199], "[bold red]x[/]")]
    mixed = lines[:200] + hostile + lines[200:]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in mixed))
    run = replay(path)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    # the two announcements with markup names are valid: two more (quiet) hosts in the fleet change the
    # denominators in the alerts' numbers, not which alerts fire, nor when
    assert identities(run.stdout) == identities(GOLDEN)
    err = run.stderr.decode()
    assert "too_large" in err and "Traceback" not in err
    assert "[/x]" not in err or "MarkupError" not in err


def test_a_bom_before_the_first_line_is_ignored(tmp_path):
    lines = recorded()
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(x + b"\n" for x in lines))
    gz = tmp_path / "bom.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    for p in (path, gz):
        run = replay(p)
        assert run.returncode == 0, run.stderr.decode()[-2000:]
        assert run.stdout == GOLDEN
        assert b"line 1:" not in run.stderr  # (the recording's own bad lines are at 101, 2002, 4003)


def test_a_host_named_like_markup_does_not_crash_the_summary(tmp_path):
    """Issue 10: a host named ``[/x]`` made the summary raise MarkupError (exit 1) after the alerts."""
    path = tmp_path / "markup.jsonl"
    bad = orjson.dumps({"schema": "fleetepi.crash/v1", "ts": ts(1), "host": "[/x]", "signature": "[bold]x[/bold]"})
    path.write_bytes(host_line("h1") + b"\n" + bad + b"\n" + orjson.dumps({"schema": "x[/y]"}) + b"\n")
    run = replay(path)
    assert run.returncode == 0, run.stderr.decode()
    assert b"[/x]" in run.stderr and b"MarkupError" not in run.stderr


def _huge_line_gz(path: Path, line_bytes: int) -> None:
    """A few good lines around one line of ``line_bytes`` zeros, gzip'd in streaming (the file stays small)."""
    good = recorded()
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        fh.write(z.compress(b"".join(x + b"\n" for x in good[:100])))
        block = b"0" * (1 << 20)
        for _ in range(line_bytes >> 20):
            fh.write(z.compress(block))
        fh.write(z.compress(b"\n" + b"".join(x + b"\n" for x in good[100:])))
        fh.write(z.flush())


def test_one_huge_line_in_a_small_gz_is_read_with_a_bound(tmp_path):
    """256 MiB of one line inside a ~300 KiB .gz: too_large, the golden alerts, and memory far below the line."""
    path = tmp_path / "huge.jsonl.gz"
    _huge_line_gz(path, 256 << 20)
    assert path.stat().st_size < 2 << 20
    run, peak_mib = replay_measured(path)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout == GOLDEN
    assert b"too_large" in run.stderr and b"268435456 bytes" in run.stderr
    assert peak_mib < 250, f"peak RSS {peak_mib:.0f} MiB for a 256 MiB line"


@pytest.mark.parametrize("reader", ["plain", "gzip"])
@pytest.mark.parametrize("chunk", [7, 1 << 16])
def test_bounded_readers_yield_every_line_and_mark_the_long_one(reader, chunk):
    import io

    lines = [b"a" * 10, b"b" * 100, b"", b"c" * 5]
    blob = b"\n".join(lines) + b"\n"
    raw = gzip.compress(blob) if reader == "gzip" else blob
    fh = io.BufferedReader(io.BytesIO(raw))
    got = list(gunzip_lines(fh, chunk_bytes=chunk, max_line_bytes=50) if reader == "gzip"
               else bounded_lines(fh, max_line_bytes=50, chunk_bytes=chunk))
    assert got[0] == lines[0] and got[2:] == lines[2:]
    assert isinstance(got[1], OverlongLine) and got[1].size == 100 and len(got[1]) == 51
    with pytest.raises(InvalidMessage, match="message of 100 bytes"):
        import fleetepi.contract.codec as codec

        old = codec.MAX_MESSAGE_BYTES
        codec.MAX_MESSAGE_BYTES = 50  # type: ignore[misc]
        try:
            decode_event(got[1])
        finally:
            codec.MAX_MESSAGE_BYTES = old  # type: ignore[misc]


def test_deep_json_in_the_stream_worker_decode_is_an_invalid_message():
    """The stream worker's state decodes input records with the same bounded decoder (stream/state.py)."""
    pytest.importorskip("faust")
    from fleetepi.stream.state import PartitionState  # noqa: F401 - import proves the path exists

    with pytest.raises(InvalidMessage):
        decode_event(deep(50_000))
    assert json.loads(b"[1]") == [1]
