"""The statistics of fleetepi: pure, event-time, deterministic, no I/O.

Nothing here imports Kafka, faust or prometheus_client: the same code runs
in the embedded pipeline and in the stream workers.
"""

from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.engine import Engine
from fleetepi.detectors.inventory import Inventory

__all__ = ["DetectorConfig", "Engine", "Inventory"]
