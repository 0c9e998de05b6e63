"""``fleetepi signature`` and ``fleetepi core-handler``: a core dump, read by hand or by the kernel.

``signature`` is for humans and tests: what a core says (signature, frames,
crash shape, notes), as a rich table or as the exact JSON event the agent
would publish. ``core-handler`` is the ``core_pattern`` pipe target: the
kernel writes the core to its stdin, it builds the event, publishes it, and
keeps the core on disk only where ``--keep-dir`` says so.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from fleetepi.agents.core.decompress import copy_limited
from fleetepi.agents.core.demangle import demangle
from fleetepi.agents.core.exceptions import BadRuleLine
from fleetepi.agents.core.limits import CoreLimits, GiB
from fleetepi.agents.core.rules import load_rules
from fleetepi.agents.core.signature import CoreAnalyzer, CoreReport
from fleetepi.contract import Crash
from fleetepi.contract.codec import encode
from fleetepi.contract.shapes import silicon_evidence


def _analyzer(rules_dir: str | None, max_core_gib: float, timeout_s: float, pyspy: bool, frames: int) -> CoreAnalyzer:
    try:
        rules = load_rules(rules_dir, native_frames=frames)
        limits = CoreLimits(max_core_bytes=int(max_core_gib * GiB), parse_timeout_s=timeout_s)
    except (BadRuleLine, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    return CoreAnalyzer(rules, limits, use_pyspy=pyspy)


_common = [
    click.option("--host", default=None, help="Host name in the event (default: this machine's name)."),
    click.option("--rules-dir", type=click.Path(file_okay=False, exists=True), default=None,
                 help="Directory with skip_frames.txt and interpreter_frames.txt (default: the shipped lists)."),
    click.option("--max-core-gib", type=float, default=32.0, show_default=True,
                 help="Largest core accepted from a pipe or a decompressor; more is cut off and the event is partial."),
    click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True,
                 help="Seconds allowed for one core (stack walk, symbols, py-spy); past it the event is partial."),
    click.option("--no-pyspy", is_flag=True, help="Do not run py-spy for Python frames of CPython cores."),
    click.option("--frames", type=click.IntRange(1, 16), default=3, show_default=True,
                 help="Native frames in the signature (after skipping crash machinery)."),
]


def _with_common(f: Any) -> Any:
    for opt in reversed(_common):
        f = opt(f)
    return f


@click.command(name="signature")
@click.argument("core", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the fleetepi.crash/v1 event (one JSON line) instead of tables.")
@click.option("--executable", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The crashed program's binary on this host, when it is not at the path recorded in the core.")
@_with_common
def signature_command(core: str, as_json: bool, executable: str | None, host: str | None, rules_dir: str | None,
                      max_core_gib: float, timeout_s: float, no_pyspy: bool, frames: int) -> None:
    """Print the crash signature, frames and crash shape of a core file.

    CORE is an ELF core (core, core.1234) or a systemd-coredump file
    (.zst, .lz4, .xz; the format is sniffed from its first bytes).

    \b
    The signature is the top frames after skipping crash machinery (abort,
    raise, assertion helpers; see agents/rules/signature/), module!function,
    or module!0xOFFSET without symbols. Python frames lead when the process
    was CPython and py-spy can read the core.
    The crash shape tells software races from sick hardware: fault class
    (null_page, non_canonical, kernel, mapped, unmapped), flags such as
    ip_zero, sp_misaligned, fault_bitflip, and a bit-flip score (> 0 when the
    fault address or a pointer register is one bit from mapped memory).

    \b
    Examples:
      fleetepi signature core.4242
      fleetepi signature --json /var/lib/systemd/coredump/core.train.0.x.4242.zst
      fleetepi signature --executable ./build/server core.server
    """
    analyzer = _analyzer(rules_dir, max_core_gib, timeout_s, not no_pyspy, frames)
    try:
        # The core's mtime is when the kernel finished writing it: the crash's event time.
        ts, note = crash_time_of(os.stat(core).st_mtime, "the core's modification time")
        report = analyzer.analyze(core, host=host or socket.gethostname(), ts=ts, executable=executable,
                                  extra_notes=[note] if note else None)
    finally:
        analyzer.close()
    if as_json:
        from fleetepi.agents.publish.conform import conforming_bytes

        click.echo(conforming_bytes(report.crash).decode())
        return
    _print_report(report)


def _print_report(report: CoreReport) -> None:
    """Tables of a core's facts; every field from the core is data (``fleetepi.console``), never markup."""
    from rich.console import Console
    from rich.table import Table

    from fleetepi.console import data, print_data

    c = report.crash
    console = Console()
    print_data(console, ("signature", "bold"), "  ", c.signature)
    print_data(console, f"signal     {c.signal or '?'} (si_code {c.si_code})   executable ", c.executable or "?",
               ("   PARTIAL", "yellow") if c.partial else "")
    print_data(console, f"fault      {c.fault_address or '-'}  class {c.fault_class}   "
                        f"flags {', '.join(c.shape_flags or []) or '-'}   bit-flip score {c.bitflip_score}")
    for line in report.bitflip_detail:
        print_data(console, "           ", line)
    silicon = silicon_evidence(c.shape_flags, c.bitflip_score, c.fault_class)
    print_data(console, "silicon?   ", ("yes: " + ", ".join(silicon), "bold") if silicon else
               "no: a software shape (host_spike counts it as an ordinary crash)")
    table = Table(title="frames (innermost first)", show_lines=False)
    for col in ("#", "module", "function", "offset", "how"):
        table.add_column(col)
    trust = iter(report.frame_trust)
    for i, f in enumerate(c.frames or []):
        if f.language == "python":
            table.add_row(str(i), data(f.module), data(f.function or "?"), f"line {f.line}", "py-spy")
        else:
            table.add_row(str(i), data(f.module), data(demangle(f.function) if f.function else ""), data(f.offset or ""),
                          next(trust, ""))
    console.print(table)
    if report.registers:
        regs = report.registers
        print_data(console, "registers  " + "  ".join(f"{r}=0x{regs[r]:x}" for r in ("rip", "rsp", "rbp", "rax", "rdi", "rsi")))
    for note in c.notes or []:
        print_data(console, (f"note: {note}", "dim"))


# --- core_pattern pipe mode ----------------------------------------------------
class _JsonLinesPublisher:
    """Stand-in for ``fleetepi.agents.publish.open_publisher`` until it exists: JSON lines to a file or stdout."""

    def __init__(self, url: str) -> None:
        self._fh = sys.stdout.buffer if url == "-" else open(url, "ab")

    def publish(self, event: Crash) -> None:
        self._fh.write(encode(event) + b"\n")
        self._fh.flush()
        if self._fh is not sys.stdout.buffer:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not sys.stdout.buffer:
            self._fh.close()


def open_publisher(url: str, spool_dir: str) -> Any:
    """The agent's publisher for ``url`` (Kafka, a file or ``-``), or JSON lines when that package is absent.

    Kafka events are spooled to ``spool_dir`` while the broker is away, so a
    crash during a broker outage is sent later, not lost.
    """
    try:
        from fleetepi.agents.publish import open_publisher as real_open
    except ImportError:
        return _JsonLinesPublisher(url)
    if url.startswith("kafka://"):
        return real_open(url, spool_dir=spool_dir)
    return real_open(url, fsync=True)


class _HashingReader:
    """Wraps stdin so the core's sha256 is computed while it streams to disk."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()

    def read(self, n: int) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        return data


@click.command(name="core-handler")
@click.argument("pid", type=int)
@click.argument("signo", type=int)
@click.argument("exe_name")
@click.argument("crash_time", type=str)
@click.option("--publish", "publish_url", default=os.environ.get("FLEETEPI_PUBLISH", "-"), show_default=True,
              help="Where the event goes: kafka://host:port, a .jsonl file, or - for stdout (env FLEETEPI_PUBLISH).")
@click.option("--keep-dir", type=click.Path(file_okay=False), default=None,
              help="Keep the core in this directory (core.EXE.PID.TIME); by default it is written nowhere but a temp file.")
@click.option("--tmp-dir", type=click.Path(file_okay=False), default=None, help="Where the temporary core goes (default: $TMPDIR).")
@click.option("--spool-dir", default="/var/lib/fleetepi/core-handler-spool", show_default=True,
              help="On-disk spool for kafka:// while the broker is away; what is left is sent by the next handler run.")
@click.option("--job", default=None, help="Scheduler job or pod that owned the process, if known.")
@_with_common
def core_handler_command(pid: int, signo: int, exe_name: str, crash_time: str, publish_url: str, keep_dir: str | None,
                         tmp_dir: str | None, spool_dir: str, job: str | None, host: str | None, rules_dir: str | None,
                         max_core_gib: float, timeout_s: float, no_pyspy: bool, frames: int) -> None:
    """core_pattern pipe handler: read a core from stdin, publish its crash event.

    \b
    Install (as root):
      echo '|/opt/fleetepi/bin/fleetepi core-handler %P %s %e %t --publish kafka://broker:9092' \\
        > /proc/sys/kernel/core_pattern
    The kernel runs this with the core on stdin, as root, with no terminal:
    PID SIGNO EXE_NAME CRASH_TIME are core_pattern's %P %s %e %t.

    The core is streamed to a temporary file (cut at --max-core-gib, the event
    then says partial), analyzed like `fleetepi signature`, published, and
    deleted unless --keep-dir is given. The event is published even when the
    core is damaged; this command exits 0 unless publishing itself fails.
    """
    analyzer = _analyzer(rules_dir, max_core_gib, timeout_s, not no_pyspy, frames)
    ts, time_note = crash_time_of(_number(crash_time), "core_pattern's %t")
    safe_exe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in exe_name)[:64] or "unknown"
    if keep_dir:
        Path(keep_dir).mkdir(parents=True, exist_ok=True)
        core_path = str(Path(keep_dir) / f"core.{safe_exe}.{pid}.{int(ts.timestamp())}")
    else:
        fd, core_path = tempfile.mkstemp(prefix=f"fleetepi-core-{safe_exe}-", dir=tmp_dir)
        os.close(fd)
    notes = [time_note] if time_note else []
    try:
        reader = _HashingReader(sys.stdin.buffer)
        with open(core_path, "wb") as out:
            written, cut, error = copy_limited(reader, out, analyzer.limits.max_core_bytes)  # type: ignore[arg-type]
        if cut:
            notes.append(f"partial: core cut at the size limit ({written} bytes)")
        if error:
            notes.append(f"partial: reading the core from stdin failed after {written} bytes ({error})")
        report = analyzer.analyze(core_path, host=host or socket.gethostname(), ts=ts, job=job,
                                  core_sha256=None if cut or error else reader.sha.hexdigest(), extra_notes=notes)
    finally:
        analyzer.close()
        if not keep_dir:
            try:
                os.unlink(core_path)
            except OSError:
                pass
    crash = report.crash
    if crash.executable is None:
        crash = _with_executable(crash, exe_name)
    publisher = open_publisher(publish_url, spool_dir)
    try:
        publisher.publish(crash)  # durable from here on (sent, spooled or written)
        flush = getattr(publisher, "flush", None)
        if flush is not None:
            flush(timeout_s=10.0)
    finally:
        publisher.close()


def _number(text: str) -> float:
    """``%t`` as a number; anything else (the kernel never sends it) is NaN, i.e. not believed."""
    try:
        return float(int(text.strip()))
    except (ValueError, OverflowError):
        return float("nan")


#: A crash time later than this host's clock by more than this is not believed.
MAX_FUTURE_S = 86400.0
#: Nor one before 2000-01-01 (a zero, negative or wrapped ``%t``).
EARLIEST_S = 946684800.0


def crash_time_of(epoch_s: float, what: str, now_s: float | None = None) -> tuple[datetime, str | None]:
    """The crash's event time from ``epoch_s``, or this host's clock (and a note) when it cannot be right.

    ``%t`` is the kernel's clock at the dump; a value before 2000, more than a
    day ahead of ours, or beyond what a datetime holds is damage (or a forged
    argument), and the crash must still be published: with the time the
    handler received it, and a note saying so. (The detectors' own admission
    rule decides what a merely skewed host's events count for.)
    """
    now = time.time() if now_s is None else now_s
    try:
        if EARLIEST_S <= float(epoch_s) <= now + MAX_FUTURE_S:
            return datetime.fromtimestamp(float(epoch_s), tz=UTC), None
    except (OverflowError, OSError, ValueError):
        pass
    return (datetime.fromtimestamp(now, tz=UTC),
            f"{what} {str(epoch_s)[:32]} is before 2000 or more than a day ahead of this host's clock; "
            "the time the handler received the core is used")


def _with_executable(crash: Crash, exe_name: str) -> Crash:
    import msgspec

    return msgspec.structs.replace(crash, executable=exe_name)


__all__ = ["core_handler_command", "open_publisher", "signature_command"]
