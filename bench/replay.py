"""Replay throughput: full pipeline vs. merely parsing the same file with orjson.

Targets (issue 2): replay >= 100,000 events/s on one core on a 2,000-host,
14-day simulated fleet, and peak RSS under 500 MB. The absolute rate depends
on the machine, so the figure that counts is the ratio to the orjson parse
of the very same file, measured in the same process just before.

The fleet is simulated once (``fleetepi.simulate``) into .cache/bench/ and
reused. Generation runs in a child process so that the simulator's memory
never shows up in this process's peak RSS, which must be the replay's.

    .venv/bin/python bench/replay.py                 # the target run
    .venv/bin/python bench/replay.py --hosts 200 --days 2 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import os
import pstats
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "bench"


def fleet_path(hosts: int, days: float, seed: int) -> Path:
    return CACHE / f"fleet-h{hosts}-d{days:g}-s{seed}.jsonl"


def generate(path: Path, hosts: int, days: float, seed: int) -> int:
    """Write the simulated fleet's events as contract JSON lines; returns how many."""
    from fleetepi.contract import encode
    from fleetepi.simulate import SimConfig, simulate

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    n = 0
    with open(tmp, "wb", buffering=1 << 20) as fh:
        for ev in simulate(SimConfig(hosts=hosts, days=days, seed=seed)).events():
            fh.write(encode(ev))
            fh.write(b"\n")
            n += 1
    os.replace(tmp, path)
    return n


def ensure_fleet(hosts: int, days: float, seed: int) -> Path:
    path = fleet_path(hosts, days, seed)
    if not path.exists():
        print(f"generating {path.name} (once; cached under {CACHE.relative_to(ROOT)}) ...", flush=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--generate-only", "--hosts", str(hosts), "--days", str(days),
                        "--seed", str(seed)], check=True)
        print(f"  done in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


class Timer:
    """Wall and CPU seconds of a block: on a shared machine only CPU time is the one-core cost."""

    def __enter__(self) -> Timer:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def parse_baseline(path: Path) -> tuple[int, Timer]:
    """orjson.loads per line: the floor of any Python JSON-lines consumer."""
    loads = orjson.loads
    n = 0
    with Timer() as t, open(path, "rb", buffering=1 << 20) as fh:
        for line in fh:
            loads(line)
            n += 1
    return n, t


def full_replay(path: Path, out: Path, profile: bool, limit: int | None = None) -> tuple[int, Timer, object]:
    """Decode + admission + every detector + alert encoding, as ``fleetepi replay`` does."""
    from fleetepi.jsonl import open_input, open_output
    from fleetepi.pipeline import JsonlAlertSink, Pipeline, batch_gc

    prof = cProfile.Profile() if profile else None
    with open_input(path) as source, open_output(out) as fh:
        lines = source if limit is None else itertools.islice(source, limit)
        pipe = Pipeline(sink=JsonlAlertSink(fh))
        with batch_gc(), Timer() as t:  # as `fleetepi replay` runs it
            if prof is not None:
                prof.enable()
            pipe.run(lines)
            pipe.finish()
            if prof is not None:
                prof.disable()
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        print(buf.getvalue())
    return pipe.summary.lines, t, pipe.summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--days", type=float, default=14)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile the replay, top 25 by own time")
    ap.add_argument("--limit", type=int, default=None, help="replay only the first N lines (profiling)")
    ap.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate_only:
        generate(fleet_path(args.hosts, args.days, args.seed), args.hosts, args.days, args.seed)
        return
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says
    except (AttributeError, OSError):
        pass
    path = ensure_fleet(args.hosts, args.days, args.seed)
    size_mb = path.stat().st_size / 1e6
    print(f"input: {path.name}, {size_mb:.0f} MB")

    n_base, tb = parse_baseline(path)
    base_rate = n_base / tb.cpu
    print(f"orjson.loads per line : {n_base:>10,} lines, {tb.cpu:6.2f} s CPU ({tb.wall:6.2f} s wall) "
          f"= {base_rate:>10,.0f} lines/s per CPU second")

    n, t, summary = full_replay(path, CACHE / "alerts.jsonl", args.profile, args.limit)
    rate = n / t.cpu
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(f"fleetepi replay       : {n:>10,} lines, {t.cpu:6.2f} s CPU ({t.wall:6.2f} s wall) "
          f"= {rate:>10,.0f} lines/s per CPU second ({n / t.wall:,.0f}/s wall)")
    print(f"ratio replay / parse  : {rate / base_rate:.3f} (parse is {base_rate / rate:.1f}x faster)")
    print(f"peak RSS              : {rss_mb:,.0f} MB")
    print(f"events by kind        : {dict(summary.events)}")  # type: ignore[attr-defined]
    print(f"invalid by reason     : { {k: v.count for k, v in summary.invalid.items()} }")  # type: ignore[attr-defined]
    print(f"alerts fired by kind  : {dict(summary.fired)}")  # type: ignore[attr-defined]
    ok_rate = "OK" if rate >= 100_000 else "MISSED"
    ok_rss = "OK" if rss_mb < 500 else "MISSED"
    print(f"targets: >= 100,000 events/s: {ok_rate}; RSS < 500 MB: {ok_rss}")


if __name__ == "__main__":
    main()
