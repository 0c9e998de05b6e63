"""Every threshold of every detector, in one frozen object with documented defaults.

Units are in the names (``_s`` seconds, ``_ms`` milliseconds). A changed
value changes ``fingerprint()``, which is part of every checkpoint, so a
worker never resumes from state computed under other parameters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from fleetepi.exceptions import ConfigError


@dataclass(frozen=True)
class DetectorConfig:
    # ---- event-time clock (engine) ----
    #: Evaluation step: how often (in event time) idle keys are re-examined and alerts resolve.
    step_s: float = 300.0
    #: Events older than the watermark by more than this are counted as ``out_of_order`` and dropped.
    allowed_lateness_s: float = 600.0
    #: Events newer than the watermark by more than this are counted as ``future_timestamp`` and dropped.
    max_future_s: float = 86400.0
    #: Announcements kept per host (attribute history for events in the past).
    inventory_history: int = 8

    def fingerprint(self) -> str:
        """Short hash of every value: part of each checkpoint's identity."""
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def replace(self, **changes: Any) -> "DetectorConfig":
        try:
            return dataclasses.replace(self, **changes)
        except TypeError as exc:
            raise ConfigError(str(exc)) from None

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> "DetectorConfig":
        """Build from a config file's mapping; unknown keys are a start-up error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown detector setting(s): {', '.join(unknown)}")
        return cls(**data)


__all__ = ["DetectorConfig"]
