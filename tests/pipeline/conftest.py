"""Fixtures of the embedded pipeline's tests: event-line builders, the CLI, a free port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from fleetepi.contract import format_ts

#: The installed CLI of this venv (what a user runs), not an import of the command.
FLEETEPI = str(Path(sys.executable).with_name("fleetepi"))
DATA = Path(__file__).parent / "data"


T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def ts(minute: float) -> str:
    """RFC 3339 event time ``minute`` minutes after 2026-11-22 10:00 UTC (negative: before)."""
    return format_ts(T0 + timedelta(minutes=minute))


def host_line(name: str, minute: float = 0, **attributes: str) -> bytes:
    attrs = attributes or {"rack": "r1", "gpu_model": "H100"}
    return orjson.dumps({"schema": "fleetepi.host/v1", "ts": ts(minute), "host": name, "attributes": attrs})


def crash_line(host: str, minute: float, signature: str = "libc.so.6!abort | trainer!main") -> bytes:
    return orjson.dumps({"schema": "fleetepi.crash/v1", "ts": ts(minute), "host": host, "signature": signature})


def telemetry_line(host: str, minute: float, kind: str = "xid", code: int | None = 79) -> bytes:
    msg: dict[str, object] = {"schema": "fleetepi.telemetry/v1", "ts": ts(minute), "host": host, "kind": kind}
    if code is not None:
        msg["code"] = code
    return orjson.dumps(msg)


@pytest.fixture
def write_events(tmp_path: Path) -> Callable[[list[bytes], str], Path]:
    """``write_events(lines, name)`` -> path of a JSON-lines file (``.gz`` compresses)."""

    def write(lines: list[bytes], name: str = "events.jsonl") -> Path:
        import gzip

        path = tmp_path / name
        blob = b"".join(line + b"\n" for line in lines)
        path.write_bytes(gzip.compress(blob) if name.endswith(".gz") else blob)
        return path

    return write


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def spawn(*args: str, **popen: object) -> Iterator[subprocess.Popen]:
    """``fleetepi ARGS`` as a real process, killed if the test leaves it running.

    Ctrl-C is given back its default in the child: a test suite started in
    the background of a script (``make test &``) runs with SIGINT ignored,
    the child would inherit that, and Python would then never raise
    KeyboardInterrupt in it.
    """
    popen.setdefault("preexec_fn", _default_sigint)
    proc = subprocess.Popen([FLEETEPI, *args], **popen)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
