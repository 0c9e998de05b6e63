"""A stand-in for kafka-python's ``KafkaProducer``, shipped in the package.

``FakeProducer(down=True)`` behaves like a producer whose broker is away
(sends fail with a retriable Kafka error); set ``down = False`` and the
next flush delivers. ``records`` is what the "broker" received, in order.
"""

from __future__ import annotations

from typing import Any


class FakeFuture:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def is_done(self) -> bool:  # kafka-python spells it as a property; both work here
        return True

    def succeeded(self) -> bool:
        return self.error is None

    def failed(self) -> bool:
        return self.error is not None

    @property
    def exception(self) -> Exception | None:
        return self.error

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return None


class FakeProducer:
    """Records ``send(topic, value, key)`` calls; fails them while ``down``."""

    def __init__(self, down: bool = False, fail_after: int | None = None) -> None:
        self.down = down
        self.fail_after = fail_after
        self.records: list[tuple[str, bytes | None, bytes]] = []
        self.closed = False

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, **_: Any) -> FakeFuture:
        from kafka.errors import KafkaTimeoutError

        if self.down or (self.fail_after is not None and len(self.records) >= self.fail_after):
            return FakeFuture(KafkaTimeoutError("broker away (fake)"))
        self.records.append((topic, key, value if value is not None else b""))
        return FakeFuture(None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


__all__ = ["FakeFuture", "FakeProducer"]
