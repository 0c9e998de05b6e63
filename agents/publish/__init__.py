"""How events leave the host: Kafka (spooled) or JSON lines.

``open_publisher(url, **opts)``: ``kafka://host:port[,host:port]`` gives a
:class:`KafkaPublisher` (options: ``spool_dir``, ``spool_max_bytes``,
TLS/SASL settings...), ``-`` stdout, anything else a JSON-lines file.
"""

from __future__ import annotations

from typing import Any

from fleetepi.agents.publish.base import Publisher
from fleetepi.agents.publish.fake import FakeProducer
from fleetepi.agents.publish.jsonl import JsonlPublisher


def open_publisher(url: str, **opts: Any) -> Publisher:
    """The publisher for ``url``; options that do not apply to it are ignored for files.

    :raises PublishError: the output cannot be opened.
    :raises ValueError: a malformed ``kafka://`` URL or unknown Kafka option.
    """
    if url.startswith("kafka://"):
        from fleetepi.agents.publish.kafka import KafkaPublisher
        from fleetepi.brokers import parse_brokers

        if "spool_dir" not in opts:
            raise ValueError("a kafka:// output needs spool_dir (publish.spool_dir in the config)")
        return KafkaPublisher(parse_brokers(url), **opts)
    path = url[len("file://"):] if url.startswith("file://") else url
    return JsonlPublisher(path, fsync=bool(opts.get("fsync", False)))


__all__ = ["FakeProducer", "JsonlPublisher", "Publisher", "open_publisher"]
