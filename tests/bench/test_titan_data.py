"""bench/titan_data.py on the real Titan files: nothing lost, the contract kept, the paper's effects preserved.

Data: /work/shared/data/real/titan/ from olcf/TitanGPULife (Ostrouchov et
al., "GPU Lifetimes on Titan Supercomputer: Survival Analysis and
Reliability", SC '20). The conversion of all 37,343 rows takes ~1.5 s and
is shared by the session (tests/bench/conftest.py).
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest

from fleetepi.contract import SCHEMA_DIR, Host, Telemetry, decode_event, encode

DATA = Path("/work/shared/data/real/titan")

pytestmark = pytest.mark.skipif(not (DATA / "gc_full.csv.gz").exists(), reason="Titan data not on this machine")


@pytest.fixture(scope="module")
def conv(titan_conversion: Any) -> Any:
    return titan_conversion


@pytest.fixture(scope="module")
def raw() -> list[dict[str, str]]:
    with gzip.open(DATA / "gc_full.csv.gz", "rt", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def batch_of() -> dict[str, str]:
    with gzip.open(DATA / "gc_summary_loc.csv.gz", "rt", newline="") as fh:
        return {r["SN"]: r["batch"] for r in csv.DictReader(fh)}


def _utc(ts: str) -> datetime:
    return datetime.fromisoformat(ts).replace(tzinfo=UTC)


def test_every_row_becomes_an_event_or_a_counted_skip(td: ModuleType, conv: Any, raw: list[dict[str, str]]) -> None:
    assert sum(conv.fates.values()) == len(raw) == 37_343
    assert set(conv.fates) <= {"failure", "announcement", "failure+announcement", *td.SKIP_REASONS}
    failure_rows = sum(1 for r in raw if r["event"])
    assert len(conv.failures) == failure_rows == conv.fates["failure"] + conv.fates["failure+announcement"]
    assert len(conv.hosts) == conv.fates["announcement"] + conv.fates["failure+announcement"]
    assert Counter(e.kind for e in conv.failures) == {
        "ecc_uncorrected": sum(r["event"] == "DBE" for r in raw), "xid": sum(r["event"] == "OTB" for r in raw)}
    # every location is one host, announced once at the start; the rest are batch changes
    hosts = {e.host for e in conv.hosts}
    assert hosts == {r["location"] for r in raw} and len(hosts) == 18_687
    assert sum(e.ts_ms == conv.start_ms for e in conv.hosts) == len(hosts)
    # the only skips on the real files are GPU swaps that keep the host's batch
    assert {k: v for k, v in conv.fates.items() if k in td.SKIP_REASONS} == {"same_batch_swap": 4_997}


def test_times_are_eastern_as_the_paper_reads_them(td: ModuleType, raw: list[dict[str, str]]) -> None:
    """gc_full's ``duration`` is the paper's DST-correct remove - insert: ours must agree to the second."""
    rows = list(td.read_rows(DATA / "gc_full.csv.gz"))
    checked = 0
    for row, r in zip(rows, raw):
        if r["duration"]:
            assert (row.remove_ms - row.insert_ms) // 1000 == int(r["duration"]), (row.line, r)
            checked += 1
    assert checked == 36_185
    # c11-2c1s4n1: inserted 2017-04-09 21:36:19 EDT
    assert rows[0].location == "c11-2c1s4n1" and rows[0].insert_ms == int(_utc("2017-04-10T01:36:19").timestamp()) * 1000


def test_stream_is_in_event_time_with_hosts_first(conv: Any) -> None:
    keys = [(e.ts_ms, 0 if isinstance(e, Host) else 1) for e in conv.events]
    assert keys == sorted(keys)


def test_events_validate_against_the_json_schemas(td: ModuleType, conv: Any) -> None:
    schemas = {json.loads(p.read_text())["$id"]: json.loads(p.read_text()) for p in SCHEMA_DIR.glob("*.schema.json")}
    validators = {k: jsonschema.Draft202012Validator(v, format_checker=jsonschema.FormatChecker())
                  for k, v in schemas.items()}
    # every failure, and every 20th announcement (jsonschema costs ~0.1 ms a message)
    sample = [e for e in conv.events if isinstance(e, Telemetry)] + conv.hosts[::20]
    for ev in sample:
        raw = encode(ev)
        doc = json.loads(raw)
        validators[doc["schema"]].validate(doc)
        assert decode_event(raw) == ev
    dbe = next(e for e in conv.failures if e.kind == "ecc_uncorrected")
    otb = next(e for e in conv.failures if e.kind == "xid")
    assert (dbe.count, dbe.code, otb.code, otb.count) == (1, None, 79, None)
    assert set(conv.hosts[0].attributes) == set(td.HOST_ATTRIBUTES)


def test_attribute_history_of_one_location(conv: Any) -> None:
    """c12-4c2s6n2, from gc_full: old GPU 0323512026161 (OTB 2016-10-20), new 0324216130343 from 2016-11-08,
    old 0323712028216 from 2017-06-20 (DBE 2017-06-24), old again 2017-07-11 and 2017-12-19 (not
    announced: same batch), new 0324917127993 from 2018-03-22 to the end."""
    host = "c12-4c2s6n2"
    history = [(e.ts.isoformat(), e.attributes["batch"]) for e in conv.hosts if e.host == host]
    assert history == [("2013-11-19T23:35:15+00:00", "old"), ("2016-11-08T23:47:06+00:00", "new"),
                       ("2017-06-20T15:51:50+00:00", "old"), ("2018-03-22T19:52:52+00:00", "new")]
    first = next(e for e in conv.hosts if e.host == host)
    assert first.attributes == {"cabinet": "c12-4", "col": "12", "row": "4", "cage": "2", "slot": "6", "node": "2",
                                "batch": "old"}
    fails = [(e.ts.isoformat(), e.kind, e.device) for e in conv.failures if e.host == host]
    assert fails == [("2016-10-20T09:40:59+00:00", "xid", "0323512026161"),
                     ("2017-06-24T22:12:45+00:00", "ecc_uncorrected", "0323712028216")]


def test_repeated_reports_are_kept_and_marked(td: ModuleType, conv: Any) -> None:
    """0323612015776 at c6-7c2s5n0 reported DBE three times on 2017-03-07 before it was pulled."""
    reps = [e for e in conv.failures if e.device == "0323612015776"]
    assert [e.ts.isoformat() for e in reps] == ["2017-03-07T13:49:26+00:00", "2017-03-07T14:22:12+00:00",
                                                "2017-03-07T18:28:52+00:00"]
    assert [e.message.startswith(td.REPEAT) for e in reps] == [False, True, True]  # type: ignore[union-attr]
    assert conv.notes["repeat_report"] == sum(1 for e in conv.failures if e.message.startswith(td.REPEAT))  # type: ignore[union-attr]


def test_first_new_batch_announcement_is_the_first_new_insert(td: ModuleType, conv: Any, batch_of: dict[str, str]) -> None:
    """What bench/titan.py takes as the day both batches are in: the first new GPU put where an old one was."""
    first_new_insert = min(ins for stays in conv.stays.values() for ins, sn in stays
                           if batch_of[sn] == "new" and ins > conv.start_ms)
    first_new_announcement = next(e.ts_ms for e in conv.hosts if e.ts_ms > conv.start_ms and e.attributes["batch"] == "new")
    assert first_new_announcement == first_new_insert
    assert td.ts_from_ms(first_new_insert).date().isoformat() == "2016-01-12"


def _raw_facts(td: ModuleType, raw: list[dict[str, str]], batch_of: dict[str, str]) -> dict[str, float]:
    """The same quantities as ``published_facts`` straight from the CSV rows, without the converter:
    failed GPU = first DBE/OTB row of a serial (at that row's cage, the serial's batch); exposure = the
    stays' own durations (GPU-years, so without the empty node-time the events count)."""
    years: Counter[str] = Counter()
    for r in raw:
        if r["duration"]:
            key = batch_of[r["SN"]] if batch_of[r["SN"]] == "new" else f"old/{r['location'].split('c')[2][0]}"
            years[key] += int(r["duration"]) / (365.25 * 86400)
    failed: Counter[str] = Counter()
    monthly: Counter[str] = Counter()
    seen: set[str] = set()
    for r in sorted((r for r in raw if r["event"]), key=lambda r: r["remove"]):
        if r["SN"] in seen:
            continue
        seen.add(r["SN"])
        b = batch_of[r["SN"]]
        failed[b if b == "new" else f"old/{r['location'].split('c')[2][0]}"] += 1
        if b == "old":
            monthly[r["remove"][:7]] += 1
    old_y = sum(v for k, v in years.items() if k != "new")
    old_rate = sum(v for k, v in failed.items() if k != "new") / old_y
    return {"old_new_ratio": old_rate / (failed["new"] / years["new"]),
            "cage2_cage0_ratio": (failed["old/2"] / years["old/2"]) / (failed["old/0"] / years["old/0"]),
            "old_failed": sum(v for k, v in failed.items() if k != "new"), "new_failed": failed["new"],
            "wave": td.wave_start(dict(monthly))}


def test_conversion_preserves_the_published_facts(td: ModuleType, conv: Any, raw: list[dict[str, str]],
                                                  batch_of: dict[str, str]) -> None:
    facts = td.published_facts(conv.events)
    ref = _raw_facts(td, raw, batch_of)
    # counts are exact; rates differ only by the empty node-time in the events' exposure (~5 %)
    assert (facts.failed_gpus["old"], facts.failed_gpus["new"]) == (5064, 126)
    assert abs(facts.failed_gpus["old"] - ref["old_failed"]) <= 2 and abs(facts.failed_gpus["new"] - ref["new_failed"]) <= 2
    assert facts.old_new_ratio == pytest.approx(ref["old_new_ratio"], rel=0.10)
    assert facts.cage2_cage0_ratio == pytest.approx(ref["cage2_cage0_ratio"], rel=0.10)
    assert facts.wave_start == ref["wave"] == "2015-07"
    # the paper's effects, as events can show them (README: ~25x for GPUs taken out, ~3x by longest location;
    # failure reports at the failing node give ~13x and ~2.4x, see titan_data.reference_facts)
    assert 10 <= facts.old_new_ratio <= 40
    assert 2.0 <= facts.cage2_cage0_ratio <= 4.0
    paper = td.reference_facts(DATA / "gc_summary_loc.csv.gz")
    assert 20 <= paper["dead"]["old_new_ratio"] <= 35 and 2.5 <= paper["dead"]["cage2_cage0_ratio"] <= 4.0
    assert facts.old_new_ratio == pytest.approx(paper["reported"]["old_new_ratio"], rel=0.10)


def test_wave_rule(td: ModuleType) -> None:
    quiet = {f"2014-{m:02d}": 4 for m in range(1, 13)}
    # one bad month is not a wave; three in a row above 3x the 2014 mean (12) are
    assert td.wave_start({**quiet, "2015-01": 30, "2015-02": 4, "2015-03": 13, "2015-04": 13, "2015-05": 13}) == "2015-03"
    assert td.wave_start({**quiet, "2015-01": 12, "2015-02": 13, "2015-03": 13}) is None
    assert td.wave_start({**quiet, "2015-01": 30, "2015-03": 30, "2015-04": 30}) is None  # a month with none breaks the run


def test_bad_rows_are_counted_and_the_rest_converted(td: ModuleType, tmp_path: Path) -> None:
    full = tmp_path / "gc_full.csv"
    full.write_text(
        "SN,location,insert,remove,duration,out,event\n"
        "A1,c1-0c2s3n1,2014-01-21 10:28:50,2016-01-01 00:00:00,1,TRUE,DBE\n"   # good: stay ending in a DBE
        "A2,c1-0c2s3n1,2016-02-01 00:00:00,2017-01-01 00:00:00,1,FALSE,\n"    # new GPU: re-announcement
        "A3,c1-0c2s3n1,2017-02-01 00:00:00,2018-01-01 00:00:00,1,FALSE,\n"    # new again: no announcement
        "A1,c1-0c2s3n1,,2015-12-31 00:00:00,,,OTB\n"                          # report without insert: kept
        "A1,rack7-node3,2014-01-21 10:28:50,2016-01-01 00:00:00,1,TRUE,\n"    # not a Titan location
        "A1,c1-0c2s3n1,2014-01-21 10:28:50,yesterday,1,TRUE,DBE\n"            # unreadable time
        "A1,c1-0c2s3n1,,2015-12-31 00:00:00,,,SBE\n"                          # unknown event
        "Z9,c1-0c2s3n2,2014-01-21 10:28:50,2016-01-01 00:00:00,1,TRUE,\n")    # serial not in the summary
    summary = tmp_path / "gc_summary_loc.csv"
    summary.write_text("SN,batch\nA1,old\nA2,new\nA3,new\n")
    got = td.convert(full, summary)
    assert got.fates == {"failure+announcement": 1, "failure": 1, "announcement": 1, "same_batch_swap": 1,
                         "bad_location": 1, "bad_time": 1, "unknown_event": 1, "unknown_serial": 1}
    assert [(e.host, e.attributes.get("batch")) for e in got.hosts] == [
        ("c1-0c2s3n1", "old"), ("c1-0c2s3n2", None), ("c1-0c2s3n1", "new")]
    assert [e.kind for e in got.failures] == ["xid", "ecc_uncorrected"]
    out = tmp_path / "t.jsonl.gz"
    assert td.write_jsonl(got.events, out) == 5
    with gzip.open(out, "rb") as fh:
        assert [decode_event(line) for line in fh] == got.events


def test_cli_reports_a_file_that_is_not_titan_data(td: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    assert td.main(["--check", "--full", str(bad)]) == 2
    assert "expected columns" in capsys.readouterr().err
    assert td.main(["--check", "--full", str(tmp_path / "missing.csv")]) == 2
