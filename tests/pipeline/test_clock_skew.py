"""One host's clock off by up to ±7 days: the other hosts' alerts unchanged (issue 10).

The recorded fleet (``data/recorded.jsonl.gz``, 100 hosts, 2 days, golden
alerts in ``data/recorded.alerts.jsonl``) with every crash and telemetry
event of one host moved by the offset. A week behind, its events are late
(``out_of_order``); a week ahead, they are held aside as ``clock_skew``
(one host is no quorum to move the fleet's time) and dropped, counted, at
the end. Either way the fleet's event time never follows that one clock.
"""

from __future__ import annotations

import gzip
from collections import Counter

import orjson
import pytest

from fleetepi.contract import Event, Host, decode_event, encode, format_ts, ts_from_ms
from fleetepi.detectors import DetectorConfig
from fleetepi.exceptions import InvalidMessage
from fleetepi.pipeline import ListAlertSink, Pipeline

from .conftest import DATA

DAY_MS = 86_400_000


def _lines() -> list[bytes]:
    return gzip.decompress((DATA / "recorded.jsonl.gz").read_bytes()).splitlines()


def _event(line: bytes) -> Event | None:
    try:
        return decode_event(line)
    except InvalidMessage:
        return None  # the recording's own bad lines stay as they are


def _busiest_host(lines: list[bytes]) -> str:
    """The host with the most crash and telemetry events: the strongest test of 'nothing else changes'."""
    hosts = Counter(ev.host for ev in map(_event, lines) if ev is not None and not isinstance(ev, Host))
    return hosts.most_common(1)[0][0]


def _shift(line: bytes, host: str, offset_ms: int) -> bytes:
    parsed = _event(line)
    if parsed is None or parsed.host != host or isinstance(parsed, Host):
        return line
    ev = orjson.loads(line)
    ev["ts"] = format_ts(ts_from_ms(parsed.ts_ms + offset_ms))
    return orjson.dumps(ev)


def _alerts(lines: list[bytes]) -> tuple[list[bytes], Pipeline]:
    sink = ListAlertSink()
    pipe = Pipeline(sink=sink)
    pipe.run(lines)
    pipe.finish()
    return [encode(a) for a in sink.alerts], pipe


def _identity(raw: bytes) -> tuple:
    a = orjson.loads(raw)
    return tuple(a.get(k) for k in ("kind", "signature", "host", "attribute", "value", "telemetry_kind", "code",
                                    "state", "ts", "severity", "finding"))


@pytest.mark.parametrize("days", [-7, -1, 1 / 48, 1 / 2, 1, 7])
def test_one_host_off_by_days_changes_no_other_alert(days: float) -> None:
    """Half an hour ahead (within the jump): its events count, and no other host's is made late."""
    lines = _lines()
    host = _busiest_host(lines)
    clean, _ = _alerts(lines)
    skewed, pipe = _alerts([_shift(x, host, int(days * DAY_MS)) for x in lines])
    others = [_identity(a) for a in clean if orjson.loads(a).get("host") != host]
    assert others, "the recording has alerts about other hosts"
    assert [_identity(a) for a in skewed if orjson.loads(a).get("host") != host] == others
    if 0 < days * DAY_MS <= DetectorConfig().max_jump_s * 1000:
        # ahead by less than the jump: nothing set aside, nobody else late
        assert pipe.engine.invalid["out_of_order"] == 0 and pipe.engine.invalid["clock_skew"] == 0
    else:
        # the shifted events were set aside, counted under their reason, not folded
        reason = "out_of_order" if days < 0 else "clock_skew"
        assert pipe.engine.invalid[reason] > 0, dict(pipe.engine.invalid)
