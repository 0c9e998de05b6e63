"""host_spike: one sick host pages; a fleet-wide or rack-wide wave does not page per host."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleetepi.detectors import DetectorConfig
from fleetepi.detectors.host_spike import odd_shape

ODD = {"fault_class": "non_canonical", "shape_flags": ["misaligned_sp", "bit_flip_address"], "bitflip_score": 0.9}


def _trouble(fl: SimpleNamespace, what: str, at: int) -> list:
    c = fl.crash
    if what == "none":
        return []
    if what == "sick_host":        # the founding case: one host, many signatures, odd shapes, ~2/h
        return [c(at + i * 25 * fl.MIN, "h0042", f"lib{i}!f | lib{i}!g", **ODD) for i in range(12)]
    if what == "crashy_host":      # one host crashing plainly, 10 times in an hour
        return [c(at + i * 5 * fl.MIN, "h0042", "sig03") for i in range(10)]
    if what == "fleet_wave":       # every host crashes 8 times in an hour, interleaved (a bad deploy everywhere)
        return [c(at + (k * 200 + i) * 2000, f"h{i:04d}", f"sig{k:02d}") for k in range(8) for i in range(200)]
    if what == "rack_wave":        # every host of rack r03 crashes 8 times in an hour (its switch flaps)
        return [c(at + (k * 20 + i) * 20_000, f"h{60 + i:04d}", f"sig{k:02d}") for k in range(8) for i in range(20)]
    raise AssertionError(what)


@pytest.mark.parametrize(("what", "pages"), [
    ("none", set()),                # background only: nobody
    ("sick_host", {"h0042"}),       # silent corruption: pages, and says so
    ("crashy_host", {"h0042"}),     # far above its peers, even with ordinary shapes
    ("fleet_wave", set()),          # the fleet mean rises with it: no page per host
    ("rack_wave", set()),           # the rack's peers rise with it: no page per host
])
def test_host_spike_table(fl: SimpleNamespace, what: str, pages: set[str]) -> None:
    at = fl.T0 + 2 * fl.DAY + 3 * fl.HOUR
    events = fl.merged(fl.hosts(), fl.background(200, fl.T0, fl.T0 + 3 * fl.DAY),
                       fl.telemetry_background(200, fl.T0, fl.T0 + 3 * fl.DAY), _trouble(fl, what, at))
    alerts = fl.firing(fl.run(events, detectors=["host_spike"]))
    assert {a.host for a in alerts} == pages, [a.summary for a in alerts]
    assert len(alerts) == len(pages)  # one alert per episode
    for a in alerts:
        assert a.kind == "host_spike" and a.p_value is not None and a.p_value < DetectorConfig().host_alpha
        assert a.observed and a.expected is not None and a.observed >= 5 * a.expected
    if what == "sick_host":
        (a,) = alerts
        assert "corruption" in (a.summary or "")
        assert any("distinct signatures" in n for n in a.notes or [])


@pytest.mark.parametrize(("kw", "odd"), [
    ({}, False),                                                  # a plain abort
    ({"fault_class": "null_page", "shape_flags": ["return_to_null"]}, False),  # the libunwind race: software
    ({"fault_class": "non_canonical"}, True),                     # an address no pointer can hold
    ({"shape_flags": ["misaligned_sp"]}, True),                   # a stack pointer off 16-byte alignment
    ({"bitflip_score": 0.95}, True),                              # one bit from a valid pointer
    ({"bitflip_score": 0.1}, False),                              # not enough of a flip
])
def test_odd_shape(fl: SimpleNamespace, kw: dict, odd: bool) -> None:
    assert odd_shape(fl.crash(fl.T0, "h1", "s", **kw), 0.5) is odd
