"""The ``coredir`` source: each complete core once, across restarts, without blocking."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import zstandard
from prometheus_client import CollectorRegistry

from fleetepi.agents.sources.coredir import CoreDirSource
from fleetepi.exceptions import SourceUnavailable


def _source(d: Path, analyzer, **kw) -> CoreDirSource:  # type: ignore[no-untyped-def]
    return CoreDirSource(host="node-7", directory=str(d), analyzer=analyzer, **kw)


def test_a_core_is_taken_once_it_is_stable_and_only_once(analyzer, core_factory, tmp_path):  # type: ignore[no-untyped-def]
    shutil.copy(core_factory("pie_fp_g", "segv"), tmp_path / "core.111")
    registry = CollectorRegistry()
    src = _source(tmp_path, analyzer, registry=registry)
    assert list(src.poll(0)) == []  # first sight: maybe still being written
    events = list(src.poll(1000))
    assert [e.signature for e in events] == ["crashy!segv_leaf | crashy!segv_mid | crashy!segv_top"]
    assert events[0].host == "node-7"
    assert list(src.poll(2000)) == []
    assert registry.get_sample_value("fleetepi_agent_cores_total", {"outcome": "ok"}) == 1.0
    assert registry.get_sample_value("fleetepi_agent_cores_total", {"outcome": "failed"}) == 0.0
    # a restart remembers it
    again = _source(tmp_path, analyzer)
    assert list(again.poll(0)) == [] and list(again.poll(1000)) == []


def test_a_growing_file_waits(analyzer, core_factory, tmp_path):  # type: ignore[no-untyped-def]
    data = core_factory("pie_fp_g", "segv").read_bytes()
    target = tmp_path / "core.222"
    target.write_bytes(data[:4096])
    src = _source(tmp_path, analyzer)
    src.poll(0)
    with target.open("ab") as fh:
        fh.write(data[4096:])
    assert list(src.poll(1000)) == []  # grew since last poll
    assert len(list(src.poll(2000))) == 1


def test_compressed_and_temp_files(analyzer, core_factory, tmp_path):  # type: ignore[no-untyped-def]
    raw = core_factory("nopie_nofp", "abort").read_bytes()
    (tmp_path / "core.crashy.0.abc.333.1700000000000000.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    (tmp_path / ".#core.crashy.partial").write_bytes(raw)  # systemd-coredump's temp name: never taken
    (tmp_path / "notes.txt").write_text("not a core")
    src = _source(tmp_path, analyzer)
    src.poll(0)
    events = list(src.poll(1))
    assert [e.signature for e in events] == ["crashy!abort_leaf | crashy!abort_top | crashy!main"]


def test_at_most_max_per_poll(analyzer, core_factory, tmp_path):  # type: ignore[no-untyped-def]
    core = core_factory("pie_fp_g", "other")
    for i in range(3):
        shutil.copy(core, tmp_path / f"core.{i}")
    src = _source(tmp_path, analyzer, max_per_poll=2)
    src.poll(0)
    assert len(list(src.poll(1))) == 2
    assert len(list(src.poll(2))) == 1


def test_a_broken_core_is_an_event_not_a_crash_of_the_loop(analyzer, tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "core.9").write_bytes(b"\x7fELF" + b"\0" * 100)
    src = _source(tmp_path, analyzer, state_path=str(tmp_path / "state" / "x.json"))  # unwritable state dir: warned
    src.poll(0)
    events = list(src.poll(1))
    assert events[0].partial is True


def test_two_instances_share_one_counter(analyzer, tmp_path):  # type: ignore[no-untyped-def]
    registry = CollectorRegistry()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _source(tmp_path / "a", analyzer, registry=registry)
    _source(tmp_path / "b", analyzer, registry=registry)
    assert registry.get_sample_value("fleetepi_agent_cores_total", {"outcome": "partial"}) == 0.0


def test_missing_directory_is_unavailable(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(SourceUnavailable):
        CoreDirSource(host="h", directory=str(tmp_path / "nope"))


def test_built_by_the_agents_source_registry(tmp_path):  # type: ignore[no-untyped-def]
    """One config entry, one instance: the agent builds coredir by name, with host and registry injected."""
    from fleetepi.agents.sources import registry as sources

    prom = CollectorRegistry()
    src = sources.create("coredir", {"directory": str(tmp_path), "max_per_poll": 1},
                         sources.SourceContext(host="node-9", registry=prom))
    try:
        assert isinstance(src, CoreDirSource) and src.host == "node-9"
        assert prom.get_sample_value("fleetepi_agent_cores_total", {"outcome": "ok"}) == 0.0
    finally:
        src.close()
