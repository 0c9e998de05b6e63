"""systemd-coredump's compressed cores (``.zst``, ``.lz4``, ``.xz``) to a plain temp file.

An ELF core must be seekable for mmap, so a compressed one is
stream-decompressed to a temporary file first, never into memory, and never
past ``max_bytes``: a core bigger than the limit is cut there (the notes and
the stack pages of the crashing thread usually sit early, so a cut core still
gives a signature) and the caller marks the event partial. The format is
sniffed from the magic bytes, not trusted from the file name.
"""

from __future__ import annotations

import lzma
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import lz4.frame
import zstandard

_CHUNK = 1 << 20
MAGIC = {
    b"\x28\xb5\x2f\xfd": "zstd",
    b"\x04\x22\x4d\x18": "lz4",
    b"\xfd7zXZ\x00": "xz",
}


@dataclass(frozen=True, slots=True)
class PlainCore:
    """A readable plain core: ``path`` and what happened on the way."""

    path: str
    compression: str | None
    truncated_at: int | None  # bytes written before the size limit cut the core
    error: str | None  # decompression failed part-way (a cut .zst); what was written is kept


def sniff(head: bytes) -> str | None:
    """``zstd``, ``lz4``, ``xz`` or ``None`` (plain) from the first bytes of a file."""
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def _reader(kind: str, raw: BinaryIO) -> BinaryIO:
    if kind == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]
    if kind == "lz4":
        return lz4.frame.LZ4FrameFile(raw, mode="rb")  # type: ignore[return-value]
    return lzma.LZMAFile(raw, mode="rb")  # type: ignore[return-value]


def copy_limited(src: BinaryIO, dst: BinaryIO, max_bytes: int) -> tuple[int, bool, str | None]:
    """Copy up to ``max_bytes``; ``(written, cut_by_limit, error)``. Errors end the copy, not the caller."""
    written = 0
    try:
        while True:
            chunk = src.read(min(_CHUNK, max_bytes - written + 1))
            if not chunk:
                return written, False, None
            if written + len(chunk) > max_bytes:
                dst.write(chunk[: max_bytes - written])
                return max_bytes, True, None
            dst.write(chunk)
            written += len(chunk)
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError, RuntimeError) as exc:
        return written, False, f"{type(exc).__name__}: {exc}"[:200]


@contextmanager
def plain_core(path: str, max_bytes: int, tmp_dir: str | None = None) -> Iterator[PlainCore]:
    """Yield a plain core for ``path``: itself, or a decompressed temp copy removed on exit."""
    with open(path, "rb") as fh:
        kind = sniff(fh.read(8))
    if kind is None:
        yield PlainCore(path, None, None, None)
        return
    fd, tmp = tempfile.mkstemp(prefix="fleetepi-core-", dir=tmp_dir)
    try:
        with open(path, "rb") as raw, os.fdopen(fd, "wb") as out:
            written, cut, error = copy_limited(_reader(kind, raw), out, max_bytes)
        yield PlainCore(tmp, kind, written if cut else None, error)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def spool_stream(src: BinaryIO, dst_path: str, max_bytes: int) -> tuple[int, bool, str | None]:
    """Write a core arriving on a pipe (core_pattern ``|``) to ``dst_path``, bounded."""
    with open(dst_path, "wb") as out:
        return copy_limited(src, out, max_bytes)


__all__ = ["MAGIC", "PlainCore", "copy_limited", "plain_core", "sniff", "spool_stream"]
