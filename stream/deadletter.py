"""Dead letters: what was refused, why, and where it came from, with the bytes.

A record that breaks the contract is never retried and never stops a
worker: it is written once to ``fleetepi.deadletter`` with the codec's
reason (a bounded label) and detail (msgspec's sentence), its original
topic/partition/offset and the raw key and value (base64), and counted in
``fleetepi_stream_deadletters_total{topic,reason}``. Values larger than
:data:`KEEP_BYTES` are truncated in the letter (``truncated`` says so; the
original stays in its topic at ``offset``), so a 5 MiB garbage message
cannot make the dead-letter write fail in turn.
"""

from __future__ import annotations

import base64
import time

import msgspec

#: Bytes of the original value kept in a dead letter.
KEEP_BYTES = 64 << 10


class DeadLetter(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One refused record (value of a ``fleetepi.deadletter`` message, keyed by the original key)."""

    reason: str
    detail: str
    topic: str
    partition: int
    offset: int
    size: int
    value_b64: str
    key_b64: str | None = None
    truncated: bool = False
    worker: str | None = None
    wall_ts_ms: int = 0


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(DeadLetter)


def make_letter(reason: str, detail: str, topic: str, partition: int, offset: int, key: bytes | None,
                value: bytes | None, worker: str | None = None) -> DeadLetter:
    """Build the letter for one refused record."""
    value = value or b""
    kept = value[:KEEP_BYTES]
    return DeadLetter(reason=reason, detail=detail[:2000], topic=topic, partition=partition, offset=offset,
                      size=len(value), value_b64=base64.b64encode(kept).decode(),
                      key_b64=None if key is None else base64.b64encode(key[:1024]).decode(),
                      truncated=len(kept) < len(value), worker=worker, wall_ts_ms=int(time.time() * 1000))


def encode_letter(letter: DeadLetter) -> bytes:
    return _encoder.encode(letter)


def decode_letter(raw: bytes) -> DeadLetter:
    return _decoder.decode(raw)


def original_value(letter: DeadLetter) -> bytes:
    """The kept bytes of the refused value (all of it unless ``truncated``)."""
    return base64.b64decode(letter.value_b64)


__all__ = ["KEEP_BYTES", "DeadLetter", "decode_letter", "encode_letter", "make_letter", "original_value"]
