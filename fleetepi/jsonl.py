"""JSON lines in and out: plain or gzip files, ``-`` for stdin/stdout.

The replay reads bytes, never text: msgspec decodes UTF-8 bytes directly, so
there is no decode-to-``str`` step per line, and a line that is not valid
UTF-8 reaches the decoder and is counted as ``malformed_json`` like any
other broken line instead of crashing a text wrapper.

Lines are read with a bound, never whole: a line longer than
``MAX_MESSAGE_BYTES`` (one 512 MiB line inside a 510 KiB ``.gz``) is read
past in pieces and handed on as an :class:`OverlongLine` of its first bytes
and its size, which the decoder counts as ``too_large``; memory stays at a
few MiB whatever the input. A UTF-8 byte-order mark before the first line is
dropped (editors on Windows write one).

Gzip is recognised by its magic bytes, not only by the ``.gz`` suffix, so a
compressed stream piped into stdin works too. Progress is measured on the
*underlying* file (compressed bytes for ``.gz``), because that is the only
size known in advance.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fleetepi.contract.codec import MAX_MESSAGE_BYTES
from fleetepi.exceptions import FleetepiError

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
#: Read buffer: large reads keep the per-line cost of reading low.
BUFFER_BYTES = 1 << 20
#: Most bytes one ``decompress`` call may produce: a compressed line of zeros
#: cannot balloon one call to gigabytes.
INFLATE_STEP_BYTES = 1 << 20


class OverlongLine(bytes):
    """The first ``MAX_MESSAGE_BYTES + 1`` bytes of a line that was longer; ``size`` is its whole length.

    Still ``bytes`` (longer than the decoder's limit), so every consumer
    rejects it as ``too_large`` on its existing path, naming the real size.
    """

    size: int

    def __new__(cls, head: bytes, size: int) -> OverlongLine:
        obj = super().__new__(cls, head)
        obj.size = size
        return obj


class _Pending:
    """The unfinished line between two chunks, kept to at most ``limit + 1`` bytes."""

    __slots__ = ("head", "limit", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = b""
        self.size = 0

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if len(self.head) <= self.limit:
            self.head = (self.head + piece)[: self.limit + 1]

    def take(self) -> bytes:
        line = self.head if self.size <= self.limit else OverlongLine(self.head, self.size)
        self.head, self.size = b"", 0
        return line


class JsonlFileError(FleetepiError):
    """A JSON-lines file cannot be opened, read or written (a bad *line* is not this: it is counted)."""


class DamagedInput(JsonlFileError):
    """The compressed input ends early or is corrupt; every line before the damage was yielded."""


@dataclass
class LineSource:
    """An opened JSON-lines input.

    :param lines: the lines as ``bytes`` (a binary file, or the gunzipping generator).
    :param raw: the underlying file, whose position is the progress.
    :param total_bytes: size of ``raw`` if known (a regular file), else None (a pipe).
    :param name: what the user named (``-`` for stdin), for messages.
    """

    lines: Iterable[bytes]
    raw: BinaryIO
    total_bytes: int | None
    name: str

    def position(self) -> int:
        """Bytes of ``raw`` consumed so far (at most one buffer ahead of the parser)."""
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def __iter__(self) -> Iterator[bytes]:
        """Lines as bytes. A truncated or corrupt gzip raises :class:`DamagedInput`
        mid-way, after every good line before it was yielded."""
        return iter(self.lines)


def gunzip_lines(fh: BinaryIO, chunk_bytes: int = 1 << 16, max_line_bytes: int = MAX_MESSAGE_BYTES) -> Iterator[bytes]:
    """Lines of a gzip stream (several members allowed, as ``cat a.gz b.gz`` makes).

    Written on zlib rather than ``gzip.GzipFile`` so that a truncated file
    (a recorder killed mid-write) loses nothing: every line decompressed
    before the cut is yielded, the partial last line too (the decoder then
    counts it as ``malformed_json``), and only then :class:`DamagedInput` is
    raised. ``GzipFile`` raises at the cut and drops its whole last buffer.
    Each inflate step is bounded (:data:`INFLATE_STEP_BYTES`) and so is the
    unfinished line (:class:`OverlongLine` past ``max_line_bytes``).
    """
    d = zlib.decompressobj(wbits=31)
    pending = _Pending(max_line_bytes)
    started = False
    first = True
    while True:
        data = fh.read(chunk_bytes)
        if not data:
            break
        while data:
            if d.eof:  # a new member follows the previous one
                if not data.startswith(_GZIP_MAGIC[:1]):
                    raise DamagedInput("trailing garbage after the last gzip member")
                d = zlib.decompressobj(wbits=31)
            started = True
            try:
                out = d.decompress(data, INFLATE_STEP_BYTES)
            except zlib.error as exc:
                raise DamagedInput(f"corrupt gzip data: {exc}") from None
            data = d.unused_data if d.eof else d.unconsumed_tail
            if not out:
                continue
            if first:
                first = False
                if out.startswith(_BOM):
                    out = out[len(_BOM):]
            parts = out.split(b"\n")
            if len(parts) == 1:
                pending.add(parts[0])
                continue
            pending.add(parts[0])
            yield pending.take()
            for part in parts[1:-1]:
                yield part if len(part) <= max_line_bytes else OverlongLine(part[: max_line_bytes + 1], len(part))
            pending.add(parts[-1])
    if pending.size:
        yield pending.take()
    if started and not d.eof:
        raise DamagedInput("compressed file ended before the end-of-stream marker (truncated .gz)")


def bounded_lines(fh: BinaryIO, max_line_bytes: int = MAX_MESSAGE_BYTES, chunk_bytes: int = BUFFER_BYTES) -> Iterator[bytes]:
    """Lines of a plain binary stream, read in chunks and split: no line is ever held past the bound.

    Splitting 1 MiB chunks is also faster than ``readline`` per line (one C
    split, then a list walk), so the bound costs the replay nothing.
    """
    pending = _Pending(max_line_bytes)
    read = fh.read1 if hasattr(fh, "read1") else fh.read
    while True:
        data = read(chunk_bytes)
        if not data:
            break
        parts = data.split(b"\n")
        pending.add(parts[0])
        if len(parts) == 1:
            continue
        yield pending.take()
        last = parts.pop()
        if len(data) <= max_line_bytes:  # no part can be over the bound: hand them out as they are
            yield from parts[1:]
        else:
            for part in parts[1:]:
                yield part if len(part) <= max_line_bytes else OverlongLine(part[: max_line_bytes + 1], len(part))
        pending.add(last)
    if pending.size:
        yield pending.take()


def _regular_size(f: BinaryIO) -> int | None:
    try:
        st = os.fstat(f.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


@contextmanager
def open_input(path: str | Path) -> Iterator[LineSource]:
    """Open ``path`` (or stdin for ``-``) for reading JSON lines, gunzipping if needed.

    :raises JsonlFileError: the file does not exist or cannot be read.
    """
    name = str(path)
    if name == "-":
        raw: BinaryIO = sys.stdin.buffer
        owned = False
    else:
        try:
            raw = open(name, "rb", buffering=0)  # type: ignore[assignment]
        except OSError as exc:
            raise JsonlFileError(f"cannot read {name}: {exc.strerror or exc}") from None
        owned = True
    try:
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw, BUFFER_BYTES)  # type: ignore[arg-type]
        head = buffered.peek(3)[:3]
        lines: Iterable[bytes]
        if head[:2] == _GZIP_MAGIC:
            lines = gunzip_lines(buffered)
        else:
            if head == _BOM:
                buffered.read(len(_BOM))
            lines = bounded_lines(buffered)
        yield LineSource(lines=lines, raw=raw, total_bytes=_regular_size(raw), name=name)
    finally:
        if owned:
            raw.close()


@contextmanager
def open_output(path: str | Path) -> Iterator[BinaryIO]:
    """Open ``path`` (or stdout for ``-``) for writing JSON lines; ``.gz`` compresses.

    Output goes to a temporary name beside the target and is renamed at the
    end, so an interrupted replay never leaves a truncated alerts file that
    looks complete.
    """
    name = str(path)
    if name == "-":
        out = sys.stdout.buffer
        try:
            yield out
        finally:
            try:
                out.flush()
            except BrokenPipeError:  # reader went away (| head): not our error
                pass
        return
    target = Path(name)
    tmp = target.with_name(f".{target.name}.partial")
    try:
        fh: BinaryIO = gzip.open(tmp, "wb") if name.endswith(".gz") else open(tmp, "wb")  # type: ignore[assignment]
    except OSError as exc:
        raise JsonlFileError(f"cannot write {name}: {exc.strerror or exc}") from None
    ok = False
    try:
        yield fh
        ok = True
    finally:
        fh.close()
        if ok:
            os.replace(tmp, target)
        else:
            tmp.unlink(missing_ok=True)


def write_lines(path: str | Path, records: Iterator[bytes] | list[bytes]) -> int:
    """Write already-encoded JSON records one per line; returns how many."""
    n = 0
    with open_output(path) as fh:
        for rec in records:
            fh.write(rec)
            fh.write(b"\n")
            n += 1
    return n


__all__ = [
    "BUFFER_BYTES", "DamagedInput", "JsonlFileError", "LineSource", "OverlongLine", "bounded_lines", "gunzip_lines",
    "open_input", "open_output", "write_lines",
]
