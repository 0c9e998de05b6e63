"""Detectors by name, built on the engine's decay clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetepi.detectors.base import Detector
from fleetepi.detectors.cases import ROUTES
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.decay import DecayClock
from fleetepi.exceptions import ConfigError


def _classes() -> dict[str, Any]:
    from fleetepi.detectors.hardware_correlation import HardwareCorrelation
    from fleetepi.detectors.host_spike import HostSpike
    from fleetepi.detectors.signature_spike import SignatureSpike
    from fleetepi.detectors.telemetry_spike import TelemetryCohortSpike, TelemetryHostSpike

    by_name = {c.name: c for c in (SignatureSpike, HardwareCorrelation, TelemetryHostSpike, HostSpike,
                                   TelemetryCohortSpike)}
    # in the order of ``ROUTES`` (telemetry_host before host_spike: a host it tickets chronic is known when
    # host_spike weighs its own), stated once
    return {n: by_name[n] for n in NAMES}


#: Every detector's name, in the order the engine runs them.
NAMES: tuple[str, ...] = tuple(ROUTES)


def clock_scales(config: DetectorConfig) -> tuple[float, ...]:
    """Every time scale any detector counts at: the engine's one decay clock."""
    return tuple(sorted({*config.host_scales_s, config.host_longrun_s, config.host_chronic_s, *config.cohort_scales_s,
                         config.cohort_longrun_s, 86400.0}))


def build_detectors(config: DetectorConfig, clock: DecayClock, names: Sequence[str] | None = None) -> list[Detector]:
    classes = _classes()
    chosen = list(classes) if names is None else list(names)
    unknown = [n for n in chosen if n not in classes]
    if unknown:
        raise ConfigError(f"unknown detector(s): {', '.join(unknown)}; known: {', '.join(classes)}")
    out = []
    # in the registry's order, however they were named: each reads what the ones before it decided
    for n in (n for n in classes if n in chosen):
        cls = classes[n]
        out.append(cls(config) if n == "signature_spike" else cls(config, clock))
    return out


__all__ = ["NAMES", "build_detectors", "clock_scales"]
