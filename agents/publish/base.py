"""What a publisher is: the agent's one way out, to Kafka or to a file.

``fleetepi.agents.publish.open_publisher(url)`` picks the implementation:
``kafka://host:port[,host:port]`` (kafka-python, spooled to disk while the
broker is away), a file path (JSON lines, appended) or ``-`` (stdout).
"""

from __future__ import annotations

from typing import Protocol

from fleetepi.contract import Crash, Host, Telemetry


class Publisher(Protocol):
    def publish(self, event: Host | Crash | Telemetry) -> None:
        """Hand one event over; it is durable (sent or spooled) when this returns or raises PublishError."""

    def flush(self, timeout_s: float | None = None) -> None:
        """Push out what is buffered (resend the spool when the broker is back)."""

    def close(self) -> None:
        """Flush what can be flushed and release the connection."""
