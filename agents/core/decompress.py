"""systemd-coredump's compressed cores (``.zst``, ``.lz4``, ``.xz``) to a plain temp file.

An ELF core must be seekable for mmap, so a compressed one is
stream-decompressed to a temporary file first, never into memory, and never
past ``max_bytes``: a core bigger than the limit is cut there (the notes and
the stack pages of the crashing thread usually sit early, so a cut core still
gives a signature) and the caller marks the event partial. The format is
sniffed from the magic bytes, not trusted from the file name.

A 110 KB ``.zst`` can expand to 3 GB (a decompression bomb, or a real core of
mostly zero pages). Zero blocks are not written but skipped over, so the
temporary file is sparse and costs the disk only its data; the copy stops at
the core's deadline (the analysis' time budget covers decompression too) and
before the temporary directory's file system fills up.
"""

from __future__ import annotations

import lzma
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import lz4.frame
import zstandard

from fleetepi.agents.core.exceptions import CoreParseError
from fleetepi.agents.core.limits import Deadline

_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)
#: Stop writing when the temporary directory's file system has less free than this.
MIN_FREE_BYTES = 1 << 30
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


def copy_limited(src: BinaryIO, dst: BinaryIO, max_bytes: int, deadline: Deadline | None = None,
                 sparse: bool = False) -> tuple[int, bool, str | None]:
    """Copy up to ``max_bytes``; ``(written, cut_by_limit, error)``. Errors end the copy, not the caller.

    :param deadline: stop (with an error saying so) when it expires.
    :param sparse: seek over all-zero chunks instead of writing them (``dst`` must be a seekable file).
    """
    written = 0
    checked_free_at = 0
    try:
        while True:
            chunk = src.read(min(_CHUNK, max_bytes - written + 1))
            if not chunk:
                break
            if written + len(chunk) > max_bytes:
                chunk = chunk[: max_bytes - written]
                _put(dst, chunk, sparse)
                written = max_bytes
                _end(dst, written, sparse)
                return written, True, None
            _put(dst, chunk, sparse)
            written += len(chunk)
            if deadline is not None and deadline.expired:
                _end(dst, written, sparse)
                return written, False, f"stopped at the time limit after {written} bytes"
            if sparse and written - checked_free_at >= 64 * _CHUNK:
                checked_free_at = written
                free = _free_bytes(dst)
                if free is not None and free < MIN_FREE_BYTES:
                    _end(dst, written, sparse)
                    return written, False, f"stopped after {written} bytes: the temporary directory is nearly full"
    except (OSError, EOFError, lzma.LZMAError, zstandard.ZstdError, RuntimeError) as exc:
        _end(dst, written, sparse)
        return written, False, f"{type(exc).__name__}: {exc}"[:200]
    _end(dst, written, sparse)
    return written, False, None


def _put(dst: BinaryIO, chunk: bytes, sparse: bool) -> None:
    if sparse and chunk == _ZEROS[: len(chunk)]:
        dst.seek(len(chunk), os.SEEK_CUR)  # a hole: no disk for a zero page
    else:
        dst.write(chunk)


def _end(dst: BinaryIO, size: int, sparse: bool) -> None:
    if sparse:
        try:
            dst.truncate(size)  # a trailing hole still counts in the file's size
        except OSError:
            pass


def _free_bytes(dst: BinaryIO) -> int | None:
    try:
        st = os.fstatvfs(dst.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return st.f_bavail * st.f_frsize


def require_regular(path: str) -> os.stat_result:
    """``stat`` of ``path``, refusing anything but a regular file (a FIFO would block ``open`` forever).

    :raises CoreParseError: not a regular file, or gone.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CoreParseError(f"cannot stat {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) \
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
        raise CoreParseError(f"{path} is {kind}, not a core file")
    return st


@contextmanager
def plain_core(path: str, max_bytes: int, tmp_dir: str | None = None, deadline: Deadline | None = None) -> Iterator[PlainCore]:
    """Yield a plain core for ``path``: itself, or a decompressed (sparse) temp copy removed on exit.

    :raises CoreParseError: ``path`` is not a regular file (FIFO, device, socket).
    """
    require_regular(path)
    with open(path, "rb") as fh:
        kind = sniff(fh.read(8))
    if kind is None:
        yield PlainCore(path, None, None, None)
        return
    fd, tmp = tempfile.mkstemp(prefix="fleetepi-core-", dir=tmp_dir)
    try:
        with open(path, "rb") as raw, os.fdopen(fd, "wb") as out:
            written, cut, error = copy_limited(_reader(kind, raw), out, max_bytes, deadline, sparse=True)
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


__all__ = ["MAGIC", "MIN_FREE_BYTES", "PlainCore", "copy_limited", "plain_core", "require_regular", "sniff", "spool_stream"]
