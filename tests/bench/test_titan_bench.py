"""bench/titan.py's scoring: the targets of issue 9 judged on the real Titan events with alerts we place.

The detectors are not run here (bench/titan.py does, ~30 s); these tests
hold the PASS/FAIL rules to the data's own dates, so a harness bug cannot
pass or fail the detectors by itself. Data: olcf/TitanGPULife (Ostrouchov
et al., SC '20), /work/shared/data/real/titan/.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fleetepi.contract import Alert, Event, ts_from_ms

pytestmark = pytest.mark.skipif(not Path("/work/shared/data/real/titan/gc_full.csv.gz").exists(),
                                reason="Titan data not on this machine")

DAY = 86_400_000
WAVE_MS = int(datetime(2015, 7, 1, tzinfo=UTC).timestamp()) * 1000
BOTH_MS = int(datetime(2016, 1, 12, tzinfo=UTC).timestamp()) * 1000  # the first new GPU went in that evening


@pytest.fixture(scope="module")
def events(titan_conversion: Any) -> list[Event]:
    return titan_conversion.events  # type: ignore[no-any-return]


def cohort(ts_ms: int, attribute: str, value: str, score: float = 6.0, state: str = "firing") -> Alert:
    return Alert(ts=ts_from_ms(ts_ms), kind="telemetry_spike", score=score, attribute=attribute, value=value,
                 telemetry_kind="ecc_uncorrected", state=state)  # type: ignore[arg-type]


def host_alert(ts_ms: int, host: str) -> Alert:
    return Alert(ts=ts_from_ms(ts_ms), kind="host_spike", score=6.0, host=host)


def test_dates_come_from_the_data(bench: ModuleType, events: list[Event]) -> None:
    r = bench.analyse(events, [])
    assert (r.wave_start, r.both_batches) == ("2015-07-01", "2016-01-12")
    assert not (r.cage2_pass or r.batch_old_pass or r.bursts_pass)
    # 14 hosts, 15 host-days with >= 10 failure reports; c24-0c2s1n0 had 78 on 2015-12-15
    assert len(r.bursts) == 15 and len({b.host for b in r.bursts}) == 14
    assert ("c24-0c2s1n0", "2015-12-15", 78) in {(b.host, b.day, b.errors) for b in r.bursts}


@pytest.mark.parametrize(("weeks", "passed"), [
    (7.9, True),    # within 8 weeks of the wave start
    (8.1, False),   # too late
    (-20.0, True),  # before the wave: cage 2 was always the hot cage; reported with a negative delay
])
def test_cage2_deadline(bench: ModuleType, events: list[Event], weeks: float, passed: bool) -> None:
    at = WAVE_MS + int(weeks * 7 * DAY)
    r = bench.analyse(events, [cohort(WAVE_MS + 40 * 7 * DAY, "cage", "2"), cohort(at, "cage", "2"),
                               cohort(at - DAY, "cage", "1", state="resolved")])
    assert r.cage2_pass is passed
    assert r.cage2_delay_weeks == pytest.approx(weeks, abs=0.01)


def test_batch_old_must_be_the_first_target_finding_after_both_batches(bench: ModuleType, events: list[Event]) -> None:
    before = cohort(BOTH_MS - 30 * DAY, "cage", "2")  # fired before the new batch came: context, not ranked
    node = cohort(BOTH_MS + DAY, "node", "0", score=9.0)  # ranked, but not one of batch/cage/cabinet
    old = cohort(BOTH_MS + 2 * DAY, "batch", "old", score=5.0)
    cab = cohort(BOTH_MS + 3 * DAY, "cabinet", "c3-1", score=8.0)
    r = bench.analyse(events, [before, node, old, cab])
    assert r.batch_old_pass and r.batch_old_time_rank == 1 and r.batch_old_score_rank == 2
    assert [f"{f.attribute}={f.value}" for f in r.findings] == ["node=0", "batch=old", "cabinet=c3-1"]
    assert r.active_at_both and r.active_at_both[0].startswith("cage=2 since ")
    late = bench.analyse(events, [cab, cohort(BOTH_MS + 5 * DAY, "batch", "old")])
    assert not late.batch_old_pass and late.batch_old_time_rank == 2


def test_the_data_shows_the_old_batch_worse_only_months_after_both_are_in(bench: ModuleType,
                                                                          events: list[Event]) -> None:
    """The hindsight test on every report since the first new GPU: a ranking target no detector can beat.

    Early in 2016 the new batch held 22 to 200 nodes and failed at about the
    old batch's rate per node; only by the autumn does its host-time say
    "old > new" at all. The dates are the data's, so they pin the harness.
    """
    ev = bench.batch_evidence(events, BOTH_MS)
    assert list(ev) == ["0.001", "1e-06"]
    assert "2016-06-01" < ev["0.001"] < ev["1e-06"] < "2017-01-01", ev


def test_every_burst_host_must_get_a_host_alert(bench: ModuleType, events: list[Event]) -> None:
    bursts = bench.analyse(events, []).bursts
    alerts = [host_alert(int(datetime.fromisoformat(b.day + "T12:00:00+00:00").timestamp()) * 1000, b.host)
              for b in bursts]
    stray = host_alert(WAVE_MS, "c0-0c0s0n0")
    r = bench.analyse(events, [*alerts, stray])
    assert r.bursts_pass and all(b.flagged for b in r.bursts)
    assert len(r.other_host_alerts) == 1 and "c0-0c0s0n0" in r.other_host_alerts[0]
    missing = bench.analyse(events, alerts[1:])
    assert not missing.bursts_pass and missing.bursts[0].flagged is None


def test_text_and_markdown_name_every_verdict(bench: ModuleType, events: list[Event]) -> None:
    r = bench.analyse(events, [cohort(WAVE_MS + 7 * DAY, "cage", "2")])
    text = "\n".join(bench.text_lines(r))
    assert "1. cage 2 within 8 weeks of the wave start: PASS" in text and "FAIL" in text
    ref = {"dead": {"old_new_ratio": 26.9, "cage2_cage0_ratio": 3.3},
           "reported": {"old_new_ratio": 13.2, "cage2_cage0_ratio": 3.3}}
    md = bench.markdown(r, {"date": "today", "machine": "here", "config": "defaults", "reference": ref})
    assert md.count("**PASS**") == 1 and md.count("**FAIL**") == 2
