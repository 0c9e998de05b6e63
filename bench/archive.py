"""The event archive's targets (issue 14), three runs:

``replay``  replay with ``--archive`` against replay without, same file, same process (target >= 0.8):
            the 2,000-host, 14-day fleet of bench/replay.py (cached in .cache/bench/).
``year``    a one-year, 2,000-host history written into an archive (``--detectors``: through them); then its size per
            10 M events (< 1 GB), ``investigate signature`` (< 2 s) and ``report`` (< 60 s, < 2 GB RSS),
            each as the CLI a user runs (a fresh process, timed with its start-up).
``stream``  the stream archiver on a real broker: the rate it drains a backlog at, and its lag while
            events arrive at the workers' full rate (docs/bench/stream.md: ~23,000 events/s per worker).

Figures are wall and CPU seconds; on the shared 2-core machine print the load
average with them (it is printed). Nothing here asserts: the figures are for
docs/bench/archive.md.

    .venv/bin/python bench/archive.py replay [--rounds 2]
    .venv/bin/python bench/archive.py year [--hosts 2000 --days 365]
    .venv/bin/python bench/archive.py stream [--rate 23000 --seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "bench"
FLEETEPI = str(Path(sys.executable).with_name("fleetepi"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tools"))  # devbroker: a development tool, not in the package


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[0:3].__str__()


class Timer:
    def __enter__(self) -> Timer:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


# ---------------------------------------------------------------------- replay
def bench_replay(rounds: int) -> None:
    from replay import ensure_fleet  # bench/replay.py: the same cached fleet

    from fleetepi.archive import ArchiveWriter
    from fleetepi.jsonl import open_input
    from fleetepi.pipeline import Pipeline, batch_gc

    path = ensure_fleet(2000, 14, 1)
    print(f"input: {path.name}, {path.stat().st_size / 1e6:.0f} MB; load {load()}")
    out = CACHE / "archive-replay"
    runs: dict[str, list[tuple[float, float, int]]] = {"plain": [], "archive": []}
    for r in range(rounds):
        for mode in ("plain", "archive"):
            shutil.rmtree(out, ignore_errors=True)
            writer = ArchiveWriter(out) if mode == "archive" else None
            with open_input(path) as src, batch_gc(), Timer() as t:
                pipe = Pipeline(archive=writer)
                pipe.run(src)
                pipe.finish()
                if writer is not None:
                    writer.close()  # every row on disk: part of the cost
            runs[mode].append((t.wall, t.cpu, pipe.summary.lines))
            extra = ""
            if writer is not None:
                extra = f"; {writer.stats.files} files, {writer.stats.bytes / 1e6:.1f} MB"
            print(f"round {r + 1} {mode:8}: {pipe.summary.lines:,} lines, {t.wall:6.2f} s wall, {t.cpu:6.2f} s CPU "
                  f"(all threads) = {pipe.summary.lines / t.wall:,.0f} lines/s wall{extra}; load {load()}")
    best = {m: min(v, key=lambda x: x[0]) for m, v in runs.items()}
    ratio_wall = best["plain"][0] / best["archive"][0]
    ratio_cpu = best["plain"][1] / best["archive"][1]
    print(f"ratio (best of {rounds}) archive / plain throughput: {ratio_wall:.3f} wall, {ratio_cpu:.3f} CPU "
          f"(target >= 0.8: {'OK' if ratio_wall >= 0.8 else 'MISSED'})")


# ---------------------------------------------------------------------- year
def bench_year(hosts: int, days: float, seed: int, thermal_s: float, ecc_s: float, outbreaks: int,
               detectors: bool) -> None:
    from fleetepi.archive import ArchiveWriter
    from fleetepi.pipeline import Pipeline, batch_gc
    from fleetepi.simulate import SimConfig, simulate
    from fleetepi.simulate.config import outbreak_specs

    root = CACHE / f"year-h{hosts}-d{days:g}"
    print(f"load {load()}")
    if not (root / "_fleetepi_archive.json").exists():
        cfg = SimConfig(hosts=hosts, days=days, seed=seed, thermal_interval_s=thermal_s, ecc_interval_s=ecc_s,
                        outbreaks=outbreak_specs(outbreaks))
        with Timer() as t:
            sim = simulate(cfg)
        print(f"simulated {len(sim):,} events ({dict(sim.counts())}) in {t.wall:.0f} s")
        tmp = root.with_name(root.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        with Timer() as t, batch_gc():
            writer = ArchiveWriter(tmp)
            pipe = Pipeline(archive=writer) if detectors else None
            feed = pipe.feed_event if pipe is not None else writer.add
            n = 0
            for n, ev in enumerate(sim.events(), 1):
                feed(ev)
                if n % 2_000_000 == 0:
                    print(f"  {n:,} events, {time.perf_counter() - t.wall0:.0f} s wall; load {load()}", flush=True)
            if pipe is not None:
                pipe.finish()
            writer.close()
        del sim
        os.replace(tmp, root)
        print(f"{'detectors + ' if detectors else ''}archive: {n:,} events in {t.wall:.0f} s wall, {t.cpu:.0f} s CPU"
              + (f"; alerts fired {dict(pipe.summary.fired)}" if pipe is not None else ""))
    events = _events_in(root)
    size = sum(f.stat().st_size for f in root.rglob("*.parquet"))
    nfiles = len(list(root.rglob("*.parquet")))
    print(f"archive: {events:,} events, {nfiles} files, {size / 1e6:,.0f} MB = "
          f"{size / events * 1e7 / 1e9:.3f} GB per 10 M events (target < 1 GB)")
    sig = _a_signature(root)
    for label, args in (("investigate signature (prefix)", ["investigate", "--archive", str(root), "signature", sig]),
                        ("investigate signature --json", ["investigate", "--archive", str(root), "--json", "signature",
                                                          sig]),
                        ("investigate host", ["investigate", "--archive", str(root), "host", _a_host(root)]),
                        ("report", ["report", "--archive", str(root), "-o", str(CACHE / "year-report.html"),
                                    "--no-progress"])):
        wall, cpu, rss = _run(args)
        print(f"{label:32}: {wall:6.2f} s wall, {cpu:6.2f} s CPU, peak RSS {rss:,.0f} MB; load {load()}")


def _events_in(root: Path) -> int:
    from fleetepi.archive.reader import Archive

    with Archive(root) as arc:
        return sum(arc.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("host", "crash", "telemetry"))


def _a_signature(root: Path) -> str:
    from fleetepi.archive.reader import Archive

    with Archive(root) as arc:
        sig = arc.query("SELECT signature FROM alert WHERE kind = 'signature_spike' LIMIT 1")
        if not sig:
            sig = arc.query("SELECT signature FROM crash GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")
    return str(sig[0][0])[:24]  # a prefix, as a person types it


def _a_host(root: Path) -> str:
    from fleetepi.archive.reader import Archive

    with Archive(root) as arc:
        return str(arc.query("SELECT host FROM crash GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")[0][0])


def _run(args: list[str]) -> tuple[float, float, float]:
    """Wall, CPU (user+sys) and peak RSS of one CLI run in a fresh process (its own rusage, via wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([FLEETEPI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        print(proc.stderr.read().decode()[-2000:])
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


# ---------------------------------------------------------------------- stream
def bench_stream(rate: float, seconds: float, hosts: int) -> None:
    import uuid

    import devbroker

    from fleetepi.archive.consumer import StreamArchiver
    from fleetepi.simulate import SimConfig, simulate, write_jsonl
    from fleetepi.stream.publish import publish_file
    from fleetepi.stream.topics import TopicNames, ensure_topics, topic_specs

    events = CACHE / f"stream-h{hosts}.jsonl"
    if not events.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        write_jsonl(simulate(SimConfig(hosts=hosts, days=3.0, seed=3)), events)
    external = os.environ.get("FLEETEPI_KAFKA_BOOTSTRAP")
    data = CACHE / "stream-kafka"
    if external:
        bootstrap = external
    else:
        bootstrap = devbroker.start(data_dir=data, fresh=True).bootstrap
    try:
        # 1. backlog: everything published first, then drained
        names = TopicNames(f"b{uuid.uuid4().hex[:6]}.")
        ensure_topics(bootstrap, topic_specs(names, 4))
        sent = publish_file(events, bootstrap, names)
        root = CACHE / "stream-archive"
        shutil.rmtree(root, ignore_errors=True)
        arch = StreamArchiver(bootstrap, root, topics=(names.hosts, names.crashes, names.telemetry, names.alerts),
                              group="bench", flush_every_s=5, compact_every_s=0)

        async def drain() -> tuple[float, float]:
            stop = asyncio.Event()
            task = asyncio.create_task(arch.run(stop))
            t0, c0 = time.perf_counter(), time.process_time()
            while arch.stats.total < sent.total and not task.done():
                await asyncio.sleep(0.05)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            stop.set()
            await task
            return wall, cpu

        print(f"load {load()}; backlog of {sent.total:,} events on 4 partitions")
        wall, cpu = asyncio.run(drain())
        print(f"backlog drained: {sent.total:,} records in {wall:.2f} s wall ({sent.total / wall:,.0f}/s), "
              f"{cpu:.2f} s CPU ({sent.total / cpu:,.0f}/s per CPU second; incl. the pre-load of the hosts topic); "
              f"load {load()}")

        # 2. live: published at `rate` while the archiver runs; lag sampled every second
        names = TopicNames(f"l{uuid.uuid4().hex[:6]}.")
        ensure_topics(bootstrap, topic_specs(names, 4))
        root2 = CACHE / "stream-archive-live"
        shutil.rmtree(root2, ignore_errors=True)
        arch2 = StreamArchiver(bootstrap, root2, topics=(names.hosts, names.crashes, names.telemetry, names.alerts),
                               group="bench-live", flush_every_s=5, compact_every_s=0)

        async def live() -> list[tuple[float, int, int]]:
            stop = asyncio.Event()
            # the publisher in a process of its own (`fleetepi publish --rate`), as the agents would be
            pub = subprocess.Popen([FLEETEPI, "publish", str(events), "--broker", f"kafka://{bootstrap}",
                                    "--topic-prefix", names.prefix, "--rate", str(rate), "--no-create-topics"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            task = asyncio.create_task(arch2.run(stop))
            samples = []
            t0 = time.perf_counter()
            while pub.poll() is None and time.perf_counter() - t0 < seconds:
                await asyncio.sleep(1.0)
                samples.append((time.perf_counter() - t0, arch2.stats.total, await arch2.lag()))
            pub.terminate()
            out = pub.communicate()[0]
            print("publisher:", out.strip().splitlines()[-1] if out.strip() else "(stopped)")
            stop.set()
            await task
            return samples

        samples = asyncio.run(live())
        lags = [lag for _, _, lag in samples]
        print(f"live at {rate:,.0f} events/s offered for {seconds:.0f} s: lag per second {lags}")
        if samples:
            (t1, n1, _), (t2, n2, _) = samples[0], samples[-1]
            print(f"archived {n2:,} records; {((n2 - n1) / (t2 - t1)) if t2 > t1 else 0:,.0f}/s while live; "
                  f"max lag {max(lags):,}, last {lags[-1]:,}; load {load()}")
    finally:
        if not external:
            devbroker.stop(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("replay")
    r.add_argument("--rounds", type=int, default=2)
    y = sub.add_parser("year")
    y.add_argument("--hosts", type=int, default=2000)
    y.add_argument("--days", type=float, default=365)
    y.add_argument("--seed", type=int, default=1)
    y.add_argument("--thermal-s", type=float, default=3600.0, help="thermal cadence (default hourly, 2x the sim's)")
    y.add_argument("--ecc-s", type=float, default=7200.0, help="ECC counter cadence (default 2 h, 2x the sim's)")
    y.add_argument("--outbreaks", type=int, default=48)
    y.add_argument("--detectors", action="store_true",
                   help="run the detectors too (alerts in the archive; ~2x the time: bench/replay.py covers their speed)")
    s = sub.add_parser("stream")
    s.add_argument("--rate", type=float, default=23_000)
    s.add_argument("--seconds", type=float, default=30)
    s.add_argument("--hosts", type=int, default=2000)
    a = ap.parse_args()
    if a.what == "replay":
        bench_replay(a.rounds)
    elif a.what == "year":
        bench_year(a.hosts, a.days, a.seed, a.thermal_s, a.ecc_s, a.outbreaks, a.detectors)
    else:
        bench_stream(a.rate, a.seconds, a.hosts)


if __name__ == "__main__":
    main()
