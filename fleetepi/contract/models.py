"""Typed messages of the fleetepi contract (v1.1).

The JSON Schemas in ``schemas/`` are normative; these structs mirror them so
that decoding *is* validation (msgspec checks types, lengths, patterns and
the ``schema`` tag in one C pass, ~1 µs a message). ``tests/test_contract.py``
keeps the two in step by validating the same samples with both.

Fields that the schemas do not name are optional additions of this project;
consumers that do not know them ignore them, as the contract requires.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, get_args

import msgspec
from msgspec import Meta, Struct

HOST_SCHEMA = "fleetepi.host/v1"
CRASH_SCHEMA = "fleetepi.crash/v1"
TELEMETRY_SCHEMA = "fleetepi.telemetry/v1"
ALERT_SCHEMA = "fleetepi.alert/v1"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

Timestamp = Annotated[datetime, Meta(tz=True)]
HostName = Annotated[str, Meta(min_length=1, max_length=253)]
Hex = Annotated[str, Meta(pattern="^0x[0-9a-f]+$")]
AttributeValue = Annotated[str, Meta(max_length=256)]

TelemetryKind = Literal["xid", "ecc_corrected", "ecc_uncorrected", "thermal", "nvlink", "pcie", "other", "power"]
#: Where a crash was read from (v1.1); absent means a core dump.
CrashOrigin = Literal["core_dump", "python_traceback", "kernel_log", "watchdog", "oom_kill", "runtime_error"]
#: page: acute, someone acts now; ticket: a standing condition for working hours (v1.1).
Severity = Literal["page", "ticket"]
#: The telemetry kinds as a tuple, in the schema's order: the one list every module uses.
TELEMETRY_KINDS: tuple[str, ...] = get_args(TelemetryKind)
AlertKind = Literal["signature_spike", "host_spike", "hardware_correlation", "telemetry_spike"]
Language = Literal["native", "python"]


class _Message(Struct, kw_only=True, omit_defaults=True, tag_field="schema"):
    """Common root: every message carries ``schema`` (the tag) and ``ts``."""

    ts: Timestamp

    @property
    def ts_ms(self) -> int:
        """Event time in integer milliseconds since the epoch.

        Exact integer arithmetic (no float round trip, which can land 1 ms
        low) and ~30 % faster than ``timestamp()``; ``fleetepi.detectors.Engine``
        inlines the same expression.
        """
        return (self.ts - _EPOCH) // _MS


class Host(_Message, tag=HOST_SCHEMA):
    """Inventory announcement: the attributes cohorts are built from."""

    host: HostName
    attributes: Annotated[dict[str, AttributeValue], Meta(max_length=64)]


class Frame(Struct, kw_only=True, omit_defaults=True):
    """One stack frame, innermost first."""

    module: str
    function: str | None = None
    offset: Hex | None = None
    language: Language | None = None
    file: str | None = None
    line: int | None = None


class Module(Struct, kw_only=True, omit_defaults=True):
    """A file mapped into the crashed process (optional field of this project).

    ``build_id`` lets stripped vendor libraries (libcuda, libnccl) be
    symbolized later, away from the host.
    """

    name: str
    build_id: str | None = None
    base: Hex | None = None
    size: int | None = None


class Crash(_Message, tag=CRASH_SCHEMA):
    """One process crash with its signature.

    Beyond the contract's fields, the *crash shape* (``si_code``,
    ``fault_class``, ``shape_flags``, ``bitflip_score``) separates a software
    race (one signature on many hosts) from silent hardware corruption (one
    host, many odd shapes), which function names alone would merge.
    """

    host: HostName
    signature: Annotated[str, Meta(min_length=1, max_length=1024)]
    signal: str | None = None
    executable: str | None = None
    fault_address: Hex | None = None
    frames: Annotated[list[Frame], Meta(max_length=256)] | None = None
    job: str | None = None
    core_sha256: str | None = None
    origin: CrashOrigin | None = None
    cpu: Annotated[int, Meta(ge=0)] | None = None
    # --- optional additions (crash shape and provenance) ---
    si_code: int | None = None
    fault_class: Literal["null_page", "non_canonical", "kernel", "mapped", "unmapped", "none"] | None = None
    shape_flags: list[str] | None = None
    bitflip_score: float | None = None
    modules: list[Module] | None = None
    notes: list[str] | None = None
    partial: bool | None = None
    #: crashes this event stands for (a flood of one failure deduplicated at the source; default 1)
    count: Annotated[int, Meta(ge=1)] | None = None

    @property
    def n(self) -> int:
        """Crashes this event stands for (1 unless the source counted repeats)."""
        return 1 if self.count is None else self.count


class Telemetry(_Message, tag=TELEMETRY_SCHEMA):
    """One hardware event or reading (Xid, ECC, thermal, ...)."""

    host: HostName
    kind: TelemetryKind
    device: str | None = None
    code: int | None = None
    count: Annotated[int, Meta(ge=0)] | None = None
    value: float | None = None
    message: Annotated[str, Meta(max_length=4096)] | None = None
    # --- optional additions ---
    severity: str | None = None
    action: str | None = None

    @property
    def n(self) -> int:
        """Errors this event stands for (the contract's default is 1)."""
        return 1 if self.count is None else self.count


class Alert(_Message, tag=ALERT_SCHEMA):
    """One anomaly that fired (or resolved)."""

    kind: AlertKind
    score: float
    state: Literal["firing", "resolved"] = "firing"
    signature: str | None = None
    host: str | None = None
    attribute: str | None = None
    value: str | None = None
    telemetry_kind: str | None = None
    code: int | None = None
    p_value: Annotated[float, Meta(ge=0.0, le=1.0)] | None = None
    observed: float | None = None
    expected: float | None = None
    relative_risk: float | None = None
    window_s: float | None = None
    summary: str | None = None
    severity: Severity | None = None
    finding: Annotated[str, Meta(max_length=64)] | None = None
    incident: Annotated[str, Meta(max_length=128)] | None = None
    # --- optional additions ---
    lower_ci: float | None = None
    upper_ci: float | None = None
    notes: list[str] | None = None
    #: the place this alert escalates to, ``attribute=value`` (a host's rack; an escalation's own): the
    #: label Alertmanager's inhibit rule holds host pages under their rack's escalation by
    escalation: str | None = None

    @property
    def is_page(self) -> bool:
        """Does this alert wake someone? (``severity`` absent means ``page``, as the contract says.)"""
        return self.severity != "ticket"

    @property
    def key(self) -> str:
        """Stable identity of the alerted entity: the Kafka key and dedup key."""
        parts = [self.kind, self.signature, self.host, self.attribute, self.value, self.telemetry_kind,
                 None if self.code is None else str(self.code)]
        return "|".join("" if p is None else p for p in parts)


Event = Host | Crash | Telemetry
Message = Host | Crash | Telemetry | Alert


def ts_from_ms(ts_ms: int | float) -> datetime:
    """UTC datetime for epoch milliseconds (what alerts carry)."""
    return datetime.fromtimestamp(ts_ms / 1000.0, tz=UTC)


def format_ts(dt: datetime) -> str:
    """RFC 3339 with millisecond precision and the ``Z`` suffix, as the contract shows."""
    dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


__all__ = [
    "ALERT_SCHEMA",
    "CRASH_SCHEMA",
    "HOST_SCHEMA",
    "TELEMETRY_KINDS",
    "TELEMETRY_SCHEMA",
    "Alert",
    "AlertKind",
    "Crash",
    "CrashOrigin",
    "Event",
    "Frame",
    "Host",
    "Message",
    "Module",
    "Severity",
    "Telemetry",
    "TelemetryKind",
    "format_ts",
    "msgspec",
    "ts_from_ms",
]
