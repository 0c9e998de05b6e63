"""The crash-shape flags (``Crash.shape_flags``), and which of them say *hardware*.

One vocabulary for the core reader (``agents.core.shape``), the kernel-log
reader (``agents.applog.crashlines``) and ``host_spike`` (the simulator's
older names are aliases): the detector once knew only the simulator's
names, so the libunwind race's return to NULL in a real core (``ip_zero``)
counted as silicon, and so did every stack overflow (``sp_unmapped``).

Only a few shapes are evidence against the machine rather than the code.
Compiled x86-64 code moves the stack pointer by multiples of 8, so a stack
pointer off that is the CPU's doing; a general-protection fault is an access
to a non-canonical address, which no pointer the program computed correctly
holds. A jump to NULL, a jump into data, a stack pointer past the stack and
a fault next to a mapping are what software bugs look like. A bit flip is
judged by ``Crash.bitflip_score`` (1/k for k candidate bits), not by its
``*_bitflip`` flags, which any pointer with one mapped neighbour gets. And a
SIGBUS whose ``si_code`` is ``BUS_MCEERR_AR``/``BUS_MCEERR_AO`` is the kernel
saying so outright: the process touched memory a machine check poisoned.
"""

from __future__ import annotations

from collections.abc import Iterable

IP_ZERO = "ip_zero"
IP_NOT_EXECUTABLE = "ip_not_executable"
IP_BITFLIP = "ip_bitflip"
SP_MISALIGNED = "sp_misaligned"
SP_UNMAPPED = "sp_unmapped"
FAULT_BITFLIP = "fault_bitflip"
REG_BITFLIP = "reg_bitflip"
GP_FAULT = "gp_fault"
IP_OUTSIDE_MODULE = "ip_outside_module"
IN_SIGNAL_HANDLER = "in_signal_handler"
MEMORY_POISONED = "memory_poisoned"

#: The simulator's names (its classic preset is held byte for byte to the first recordings), read as the agents'.
ALIASES = {"return_to_null": IP_ZERO, "misaligned_sp": SP_MISALIGNED, "bit_flip_address": FAULT_BITFLIP}

#: Flags that no correctly computing machine produces.
HARDWARE_FLAGS = frozenset({SP_MISALIGNED, GP_FAULT, MEMORY_POISONED})
#: ``Crash.fault_class`` values that no pointer the program computed correctly holds.
HARDWARE_FAULT_CLASSES = frozenset({"non_canonical"})
#: A bit-flip score at or above this is a flip (one or two candidate bits); below, a pointer that merely has
#: mapped neighbours. host_spike's ``host_bitflip_min`` default, and the archive's and report's cut.
BITFLIP_MIN = 0.5


def canonical_flag(flag: str) -> str:
    return ALIASES.get(flag, flag)


def hardware_flags(flags: Iterable[str] | None) -> list[str]:
    """The flags among ``flags`` that point at the machine (agents' names; aliases read as them)."""
    return [f for f in (canonical_flag(x) for x in flags or ()) if f in HARDWARE_FLAGS]


def silicon_evidence(flags: Iterable[str] | None, bitflip_score: float | None, fault_class: str | None,
                     bitflip_min: float = BITFLIP_MIN) -> list[str]:
    """What in a crash's shape is the machine's doing, worded; empty: it looks like software."""
    out = hardware_flags(flags)
    if bitflip_score is not None and bitflip_score >= bitflip_min:
        out.append(f"bit-flip score {bitflip_score:g} >= {bitflip_min:g}")
    if fault_class in HARDWARE_FAULT_CLASSES:
        out.append(f"{fault_class} fault address")
    return out


__all__ = ["ALIASES", "BITFLIP_MIN", "FAULT_BITFLIP", "GP_FAULT", "HARDWARE_FAULT_CLASSES", "HARDWARE_FLAGS", "IN_SIGNAL_HANDLER", "IP_BITFLIP",
           "IP_NOT_EXECUTABLE", "IP_OUTSIDE_MODULE", "IP_ZERO", "MEMORY_POISONED", "REG_BITFLIP", "SP_MISALIGNED", "SP_UNMAPPED", "canonical_flag",
           "hardware_flags", "silicon_evidence"]
