"""The typed models and the normative JSON Schemas accept and reject the same messages."""

from __future__ import annotations

import json

import jsonschema
import pytest

from fleetepi.contract import SCHEMA_DIR, decode_alert, decode_event, decode_message, encode
from fleetepi.exceptions import InvalidMessage

SCHEMAS = {
    json.loads(p.read_text())["$id"]: json.loads(p.read_text()) for p in SCHEMA_DIR.glob("*.schema.json")
}

VALID = [
    {"schema": "fleetepi.host/v1", "ts": "2026-11-22T10:15:03.120Z", "host": "gpu-a-001",
     "attributes": {"gpu_model": "H100", "driver": "550.54", "rack": "r17", "bios": "2.4"}},
    {"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03.120Z", "host": "gpu-a-001",
     "signature": "python3.11!subprocess_fork_exec | libc.so.6!__libc_fork", "signal": "SIGSEGV",
     "fault_address": "0x0", "frames": [{"module": "libc.so.6", "function": "__libc_fork", "offset": "0x1a2"}],
     "job": "train-42"},
    {"schema": "fleetepi.telemetry/v1", "ts": "2026-11-22T10:15:03Z", "host": "gpu-a-001", "kind": "xid",
     "code": 79, "count": 3, "device": "0000:cb:00.0", "message": "GPU has fallen off the bus."},
    {"schema": "fleetepi.telemetry/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "kind": "thermal", "value": 91.5},
    {"schema": "fleetepi.alert/v1", "ts": "2026-11-22T10:15:03.120Z", "kind": "hardware_correlation",
     "signature": "a!b", "attribute": "bios", "value": "2.4", "score": 12.5, "p_value": 1e-9,
     "relative_risk": 40.0, "state": "firing"},
    # v1.1: severity, finding, incident on alerts; origin and cpu on crashes; power telemetry
    {"schema": "fleetepi.alert/v1", "ts": "2026-11-22T10:15:03.120Z", "kind": "host_spike", "host": "h1",
     "score": 4.0, "severity": "ticket", "finding": "crash_loop", "incident": "host:h1"},
    {"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "signature": "python!OOM",
     "origin": "python_traceback", "cpu": 17},
    {"schema": "fleetepi.telemetry/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "kind": "power", "value": 699.5,
     "device": "0000:cb:00.0"},
]

# Each case: a message both the schema and the decoder must reject, and the reason we give.
INVALID = [
    ({"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03Z", "host": "h"}, "missing_field"),
    ({"schema": "fleetepi.crash/v2", "ts": "2026-11-22T10:15:03Z", "host": "h", "signature": "x"}, "unknown_schema"),
    ({"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03Z", "host": "", "signature": "x"}, "invalid_field"),
    ({"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "signature": "x",
      "fault_address": "0xDEAD"}, "invalid_field"),  # upper-case hex breaks the pattern
    ({"schema": "fleetepi.telemetry/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "kind": "xid",
      "count": -1}, "invalid_field"),
    ({"schema": "fleetepi.telemetry/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "kind": "cosmic"},
     "invalid_field"),
    ({"schema": "fleetepi.host/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "attributes": {"rack": 17}},
     "invalid_field"),
    ({"schema": "fleetepi.host/v1", "ts": "not a time", "host": "h", "attributes": {}}, "invalid_field"),
    ({"schema": "fleetepi.alert/v1", "ts": "2026-11-22T10:15:03Z", "kind": "host_spike", "score": 1.0,
      "severity": "urgent"}, "invalid_field"),
    ({"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "signature": "x",
      "origin": "crystal_ball"}, "invalid_field"),
    ({"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:15:03Z", "host": "h", "signature": "x", "cpu": -1},
     "invalid_field"),
]


@pytest.mark.parametrize("msg", VALID, ids=lambda m: m["schema"])
def test_valid_samples_pass_schema_and_decoder(msg):
    jsonschema.validate(msg, SCHEMAS[msg["schema"]], format_checker=jsonschema.FormatChecker())
    decoded = decode_message(json.dumps(msg))
    # round trip: what we encode validates too and decodes to the same struct
    again = json.loads(encode(decoded))
    jsonschema.validate(again, SCHEMAS[msg["schema"]])
    assert decode_message(encode(decoded)) == decoded


@pytest.mark.parametrize(("msg", "reason"), INVALID)
def test_invalid_samples_are_rejected_with_reason(msg, reason):
    schema = SCHEMAS.get(msg["schema"])
    if schema is not None:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(msg, schema, format_checker=jsonschema.FormatChecker())
    decode = decode_alert if msg["schema"] == "fleetepi.alert/v1" else decode_event
    with pytest.raises(InvalidMessage) as info:
        decode(json.dumps(msg))
    assert info.value.reason == reason
    assert info.value.detail


@pytest.mark.parametrize(("raw", "reason"), [
    (b"{not json", "malformed_json"),
    (b"\xff\xfe garbage", "malformed_json"),
    (b"[1, 2]", "not_an_object"),
    (b'{"ts": "2026-11-22T10:15:03Z"}', "unknown_schema"),
    (b'{"schema": "x"' + b" " * (1 << 20) + b"}", "too_large"),
])
def test_bytes_that_are_not_messages(raw, reason):
    with pytest.raises(InvalidMessage) as info:
        decode_event(raw)
    assert info.value.reason == reason


def test_unknown_fields_are_ignored():
    msg = dict(VALID[1], future_field={"a": 1})
    assert decode_event(json.dumps(msg)).signature == VALID[1]["signature"]
