"""Detectors by name: the stream workers pick the subset their partitions own."""

from __future__ import annotations

from collections.abc import Sequence

from fleetepi.detectors.base import Detector
from fleetepi.detectors.config import DetectorConfig
from fleetepi.exceptions import ConfigError


def _classes() -> dict[str, type]:
    from fleetepi.detectors.hardware_correlation import HardwareCorrelation
    from fleetepi.detectors.host_spike import HostSpike
    from fleetepi.detectors.signature_spike import SignatureSpike
    from fleetepi.detectors.telemetry_spike import TelemetryCohortSpike, TelemetryHostSpike

    return {c.name: c for c in (SignatureSpike, HardwareCorrelation, HostSpike, TelemetryHostSpike, TelemetryCohortSpike)}


#: Which partition key each detector's state lives under (for the stream workers):
#: "signature" (crash signature), "host", or "telemetry" (telemetry kind and code).
ROUTE_OF = {
    "signature_spike": "signature",
    "hardware_correlation": "signature",
    "host_spike": "host",
    "telemetry_host": "host",
    "telemetry_cohort": "telemetry",
}


def build_detectors(config: DetectorConfig, names: Sequence[str] | None = None) -> list[Detector]:
    classes = _classes()
    chosen = list(classes) if names is None else list(names)
    unknown = [n for n in chosen if n not in classes]
    if unknown:
        raise ConfigError(f"unknown detector(s): {', '.join(unknown)}; known: {', '.join(classes)}")
    return [classes[n](config) for n in chosen]


__all__ = ["ROUTE_OF", "build_detectors"]
