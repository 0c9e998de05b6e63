"""The statistics of fleetepi: pure, event-time, deterministic, no I/O.

Nothing here imports Kafka, faust or prometheus_client: the same code runs
in the embedded pipeline and in the stream workers.
"""

from detectors.config import DetectorConfig
from detectors.engine import Engine
from detectors.inventory import Inventory

__all__ = ["DetectorConfig", "Engine", "Inventory"]
