"""An ELF core file, memory-mapped: notes, segments, and reads of process memory.

The core is ``mmap``'d and never read whole: pyelftools parses the ELF and
program headers and walks the ``PT_NOTE`` segment (a few KB at the start of
the file), and :meth:`CoreFile.read` copies only the bytes asked for (stack
pages, a few words at pointers). The kernel pages in what is touched, so a
1 GiB core costs about as much as a 1 MB one. This module is the one
boundary where pyelftools' errors become fleetepi errors; anything that can
still be read from a damaged core is kept, with a note on what was lost.
"""

from __future__ import annotations

import bisect
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile

from fleetepi.agents.core.exceptions import NotACore, UnsupportedCore
from fleetepi.agents.core.notes import PrStatus, SigInfo, decode_auxv, decode_prstatus, decode_siginfo

PF_X = 1
PF_W = 2
PF_R = 4
_ADDR_END = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Segment:
    """One ``PT_LOAD``: a range of process memory and where its dumped bytes lie."""

    vaddr: int
    memsz: int
    offset: int
    filesz: int
    flags: int

    @property
    def end(self) -> int:
        return self.vaddr + self.memsz

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)


@dataclass(frozen=True, slots=True)
class FileMapping:
    """One ``NT_FILE`` entry: a file mapped at ``start..end`` from page ``page_offset``."""

    start: int
    end: int
    page_offset: int
    path: str


#: One past the last x86-64 address (what a 64-bit field can hold).
_ADDRESS_END = 1 << 64


@dataclass(slots=True)
class CoreNotes:
    """What the notes say; fields stay ``None`` when a note is missing or unreadable."""

    threads: list[PrStatus] = field(default_factory=list)
    siginfo: SigInfo | None = None
    fname: str | None = None
    psargs: str | None = None
    files: list[FileMapping] = field(default_factory=list)
    page_size: int = 4096
    auxv: dict[int, int] = field(default_factory=dict)


class CoreFile:
    """A memory-mapped ELF core; use as a context manager.

    :param path: the core file (plain ELF; see ``fleetepi.agents.core.decompress`` for
        ``.zst``/``.lz4``/``.xz``).
    :raises NotACore: not an ELF core at all.
    :raises UnsupportedCore: an ELF core of another machine than x86-64.

    ``notes_problems`` lists what could not be read (truncated notes, a
    segment cut off by the end of the file); callers put them in the event's
    ``notes`` and mark it ``partial``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.problems: list[str] = []
        self._fh = open(self.path, "rb")
        try:
            self.size = os.fstat(self._fh.fileno()).st_size
            if self.size < 64:
                raise NotACore(f"{self.path}: {self.size} bytes is too short for an ELF header")
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
            if self._mm[:4] != b"\x7fELF":
                raise NotACore(f"{self.path}: not an ELF file (magic {self._mm[:4]!r})")
            try:
                self._elf = ELFFile(self._mm)
                e_type = self._elf.header["e_type"]
                machine = self._elf.header["e_machine"]
            except Exception as exc:  # noqa: BLE001 - ELFError, or construct errors on short input
                raise NotACore(f"{self.path}: unreadable ELF header ({exc})") from None
            if e_type != "ET_CORE":
                raise NotACore(f"{self.path}: ELF type {e_type}, not a core dump")
            if machine != "EM_X86_64":
                raise UnsupportedCore(f"{self.path}: core of machine {machine}; only x86-64 registers are decoded")
            self.segments = self._read_segments()
            self._starts = [s.vaddr for s in self.segments]
            self.notes = self._read_notes()
        except BaseException:
            self.close()
            raise

    # --- lifecycle -------------------------------------------------------
    def close(self) -> None:
        mm = getattr(self, "_mm", None)
        if mm is not None:
            try:
                mm.close()
            except BufferError:  # a memoryview still refers to it; the GC closes it later
                pass
        self._fh.close()

    def __enter__(self) -> CoreFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- headers ---------------------------------------------------------
    def _read_segments(self) -> list[Segment]:
        segs: list[Segment] = []
        try:
            for i in range(self._elf.num_segments()):
                h = self._elf.get_segment(i).header
                if h["p_type"] != "PT_LOAD":
                    continue
                # A corrupt header can claim memory past 2**64: clamp, so later arithmetic stays in range.
                memsz = min(h["p_memsz"], _ADDR_END - h["p_vaddr"])
                seg = Segment(h["p_vaddr"], memsz, h["p_offset"], min(h["p_filesz"], memsz), h["p_flags"])
                if seg.filesz and seg.offset + seg.filesz > self.size:
                    cut = max(0, self.size - seg.offset)
                    self.problems.append(
                        f"truncated core: segment at 0x{seg.vaddr:x} has {cut} of {seg.filesz} bytes in the file"
                    )
                    seg = Segment(seg.vaddr, seg.memsz, seg.offset, cut, seg.flags)
                segs.append(seg)
        except Exception as exc:  # noqa: BLE001 - pyelftools/construct on a cut program header table
            self.problems.append(f"unreadable program headers after {len(segs)} segments ({type(exc).__name__})")
        segs.sort(key=lambda s: s.vaddr)
        return segs

    def _read_notes(self) -> CoreNotes:
        notes = CoreNotes()
        seen = 0
        try:
            for i in range(self._elf.num_segments()):
                seg = self._elf.get_segment(i)
                if seg.header["p_type"] != "PT_NOTE":
                    continue
                if seg.header["p_offset"] + seg.header["p_filesz"] > self.size:
                    self.problems.append("truncated core: the notes segment is cut off")
                for note in seg.iter_notes():
                    seen += 1
                    self._take_note(notes, note)
        except Exception as exc:  # noqa: BLE001 - construct/ELFError on a cut or corrupt note
            self.problems.append(f"unreadable note after {seen} notes ({type(exc).__name__}: {exc})"[:200])
        if not notes.threads:
            self.problems.append("no NT_PRSTATUS: registers unknown")
        return notes

    @staticmethod
    def _take_note(notes: CoreNotes, note: object) -> None:
        n_type = note["n_type"]  # type: ignore[index]
        desc = note["n_desc"]  # type: ignore[index]
        if n_type == "NT_PRSTATUS":
            notes.threads.append(decode_prstatus(desc))
        elif n_type == "NT_SIGINFO" and notes.siginfo is None:  # the first thread's is the fatal one
            notes.siginfo = decode_siginfo(desc)
        elif n_type == "NT_PRPSINFO":
            notes.fname = desc["pr_fname"].split(b"\0", 1)[0].decode("utf-8", "replace") or None
            notes.psargs = desc["pr_psargs"].split(b"\0", 1)[0].decode("utf-8", "replace").strip() or None
        elif n_type == "NT_FILE":
            size = desc["page_size"]
            # A damaged note can say anything; a page is a power of two from 4 KiB to 1 GiB.
            notes.page_size = size if 4096 <= size <= 1 << 30 and size & (size - 1) == 0 else 4096
            for entry, name in zip(desc["Elf_Nt_File_Entry"], desc["filename"]):
                start, end = entry["vm_start"], entry["vm_end"]
                if not 0 <= start < end <= _ADDRESS_END:  # an empty or inverted range maps nothing: skipped
                    continue
                notes.files.append(FileMapping(start, end, entry["page_offset"], name.decode("utf-8", "replace")))
        elif n_type == "NT_AUXV":
            notes.auxv = decode_auxv(desc)

    # --- memory ----------------------------------------------------------
    def segment_at(self, addr: int) -> Segment | None:
        """The ``PT_LOAD`` containing ``addr`` (dumped or not)."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self.segments[i].end:
            return self.segments[i]
        return None

    def is_mapped(self, addr: int) -> bool:
        return self.segment_at(addr) is not None

    def is_executable(self, addr: int) -> bool:
        seg = self.segment_at(addr)
        return seg is not None and seg.executable

    def read(self, addr: int, size: int) -> bytes | None:
        """Bytes of process memory at ``addr``, or ``None`` when the core does not hold them all."""
        seg = self.segment_at(addr)
        if seg is None or addr + size > seg.vaddr + seg.filesz:
            return None
        off = seg.offset + (addr - seg.vaddr)
        return self._mm[off : off + size]

    def readable_span(self, addr: int, limit: int) -> bytes:
        """Up to ``limit`` dumped bytes from ``addr`` within its segment (stack scans)."""
        seg = self.segment_at(addr)
        if seg is None:
            return b""
        avail = seg.vaddr + seg.filesz - addr
        if avail <= 0:
            return b""
        off = seg.offset + (addr - seg.vaddr)
        return self._mm[off : off + min(limit, avail)]


__all__ = ["CoreFile", "CoreNotes", "FileMapping", "PF_R", "PF_W", "PF_X", "Segment"]
