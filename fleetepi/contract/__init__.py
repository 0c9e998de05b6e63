"""The message contract: typed models, codec and the normative JSON Schemas."""

from pathlib import Path

from fleetepi.contract.codec import REASONS, decode_alert, decode_event, decode_message, encode
from fleetepi.contract.models import (
    ALERT_SCHEMA,
    CRASH_SCHEMA,
    HOST_SCHEMA,
    TELEMETRY_KINDS,
    TELEMETRY_SCHEMA,
    Alert,
    Crash,
    CrashOrigin,
    Event,
    Frame,
    Host,
    Message,
    Module,
    Severity,
    Telemetry,
    format_ts,
    ts_from_ms,
)

#: Directory of the JSON Schemas copied from the shared contract.
SCHEMA_DIR = Path(__file__).parent / "schemas"

#: Kafka topics of the contract.
TOPIC_HOSTS = "fleetepi.hosts"
TOPIC_CRASHES = "fleetepi.crashes"
TOPIC_TELEMETRY = "fleetepi.telemetry"
TOPIC_ALERTS = "fleetepi.alerts"
TOPIC_DEADLETTER = "fleetepi.deadletter"

#: schema id -> topic, for producers.
TOPIC_FOR_SCHEMA = {
    HOST_SCHEMA: TOPIC_HOSTS,
    CRASH_SCHEMA: TOPIC_CRASHES,
    TELEMETRY_SCHEMA: TOPIC_TELEMETRY,
    ALERT_SCHEMA: TOPIC_ALERTS,
}

__all__ = [
    "ALERT_SCHEMA",
    "Alert",
    "CRASH_SCHEMA",
    "Crash",
    "CrashOrigin",
    "Event",
    "Frame",
    "HOST_SCHEMA",
    "Host",
    "Message",
    "Module",
    "REASONS",
    "SCHEMA_DIR",
    "Severity",
    "TELEMETRY_KINDS",
    "TELEMETRY_SCHEMA",
    "TOPIC_ALERTS",
    "TOPIC_CRASHES",
    "TOPIC_DEADLETTER",
    "TOPIC_FOR_SCHEMA",
    "TOPIC_HOSTS",
    "TOPIC_TELEMETRY",
    "Telemetry",
    "decode_alert",
    "decode_event",
    "decode_message",
    "encode",
    "format_ts",
    "ts_from_ms",
]
