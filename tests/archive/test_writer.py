"""The writer: every admitted event once, attributes as of the event's time, atomic files."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from fleetepi.archive import ArchiveWriter
from fleetepi.archive.layout import META_FILE
from fleetepi.archive.reader import Archive
from fleetepi.contract import decode_event
from fleetepi.pipeline import Pipeline

from .conftest import crash_line, host_line, telemetry_line


def _replay(lines: list[bytes], root: Path, **kw: object) -> Pipeline:
    with ArchiveWriter(root, fsync=False, **kw) as w:  # type: ignore[arg-type]
        pipe = Pipeline(archive=w)
        pipe.run(lines)
        pipe.finish()
    return pipe


def test_every_accepted_event_is_archived_once(fleet_archive) -> None:
    with Archive(fleet_archive.path) as arc:
        got = {t: arc.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("host", "crash", "telemetry")}
        alerts = arc.query("SELECT count(*) FROM alert WHERE state = 'firing'")[0][0]
        hostdays = arc.query("SELECT sum(events) FROM hostday")[0][0]
    assert got == fleet_archive.counts
    assert alerts == fleet_archive.alerts > 0
    assert hostdays == got["crash"] + got["telemetry"]  # the rollup counts the same events


def test_rejected_lines_are_not_archived(tmp_path: Path) -> None:
    lines = [host_line("h1"), crash_line("h1", 1), b"{not json", crash_line("h1", 500),
             crash_line("h1", 2),  # 498 minutes behind the watermark: out_of_order, dropped by the engine
             crash_line("ghost", 501)]  # unknown host: admitted (flagged), archived without attributes
    pipe = _replay(lines, tmp_path / "a")
    assert pipe.summary.invalid["out_of_order"].count == 1
    with Archive(tmp_path / "a") as arc:
        rows = arc.query('SELECT host, "attr.rack" FROM crash ORDER BY ts')
    assert rows == [("h1", "r1"), ("h1", "r1"), ("ghost", None)]


def test_attributes_are_those_in_force_at_the_event_time(tmp_path: Path) -> None:
    lines = [host_line("h1", 0, bios="2.3", rack="r7"), host_line("h2", 0, bios="2.3", rack="r8"),
             crash_line("h1", 10), telemetry_line("h1", 20),
             host_line("h1", 30, bios="2.4", rack="r7"),  # BIOS upgrade at minute 30
             crash_line("h1", 40), crash_line("h2", 41), telemetry_line("h1", 50)]
    _replay(lines, tmp_path / "a", batch_events=3)  # batches split the upgrade from its events
    with Archive(tmp_path / "a") as arc:
        crashes = arc.query('SELECT host, "attr.bios" FROM crash ORDER BY ts')
        tel = arc.query('SELECT "attr.bios" FROM telemetry ORDER BY ts')
        hosts = arc.query('SELECT host, "attr.bios" FROM host ORDER BY ts, host')
    assert crashes == [("h1", "2.3"), ("h1", "2.4"), ("h2", "2.3")]
    assert tel == [("2.3",), ("2.4",)]
    assert hosts == [("h1", "2.3"), ("h2", "2.3"), ("h1", "2.4")]


def test_free_form_attribute_keys_become_columns(tmp_path: Path) -> None:
    lines = [host_line("h1", 0, **{"topology.kubernetes.io/zone": "z1", "Weird Key": "x"}), crash_line("h1", 1)]
    _replay(lines, tmp_path / "a")
    with Archive(tmp_path / "a") as arc:
        assert set(arc.attribute_keys("crash")) == {"topology.kubernetes.io/zone", "Weird Key"}
        assert arc.query('SELECT "attr.topology.kubernetes.io/zone", "attr.Weird Key" FROM crash') == [("z1", "x")]


def test_events_without_a_line_are_archived_like_lines(tmp_path: Path) -> None:
    """The demo feeds decoded events (no JSON line): the writer re-encodes them, same rows."""
    lines = [host_line("h1", 0, rack="r1"), crash_line("h1", 1, signal="SIGSEGV", shape_flags=["ip_zero"],
                                                        bitflip_score=0.25, cpu=3),
             telemetry_line("h1", 2, "ecc_corrected", None)]
    _replay(lines, tmp_path / "lines")
    with ArchiveWriter(tmp_path / "structs", fsync=False) as w:
        pipe = Pipeline(archive=w)
        for line in lines:
            pipe.feed_event(decode_event(line))
    q = "SELECT * EXCLUDE (day) FROM {} ORDER BY ts"
    for table in ("crash", "telemetry", "host"):
        with Archive(tmp_path / "lines") as a, Archive(tmp_path / "structs") as b:
            assert a.query(q.format(table)) == b.query(q.format(table))


def test_files_are_complete_parquet_with_format_metadata(fleet_archive) -> None:
    root = fleet_archive.path
    meta = json.loads((root / META_FILE).read_text())
    assert meta["format"] == 1
    files = list(root.rglob("*.parquet"))
    assert files and not list(root.rglob("*.tmp"))
    for f in files:
        md = pq.read_metadata(f).metadata
        assert md[b"fleetepi.format"] == b"1"
    # plain DuckDB, without fleetepi, reads the layout (what docs/archive.md shows)
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/schema=crash/*/*.parquet', hive_partitioning = true, "
                   "union_by_name = true)").fetchall()[0][0]
    assert n == fleet_archive.counts["crash"]


def test_writer_failure_surfaces_in_the_caller(tmp_path: Path) -> None:
    root = tmp_path / "a"
    w = ArchiveWriter(root, fsync=False)
    w.add(decode_event(host_line("h1")))
    (root / "schema=host").write_text("a file where a folder must go")
    with pytest.raises(Exception, match="archive"):
        w.close()


def test_the_format_version_is_one_number() -> None:
    import fleetepi.archive
    from fleetepi.archive import schema

    assert fleetepi.archive.FORMAT_VERSION == schema.FORMAT_VERSION
