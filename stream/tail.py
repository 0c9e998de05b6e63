"""``fleetepi alerts``: read the alerts topic, the way an on-call person checks what the workers said.

Prometheus and Alertmanager are where pages come from; this is for the
moment before they are wired (the README's first live run), and for looking
at the raw records (``--json``) when a page looks wrong. It reads with
kafka-python and no consumer group: it never moves anybody's offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from fleetepi.contract import Alert, decode_alert
from fleetepi.exceptions import InvalidMessage
from fleetepi.stream.exceptions import BrokerError


def read_alerts(bootstrap: str, topic: str, from_beginning: bool = True, timeout_s: float | None = None,
                poll_s: float = 0.5) -> Iterator[tuple[bytes, Alert | None]]:
    """(raw record, alert or None when it does not decode) as they come, until ``timeout_s`` passes.

    :raises BrokerError: the broker does not answer.
    """
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=None,
                                 enable_auto_commit=False,
                                 auto_offset_reset="earliest" if from_beginning else "latest",
                                 request_timeout_ms=30_000)
    except KafkaError as exc:
        raise BrokerError(f"cannot read {topic} from {bootstrap}: {exc}") from None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while deadline is None or time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=int(poll_s * 1000))
            for records in batches.values():
                for rec in records:
                    try:
                        yield rec.value, decode_alert(rec.value)
                    except InvalidMessage:
                        yield rec.value, None
    finally:
        consumer.close()


def one_line(alert: Alert) -> str:
    """``ts  severity  state  kind  summary``: what a person scans first."""
    return (f"{alert.ts.strftime('%Y-%m-%d %H:%M')}  {alert.severity or 'page':6}  {alert.state:8}  "
            f"{alert.kind:20}  {alert.summary}")


__all__ = ["one_line", "read_alerts"]
