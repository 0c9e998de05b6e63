"""Kafka broker addresses: the one parser every command uses.

The CLI takes ``--broker kafka://HOST:PORT`` (several brokers separated by
``,`` or ``;``, each with or without its own ``kafka://``), Helm and systemd
pass the same string, and the clients underneath want ``HOST:PORT`` lists.
One parser means a typo is the same clear error in ``agent``, ``publish``,
``worker`` and ``archive``, instead of a connection retry loop in one of them.
"""

from __future__ import annotations

#: The broker the CLI, the README and ``fleetepi dev kafka start`` agree on.
DEFAULT_BROKER = "kafka://127.0.0.1:9092"
DEFAULT_KAFKA_PORT = 9092


def parse_brokers(url: str) -> list[str]:
    """``kafka://h1:9092,h2:9092`` (or ``;``-separated, or bare ``h:p``) -> ``["h1:9092", "h2:9092"]``.

    :raises ValueError: no address, another scheme, or an address without a numeric port.
    """
    out = []
    for part in url.replace(";", ",").split(","):
        part = part.strip().rstrip("/")
        if not part:
            continue
        scheme, sep, rest = part.partition("://")
        if sep:
            if scheme != "kafka":
                raise ValueError(f"not a kafka:// address: {part!r} in {url!r}")
            part = rest
        host, colon, port = part.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"a Kafka broker is HOST:PORT (kafka://HOST:PORT[,HOST:PORT]): {part!r} in {url!r}")
        out.append(part)
    if not out:
        raise ValueError(f"no Kafka broker address in {url!r}")
    return out


def broker_option(ctx: object, param: object, value: str | None) -> str | None:
    """click callback: a malformed ``--broker`` is a usage error (exit 2) before anything connects."""
    if value is None:
        return None
    try:
        parse_brokers(value)
    except ValueError as exc:
        import click

        raise click.BadParameter(str(exc)) from None
    return value


def bootstrap_of(url: str) -> str:
    """The comma-separated ``HOST:PORT`` list the Kafka clients take (see :func:`parse_brokers`)."""
    return ",".join(parse_brokers(url))


__all__ = ["DEFAULT_BROKER", "DEFAULT_KAFKA_PORT", "bootstrap_of", "broker_option", "parse_brokers"]
