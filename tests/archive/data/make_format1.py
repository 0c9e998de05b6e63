"""Writes tests/archive/data/format1/: an archive of format 1, kept so later versions prove they still read it.

Run once by the version that introduced format 1 (2026-11); do not re-run it
with a later version (that would defeat the test). A new format version gets
a fixture of its own beside this one.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleetepi.archive import ArchiveWriter
from fleetepi.contract import Alert, Crash, Host, Telemetry

OUT = Path(__file__).parent / "format1"
SIG = "libunwind.so.8!_ULx86_64_step | libstdc++.so.6!_Unwind_RaiseException | trainer!Trainer::step"


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    with ArchiveWriter(OUT) as w:
        for i, rack in enumerate(["r1", "r1", "r2"]):
            w.add(Host(ts=t0, host=f"h{i}", attributes={"rack": rack, "bios": "2.3"}))
        for i in range(3):
            w.add(Crash(ts=t0 + timedelta(hours=10 + i), host=f"h{i}", signature=SIG, signal="SIGSEGV",
                        fault_class="null_page", shape_flags=["ip_zero"], cpu=i))
            w.add(Telemetry(ts=t0 + timedelta(hours=20 + i), host=f"h{i}", kind="xid", code=79))
        w.add_alert(Alert(ts=t0 + timedelta(hours=12), kind="signature_spike", score=9.0, signature=SIG))
    for f in sorted(OUT.rglob("*")):
        print(f.relative_to(OUT))


if __name__ == "__main__":
    main()
