"""Every event leaves the host following the contract, or not as that event at all.

An event the agent builds from a damaged core can hold what the contract
forbids (``"base": "0x-3fff..."``, a 22-digit ``size``); published as is,
``core-handler`` exits 0 and the replay or the worker rejects it: the crash
is lost downstream, silently. So each publisher encodes through
:func:`conforming_bytes`, which decodes its own output with the contract's
decoder first. A crash that fails keeps what the detectors need (time, host,
signature, signal, executable, job, core hash) and says why in a note; only
an event whose *core* fields break the contract is refused, as a
``PublishError`` the caller counts.
"""

from __future__ import annotations

import logging

import msgspec

from fleetepi.agents.exceptions import PublishError
from fleetepi.contract import Crash, Event, decode_event, encode
from fleetepi.exceptions import InvalidMessage

log = logging.getLogger(__name__)


def conforming_bytes(event: Event) -> bytes:
    """``encode(event)``, checked against the contract (a crash is reduced rather than lost).

    :raises PublishError: the event cannot be made to follow the contract.
    """
    why = _check(event)
    if why is None:
        return encode(event)
    if isinstance(event, Crash):
        reduced = _reduced(event, why)
        again = _check(reduced)
        if again is None:
            log.error("crash event broke the contract (%s); published without its optional fields", why)
            return encode(reduced)
        why = again
    raise PublishError(f"{type(event).__name__.lower()} event breaks the contract: {why}")


def _check(event: Event) -> str | None:
    try:
        data = encode(event)
    except (msgspec.EncodeError, OverflowError, TypeError, ValueError) as exc:
        return f"not encodable: {exc}"
    try:
        decode_event(data)
    except InvalidMessage as exc:
        return f"{exc.reason}: {exc.detail}"
    return None


def _reduced(crash: Crash, why: str) -> Crash:
    notes = [n for n in (crash.notes or []) if isinstance(n, str)][:30]
    notes.append(f"partial: the event broke the contract ({why})"[:300] + "; optional fields dropped")
    sig = crash.signature if isinstance(crash.signature, str) and 0 < len(crash.signature) <= 1024 else "unknown!invalid-event"
    return Crash(ts=crash.ts, host=crash.host, signature=sig, signal=_str(crash.signal), executable=_str(crash.executable),
                 job=_str(crash.job), core_sha256=_str(crash.core_sha256), notes=notes, partial=True)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


__all__ = ["conforming_bytes"]
