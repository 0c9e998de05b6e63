"""Scaling: the detectors' CPU per event against fleet size, and replay throughput on the noisy preset.

1. **CPU per event of ``Engine.process``** at 500, 2,000, 8,000 and 32,000
   hosts of the ``scaling-*`` preset family (the same per-host rates at every
   size). Each fleet is simulated, its events are turned into contract structs
   a chunk at a time BEFORE the clock starts (generation and parsing are not
   measured), and ``time.process_time`` is read once per chunk around the
   ``Engine.process`` loop. Every size is measured over the same span of event
   time (``--hours``, from the start: all host announcements, then crashes and
   telemetry), so the detectors' state has grown for as long at every size;
   ``--budget-s`` caps the CPU spent per size (a capped size reports the
   events it reached). Target (issue 9): within +-25 % of each other.
2. **Replay events/s** of the noisy preset (``fleetepi replay``'s pipeline,
   ``fleetepi.pipeline.Pipeline``, from a JSON-lines file) against an orjson
   parse-only pass over the same file in the same process, CPU seconds.
   Target (issue 9): >= 100,000 events/s. Then the file split by line kind,
   each part replayed alone (``--no-split`` skips it): the thermal and
   power readings, nine lines in ten and cheap, and everything else, whose
   rate is what a recording with few readings per crash replays at.

    .venv/bin/python bench/scaling.py                       # both parts, writes docs/bench/scaling.md
    .venv/bin/python bench/scaling.py --sizes 500,2000 --hours 6 --no-replay --no-write
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by file path
from machine import describe

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "bench"
SIZES = (500, 2000, 8000, 32000)
CHUNK = 50_000
#: sizes whose one measurement takes less CPU than this are measured --repeat times (best reported)
REPEAT_UNDER_S = 30.0


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cpu_per_event(hosts: int, seed: int, hours: float, budget_s: float) -> dict[str, Any]:
    """``Engine.process`` CPU per event over the first ``hours`` of event time of ``scaling-<hosts>``."""
    from fleetepi.detectors import DetectorConfig, Engine
    from fleetepi.simulate import preset, simulate

    t0 = time.perf_counter()
    sim = simulate(preset(f"scaling-{hosts}", seed))
    t_sim = time.perf_counter() - t0
    end_ms = sim.start_ms + int(hours * 3_600_000)
    engine = Engine(DetectorConfig())  # default settings
    process = engine.process
    events = sim.events()
    cpu = 0.0
    n = n_alerts = 0
    last_ms = sim.start_ms
    capped = False
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, old[1], old[2])  # as `fleetepi replay` runs (pipeline.batch_gc)
    try:
        while True:
            chunk = [e for e in islice(events, CHUNK) if e.ts_ms < end_ms]  # built before the clock starts
            if not chunk:
                break
            c0 = time.process_time()
            for ev in chunk:
                if process(ev):
                    n_alerts += 1
            cpu += time.process_time() - c0
            n += len(chunk)
            last_ms = chunk[-1].ts_ms
            if len(chunk) < CHUNK:
                break
            if cpu >= budget_s:
                capped = True
                break
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
    reached_h = (last_ms - sim.start_ms) / 3_600_000
    return {"hosts": hosts, "events": n, "cpu_s": cpu, "us_per_event": 1e6 * cpu / n if n else None,
            "capped": capped, "hours": hours, "reached_h": round(min(reached_h, hours), 2),
            "events_in_run": len(sim), "alerts": n_alerts, "t_sim_s": t_sim}


def generate(path: Path, name: str, seed: int) -> int:
    """Write the preset's events as contract JSON lines (run in a child: its memory is not the replay's)."""
    from fleetepi.simulate import preset, simulate, write_jsonl

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    n = write_jsonl(simulate(preset(name, seed)), tmp)
    os.replace(tmp, path)
    return n


#: What a line of the replay file is, for the split: a thermal or power reading, or anything else (crashes,
#: ECC and Xid counts, host announcements). Readings are most of the noisy file's lines and cost little each.
READING_MARKS = (b'"kind":"thermal"', b'"kind":"power"')


def split_by_kind(path: Path) -> tuple[Path, Path]:
    """The replay file as two: its readings (with every host announcement) and everything but its readings.

    Why: events/s over the whole file is mostly the readings' rate. A recording
    with few readings per crash (an independent simulator's, a fleet that
    sends thermal only on change) replays at the rate of the rest.
    """
    readings, rest = path.with_suffix(".readings.jsonl"), path.with_suffix(".no-readings.jsonl")
    if not (readings.exists() and rest.exists()) or min(readings.stat().st_mtime, rest.stat().st_mtime) < path.stat().st_mtime:
        with open(path, "rb") as src, open(readings, "wb") as r_out, open(rest, "wb") as o_out:
            for line in src:
                if any(m in line for m in READING_MARKS):
                    r_out.write(line)
                else:
                    o_out.write(line)
                    if b'"schema":"fleetepi.host/' in line:
                        r_out.write(line)
    return readings, rest


def replay_cpu(path: Path) -> dict[str, Any]:
    """The full replay pipeline over ``path``: lines, CPU and wall seconds, alerts by kind (the alerts themselves
    to ``.cache/bench/scaling-alerts-<file>.jsonl``)."""
    from fleetepi.jsonl import open_input, open_output
    from fleetepi.pipeline import JsonlAlertSink, Pipeline, batch_gc

    with open_input(path) as source, open_output(CACHE / f"scaling-alerts-{path.stem}.jsonl") as out:
        pipe = Pipeline(sink=JsonlAlertSink(out))
        with batch_gc():
            c0, w0 = time.process_time(), time.perf_counter()
            pipe.run(source)
            pipe.finish()
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"lines": pipe.summary.lines, "cpu_s": cpu, "wall_s": wall, "per_s": pipe.summary.lines / cpu,
            "alerts": dict(pipe.summary.fired), "invalid": pipe.summary.invalid_total}


def replay_rates(path: Path, split: bool = True) -> dict[str, Any]:
    """orjson parse-only, then the full replay pipeline, over the same file, CPU seconds each; with ``split``,
    the replay of its readings alone and of everything else alone."""
    loads = orjson.loads
    n_parse = 0
    c0 = time.process_time()
    with open(path, "rb", buffering=1 << 20) as fh:
        for line in fh:
            loads(line)
            n_parse += 1
    parse_cpu = time.process_time() - c0
    whole = replay_cpu(path)
    out = {"lines": whole["lines"], "parse_cpu_s": parse_cpu, "parse_per_s": n_parse / parse_cpu,
           "replay_cpu_s": whole["cpu_s"], "replay_wall_s": whole["wall_s"], "replay_per_s": whole["per_s"],
           "ratio": whole["per_s"] / (n_parse / parse_cpu), "alerts": whole["alerts"], "invalid": whole["invalid"]}
    if split:
        readings, rest = split_by_kind(path)
        out["readings"], out["no_readings"] = replay_cpu(readings), replay_cpu(rest)
    return out




def markdown(rows: list[dict[str, Any]], replay: dict[str, Any] | None, meta: dict[str, Any]) -> str:
    lines = ["# Scaling benchmark", "",
             f"`bench/scaling.py`, run {meta['date']} on {meta['machine']}; load average {meta['load_start']} at "
             f"the start, {meta['load_end']} at the end (CPU-time figures; the machine is shared).", "",
             "## CPU per event of `Engine.process` against fleet size", "",
             f"Preset family `scaling-*` (seed {meta['seed']}): the same per-host rates at every size (racks of 40, "
             "~5 crashes per host-day incl. crash loops and job-wide aborts, thermal on change and ECC deltas only "
             "when non-zero, so crashes are about a third of the events; chronic hosts, static associations, the "
             "eight classic outbreaks). Events are built as "
             "contract structs before the clock starts; `time.process_time` around the `Engine.process` loop, "
             f"over the first {meta['hours']:g} h of event time at every size (CPU capped at {meta['budget_s']:g} s "
             "per size: a capped size reports the span it reached). A discarded warm-up run goes first: the first "
             "engine of a process pays one-time costs (lazily imported scipy distributions) that are no cost per "
             "event.", "",
             "| hosts | events measured | event time covered | CPU s | µs/event | ratio to 500 hosts | runs (µs/event) |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    base = rows[0]["us_per_event"] if rows and rows[0]["us_per_event"] else None
    for r in rows:
        us = r["us_per_event"]
        ratio = f"{us / base:.2f}" if us and base else "–"
        span = f"{r['reached_h']:g} h" + (" (capped)" if r["capped"] else "")
        runs = ", ".join(f"{x:g}" for x in r.get("runs_us", []))
        lines.append(f"| {r['hosts']:,} | {r['events']:,} | {span} | {r['cpu_s']:.1f} | "
                     f"{us:.1f} | {ratio} | {runs} |" if us else f"| {r['hosts']:,} | 0 | – | – | – | – | – |")
    lines += ["", f"A size whose one run takes under {REPEAT_UNDER_S:g} s of CPU is run {meta['repeat']} times and the "
              "best reported (timeit's rule: on a shared machine the minimum is the run least disturbed by other "
              "work); every run is listed.", "",
              "Target (issue 9): CPU per event at 500, 2,000, 8,000 and 32,000 hosts within ±25 % of each other.",
              ""]
    if replay:
        lines += ["## Replay throughput on the noisy preset", "",
                  f"`{meta['replay_file']}`: the `noisy` preset (2,000 hosts x 14 days, ~5 crashes per host-day), "
                  f"seed {meta['replay_seed']}, {replay['lines']:,} lines. Same file, same process:", "",
                  "| pass | CPU s | lines per CPU-second |", "|---|---:|---:|",
                  f"| orjson.loads per line (parse only) | {replay['parse_cpu_s']:.1f} | {replay['parse_per_s']:,.0f} |",
                  f"| `fleetepi replay` pipeline (decode, admission, every detector, alert encoding) | "
                  f"{replay['replay_cpu_s']:.1f} | {replay['replay_per_s']:,.0f} |", "",
                  f"Ratio replay / parse: **{replay['ratio']:.3f}**; replay wall {replay['replay_wall_s']:.0f} s; "
                  f"alerts fired by kind {replay['alerts']}. Target (issue 9): >= 100,000 events/s.", ""]
        if "readings" in replay:
            r, o = replay["readings"], replay["no_readings"]
            lines += ["The same file split by line kind, each part replayed alone (the readings keep the host "
                      "announcements):", "",
                      "| part | lines | CPU s | lines per CPU-second | µs per line |", "|---|---:|---:|---:|---:|",
                      f"| thermal and power readings | {r['lines']:,} | {r['cpu_s']:.1f} | {r['per_s']:,.0f} | "
                      f"{1e6 / r['per_s']:.1f} |",
                      f"| everything else (crashes, ECC, Xid, announcements) | {o['lines']:,} | {o['cpu_s']:.1f} | "
                      f"{o['per_s']:,.0f} | {1e6 / o['per_s']:.1f} |", "",
                      "Most of the file's lines are readings, which cost a few microseconds each. A recording with "
                      "few readings per crash replays at the second row's rate: there the step decisions and folds "
                      "that each crash causes set the pace, not the parse.", ""]
    lines += ["Reproduce: `.venv/bin/python bench/scaling.py` (`--sizes`, `--hours`, `--budget-s`, `--no-replay`, `--no-split`).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="fleet sizes of the scaling-* presets")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hours", type=float, default=48.0,
                    help="event time measured at every size, from the start (default: the whole 2-day run)")
    ap.add_argument("--budget-s", type=float, default=600.0, help="cap on Engine.process CPU per size")
    ap.add_argument("--repeat", type=int, default=3,
                    help=f"runs of a size measured in under {REPEAT_UNDER_S:g} s of CPU; the best is reported")
    ap.add_argument("--no-replay", action="store_true", help="skip the replay part")
    ap.add_argument("--no-split", action="store_true",
                    help="replay the whole file only, not also its readings and the rest apart")
    ap.add_argument("--replay-preset", default="noisy")
    ap.add_argument("--replay-seed", type=int, default=101)
    ap.add_argument("--no-write", action="store_true", help="do not write docs/bench/scaling.md")
    ap.add_argument("--md", type=Path, default=ROOT / "docs" / "bench" / "scaling.md")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--generate-only", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.generate_only:
        generate(Path(args.generate_only), args.replay_preset, args.replay_seed)
        return 0
    load_start = loadavg()
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    for n in sizes:
        from fleetepi.simulate import PRESETS

        if f"scaling-{n}" not in PRESETS:
            raise SystemExit(f"no preset scaling-{n}; known sizes: {', '.join(map(str, SIZES))}")
    # the first Engine of a process pays one-time costs (lazily imported scipy.stats distributions, their
    # first-use tables): about a second of CPU inside the first size's loop
    warm = cpu_per_event(sizes[0], args.seed, min(args.hours, 6.0), args.budget_s)
    print(f"warm-up (discarded): {warm['us_per_event']:.1f} us/event over {warm['events']:,} events", flush=True)
    rows = []
    for n in sizes:
        runs = [cpu_per_event(n, args.seed, args.hours, args.budget_s)]
        # a size measured in seconds of CPU is at the mercy of whatever else the machine does: best of
        # --repeat (timeit's rule: the least disturbed run), every run listed
        while len(runs) < args.repeat and runs[0]["cpu_s"] < REPEAT_UNDER_S:
            runs.append(cpu_per_event(n, args.seed, args.hours, args.budget_s))
        r = min(runs, key=lambda x: x["us_per_event"] or float("inf"))
        r["runs_us"] = [round(x["us_per_event"], 1) for x in runs if x["us_per_event"]]
        rows.append(r)
        base = rows[0]["us_per_event"]
        print(f"{n:>6,} hosts: {r['events']:>9,} events over {r['reached_h']:g} h{' (capped)' if r['capped'] else ''}, "
              f"{r['cpu_s']:7.1f} s CPU = {r['us_per_event']:8.1f} us/event, ratio to {sizes[0]:,} hosts "
              f"{r['us_per_event'] / base:5.2f}  (load {loadavg()}; runs {r['runs_us']})", flush=True)
    replay = None
    path = CACHE / f"{args.replay_preset}-s{args.replay_seed}.jsonl"
    if not args.no_replay:
        if not path.exists():
            print(f"generating {path.name} (once; cached under .cache/bench) ...", flush=True)
            subprocess.run([sys.executable, __file__, "--generate-only", str(path), "--replay-preset",
                            args.replay_preset, "--replay-seed", str(args.replay_seed)], check=True)
        replay = replay_rates(path, split=not args.no_split)
        print(f"orjson parse only: {replay['parse_per_s']:>10,.0f} lines per CPU-second ({replay['parse_cpu_s']:.1f} s)")
        print(f"fleetepi replay  : {replay['replay_per_s']:>10,.0f} lines per CPU-second ({replay['replay_cpu_s']:.1f} s "
              f"CPU, {replay['replay_wall_s']:.1f} s wall); ratio {replay['ratio']:.3f}; target >= 100,000: "
              f"{'met' if replay['replay_per_s'] >= 100_000 else 'MISSED'}")
        for part, name in (("readings", "readings only"), ("no_readings", "without readings")):
            if part in replay:
                x = replay[part]
                print(f"  {name:<17}: {x['per_s']:>10,.0f} lines per CPU-second ({x['lines']:,} lines, "
                      f"{x['cpu_s']:.1f} s CPU)")
    meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": describe(), "seed": args.seed,
            "hours": args.hours, "budget_s": args.budget_s, "repeat": args.repeat, "load_start": load_start, "load_end": loadavg(),
            "replay_file": str(path.relative_to(ROOT)) if replay else None, "replay_seed": args.replay_seed}
    if not args.no_write:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(markdown(rows, replay, meta))
        print(f"wrote {args.md}")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "cpu_per_event": rows, "replay": replay}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
