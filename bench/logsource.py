"""Benchmark: the application-output source (``applog``) on one core, and a flood of one traceback.

Target (issue 12): >= 100,000 lines/s on one core. The input is a real file
on disk read by :class:`AppLogSource` (glob, offsets, parser, dedup, crash
events), in three mixes:

* ``training log``: what a healthy job prints (step/loss lines, a logging
  prefix), with a real traceback every 5,000 lines and NCCL INFO chatter;
* ``flood``: one real traceback (the one ``tests/agents/data/apps/fail.py
  raise`` prints), repeated 20,000 times: how many events leave, and at what
  rate the lines are read;
* ``shared lines``: the real lines of ``tests/agents/data/{nccl,oom,misc}.txt``
  repeated.

Baseline in the same process: reading and splitting the same file without
parsing. Figures are CPU seconds of this process (``time.process_time``)
and wall seconds; run it on a quiet machine, and say the load average.

    .venv/bin/python bench/logsource.py [--lines 400000]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "agents" / "data"


def traceback_text() -> list[str]:
    proc = subprocess.run([sys.executable, str(DATA / "apps" / "fail.py"), "raise", "a"], capture_output=True, text=True, check=False)
    return proc.stderr.splitlines()


def training_log(n: int, tb: list[str]) -> list[str]:
    lines = []
    i = 0
    while len(lines) < n:
        i += 1
        lines.append(f"2026-11-23 10:{(i // 60) % 60:02d}:{i % 60:02d},123 INFO trainer: step {i} loss {1.0 / (i + 1):.5f} lr 3.0e-04 tokens/s {40000 + i % 977}")
        if i % 50 == 0:
            lines.append(f"node-17:984:1357 [{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : {i % 8}[{i % 8}] -> {(i + 1) % 8}[{(i + 1) % 8}] via P2P/IPC")
        if i % 5000 == 0:
            lines.extend(tb)
    return lines[:n]


def shared_lines(n: int) -> list[str]:
    rows = []
    for name in ("nccl.txt", "oom.txt", "misc.txt"):
        rows += [r.partition("\t")[2] for r in (DATA / name).read_text().splitlines()]
    return (rows * (n // len(rows) + 1))[:n]


def run_source(path: Path, lines: int) -> tuple[float, float, int, int]:
    """(CPU s, wall s, crash events, failures counted) for one pass of the source over ``path``."""
    from fleetepi.agents.applog.sources import AppLogSource

    src = AppLogSource("bench-host", [str(path)], from_start=True, dedup_interval_s=3600, max_lines_per_poll=lines + 10)
    c0, w0 = time.process_time(), time.perf_counter()
    events = list(src.poll(0)) + src.drain(10_000)
    c1, w1 = time.process_time(), time.perf_counter()
    src.close()
    return c1 - c0, w1 - w0, len(events), sum(e.n for e in events)


def baseline(path: Path) -> tuple[float, float]:
    """Read and split the file, nothing else."""
    c0, w0 = time.process_time(), time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        tail = b""
        n = 0
        while True:
            data = fh.read(1 << 16)
            if not data:
                break
            parts = (tail + data).split(b"\n")
            tail = parts.pop()
            for p in parts:
                p.decode("utf-8", errors="replace")
                n += 1
    return time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=400_000)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores (pinned to 1), "
          f"Python {platform.python_version()}, load average {open('/proc/loadavg').read().split()[:3]}")
    tb = traceback_text()
    mixes = {
        "training log": training_log(args.lines, tb),
        "flood (one traceback x 20,000)": (tb * (20_000 * len(tb) // len(tb)))[: 20_000 * len(tb)],
        "shared lines": shared_lines(args.lines),
    }
    print(f"{'input':<34}{'lines':>9}{'read+split lines/s':>20}{'source lines/s (CPU)':>22}{'(wall)':>12}{'events':>8}{'failures':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in mixes.items():
            path = Path(tmp) / "app.log"
            path.write_text("\n".join(lines) + "\n")
            bc, _bw = baseline(path)
            cpu, wall, events, failures = run_source(path, len(lines))
            print(f"{name:<34}{len(lines):>9,}{len(lines) / bc:>20,.0f}{len(lines) / cpu:>22,.0f}{len(lines) / wall:>12,.0f}"
                  f"{events:>8}{failures:>10,}")
    print("target: >= 100,000 lines/s on one core")


if __name__ == "__main__":
    main()
