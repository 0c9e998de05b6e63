"""Bad input: damaged files are skipped and counted, writers and compaction never corrupt, old archives read."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fleetepi.archive import ArchiveFormatError
from fleetepi.archive.layout import MARKER_PREFIX, META_FILE, partition_files
from fleetepi.archive.maintenance import compact, retain
from fleetepi.archive.queries import signature_answer
from fleetepi.archive.reader import Archive, _reads_ok

from .conftest import FLEETEPI, FleetArchive

HERE = Path(__file__).parent


def _crash_files(root: Path) -> list[Path]:
    return sorted(root.glob("schema=crash/day=*/*.parquet"))


def _investigate(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([FLEETEPI, "investigate", "--archive", str(root), "--json", *args],
                          capture_output=True, text=True, timeout=120)


def test_truncated_and_garbage_files_are_skipped_with_a_warning(archive_copy: Path, fleet_archive: FleetArchive) -> None:
    files = _crash_files(archive_copy)
    victim = files[1]
    lost = pq.read_metadata(victim).num_rows
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])  # a writer killed mid-file (without the atomic rename)
    (files[0].parent / "part-garbage.parquet").write_bytes(b"not parquet at all")
    sig = json.loads(_investigate(fleet_archive.path, "signature", "lib").stdout)["signature"]
    proc = _investigate(archive_copy, "signature", sig)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning: skipped") == 2
    out = json.loads(proc.stdout)
    assert len(out["skipped_files"]) == 2
    with Archive(archive_copy) as arc:
        assert len(arc.skipped) == 2
        assert arc.query("SELECT count(*) FROM crash")[0][0] == fleet_archive.counts["crash"] - lost


def test_file_damaged_inside_is_found_at_query_time(archive_copy: Path, fleet_archive: FleetArchive) -> None:
    victim = max(_crash_files(archive_copy), key=lambda p: p.stat().st_size)
    lost = pq.read_metadata(victim).num_rows
    data = bytearray(victim.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for i in range(4, len(data) - footer - 8):  # every data page scrambled, footer and magic intact
        data[i] = (data[i] * 31 + 7) % 256
    victim.write_bytes(bytes(data))
    assert _reads_ok(victim) is not None
    with Archive(archive_copy) as arc:
        assert not arc.skipped  # the ends look fine: found only when read
        n = arc.query("SELECT count(*), count(DISTINCT signature), max(length(signature)) FROM crash")[0][0]
        assert n == fleet_archive.counts["crash"] - lost
        assert [s.path for s in arc.skipped] == [str(victim)]


def test_killed_writer_leaves_no_visible_half_file(tmp_path: Path) -> None:
    root = tmp_path / "a"
    proc = subprocess.Popen([sys.executable, str(HERE / "writer_proc.py"), str(root), "w", "200000", "2000"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for _ in range(3):  # let it publish a few files, then kill it mid-stream
        assert proc.stdout.readline(), "writer died early"
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Archive(root) as arc:
        assert not arc.skipped
        n = arc.query("SELECT count(*) FROM crash")[0][0]
    assert n >= 6000
    for f in root.rglob("*.parquet"):
        assert _reads_ok(f) is None, f


def test_two_writers_and_a_compactor_never_corrupt_a_partition(tmp_path: Path) -> None:
    root = tmp_path / "a"
    n = 6000
    procs = [subprocess.Popen([sys.executable, str(HERE / "writer_proc.py"), str(root), p, str(n), "300"],
                              stdout=subprocess.DEVNULL) for p in ("a", "b")]
    compactions = 0
    while any(p.poll() is None for p in procs):
        if root.exists():
            rep = compact(root, fsync=False)
            compactions += rep.compacted_partitions
        time.sleep(0.02)
    assert all(p.returncode == 0 for p in procs)
    compact(root, fsync=False)
    with Archive(root) as arc:
        assert not arc.skipped
        rows = dict(arc.query("SELECT signature, count(*) FROM crash GROUP BY 1"))
        days = arc.query("SELECT count(DISTINCT day) FROM crash")[0][0]
    assert rows == {"sig-a": n, "sig-b": n}
    assert days == 2
    assert compactions > 0
    for day in ("2026-11-22", "2026-11-23"):
        assert len(partition_files(root, "crash", day)) == 1


def test_a_compaction_killed_after_its_rename_double_counts_nothing(archive_copy: Path,
                                                                     fleet_archive: FleetArchive) -> None:
    day = sorted(p.parent.name[4:] for p in _crash_files(archive_copy))[0]
    folder = archive_copy / "schema=crash" / f"day={day}"
    # a second file in the partition, then a merge whose inputs were not yet removed
    src = next(folder.glob("*.parquet"))
    table = pq.read_table(src)
    half = table.slice(0, table.num_rows // 2), table.slice(table.num_rows // 2)
    src.unlink()
    for i, part in enumerate(half):
        pq.write_table(part, folder / f"part-split-{i}.parquet")
    pq.write_table(table, folder / "compact-merged.parquet")
    (folder / f"{MARKER_PREFIX}x.json").write_text(json.dumps(
        {"output": "compact-merged.parquet", "inputs": ["part-split-0.parquet", "part-split-1.parquet"]}))
    with Archive(archive_copy) as arc:
        assert arc.query("SELECT count(*) FROM crash")[0][0] == fleet_archive.counts["crash"]
    compact(archive_copy, fsync=False)  # finishes the killed one: inputs and marker gone
    assert sorted(p.name for p in folder.iterdir()) == ["compact-merged.parquet"]
    with Archive(archive_copy) as arc:
        assert arc.query("SELECT count(*) FROM crash")[0][0] == fleet_archive.counts["crash"]


def test_compaction_moves_damaged_files_aside_and_drops_kafka_duplicates(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "schema=telemetry" / "day=2026-11-22"
    folder.mkdir(parents=True)
    (tmp_path / "a" / META_FILE).write_text('{"format": 1}')
    ts = pa.array([1763800000000] * 3, type=pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    t = pa.table({"ts": ts, "host": ["h"] * 3, "kind": ["xid"] * 3, "src_partition": [0, 0, 1],
                  "src_offset": [5, 6, 5]})
    pq.write_table(t, folder / "part-1.parquet")
    pq.write_table(t.slice(1), folder / "part-2.parquet")  # a restart re-delivered offsets 6 and (1, 5)
    (folder / "part-3.parquet").write_bytes(b"PAR1 half a file")
    rep = compact(tmp_path / "a", fsync=False)
    assert rep.duplicates_dropped == 2 and len(rep.corrupt_moved) == 1
    assert (tmp_path / "a" / "_corrupt" / "schema=telemetry" / "day=2026-11-22" / "part-3.parquet").exists()
    with Archive(tmp_path / "a") as arc:
        assert arc.query("SELECT count(*) FROM telemetry")[0][0] == 3


def test_retention_drops_whole_days_oldest_first(archive_copy: Path) -> None:
    with Archive(archive_copy) as arc:
        days = [str(d) for (d,) in arc.query("SELECT DISTINCT day FROM hostday ORDER BY 1")]
    assert len(days) == 4
    # older than 2 days before the newest day of events (an alert resolved at the end may fall on the next)
    rep = retain(archive_copy, max_age_days=2, today=date.fromisoformat(days[-1]))
    assert rep.days_removed == days[:1]
    sizes = sum(f.stat().st_size for f in archive_copy.rglob("*.parquet"))
    rep = retain(archive_copy, max_bytes=sizes - 1)  # one byte too many: the oldest day left goes
    assert rep.days_removed == [days[1]]
    with Archive(archive_copy) as arc:
        assert [str(d) for (d,) in arc.query("SELECT DISTINCT day FROM crash ORDER BY 1")] == days[2:]


# ---------------------------------------------------------------------- older formats
def _write_format0(root: Path) -> None:
    """An archive as a first, metadata-less writer would have left it: fewer columns, no hostday/alert tables."""
    rows = orjson.loads((HERE / "data" / "format0-crashes.json").read_bytes())
    table = pa.Table.from_pylist(rows)
    table = table.set_column(0, "ts", pa.array([r["ts"] for r in rows]).cast(pa.timestamp("ms", tz="UTC")))
    for day in sorted({r["ts"][:10] for r in rows}):
        folder = root / "schema=crash" / f"day={day}"
        folder.mkdir(parents=True)
        mask = pa.array([r["ts"].startswith(day) for r in rows])
        pq.write_table(table.filter(mask), folder / "part-0.parquet")


def test_an_archive_without_metadata_and_with_fewer_columns_still_answers(tmp_path: Path) -> None:
    root = tmp_path / "old"
    _write_format0(root)
    with Archive(root) as arc:
        assert arc.meta["format"] == 0
        assert "cpu" in arc.columns["crash"]  # missing columns read as NULL
        a = signature_answer(arc, "libunwind")
    assert a.cases == 4 and a.hosts == 3
    assert a.cohorts == []  # no hostday denominators in that archive: no cohort table, no error
    proc = _investigate(root, "host", "dc1-r01-n01")
    assert proc.returncode == 0, proc.stderr


def test_the_format1_archive_checked_in_still_reads() -> None:
    """tests/archive/data/format1 was written by the first archive version (scripts: see its README)."""
    root = HERE / "data" / "format1"
    with Archive(root) as arc:
        assert arc.meta["format"] == 1
        a = signature_answer(arc, "libunwind.so.8!_ULx86_64_step")
        assert a.cases == 3 and a.hosts == 3
        assert arc.query('SELECT DISTINCT "attr.rack" FROM crash ORDER BY 1') == [("r1",), ("r2",)]


def test_an_archive_of_a_newer_format_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / META_FILE).write_text('{"format": 99}')
    with pytest.raises(ArchiveFormatError, match="newer"):
        Archive(tmp_path)
    proc = _investigate(tmp_path, "host", "h")
    assert proc.returncode == 1 and "upgrade fleetepi" in proc.stderr


def test_stale_temporary_files_are_invisible(archive_copy: Path, fleet_archive: FleetArchive) -> None:
    folder = _crash_files(archive_copy)[0].parent
    (folder / ".part-x.parquet.tmp").write_bytes(b"PAR1 half")
    with Archive(archive_copy) as arc:
        assert not arc.skipped
        assert arc.query("SELECT count(*) FROM crash")[0][0] == fleet_archive.counts["crash"]
