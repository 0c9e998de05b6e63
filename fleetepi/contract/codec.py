"""Bytes <-> contract messages, with a specific reason for every rejection.

A rejected message is never fatal: callers count it under ``reason`` (a
small, fixed set, safe as a Prometheus label) and keep ``detail`` (msgspec's
own sentence, e.g. "Expected `str`, got `int` - at `$.host`") for the
dead-letter record and the log.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from fleetepi.contract.models import Alert, Crash, Event, Host, Message, Telemetry
from fleetepi.exceptions import InvalidMessage

#: Largest message accepted; a bigger one is dead-lettered as ``too_large``.
MAX_MESSAGE_BYTES: Final = 1 << 20

#: Every reason a message can be rejected or flagged for (the label values
#: of ``fleetepi_events_invalid_total``). Admission checks in the pipeline add
#: the time and inventory ones.
REASONS: Final = (
    "malformed_json",
    "not_an_object",
    "unknown_schema",
    "missing_field",
    "invalid_field",
    "too_large",
    "out_of_order",
    "future_timestamp",
    "unknown_host",
    "clock_skew",
)

_event_decoder = msgspec.json.Decoder(Host | Crash | Telemetry)
_message_decoder = msgspec.json.Decoder(Host | Crash | Telemetry | Alert)
_alert_decoder = msgspec.json.Decoder(Alert)
_encoder = msgspec.json.Encoder()

_MISSING = re.compile(r"missing required field")
_TAG = re.compile(r"at `\$\.schema`|Invalid value .* at `\$\.schema`|missing required field `schema`")


def _classify(exc: msgspec.ValidationError, raw: bytes) -> InvalidMessage:
    text = str(exc)
    if text.startswith("Expected `object`") and " - at `$" not in text:  # the message itself, not a field
        return InvalidMessage("not_an_object", text)
    if _TAG.search(text):
        return InvalidMessage("unknown_schema", text)
    if _MISSING.search(text):
        return InvalidMessage("missing_field", text)
    return InvalidMessage("invalid_field", text)


def _decode(decoder: msgspec.json.Decoder, raw: bytes | str) -> object:
    """The one bounded decode: size, depth, syntax and contract, each an :class:`InvalidMessage`."""
    if len(raw) > MAX_MESSAGE_BYTES:
        size = getattr(raw, "size", len(raw))  # an OverlongLine knows the length it was cut from
        raise InvalidMessage("too_large", f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        return decoder.decode(raw)
    except RecursionError:  # ~1,000 nested arrays in an unknown field: msgspec recurses to skip them
        raise InvalidMessage("too_large", "nested deeper than the decoder's recursion limit "
                                          "(a contract message is at most 4 levels deep)") from None
    except msgspec.ValidationError as exc:
        raise _classify(exc, raw if isinstance(raw, bytes) else raw.encode()) from None
    except msgspec.DecodeError as exc:
        raise InvalidMessage("malformed_json", str(exc)) from None
    except UnicodeDecodeError as exc:  # msgspec lets invalid UTF-8 in strings through as this
        raise InvalidMessage("malformed_json", f"not valid UTF-8: {exc.reason} at byte {exc.start}") from None


def decode_event(raw: bytes | str) -> Event:
    """Decode one producer message (host, crash or telemetry).

    The replay's hot path (bench/replay.py): a good message costs one length
    check and one msgspec call here; anything else takes the full path of
    ``_decode`` for its reason.

    :raises InvalidMessage: with ``reason`` from :data:`REASONS`.
    """
    if len(raw) <= MAX_MESSAGE_BYTES:
        try:
            return _event_decoder.decode(raw)  # type: ignore[no-any-return]
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            pass  # ValidationError is a DecodeError: classified below
    return _decode(_event_decoder, raw)  # type: ignore[return-value]


def decode_message(raw: bytes | str) -> Message:
    """Decode any contract message, alerts included."""
    return _decode(_message_decoder, raw)  # type: ignore[return-value]


def decode_alert(raw: bytes | str) -> Alert:
    """Decode one alert (``fleetepi.alerts`` records, ``replay`` output)."""
    return _decode(_alert_decoder, raw)  # type: ignore[return-value]


def encode(message: Message) -> bytes:
    """Compact JSON with the ``schema`` tag first; optional ``None`` fields are left out."""
    return _encoder.encode(message)


__all__ = ["MAX_MESSAGE_BYTES", "REASONS", "decode_alert", "decode_event", "decode_message", "encode"]
