"""The kernel's lines about a process it killed or that faulted: crash fields without a core.

Shared by the kernel-log source (these lines arrive on ``/dev/kmsg``) and the
application-output parser (they also land in syslog files and ``journalctl``
output). Each extractor is a pure function of one line's text; the state a
parser keeps across lines is only the cgroup of a pending OOM kill.

* ``segfault``: ``comm[pid]: segfault at ADDR ip IP sp SP error N in LIB[BASE+SIZE]
  likely on CPU C (core K, socket S)``. The site is ``LIB!0xOFFSET`` with
  OFFSET = IP - BASE (stable across ASLR for one build), the fault address
  class comes from :func:`fleetepi.agents.core.shape.classify_fault`, whose
  mapping oracle is the page-fault error code's present bit (bit 0: the page
  was there and the access broke its protection, i.e. mapped; clear: nothing
  mapped there), and ``cpu`` is the CPU the kernel names: what the
  ``suspected_bad_silicon`` detector counts crashes by.
* ``trap``: ``traps: comm[pid] general protection fault ip:IP sp:SP error:0 in
  LIB[BASE+SIZE]`` (and ``trap invalid opcode`` / ``trap divide error``).
* ``oom_kill``: ``Out of memory: Killed process N (comm)``; the process name is
  the site (``python3.11`` and ``python3`` are one name); the job comes from
  the ``task_memcg`` of the ``oom-kill:`` line just before it (Slurm's
  ``/slurm/uid_U/job_J/...``, a Kubernetes ``pod<uid>`` slice).
* ``memory_failure``: the kernel killing a process that touched memory a
  machine check poisoned: ``Memory failure: PFN: Sending SIGBUS to comm:pid due
  to hardware memory corruption`` (5.3 on; ``Killing comm:pid`` before), ``MCE:
  Killing comm:pid due to hardware memory corruption fault at ADDR`` (the x86
  page-fault path, with the virtual address) and the older ``MCE PFN: Killing
  comm:pid early ...``. The crash is a SIGBUS flagged ``memory_poisoned``, as a
  core dump of the same death is (``si_code`` BUS_MCEERR_AR/AO): where cores are
  off or the process was too large to dump, the kernel's line is the only
  trace that the machine, not the code, failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleetepi.agents.core.shape import classify_fault
from fleetepi.contract.shapes import GP_FAULT, IP_OUTSIDE_MODULE, IP_ZERO, MEMORY_POISONED, SP_MISALIGNED

_SEGFAULT = re.compile(
    r"(?P<comm>\S+)\[(?P<pid>\d+)\]: segfault at (?P<addr>[0-9a-f]+) ip (?P<ip>[0-9a-f]+) sp (?P<sp>[0-9a-f]+)"
    r" error (?P<error>[0-9a-f]+)(?: in (?P<lib>[^\[\s]+)\[(?P<base>[0-9a-f]+)\+(?P<size>[0-9a-f]+)\])?"
    r"(?:.*?likely on CPU (?P<cpu>\d+)(?: \(core (?P<core>\d+), socket (?P<socket>\d+)\))?)?")
_TRAP = re.compile(
    r"traps: (?P<comm>\S+)\[(?P<pid>\d+)\] (?P<what>general protection fault|trap [\w ]+?) ip:(?P<ip>[0-9a-f]+)"
    r" sp:(?P<sp>[0-9a-f]+) error:(?P<error>[0-9a-f]+)(?: in (?P<lib>[^\[\s]+)\[(?P<base>[0-9a-f]+)\+(?P<size>[0-9a-f]+)\])?"
    r"(?:.*?likely on CPU (?P<cpu>\d+))?")
_OOM = re.compile(r"(?P<cg>Memory cgroup out|Out) of memory: Killed process (?P<pid>\d+) \((?P<comm>[^)]*)\)")
_MEMCG = re.compile(r"task_memcg=(?P<memcg>[^,\s]*).*?,pid=(?P<pid>\d+)")
_MEMORY_FAILURE = re.compile(
    r"(?:Memory failure|Memory error may not recovered|MCE)(?::\s*|\s+)(?:(?P<pfn>0x[0-9a-f]+):\s*)?(?:Sending SIGBUS to|Killing)"
    r" (?P<comm>.+?):(?P<pid>\d+)(?P<early> early)? due to hardware memory corruption(?: fault at (?P<addr>[0-9a-f]+))?")
_TRAP_SIGNAL = {"general protection fault": "SIGSEGV", "trap invalid opcode": "SIGILL", "trap divide error": "SIGFPE",
                "trap int3": "SIGTRAP"}
#: cgroup path -> job id: Slurm's job directory, a Kubernetes pod slice, a systemd unit of a job runner.
_JOB_IN_CGROUP = (
    (re.compile(r"/job_(\d+)(?:/|$)"), "slurm:{}"),
    (re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"), "k8s-pod:{}"),
)
_VERSION_TAIL = re.compile(r"(?<=[a-zA-Z])[\d.]+$")


@dataclass
class CrashFields:
    """What one kernel line says about a dead process (a partial crash event)."""

    signature: str
    signal: str | None = None
    executable: str | None = None
    fault_address: str | None = None
    fault_class: str | None = None
    cpu: int | None = None
    shape_flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    job: str | None = None
    pid: int | None = None


def process_name(comm: str) -> str:
    """``python3.11`` -> ``python``: a name that is the same on every host and interpreter build."""
    return _VERSION_TAIL.sub("", comm) or comm


def job_from_cgroup(path: str) -> str | None:
    """The scheduler job a cgroup path belongs to, or None."""
    for rx, fmt in _JOB_IN_CGROUP:
        m = rx.search(path)
        if m:
            return fmt.format(m.group(1).replace("_", "-"))
    return None


def _site(m: re.Match[str]) -> tuple[str, list[str]]:
    ip = int(m.group("ip"), 16)
    flags = [IP_ZERO] if ip == 0 else []
    if m.group("lib") and m.group("base"):
        base, size = int(m.group("base"), 16), int(m.group("size"), 16)
        lib = m.group("lib").rsplit("/", 1)[-1]
        if base <= ip < base + size:
            return f"{lib}!0x{ip - base:x}", flags
        return f"{lib}!?", [*flags, IP_OUTSIDE_MODULE]
    return ("NULL" if ip == 0 else "[unmapped]"), flags


def segfault(text: str) -> CrashFields | None:
    m = _SEGFAULT.search(text)
    if m is None:
        return None
    site, flags = _site(m)
    addr, error = int(m.group("addr"), 16), int(m.group("error"), 16)
    present = bool(error & 1)
    fault_class = classify_fault(addr, lambda _a: present)
    if int(m.group("sp"), 16) % 8:
        flags.append(SP_MISALIGNED)
    notes = [f"kernel: segfault, page-fault error {error} ({'protection' if present else 'not present'}, "
             f"{'write' if error & 2 else 'read'}{', instruction fetch' if error & 16 else ''})"]
    if m.group("socket"):
        notes.append(f"kernel: CPU {m.group('cpu')} is core {m.group('core')} of socket {m.group('socket')}")
    return CrashFields(signature=site, signal="SIGSEGV", executable=process_name(m.group("comm")),
                       fault_address=f"0x{addr:x}", fault_class=fault_class,
                       cpu=int(m.group("cpu")) if m.group("cpu") else None, shape_flags=flags, notes=notes,
                       pid=int(m.group("pid")))


def trap(text: str) -> CrashFields | None:
    m = _TRAP.search(text)
    if m is None:
        return None
    site, flags = _site(m)
    what = m.group("what")
    if what == "general protection fault":
        flags.append(GP_FAULT)
    return CrashFields(signature=site, signal=_TRAP_SIGNAL.get(what, "SIGTRAP"), executable=process_name(m.group("comm")),
                       fault_class="none", cpu=int(m.group("cpu")) if m.group("cpu") else None, shape_flags=flags,
                       notes=[f"kernel: {what}"], pid=int(m.group("pid")))


def oom_kill(text: str, memcg_of_pid: dict[int, str] | None = None) -> CrashFields | None:
    m = _OOM.search(text)
    if m is None:
        return None
    pid, name = int(m.group("pid")), process_name(m.group("comm"))
    memcg = (memcg_of_pid or {}).pop(pid, None)
    notes = ["kernel: memory cgroup limit" if m.group("cg").startswith("Memory") else "kernel: system out of memory"]
    if memcg:
        notes.append(f"kernel: task_memcg {memcg}")
    return CrashFields(signature=f"oom_kill!{name}", signal="SIGKILL", executable=name, notes=notes,
                       job=job_from_cgroup(memcg) if memcg else None, pid=pid)


def memory_failure(text: str) -> CrashFields | None:
    m = _MEMORY_FAILURE.search(text)
    if m is None:
        return None
    name = process_name(m.group("comm"))
    notes = ["kernel: killed for touching memory a machine check poisoned"
             + (" (found ahead of use: action optional)" if m.group("early") else "")]
    if m.group("pfn"):
        notes.append(f"kernel: physical page {m.group('pfn')}")
    addr = f"0x{int(m.group('addr'), 16):x}" if m.group("addr") else None
    return CrashFields(signature=f"memory_failure!{name}", signal="SIGBUS", executable=name, fault_address=addr,
                       fault_class="mapped" if addr else None, shape_flags=[MEMORY_POISONED], notes=notes,
                       pid=int(m.group("pid")))


def oom_memcg(text: str) -> tuple[int, str] | None:
    """``(pid, task_memcg)`` of an ``oom-kill:`` line, for the kill line that follows."""
    m = _MEMCG.search(text)
    return (int(m.group("pid")), m.group("memcg")) if m else None


#: extractors that read one line alone (``oom_kill`` also takes the cgroups of the lines before it)
LINE_EXTRACTORS = {"segfault": segfault, "trap": trap, "memory_failure": memory_failure}


__all__ = ["LINE_EXTRACTORS", "CrashFields", "job_from_cgroup", "memory_failure", "oom_kill", "oom_memcg", "process_name", "segfault", "trap"]
