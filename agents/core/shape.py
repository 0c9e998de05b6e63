"""Crash shape: what the registers and the fault address say, beyond function names.

The founding case of fleetepi: a year of cores of one service fell into two
populations under the same function names. One host's CPU silently
miscomputed, and its cores showed misaligned stack pointers and pointers one
bit away from valid memory; an old libunwind race showed returns to NULL
(``rip == 0``) on many hosts. The shape separates them: a software race is one
signature on many hosts, corruption is one host with many odd shapes.
All functions here are pure over (registers, siginfo, a mapping oracle).
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Callable
from dataclasses import dataclass, field

from fleetepi.agents.core.notes import POINTER_REGS, SigInfo
from fleetepi.contract.shapes import (
    FAULT_BITFLIP,
    GP_FAULT,
    IP_BITFLIP,
    IP_NOT_EXECUTABLE,
    IP_ZERO,
    MEMORY_POISONED,
    REG_BITFLIP,
    SP_MISALIGNED,
    SP_UNMAPPED,
)

#: Linux's default ``vm.mmap_min_addr``: nothing is ever mapped below it.
NULL_PAGE_LIMIT = 0x10000
#: First kernel address on x86-64 with 4-level paging.
KERNEL_START = 0xFFFF800000000000
#: ``si_code`` of a general-protection fault: the kernel reports no address.
SI_KERNEL = 0x80
#: ``si_code`` of a SIGBUS for memory a machine check poisoned: read now (``BUS_MCEERR_AR``), found ahead
#: of use (``BUS_MCEERR_AO``). The kernel's own word that the machine, not the code, failed.
BUS_MCEERR = frozenset({4, 5})
#: A value this close to a mapping is a near miss (end pointers), not a flip.
_NEAR = 64 * 1024
#: Weight of a pointer register hit relative to a fault address hit.
_REG_WEIGHT = 0.5

#: Address oracle: is this address inside some mapping (or executable mapping).
IsMapped = Callable[[int], bool]


@dataclass(slots=True)
class Shape:
    si_code: int | None = None
    fault_address: int | None = None
    fault_class: str = "none"
    flags: list[str] = field(default_factory=list)
    bitflip_score: float = 0.0
    bitflip_detail: list[str] = field(default_factory=list)


def is_canonical(addr: int) -> bool:
    """x86-64 (48-bit) canonical: bits 47..63 all equal."""
    top = addr >> 47
    return top == 0 or top == (1 << 17) - 1


def classify_fault(addr: int, is_mapped: IsMapped) -> str:
    """``null_page``, ``non_canonical``, ``kernel``, ``mapped`` or ``unmapped``."""
    if addr < NULL_PAGE_LIMIT:
        return "null_page"
    if not is_canonical(addr):
        return "non_canonical"
    if addr >= KERNEL_START:
        return "kernel"
    return "mapped" if is_mapped(addr) else "unmapped"


def one_bit_neighbours(value: int, is_mapped: IsMapped) -> list[int]:
    """Bits whose flip turns ``value`` into a mapped address (bits 12-63: page granularity)."""
    return [bit for bit in range(12, 64) if is_mapped(value ^ (1 << bit))]


def _near_mapping(value: int, is_mapped: IsMapped) -> bool:
    return is_mapped(value - _NEAR) or is_mapped(value + _NEAR) or is_mapped(value - 4096) or is_mapped(value + 4096)


def bitflip_candidates(value: int, is_mapped: IsMapped) -> list[int]:
    """Flip bits for an *unmapped* pointer-like value that is no near miss, else ``[]``."""
    if value < NULL_PAGE_LIMIT or value >= (1 << 64) or is_mapped(value) or _near_mapping(value, is_mapped):
        return []
    return one_bit_neighbours(value, is_mapped)


def crash_shape(
    regs: dict[str, int] | None,
    siginfo: SigInfo | None,
    is_mapped: IsMapped,
    is_executable: IsMapped,
    *,
    at_function_entry: bool = False,
) -> Shape:
    """The crash shape of one thread.

    :param at_function_entry: ``rip`` is the first instruction of a function
        (the thread just executed a ``call``); informational, see the note on
        ``sp_misaligned`` below.

    The bit-flip score adds 1/k for the fault address and 0.5/k for each
    pointer register that is one bit (of k candidate bits) away from mapped
    memory; 0.0 means no such value.
    """
    shape = Shape()
    if siginfo is not None:
        shape.si_code = siginfo.code
        if siginfo.addr is not None and siginfo.code != SI_KERNEL:
            shape.fault_address = siginfo.addr
            shape.fault_class = classify_fault(siginfo.addr, is_mapped)
        elif siginfo.signo in (_signal.SIGSEGV, _signal.SIGBUS) and siginfo.code == SI_KERNEL:
            shape.flags.append(GP_FAULT)  # non-canonical access or similar: no address reported
        if siginfo.signo == _signal.SIGBUS and siginfo.code in BUS_MCEERR:
            shape.flags.append(MEMORY_POISONED)
    if regs is None:
        return shape
    rip, rsp = regs["rip"], regs["rsp"]
    if rip == 0:
        shape.flags.append(IP_ZERO)
    elif not is_executable(rip):
        shape.flags.append(IP_NOT_EXECUTABLE)
        bits = [b for b in range(12, 64) if is_executable(rip ^ (1 << b))]
        if bits and not _near_mapping(rip, is_executable):
            shape.flags.append(IP_BITFLIP)
            shape.bitflip_score += 1.0 / len(bits)
            shape.bitflip_detail.append(f"rip 0x{rip:x} is bit {bits[0]} away from executable code")
    # Compiled x86-64 code only ever moves rsp by multiples of 8. The stricter
    # "rsp % 16 == 8 at a call boundary" is NOT used: GCC drops the 16-byte
    # alignment before calls to local functions it knows do not need it
    # (measured on this project's test program at -O1), so it fires on
    # healthy crashes.
    if rsp % 8 != 0:
        shape.flags.append(SP_MISALIGNED)
    if not is_mapped(rsp):
        shape.flags.append(SP_UNMAPPED)
    if shape.fault_address is not None and shape.fault_class in ("unmapped", "non_canonical", "kernel"):
        bits = bitflip_candidates(shape.fault_address, is_mapped)
        if bits:
            shape.flags.append(FAULT_BITFLIP)
            shape.bitflip_score += 1.0 / len(bits)
            shape.bitflip_detail.append(f"fault address 0x{shape.fault_address:x} is bit {bits[0]} away from mapped memory")
    reg_hits = 0
    for name in POINTER_REGS:
        bits = bitflip_candidates(regs[name], is_mapped)
        if bits:
            reg_hits += 1
            shape.bitflip_score += _REG_WEIGHT / len(bits)
            shape.bitflip_detail.append(f"{name} 0x{regs[name]:x} is bit {bits[0]} away from mapped memory")
    if reg_hits:
        shape.flags.append(REG_BITFLIP)
    shape.bitflip_score = round(shape.bitflip_score, 4)
    return shape


__all__ = [
    "KERNEL_START",
    "NULL_PAGE_LIMIT",
    "SI_KERNEL",
    "Shape",
    "bitflip_candidates",
    "classify_fault",
    "crash_shape",
    "is_canonical",
    "one_bit_neighbours",
]
