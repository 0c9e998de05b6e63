"""Decoders for the core notes that pyelftools 0.33 hands back as raw bytes.

pyelftools decodes ``NT_PRPSINFO`` and ``NT_FILE`` but returns
``NT_PRSTATUS``, ``NT_SIGINFO`` and ``NT_AUXV`` undecoded; their x86-64
layouts are fixed by the kernel ABI (``struct elf_prstatus``,
``siginfo_t``, ``Elf64_auxv_t``), so a few ``struct`` formats decode them
without a C parser. Every decoder takes bytes and returns a frozen record:
pure functions, tested on real cores.
"""

from __future__ import annotations

import signal as _signal
import struct
from dataclasses import dataclass

#: x86-64 ``struct user_regs_struct`` field order (27 unsigned longs).
X86_64_REGS = (
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8",
    "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags",
    "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs",
)
#: Registers that may hold data pointers (the bit-flip test looks at these).
POINTER_REGS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")

_PRSTATUS_REGS_AT = 112  # after si_signo..pr_cstime (see linux/elfcore.h)
_PRSTATUS_HEAD = struct.Struct("<iiihxxQQiiii")
_REGS = struct.Struct("<27Q")
_SIGINFO_HEAD = struct.Struct("<iiixxxxQ")

#: Signals whose ``si_addr`` is the faulting address (others carry a sender pid there).
FAULT_SIGNALS = frozenset({_signal.SIGSEGV, _signal.SIGBUS, _signal.SIGILL, _signal.SIGFPE, _signal.SIGTRAP})

#: si_code values at or below 0 come from a user (kill, tgkill, sigqueue), not the CPU.
SI_USER_MAX = 0


@dataclass(frozen=True, slots=True)
class PrStatus:
    """One thread's status: the signal it stopped on and its registers."""

    cursig: int
    pid: int
    regs: dict[str, int]


@dataclass(frozen=True, slots=True)
class SigInfo:
    """The signal that killed the process, as the kernel delivered it."""

    signo: int
    errno: int
    code: int
    addr: int | None  # fault address for FAULT_SIGNALS raised by the CPU, else None


def decode_prstatus(desc: bytes) -> PrStatus:
    """Decode an x86-64 ``NT_PRSTATUS`` descriptor (336 bytes).

    :raises ValueError: when the descriptor is too short for the register set.
    """
    if len(desc) < _PRSTATUS_REGS_AT + _REGS.size:
        raise ValueError(f"NT_PRSTATUS of {len(desc)} bytes, need {_PRSTATUS_REGS_AT + _REGS.size} for x86-64")
    _signo, _code, _errno, cursig, _pend, _hold, pid, _ppid, _pgrp, _sid = _PRSTATUS_HEAD.unpack_from(desc, 0)
    values = _REGS.unpack_from(desc, _PRSTATUS_REGS_AT)
    return PrStatus(cursig=cursig, pid=pid, regs=dict(zip(X86_64_REGS, values)))


def decode_siginfo(desc: bytes) -> SigInfo:
    """Decode ``NT_SIGINFO`` (a ``siginfo_t``, 128 bytes on x86-64).

    ``si_addr`` only means "fault address" for a CPU-raised fault signal; for
    ``kill``/``abort`` the same bytes hold the sender's pid and uid.
    """
    if len(desc) < _SIGINFO_HEAD.size:
        raise ValueError(f"NT_SIGINFO of {len(desc)} bytes, need {_SIGINFO_HEAD.size}")
    signo, errno, code, addr = _SIGINFO_HEAD.unpack_from(desc, 0)
    is_fault = signo in FAULT_SIGNALS and code > SI_USER_MAX
    return SigInfo(signo=signo, errno=errno, code=code, addr=addr if is_fault else None)


def decode_auxv(desc: bytes) -> dict[int, int]:
    """Decode ``NT_AUXV`` into ``{a_type: a_val}`` (stops at ``AT_NULL``)."""
    out: dict[int, int] = {}
    for a_type, a_val in struct.iter_unpack("<QQ", desc[: len(desc) // 16 * 16]):
        if a_type == 0:
            break
        out[a_type] = a_val
    return out


def signal_name(signo: int) -> str:
    """``SIGSEGV`` for 11; ``SIG42`` for numbers Python does not name."""
    try:
        return _signal.Signals(signo).name
    except ValueError:
        return f"SIG{signo}"


#: Auxiliary vector keys used here.
AT_ENTRY = 9
AT_SYSINFO_EHDR = 33  # base of the vDSO
AT_EXECFN = 31

__all__ = [
    "AT_ENTRY",
    "AT_EXECFN",
    "AT_SYSINFO_EHDR",
    "FAULT_SIGNALS",
    "POINTER_REGS",
    "PrStatus",
    "SigInfo",
    "X86_64_REGS",
    "decode_auxv",
    "decode_prstatus",
    "decode_siginfo",
    "signal_name",
]
