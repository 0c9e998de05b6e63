"""Errors of the stream package, all under :class:`fleetepi.exceptions.FleetepiError`.

::

    FleetepiError
     ├── ServiceError            (fleetepi.exceptions)
     │    └── BrokerError        the local Kafka broker cannot be installed, started or reached
     └── StreamError             a worker or publisher setting or broker answer that makes no sense
          └── RebuildError       a partition's state could not be rebuilt from its log

Kafka-client errors (kafka-python, aiokafka) are translated into these at the
edges (``devbroker``, ``topics``, ``publish``), so commands catch
``FleetepiError`` only.
"""

from __future__ import annotations

from fleetepi.exceptions import FleetepiError, ServiceError


class BrokerError(ServiceError):
    """The local broker could not be installed, formatted, started, reached or stopped."""


class StreamError(FleetepiError):
    """Bad worker/publisher configuration or an unusable broker answer (start-up only)."""


class RebuildError(StreamError):
    """Reading a partition's retained log to rebuild its detector state failed."""


__all__ = ["BrokerError", "RebuildError", "StreamError"]
