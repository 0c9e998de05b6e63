"""The one error root of fleetepi.

::

    FleetepiError
     ├── ConfigError          bad configuration; raised at start-up, never in the loop
     ├── InvalidMessage       a message that breaks the contract (reason + detail)
     ├── CoreParseError       a core dump that cannot be read (agents.core)
     ├── SourceUnavailable    a telemetry source that is off on this host (no GPU, no EDAC)
     ├── PublishError         the broker refused or is away (agents.publish)
     └── ServiceError         a helper service (Kafka, Prometheus) failed to start

Third-party errors (msgspec, pyelftools, kafka-python) are translated into
these at one boundary each, so callers catch ``FleetepiError`` and nothing
else.
"""

from __future__ import annotations


class FleetepiError(Exception):
    """Root of every error fleetepi raises on purpose."""


class ConfigError(FleetepiError):
    """Invalid configuration: the process exits at start-up with this message."""


class InvalidMessage(FleetepiError):
    """A message that does not follow the contract.

    ``reason`` is one of :data:`fleetepi.contract.codec.REASONS` (a bounded
    metric label); ``detail`` is the human sentence for logs and dead letters.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class CoreParseError(FleetepiError):
    """A core file that cannot be parsed at all (partial results carry notes instead)."""


class SourceUnavailable(FleetepiError):
    """A telemetry source that is off on this host; said once, then the source is skipped."""


class PublishError(FleetepiError):
    """Publishing failed; the event stays in the spool."""


class ServiceError(FleetepiError):
    """A local service (Kafka broker, Prometheus) could not be started or reached."""


__all__ = [
    "ConfigError",
    "CoreParseError",
    "FleetepiError",
    "InvalidMessage",
    "PublishError",
    "ServiceError",
    "SourceUnavailable",
]
