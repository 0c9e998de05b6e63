"""Unwind the crashing thread from the registers and the stack pages in the core.

First **DWARF CFI** (``.eh_frame`` of the module files on this host, see
``fleetepi.agents.core.cfi``): exact, for as long as every frame has it. Where it
stops (no module file, a NULL pc, a DWARF expression), two sources of return
addresses, merged, take over from the last state:

* **frame pointers** (``rbp`` chain): exact where every function keeps one;
* **stack scanning**: every 8-byte word above ``rsp`` that lands in an
  executable mapping *and* is preceded by a call instruction in the module's
  code. Measured on this project's test cores, scanning recovers whole stacks
  where the frame-pointer chain loses the frames of libc (built without frame
  pointers) between the crash and the first user frame.

The walk takes scanned frames below the first valid frame-pointer link (the
non-FP functions between the crash site and user code), follows the chain,
and scans on above where the chain breaks. When the crashing function keeps
a frame pointer itself, words below its frame are stale locals and are not
taken. Code bytes come from the core when the kernel dumped them, else from
the module's file on this host (matched by build id).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fleetepi.agents.core.cfi import DWARF_REGS, UnwindState, step
from fleetepi.agents.core.elfcore import CoreFile
from fleetepi.agents.core.limits import Deadline
from fleetepi.agents.core.notes import SigInfo, decode_siginfo

#: Reads ``n`` code bytes at a process address, or ``None`` when no source has them.
CodeReader = Callable[[int, int], "bytes | None"]
#: Function start (process address) containing a process address, or ``None``.
FunctionStart = Callable[[int], "int | None"]
#: CFI rows and link-time address for a process address, or ``None`` (see ``fleetepi.agents.core.cfi``).
CfiLookup = Callable[[int], "tuple[list[dict[str, object]], int] | None"]

#: How many scanned candidates further up may prove the ones before them stale.
_STALE_LOOKAHEAD = 4
#: PLT stubs: ``jmp *GOT(%rip)``, with ``endbr64`` and/or ``bnd`` prefixes; the disp32 follows.
_PLT_JUMPS = (b"\xff\x25", b"\xf2\xff\x25", b"\xf3\x0f\x1e\xfa\xf2\xff\x25", b"\xf3\x0f\x1e\xfa\xff\x25")
_FP_PROLOGUES = (b"\x55\x48\x89\xe5", b"\xf3\x0f\x1e\xfa\x55\x48\x89\xe5")
#: glibc's and musl's ``__restore_rt``: ``mov $15, %rax; syscall`` (rt_sigreturn).
SIGRETURN_CODE = b"\x48\xc7\xc0\x0f\x00\x00\x00\x0f\x05"
#: ``struct rt_sigframe``: after the handler returns, rsp points at ``uc``; the
#: general registers (``uc_mcontext.gregs``) start 40 bytes in.
_UC_GREGS = 40
#: The kernel's ``struct ucontext`` is 304 bytes; ``siginfo`` follows it.
_UC_SIZE = 304
#: ``gregs`` order (``REG_R8`` ... ``REG_RIP``) as DWARF register numbers.
_GREGS_DWARF = (8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 6, 3, 1, 0, 2, 7)


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One unwound frame before symbolization.

    :param pc: the instruction pointer (frame 0) or return address (callers).
    :param trust: ``context`` (registers), ``cfi`` (DWARF call-frame info),
        ``fp`` (frame-pointer chain), ``scan`` (stack scanning) or ``signal``
        (the context a signal interrupted, read from the kernel's signal
        frame), like breakpad's frame trust.
    :param sigreturn: this pc is the signal-return trampoline (``__restore_rt``).
    """

    pc: int
    trust: str
    sigreturn: bool = False

    @property
    def is_return(self) -> bool:
        """A return address (symbolize at ``pc - 1``, the call), not an exact pc."""
        return self.trust not in ("context", "signal")


@dataclass(frozen=True, slots=True)
class CaughtSignal:
    """A signal a handler caught on this stack: what it interrupted, and why."""

    regs: dict[str, int]
    siginfo: SigInfo | None


@dataclass(frozen=True, slots=True)
class WalkResult:
    frames: list[RawFrame]
    notes: list[str]
    caught: CaughtSignal | None = None


def call_before(code: bytes) -> bool:
    """Whether the bytes just before a return address end with a ``call`` instruction.

    ``code`` is the 7 bytes preceding the return address. Covers ``E8 rel32``
    and the ``FF /2`` forms compilers emit (register, ``[reg]``,
    ``[reg+disp8]``, ``[reg+disp32]``, ``[rip+disp32]``, with or without SIB);
    a REX prefix before ``FF`` does not move the opcode's position from the end.
    """
    n = len(code)

    def at(back: int) -> int:
        return code[n - back] if back <= n else -1

    if at(5) == 0xE8:
        return True
    if at(2) == 0xFF:  # FF /2 mod=11 (call reg) or mod=00 without SIB/disp
        modrm = at(1)
        if (modrm & 0x38) == 0x10 and ((modrm >> 6) == 3 or ((modrm >> 6) == 0 and (modrm & 7) not in (4, 5))):
            return True
    if at(3) == 0xFF:
        modrm = at(2)
        if (modrm & 0x38) == 0x10 and (modrm >> 6) == 1 and (modrm & 7) != 4:  # [reg+disp8]
            return True
        if (modrm & 0x38) == 0x10 and (modrm >> 6) == 0 and (modrm & 7) == 4:  # [sib]
            return True
    if at(4) == 0xFF:
        modrm = at(3)
        if (modrm & 0x38) == 0x10 and (modrm >> 6) == 1 and (modrm & 7) == 4:  # [sib+disp8]
            return True
    if at(6) == 0xFF:
        modrm = at(5)
        if modrm == 0x15:  # [rip+disp32]
            return True
        if (modrm & 0x38) == 0x10 and (modrm >> 6) == 2 and (modrm & 7) != 4:  # [reg+disp32]
            return True
    if at(7) == 0xFF:
        modrm = at(6)
        if (modrm & 0x38) == 0x10 and (modrm >> 6) == 2 and (modrm & 7) == 4:  # [sib+disp32]
            return True
    return False


_X86_PF, _X86_GP, _X86_UD, _X86_DE = 14, 13, 6, 0


def trap_siginfo(trapno: int, err: int, cr2: int) -> SigInfo | None:
    """The signal an x86 trap raises: page fault -> SIGSEGV at ``cr2`` (MAPERR, or
    ACCERR when the page was present), general protection -> SIGSEGV without an
    address (SI_KERNEL), invalid opcode -> SIGILL, divide error -> SIGFPE."""
    if trapno == _X86_PF:
        return SigInfo(signo=11, errno=0, code=2 if err & 1 else 1, addr=cr2)
    if trapno == _X86_GP:
        return SigInfo(signo=11, errno=0, code=0x80, addr=None)
    if trapno == _X86_UD:
        return SigInfo(signo=4, errno=0, code=1, addr=None)
    if trapno == _X86_DE:
        return SigInfo(signo=8, errno=0, code=1, addr=None)
    return None


class StackWalker:
    """Unwinds one thread.

    :param core: the open core.
    :param code: reader of code bytes (core first, then the module file).
    :param function_start: start of the function around an address, for the
        frame-pointer prologue test of frame 0 (``None`` when unknown).
    :param cfi: CFI rows for a pc (``None``: no CFI, frame pointers and scanning only).
    :param exec_ranges: ``[start, end)`` of executable memory: the core's
        ``PF_X`` segments and the modules' executable loads (gdb's gcore
        leaves unmodified text out of the core, so both are needed).
    :param scan_bytes: how far above ``rsp`` to look.
    :param max_frames: frames returned at most.
    """

    def __init__(
        self,
        core: CoreFile,
        code: CodeReader,
        function_start: FunctionStart,
        exec_ranges: list[tuple[int, int]],
        *,
        cfi: CfiLookup | None = None,
        scan_bytes: int = 256 * 1024,
        max_frames: int = 64,
    ) -> None:
        self.core = core
        self.code = code
        self.function_start = function_start
        self.cfi = cfi
        self.scan_bytes = scan_bytes
        self.max_frames = max_frames
        ranges = sorted((s, min(e, (1 << 64) - 1)) for s, e in exec_ranges if 0 <= s < e)
        self._x_starts = np.array([s for s, _e in ranges], dtype=np.uint64)
        self._x_ends = np.array([e for _s, e in ranges], dtype=np.uint64)
        self.unverified = 0

    # --- return-address test ---------------------------------------------
    def _is_executable(self, addr: int) -> bool:
        i = int(np.searchsorted(self._x_starts, np.uint64(addr), side="right")) - 1
        return i >= 0 and addr < int(self._x_ends[i])

    def _is_return(self, addr: int) -> bool:
        if not self._is_executable(addr) or not self._is_executable(addr - 1):
            return False  # the call must end inside code, so a range start is never a return address
        code = self.code(addr - 7, 7)
        if code is None:
            self.unverified += 1  # no code to check: trust the executable mapping alone
            return True
        return call_before(code)

    # --- the walk ---------------------------------------------------------
    def _read_u64(self, addr: int) -> int | None:
        data = self.core.read(addr, 8)
        return int.from_bytes(data, "little") if data is not None and len(data) == 8 else None

    def walk(self, regs: dict[str, int], deadline: Deadline | None = None) -> WalkResult:
        """Frames of the thread whose registers are ``regs``: CFI first, then frame pointers and scanning."""
        frames = [RawFrame(regs["rip"], "context")]
        if self.cfi is None:
            return self._walk_fp_scan(regs, frames, deadline)
        state = UnwindState(regs["rip"], {n: regs[name] for n, name in DWARF_REGS.items()})
        caught: CaughtSignal | None = None
        while len(frames) < self.max_frames:
            if deadline is not None and deadline.expired:
                return WalkResult(frames, ["parse timeout during CFI unwinding: stack cut short"])
            if frames[-1].is_return and self.code(state.pc, len(SIGRETURN_CODE)) == SIGRETURN_CODE:
                interrupted = self._signal_context(state.regs[7])
                if interrupted is None:
                    break
                if caught is None:
                    caught = self._caught(state.regs[7], interrupted)
                frames[-1] = RawFrame(frames[-1].pc, frames[-1].trust, sigreturn=True)
                frames.append(RawFrame(interrupted.pc, "signal"))
                state = interrupted
                continue
            got = self.cfi(state.pc - 1 if frames[-1].is_return else state.pc)
            nxt = step(got[0], got[1], state, self._read_u64) if got is not None else None
            if nxt is None and len(frames) == 1:
                # A call to NULL or into unmapped memory has only pushed its return address:
                # the caller's state is [rsp] and rsp + 8, and CFI can go on from there.
                ret = self._read_u64(state.regs[7])
                if ret is not None and self._is_return(ret):
                    frames.append(RawFrame(ret, "scan"))
                    state = UnwindState(ret, {**state.regs, 7: state.regs[7] + 8})
                    continue
            if nxt is None:
                break
            if nxt.pc == 0:  # the CFI says "outermost frame" (_start, clone3): the stack ends here
                return WalkResult(frames, [], caught)
            if nxt.regs[7] <= state.regs[7] or not self._is_executable(nxt.pc):
                break
            frames.append(RawFrame(nxt.pc, "cfi"))
            state = nxt
        if len(frames) == 1:
            return self._walk_fp_scan(regs, frames, deadline)
        if len(frames) >= self.max_frames:
            return WalkResult(frames, [f"stack cut at {self.max_frames} frames"], caught)
        rest = self._walk_fp_scan({"rip": state.pc, "rsp": state.regs[7], "rbp": state.regs.get(6, 0)}, [], deadline)
        if len(rest.frames) <= 1:
            return WalkResult(frames, [], caught)
        notes = [f"CFI unwinding stopped after {len(frames)} frames; {len(rest.frames) - 1} more by frame pointers or scanning"]
        return WalkResult((frames + rest.frames[1:])[: self.max_frames], notes + rest.notes, caught)

    def _signal_context(self, sp: int) -> UnwindState | None:
        """Registers a signal interrupted, from the kernel's ``rt_sigframe`` at ``sp``."""
        raw = self.core.read(sp + _UC_GREGS, 17 * 8)
        if raw is None:
            return None
        gregs = struct.unpack("<17Q", raw)
        regs = {dwarf: gregs[i] for i, dwarf in enumerate(_GREGS_DWARF)}
        return UnwindState(gregs[16], regs)

    def _caught(self, sp: int, interrupted: UnwindState) -> CaughtSignal:
        """What the handler caught: from the CPU trap the kernel saved (``trapno``,
        ``err``, ``cr2`` in ``uc_mcontext``, always there), else the ``siginfo``
        the kernel copies only for ``SA_SIGINFO`` handlers."""
        names = {name: interrupted.regs.get(n, 0) for n, name in DWARF_REGS.items()}
        regs = {**names, "rip": interrupted.pc}
        tail = self.core.read(sp + _UC_GREGS + 19 * 8, 4 * 8)
        if tail is not None:
            err, trapno, _oldmask, cr2 = struct.unpack("<4Q", tail)
            info = trap_siginfo(trapno, err, cr2)
            if info is not None:
                return CaughtSignal(regs, info)
        raw = self.core.read(sp + _UC_SIZE, 128)
        info = decode_siginfo(raw) if raw is not None else None
        return CaughtSignal(regs, info if info is not None and 1 <= info.signo <= 64 else None)

    def _walk_fp_scan(self, regs: dict[str, int], frames: list[RawFrame], deadline: Deadline | None) -> WalkResult:
        notes: list[str] = []
        pc, sp, bp = regs["rip"], regs["rsp"], regs["rbp"]
        frames = frames or [RawFrame(pc, "context")]
        seg = self.core.segment_at(sp)
        if seg is None:
            notes.append(f"stack pointer 0x{sp:x} is outside every mapping: no stack to walk")
            return WalkResult(frames, notes)
        base = (sp + 7) & ~7
        stack = self.core.readable_span(base, self.scan_bytes)
        if not stack:
            notes.append("the stack pages are not in the core (truncated or filtered): no caller frames")
            return WalkResult(frames, notes)
        words = np.frombuffer(stack[: len(stack) // 8 * 8], dtype="<u8")

        def word(addr: int) -> int | None:
            i = (addr - base) >> 3
            return int(words[i]) if 0 <= i < len(words) and (addr - base) % 8 == 0 else None

        # Scan: every word inside an executable mapping, then the call test (few candidates).
        idx = np.searchsorted(self._x_starts, words, side="right") - 1
        inside = (idx >= 0) & (words < self._x_ends[np.clip(idx, 0, None)]) if len(self._x_starts) else np.zeros(len(words), bool)
        scanned: list[tuple[int, int]] = []  # (slot address, return address)
        for i in np.flatnonzero(inside):
            if deadline is not None and deadline.expired:
                notes.append("parse timeout during stack scan: stack cut short")
                break
            ret = int(words[i])
            if self._is_return(ret):
                scanned.append((base + 8 * int(i), ret))
                if len(scanned) >= 4 * self.max_frames:
                    break

        # Frame-pointer chain.
        chain: list[tuple[int, int]] = []
        end_of_stack = base + 8 * len(words)
        cur = bp
        while len(chain) < self.max_frames and base <= cur < end_of_stack - 8 and cur % 8 == 0:
            ret, nxt = word(cur + 8), word(cur)
            if ret is None or nxt is None or not self._is_return(ret):
                break
            chain.append((cur + 8, ret))
            if nxt == 0 or nxt <= cur:
                break
            cur = nxt

        if chain:
            first_slot = chain[0][0]
            own_frame = self._has_fp_prologue(pc)
            if not own_frame:
                below = [r for s, r in scanned if s < first_slot]
                frames += [RawFrame(r, "scan") for r in self._drop_stale(frames[-1], below)]
            frames += [RawFrame(r, "fp") for _s, r in chain]
            last_slot = chain[-1][0]
            tail = [RawFrame(r, "scan") for r in self._drop_stale(frames[-1], [r for s, r in scanned if s > last_slot])]
            if tail:
                notes.append(f"frame-pointer chain ended after {len(chain)} links; {len(tail)} more frames by stack scan")
            frames += tail
        else:
            frames += [RawFrame(r, "scan") for r in self._drop_stale(frames[-1], [r for _s, r in scanned])]
            notes.append("no frame-pointer chain: all caller frames from stack scanning")
        if self.unverified:
            notes.append(f"{self.unverified} scanned return addresses unverified (no code bytes for their module)")
        if len(frames) > self.max_frames:
            notes.append(f"stack cut at {self.max_frames} frames")
            frames = frames[: self.max_frames]
        return WalkResult(frames, notes)

    def _drop_stale(self, callee: RawFrame, rets: list[int]) -> list[int]:
        """Scanned return addresses without the stale ones a later candidate proves stale.

        A big frame (``abort``'s) keeps words of earlier calls in slots it
        never wrote, and some are return addresses (``init_cpu_features`` of
        ld.so, left from start-up); which slot they land in moves with the
        stack's ASLR alignment, so a scan took them in some runs only. When a
        candidate a few slots further up returns from a *direct call to the
        callee's own function*, it is the callee's caller, and the candidates
        between are dead locals. Only that positive evidence drops anything: a
        tail call (whose caller called another function) keeps every candidate.
        """
        out: list[int] = []
        pc = callee.pc - 1 if callee.is_return else callee.pc
        i = 0
        while i < len(rets):
            target_fn = self.function_start(pc)
            if target_fn is not None:
                for j in range(i + 1, min(i + 1 + _STALE_LOOKAHEAD, len(rets))):
                    if self._direct_call_target(rets[j]) == target_fn:
                        i = j
                        break
            out.append(rets[i])
            pc = rets[i] - 1
            i += 1
        return out

    def _direct_call_target(self, ret: int) -> int | None:
        """The function a ``call rel32`` just before ``ret`` enters (through a PLT stub's GOT slot), if any."""
        code = self.code(ret - 5, 5)
        if code is None or len(code) != 5 or code[0] != 0xE8:
            return None
        target = (ret + int.from_bytes(code[1:], "little", signed=True)) & ((1 << 64) - 1)
        stub = self.code(target, 11)
        if stub is None:
            return target
        for prefix in _PLT_JUMPS:
            if stub.startswith(prefix):
                at = len(prefix)
                got = target + at + 4 + int.from_bytes(stub[at:at + 4], "little", signed=True)
                resolved = self._read_u64(got)
                return resolved if resolved else None
        return target

    def _has_fp_prologue(self, pc: int) -> bool:
        start = self.function_start(pc)
        if start is None or pc < start + 4:
            return False
        head = self.code(start, 8)
        return head is not None and any(head.startswith(p) for p in _FP_PROLOGUES)


__all__ = ["SIGRETURN_CODE", "CaughtSignal", "CfiLookup", "trap_siginfo", "CodeReader", "FunctionStart", "RawFrame", "StackWalker", "WalkResult", "call_before"]
