"""One core file in, one ``fleetepi.crash/v1`` event out: the pipeline that ties the parts together.

``analyze_core`` opens (and if need be decompresses) the core, reads its
notes, walks the crashing thread, symbolizes from verified files, asks
py-spy for Python frames, computes the crash shape and runs the signature
rules. It never raises on a damaged core: whatever could be read becomes
the event, ``partial=True`` with the reasons in ``notes``. The event carries
every module's build id, so frames can be re-symbolized off the host.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fleetepi.agents.core.decompress import plain_core, require_regular
from fleetepi.agents.core.elfcore import CoreFile
from fleetepi.agents.core.exceptions import CoreParseError
from fleetepi.agents.core.limits import CoreLimits, Deadline
from fleetepi.agents.core.mappings import ModuleInfo, ModuleMap, module_name
from fleetepi.agents.core.notes import AT_ENTRY, FAULT_SIGNALS, SigInfo, signal_name
from fleetepi.agents.core.pyframes import is_cpython, python_stack
from fleetepi.agents.core.resolve import AddressResolver
from fleetepi.agents.core.rules import SigFrame, SignatureInput, SignatureRules, generate, load_rules, python_file_key
from fleetepi.agents.core.shape import Shape, crash_shape
from fleetepi.agents.core.stackwalk import CaughtSignal, RawFrame, StackWalker
from fleetepi.agents.core.symbols import SymbolCache
from fleetepi.contract import Crash, Frame, Module
from fleetepi.contract.shapes import IN_SIGNAL_HANDLER

log = logging.getLogger(__name__)

_MAX_NOTES = 32


@dataclass(slots=True)
class CoreReport:
    """The event plus what a human wants beside it (``fleetepi signature``)."""

    crash: Crash
    shape: Shape
    registers: dict[str, int] = field(default_factory=dict)
    frame_trust: list[str] = field(default_factory=list)
    bitflip_detail: list[str] = field(default_factory=list)


class CoreAnalyzer:
    """Turns cores into crash events; keep one per agent so symbol tables stay cached.

    :param rules: loaded signature rules (default: the shipped lists).
    :param limits: size and time bounds.
    :param symbols: symbol table cache (shared across cores).
    :param use_pyspy: look for Python frames in CPython cores.
    :param use_cfi: unwind with ``.eh_frame`` first (off: frame pointers and scanning only).
    :param tmp_dir: where compressed cores are decompressed.
    """

    def __init__(
        self,
        rules: SignatureRules | None = None,
        limits: CoreLimits | None = None,
        symbols: SymbolCache | None = None,
        *,
        use_pyspy: bool = True,
        use_cfi: bool = True,
        tmp_dir: str | None = None,
    ) -> None:
        self.rules = rules or load_rules()
        self.limits = limits or CoreLimits()
        self.symbols = symbols or SymbolCache()
        self.use_pyspy = use_pyspy
        self.use_cfi = use_cfi
        self.tmp_dir = tmp_dir

    def close(self) -> None:
        self.symbols.close()

    # --- entry points ---------------------------------------------------------
    def analyze(
        self,
        path: str | os.PathLike[str],
        *,
        host: str,
        ts: datetime | None = None,
        executable: str | None = None,
        job: str | None = None,
        core_sha256: str | None = None,
        compute_sha256: bool = False,
        extra_notes: list[str] | None = None,
    ) -> CoreReport:
        """Analyze one core; never raises for a damaged or foreign file (partial event instead).

        :param executable: where the crashed program's binary is on *this*
            host, if not at the path the core recorded.
        :param extra_notes: notes from the caller (e.g. "core cut at the size limit").
        """
        ts = ts or datetime.now(UTC)
        notes = list(extra_notes or [])
        partial = any(n.startswith("partial:") for n in notes)
        deadline = Deadline(self.limits.parse_timeout_s)  # decompression included
        try:
            require_regular(str(path))  # before any open(): a FIFO would block it forever
            if compute_sha256 and core_sha256 is None:
                core_sha256 = _sha256(str(path))
            with plain_core(str(path), self.limits.max_core_bytes, self.tmp_dir, deadline) as plain:
                if plain.truncated_at is not None:
                    notes.append(f"partial: {plain.compression} core cut at the size limit ({plain.truncated_at} bytes)")
                    partial = True
                if plain.error is not None:
                    notes.append(f"partial: {plain.compression} stream damaged ({plain.error})")
                    partial = True
                return self._analyze_plain(plain.path, host, ts, executable, job, core_sha256, notes, partial, deadline)
        except (CoreParseError, OSError) as exc:
            notes.append(f"partial: unreadable core ({exc})"[:300])
            return self._unknown(ts, host, job, core_sha256, notes, "unknown!unreadable-core")
        except Exception as exc:  # a bug meeting an odd core must not lose the crash or kill the agent
            log.exception("core analysis failed for %s", path)
            notes.append(f"partial: analysis failed ({type(exc).__name__}: {exc})"[:300])
            return self._unknown(ts, host, job, core_sha256, notes, "unknown!analysis-failed")

    @staticmethod
    def _unknown(
        ts: datetime, host: str, job: str | None, core_sha256: str | None, notes: list[str], signature: str
    ) -> CoreReport:
        crash = Crash(
            ts=ts,
            host=host,
            signature=signature,
            job=job,
            core_sha256=core_sha256,
            fault_class="none",
            shape_flags=[],
            bitflip_score=0.0,
            notes=notes[:_MAX_NOTES],
            partial=True,
        )
        return CoreReport(crash, Shape())

    # --- the pipeline --------------------------------------------------------
    def _analyze_plain(
        self,
        path: str,
        host: str,
        ts: datetime,
        executable: str | None,
        job: str | None,
        core_sha256: str | None,
        notes: list[str],
        partial: bool,
        deadline: Deadline,
    ) -> CoreReport:
        with CoreFile(path) as core:
            for problem in core.problems:
                notes.append(f"partial: {problem}")
                partial = True
            modmap = ModuleMap.from_core(core)
            main = _main_module(modmap, core.notes.auxv.get(AT_ENTRY))
            overrides = {main.path: executable} if (main is not None and executable) else {}
            addrs = AddressResolver(core, modmap, self.symbols, overrides)
            regs: dict[str, int] = core.notes.threads[0].regs if core.notes.threads else {}
            tid = core.notes.threads[0].pid if core.notes.threads else None
            raw: list[RawFrame] = []
            caught: CaughtSignal | None = None
            if regs:
                walker = StackWalker(
                    core,
                    addrs.code,
                    addrs.function_start,
                    addrs.exec_ranges(),
                    cfi=addrs.cfi if self.use_cfi else None,
                    scan_bytes=self.limits.stack_scan_bytes,
                    max_frames=self.limits.max_frames,
                )
                walked = walker.walk(regs, deadline)
                raw, caught = walked.frames, walked.caught
                notes.extend(walked.notes)
            native, sig_native = addrs.symbolize(raw)

            py_frames, sig_python = self._python_frames(path, tid, modmap, deadline, notes)
            shape = self._shape(regs, core.notes.siginfo, caught, addrs, notes)
            if deadline.expired:
                notes.append("partial: parse timeout; frames may be missing")
                partial = True
            if not regs and not partial:
                partial = True
            result = generate(
                SignatureInput(native=sig_native, python=sig_python, partial_reason="partial" if partial else None),
                self.rules,
            )
            shown = {f.module for f in native}
            notes.extend(f"no symbols for {name}: {why}" for name, why in sorted(addrs.why_no_symbols.items()) if name in shown)
            notes.extend(result.notes)
            signo = core.notes.siginfo.signo if core.notes.siginfo else (core.notes.threads[0].cursig if core.notes.threads else None)
            modules = [
                Module(name=m.name, build_id=m.build_id, base=f"0x{m.base:x}", size=m.end - m.base) for m in modmap.modules
            ]
            exe_name = main.name if main is not None else (core.notes.fname or None)
            crash = Crash(
                ts=ts,
                host=host,
                signature=result.signature[:1024],
                signal=signal_name(signo) if signo else None,
                executable=exe_name,
                fault_address=f"0x{shape.fault_address:x}" if shape.fault_address is not None else None,
                frames=(py_frames + native)[:256],
                job=job,
                core_sha256=core_sha256,
                si_code=shape.si_code,
                fault_class=shape.fault_class,  # type: ignore[arg-type]
                shape_flags=list(shape.flags),
                bitflip_score=shape.bitflip_score,
                modules=modules[:512],
                notes=_dedupe(notes)[:_MAX_NOTES],
                partial=True if partial else None,
            )
            return CoreReport(crash, shape, dict(regs), [f.trust for f in raw], list(shape.bitflip_detail))


    @staticmethod
    def _shape(
        regs: dict[str, int], siginfo: SigInfo | None, caught: CaughtSignal | None, addrs: AddressResolver, notes: list[str]
    ) -> Shape:
        """The crash shape; of the fault a signal handler caught, when it caught one.

        A service's crash handler (log, then ``abort()``) turns every SIGSEGV
        into a SIGABRT whose registers are the handler's; the fault address and
        registers that tell a bit flip from a NULL dereference are those the
        kernel saved in the signal frame.
        """
        if caught is not None and caught.siginfo is not None and caught.siginfo.signo in FAULT_SIGNALS:
            rip = caught.regs["rip"]
            shape = crash_shape(caught.regs, caught.siginfo, addrs.is_mapped, addrs.is_executable,
                                at_function_entry=rip != 0 and addrs.function_start(rip) == rip)
            shape.flags.append(IN_SIGNAL_HANDLER)
            notes.append(
                f"crash shape from the {signal_name(caught.siginfo.signo)} (si_code {caught.siginfo.code}) that a "
                "signal handler caught; the process then died of "
                f"{signal_name(siginfo.signo) if siginfo else 'another signal'}"
            )
            return shape
        rip = regs.get("rip")
        entry = rip is not None and rip != 0 and addrs.function_start(rip) == rip
        return crash_shape(regs or None, siginfo, addrs.is_mapped, addrs.is_executable, at_function_entry=entry)

    def _python_frames(
        self, path: str, tid: int | None, modmap: ModuleMap, deadline: Deadline, notes: list[str]
    ) -> tuple[list[Frame], list[SigFrame]]:
        """Python frames of a CPython core via py-spy (empty, with a note, when not to be had)."""
        if not self.use_pyspy or deadline.expired or not is_cpython([m.name for m in modmap.modules]):
            return [], []
        stack = python_stack(path, tid, timeout_s=min(self.limits.pyspy_timeout_s, max(deadline.remaining_s, 0.1)))
        if stack.note:
            notes.append(stack.note)
        frames = [
            Frame(module=python_file_key(f.file), function=f.function, file=f.file, line=f.line, language="python")
            for f in stack.frames
        ]
        return frames, [SigFrame(module=f.module, function=f.function, language="python") for f in frames]


def _main_module(modmap: ModuleMap, entry: int | None) -> ModuleInfo | None:
    if entry:
        mod = modmap.find(entry)
        if mod is not None:
            return mod
    files = [m for m in modmap.modules if m.path.startswith("/")]
    return files[0] if files else None


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def analyze_core(path: str | os.PathLike[str], *, host: str, **kwargs: object) -> CoreReport:
    """One-shot convenience: a fresh analyzer (no shared symbol cache) for one core."""
    analyzer = CoreAnalyzer()
    try:
        return analyzer.analyze(path, host=host, **kwargs)  # type: ignore[arg-type]
    finally:
        analyzer.close()


__all__ = ["CoreAnalyzer", "CoreReport", "analyze_core", "module_name"]
