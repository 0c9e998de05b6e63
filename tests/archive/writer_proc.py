"""A writer process for the concurrency tests: ``python writer_proc.py ROOT PREFIX N [FLUSH_EVERY]``.

Writes N crashes (and announcements) of hosts named PREFIX-*, one minute
apart from 2026-11-22 00:00 UTC (two days' partitions), flushing every
FLUSH_EVERY events so that files appear while the other processes run.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

from fleetepi.archive import ArchiveWriter
from fleetepi.contract import Crash, Host


def main() -> None:
    root, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    flush_every = int(sys.argv[4]) if len(sys.argv) > 4 else 500
    t0 = datetime(2026, 11, 22, tzinfo=UTC)
    with ArchiveWriter(root, batch_events=256) as w:
        for h in range(10):
            w.add(Host(ts=t0, host=f"{prefix}-{h}", attributes={"rack": f"r{h % 3}"}))
        for i in range(n):
            w.add(Crash(ts=t0 + timedelta(minutes=i * 2880 / n), host=f"{prefix}-{i % 10}", signature=f"sig-{prefix}"))
            if (i + 1) % flush_every == 0:
                w.flush()
                print(i + 1, flush=True)


if __name__ == "__main__":
    main()
