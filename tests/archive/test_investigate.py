"""``fleetepi investigate`` and its queries, against the simulator's ground truth."""

from __future__ import annotations

import json
import math
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetepi.archive import ArchiveWriter, NoMatch
from fleetepi.archive.epi import rate_ratio, risk_ratio, sparkline
from fleetepi.archive.queries import cohort_answer, host_answer, signature_answer
from fleetepi.archive.reader import Archive
from fleetepi.contract import decode_event
from fleetepi.investigate import parse_when

from .conftest import FLEETEPI, FleetArchive, crash_line, host_line


def _truth(fa: FleetArchive, template: str):
    return next(o for o in fa.truth if o.template == template)


def test_a_cohort_outbreak_ranks_its_cohort_first(fleet_archive: FleetArchive) -> None:
    o = _truth(fleet_archive, "hardware_correlation/bios_rack")
    accept = {(a[3], a[4]) for a in o.accept}
    with Archive(fleet_archive.path) as arc:
        a = signature_answer(arc, o.signature[:25])
        assert a.signature == o.signature
        top = [(r.attribute, r.value) for r in a.cohorts[:3]]
        assert accept & set(top), (top, accept)
        best = next(r for r in a.cohorts if (r.attribute, r.value) in accept)
        assert best.relative_risk > 1 and best.ci_low > 1
        assert best.hosts_affected <= best.hosts and best.host_days >= best.hosts  # denominators make sense
        c = cohort_answer(arc, best.attribute, best.value)
        assert o.signature in [r.value for r in c.signatures[:3]]
        assert c.rate_per_1000_host_days > 0


def test_a_bit_flip_host_shows_its_shapes_on_itself(fleet_archive: FleetArchive) -> None:
    o = _truth(fleet_archive, "host_spike/bit_flip")
    with Archive(fleet_archive.path) as arc:
        h = host_answer(arc, o.host)
    assert h.crashes >= o.n_events
    assert h.bitflip_share > 0.3
    assert any(s.hosts == 1 and s.bitflip_cases > 0 for s in h.shapes)
    assert h.attributes and h.host_days >= 1


def test_the_libunwind_race_is_many_hosts_one_shape(fleet_archive: FleetArchive) -> None:
    o = _truth(fleet_archive, "signature_spike/new")
    with Archive(fleet_archive.path) as arc:
        a = signature_answer(arc, "libunwind")
    assert a.signature == o.signature
    assert a.hosts >= 3 and a.shapes[0].hosts == a.hosts and a.bitflip_share == 0.0
    assert a.series.counts and sum(a.series.counts) == a.cases
    assert a.first_seen is not None and a.last_seen is not None and a.first_seen <= a.last_seen


def test_cli_json_and_text(fleet_archive: FleetArchive) -> None:
    o = _truth(fleet_archive, "hardware_correlation/bios_rack")
    proc = subprocess.run([FLEETEPI, "investigate", "--archive", str(fleet_archive.path), "--json", "signature",
                           o.signature[:20]], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["cases"] > 0 and out["cohorts"][0]["relative_risk"] > 1 and out["series"]["bin"] in ("hour", "day")
    proc = subprocess.run([FLEETEPI, "investigate", "--archive", str(fleet_archive.path), "--since", "2026-11-02",
                           "cohort", f"{o.accept[0][3]}={o.accept[0][4]}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "signatures the cohort over-represents" in proc.stdout
    proc = subprocess.run([FLEETEPI, "investigate", "--archive", str(fleet_archive.path), "signature", "no-such-thing"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "no crash signature" in proc.stderr


def test_user_data_is_never_rich_markup(tmp_path: Path) -> None:
    sig = "[bold red]lib[/]!f | [link=x]y"
    with ArchiveWriter(tmp_path / "a", fsync=False) as w:
        w.add(decode_event(host_line("h[1]")))
        w.add(decode_event(crash_line("h[1]", 1, signature=sig)))
    proc = subprocess.run([FLEETEPI, "investigate", "--archive", str(tmp_path / "a"), "signature", "[bold"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sig in proc.stdout and "h[1]" in proc.stdout


def test_since_until_filter_rows(fleet_archive: FleetArchive) -> None:
    with Archive(fleet_archive.path) as full, Archive(fleet_archive.path, since=parse_when("2026-11-02"),
                                                      until=parse_when("2026-11-03")) as day:
        n = day.query("SELECT count(*), min(ts), max(ts) FROM crash")[0]
        assert 0 < n[0] < full.query("SELECT count(*) FROM crash")[0][0]
        assert n[1] >= datetime(2026, 11, 2, tzinfo=UTC) and n[2] < datetime(2026, 11, 3, tzinfo=UTC)
        with pytest.raises(NoMatch, match="values"):
            cohort_answer(day, "rack", "no-such-rack")


# ---------------------------------------------------------------------- arithmetic
@pytest.mark.parametrize(("a", "n1", "c", "n2", "rr"), [
    (10, 40, 5, 1960, 98.0),   # a rack holding most cases
    (5, 100, 5, 100, 1.0),     # no difference
    (2, 10, 0, 90, 41.4),      # zero outside: 0.5 in every cell (2.5/11 vs 0.5/91), finite
])
def test_risk_ratio(a: int, n1: int, c: int, n2: int, rr: float) -> None:
    r = risk_ratio(a, n1, c, n2)
    assert r.rr == pytest.approx(rr, rel=0.02)
    assert r.lower < r.rr < r.upper and math.isfinite(r.upper)


def test_rate_ratio_allows_more_events_than_units() -> None:
    r = rate_ratio(300, 100, 50, 100)
    assert r.rr == pytest.approx(6.0) and r.lower > 4


def test_sparkline_and_parse_when() -> None:
    assert sparkline([0, 1, 8]) == " ▂█"
    now = datetime(2026, 11, 22, tzinfo=UTC)
    assert parse_when("2d", now) == datetime(2026, 11, 20, tzinfo=UTC)
    assert parse_when("2026-11-02") == datetime(2026, 11, 2, tzinfo=UTC)
