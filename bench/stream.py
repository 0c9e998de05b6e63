"""Stream worker benchmark: throughput vs a bare faust agent, and produce -> alert latency.

    .venv/bin/python bench/stream.py                 # starts its own broker
    .venv/bin/python bench/stream.py --broker kafka://127.0.0.1:9092 --hosts 1000 --days 2

1. Throughput. A simulated fleet's events are published to fresh topics,
   then (a) a bare faust agent that only counts the records of the two
   input topics, with the worker's batching (``take_events(batch_max,
   within)``), and (b) a ``fleetepi worker`` consume the same backlog. Both
   are separate processes started the same way, one after the other, in
   this run; the ratio is what the target is about. Input rate = input
   records / time to fold them all; end-to-end = until the detector stages
   (host, signature, cohort) have folded everything too.
2. Latency. A fresh worker on fresh topics; events are published at
   ``--rate`` per second, each record stamped with its send time. For every
   alert on ``fleetepi.alerts``: alert record time - send time of the event
   whose arrival made it fire (the first event at or after the alert's ``ts``:
   that event's own time, or the step boundary it crossed).
   Also the fold lag of the input stage, sampled every 100 ms.

Prints one table; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]


class _Ts(msgspec.Struct):
    """Just the event time of a record (the latency run maps alerts back to the send time of their event)."""

    ts: datetime
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))  # devbroker: a development tool, not in the package

BARE = r'''
import sys, time, os, faust
from faust.worker import Worker
broker, prefix, total, batch, within, datadir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
app = faust.App("bare-" + prefix, broker=broker, value_serializer="raw", key_serializer="raw", web_enabled=False,
                consumer_auto_offset_reset="earliest", topic_disable_leader=True, topic_allow_declare=False,
                stream_wait_empty=False, broker_session_timeout=10, broker_rebalance_timeout=10,
                broker_heartbeat_interval=1, datadir=datadir, stream_buffer_maxsize=max(4096, 2 * batch),
                consumer_max_fetch_size=16 << 20)
state = {"n": 0, "t0": None}
@app.agent(app.topic(prefix + "fleetepi.crashes", prefix + "fleetepi.telemetry"))
async def count(stream):
    async for events in stream.take_events(batch, within):
        if state["t0"] is None:
            state["t0"] = time.perf_counter()
        state["n"] += len(events)
        if state["n"] >= total:
            print("BARE", state["n"], time.perf_counter() - state["t0"], flush=True)
            os._exit(0)
Worker(app, loglevel="warning", quiet=True, redirect_stdouts=False).execute_from_commandline()
'''

#: The same count through the worker's consumer path (stream.batches, and stream.faust_adapter with
#: --fetch-loop fast): what a worker could reach if its own work were free.
BARE_RAW = r'''
import sys, time, os
from faust.worker import Worker
from fleetepi.stream.batches import ack_all, batches, subscribe
import faust
from fleetepi.stream.faust_adapter import FastApp
broker, prefix, total, batch, within, datadir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
app = (FastApp if os.environ.get("FLEETEPI_BENCH_FAST") else faust.App)("bareraw-" + prefix, broker=broker, value_serializer="raw", key_serializer="raw", web_enabled=False,
              consumer_auto_offset_reset="earliest", topic_disable_leader=True, topic_allow_declare=False,
              stream_wait_empty=False, broker_session_timeout=10, broker_rebalance_timeout=10,
              broker_heartbeat_interval=1, datadir=datadir, stream_buffer_maxsize=max(4096, 2 * batch),
              consumer_max_fetch_size=16 << 20)
state = {"n": 0, "t0": None}
def counter(chan):
    async def count():
        async for msgs in batches(app, chan, batch, within):
            if state["t0"] is None:
                state["t0"] = time.perf_counter()
            ack_all(app, msgs)
            state["n"] += len(msgs)
            if state["n"] >= total:
                print("BARE", state["n"], time.perf_counter() - state["t0"], flush=True)
                os._exit(0)
    return count
for t in ("fleetepi.crashes", "fleetepi.telemetry"):
    app.task(counter(subscribe(app, prefix + t, max(4096, 2 * batch))))
Worker(app, loglevel="warning", quiet=True, redirect_stdouts=False).execute_from_commandline()
'''


def run_bare(script_text: str, name: str, broker: str, prefix: str, inputs: int, batch: int, within: float,
             work: Path) -> float:
    """Run one counting consumer over the backlog in its own process: records/s."""
    script = work / f"{name}.py"
    script.write_text(script_text)
    out = subprocess.run([sys.executable, str(script), broker, prefix, str(inputs), str(batch), str(within),
                          str(work / f"{name}-data")], capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "FLEETEPI_BENCH_FAST": "1" if FAST_CONSUMER else ""})
    line = next((ln[ln.index("BARE"):] for ln in out.stdout.splitlines() if "BARE" in ln), None)
    if line is None:
        raise SystemExit(f"{name} failed: {out.stdout[-2000:]} {out.stderr[-2000:]}")
    _, n, secs = line.split()[:3]
    return int(n) / float(secs)


def free_port() -> int:
    from devbroker import free_port as fp

    return fp()


def status(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/fleetepi/status/", timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


#: Workers run with --fetch-loop fast (set by the command line).
FAST_CONSUMER = False


def start_worker(broker: str, prefix: str, data: Path, batch: int, within: float) -> tuple[subprocess.Popen, int]:
    web = free_port()
    cmd = [sys.executable, "-m", "fleetepi.cli", "worker", "--broker", broker, "--app-id", f"bench-{prefix}",
           "--topic-prefix", prefix, "--web-port", str(web), "--no-metrics", "--data-dir", str(data),
           "--batch-max", str(batch), "--batch-within", str(within), "--checkpoint-interval", "0",
           "--fetch-loop", "fast" if FAST_CONSUMER else "faust"]
    log = open(data.parent / f"worker-{prefix}.log", "ab")
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT), web


def folded(st: dict[str, Any], stages: tuple[str, ...]) -> int:
    return sum(v for k, v in st["positions"].items() if k.split("/")[0] in stages)


def internal_ends(bootstrap: str, names: Any) -> int:
    from kafka import KafkaConsumer, TopicPartition

    cons = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        total = 0
        for t in (names.fleet,):
            tps = [TopicPartition(t, p) for p in sorted(cons.partitions_for_topic(t) or ())]
            total += sum(cons.end_offsets(tps).values()) if tps else 0
        return total
    finally:
        cons.close()


def bench_throughput(broker: str, bootstrap: str, events: Path, work: Path, batch: int, within: float,
                     workers: int = 1) -> dict[str, Any]:
    from fleetepi.stream.publish import publish_file
    from fleetepi.stream.topics import TopicNames, ensure_topics, topic_specs

    names = TopicNames(f"b{uuid.uuid4().hex[:6]}.")
    ensure_topics(bootstrap, topic_specs(names, 4))
    stats = publish_file(events, bootstrap, names)
    inputs = stats.sent[names.crashes] + stats.sent[names.telemetry]
    # (a) bare agent (stock faust stream), (a') the same count through the worker's consumer path
    bare_rate = run_bare(BARE, "bare", broker, names.prefix, inputs, batch, within, work)
    raw_rate = run_bare(BARE_RAW, "bare-raw", broker, names.prefix, inputs, batch, within, work)
    # (b) the worker(s), same backlog, one consumer group
    procs = [start_worker(broker, names.prefix, work / f"worker-data-{i}", batch, within) for i in range(workers)]
    if workers > 1:  # every worker has joined before the clock starts (else the first takes all)
        while any(status(web) is None for _, web in procs):
            time.sleep(0.05)
    try:
        t_first = t_inputs = None
        n_first = 0
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            sts = [status(web) for _, web in procs]
            if all(sts):
                st = {"positions": {f"{k}@{i}": v for i, x in enumerate(sts) for k, v in x["positions"].items()}}
                n_in = folded(st, ("crashes", "telemetry"))
                if n_in and t_first is None:
                    t_first, n_first = time.perf_counter(), n_in  # rates count what came after this poll
                if t_inputs is None and n_in >= inputs:
                    t_inputs = time.perf_counter()
                    ends = internal_ends(bootstrap, names)
                if t_inputs is not None and folded(st, ("fleet",)) >= ends:
                    t_all = time.perf_counter()
                    break
            time.sleep(0.05)
        else:
            raise SystemExit("worker did not drain the backlog in 15 minutes")
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            proc.wait(timeout=60)
    assert t_first is not None and t_inputs is not None
    in_rate = (inputs - n_first) / (t_inputs - t_first)
    all_rate = (inputs - n_first) / (t_all - t_first)
    return {"events": inputs, "workers": workers, "bare_events_per_s": bare_rate, "bare_raw_events_per_s": raw_rate,
            "ratio_input_raw": in_rate / raw_rate, "ratio_end_to_end_raw": all_rate / raw_rate,
            "worker_input_events_per_s": in_rate,
            "worker_end_to_end_events_per_s": all_rate, "ratio_input": in_rate / bare_rate,
            "ratio_end_to_end": all_rate / bare_rate}


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def bench_latency(broker: str, bootstrap: str, events: Path, work: Path, rate: float, batch: int,
                  within: float) -> dict[str, Any]:
    from fleetepi.contract import decode_alert
    from fleetepi.stream.publish import Publisher, PublishStats, routed_lines
    from fleetepi.stream.topics import TopicNames, ensure_topics, topic_specs

    names = TopicNames(f"l{uuid.uuid4().hex[:6]}.")
    ensure_topics(bootstrap, topic_specs(names, 4))
    data = work / "latency-data"
    proc, web = start_worker(broker, names.prefix, data, batch, within)
    sent_at: dict[int, float] = {}
    lags: list[float] = []

    async def publish() -> tuple[int, float]:
        pub = Publisher(bootstrap)
        await pub.start()
        stats = PublishStats()
        for topic, key, value in routed_lines(events, names, True, stats):
            await pub.add(topic, key, value)
        await pub.flush()
        while status(web) is None or not status(web)["inventory_ready"]:  # type: ignore[index]
            await asyncio.sleep(0.2)
        n, start = 0, time.perf_counter()
        marks: list[tuple[float, int]] = []
        samples: list[tuple[float, int]] = []
        publishing = True

        async def poll() -> None:
            while publishing or not samples or samples[-1][1] < n:
                st = await asyncio.to_thread(status, web)
                if st:
                    samples.append((time.time(), folded(st, ("crashes", "telemetry"))))
                await asyncio.sleep(0.1)

        # decoded and routed before the clock starts: the publisher shares the 2 cores with the worker
        ts_of = msgspec.json.Decoder(_Ts).decode
        routed = [(topic, key, value, int(ts_of(value).ts.timestamp() * 1000))
                  for topic, key, value in routed_lines(events, names, False, stats)]
        start = time.perf_counter()
        poller = asyncio.ensure_future(poll())
        for topic, key, value, ts_ms in routed:
            n += 1
            if n % 16 == 0:
                ahead = n / rate - (time.perf_counter() - start)
                if ahead > 0.005:
                    await pub.send_open()
                    await asyncio.sleep(ahead)
            now = time.time()
            sent_at.setdefault(ts_ms, now)
            if n % 500 == 0:
                marks.append((now, n))
            await pub.add(topic, key, value, int(now * 1000))
        await pub.flush()
        paced_s = time.perf_counter() - start
        await pub.stop()
        publishing = False
        await poller
        # fold lag of the input stage: when did the worker's count (sampled every 100 ms) pass each mark?
        i = 0
        for t_pub, k in marks:
            while i < len(samples) and samples[i][1] < k:
                i += 1
            if i < len(samples):
                lags.append(samples[i][0] - t_pub)
        return n, paced_s

    try:
        n, elapsed = asyncio.run(publish())
        time.sleep(3)
        from kafka import KafkaConsumer, TopicPartition

        cons = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
        tps = [TopicPartition(names.alerts, p) for p in sorted(cons.partitions_for_topic(names.alerts) or ())]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        end = cons.end_offsets(tps)
        lat: list[float] = []
        times = sorted(sent_at)
        while any(cons.position(tp) < end[tp] for tp in tps):
            for recs in cons.poll(timeout_ms=500).values():
                for r in recs:
                    a = decode_alert(r.value)
                    # An alert raised by an event carries its time; one raised at a step boundary
                    # (``Engine._tick``) was made possible by the first event at or after it.
                    i = bisect.bisect_left(times, a.ts_ms)
                    if i < len(times) and a.state == "firing":
                        lat.append(r.timestamp / 1000.0 - sent_at[times[i]])
        cons.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {"events": n, "rate_target": rate, "rate_achieved": n / elapsed, "alerts_measured": len(lat),
            "alert_latency_p50_s": percentile(lat, 0.5), "alert_latency_p99_s": percentile(lat, 0.99),
            "alert_latency_max_s": max(lat) if lat else float("nan"),
            "fold_lag_p50_s": percentile(lags, 0.5), "fold_lag_p99_s": percentile(lags, 0.99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", help="kafka://HOST:PORT (default: start a fresh local broker)")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=5000.0, help="events/s of the latency run")
    ap.add_argument("--latency-days", type=float, default=2.0, help="days of events in the latency run")
    ap.add_argument("--latency-hosts", type=int, help="fleet size of the latency run (default: --hosts)")
    ap.add_argument("--skip-throughput", action="store_true", help="only the latency run")
    ap.add_argument("--skip-latency", action="store_true", help="only the throughput run")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (one group) in the throughput run")
    ap.add_argument("--batch-max", type=int, default=2000)
    ap.add_argument("--batch-within", type=float, default=0.05)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--fetch-loop", choices=("fast", "faust"), default="fast",
                    help="the workers' fetch loop (and the raw counting consumer's)")
    args = ap.parse_args()
    global FAST_CONSUMER
    FAST_CONSUMER = args.fetch_loop == "fast"

    import devbroker

    from fleetepi.brokers import bootstrap_of
    from fleetepi.simulate import SimConfig, simulate, write_jsonl

    work = Path(tempfile.mkdtemp(prefix="fleetepi-bench-stream-"))
    info = None
    if args.broker:
        broker = args.broker
    else:
        info = devbroker.start(data_dir=work / "kafka", fresh=True)
        broker = f"kafka://{info.bootstrap}"
    bootstrap = bootstrap_of(broker)  # the one parser: a list of brokers too
    try:
        events = work / "events.jsonl"
        if not args.skip_throughput:
            write_jsonl(simulate(SimConfig(hosts=args.hosts, days=args.days, seed=11)), events)
        lat_events = work / "latency.jsonl"
        if not args.skip_latency:
            write_jsonl(simulate(SimConfig(hosts=args.latency_hosts or args.hosts, days=args.latency_days,
                                           seed=12)), lat_events)
        thr = None if args.skip_throughput else bench_throughput(broker, bootstrap, events, work, args.batch_max,
                                                                   args.batch_within, args.workers)
        lat = None if args.skip_latency else bench_latency(broker, bootstrap, lat_events, work, args.rate,
                                                           args.batch_max, args.batch_within)
    finally:
        if info is not None:
            devbroker.stop(work / "kafka")
    figures = {"machine": f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", "throughput": thr, "latency": lat}
    if thr is not None:
        print(f"throughput over {thr['events']:,} input events (same backlog, same batching):")
        print(f"  bare faust agent (count only)      {thr['bare_events_per_s']:10,.0f} events/s")
        print(f"  same count, worker's consumer path {thr['bare_raw_events_per_s']:10,.0f} events/s")
        print(f"  {thr['workers']} worker process(es):")
        print(f"  worker, input stages folded        {thr['worker_input_events_per_s']:10,.0f} events/s  "
              f"ratio {thr['ratio_input']:.2f} (to the path: {thr['ratio_input_raw']:.2f})")
        print(f"  worker, all detector stages        {thr['worker_end_to_end_events_per_s']:10,.0f} events/s  "
              f"ratio {thr['ratio_end_to_end']:.2f} (to the path: {thr['ratio_end_to_end_raw']:.2f})")
    if lat is None:
        print(f"machine: {figures['machine']}")
        return
    print(f"latency at {lat['rate_target']:,.0f} events/s (achieved {lat['rate_achieved']:,.0f}), "
          f"{lat['events']:,} events:")
    print(f"  produce -> alert on the alerts topic: p50 {lat['alert_latency_p50_s']:.3f} s  "
          f"p99 {lat['alert_latency_p99_s']:.3f} s  max {lat['alert_latency_max_s']:.3f} s  "
          f"({lat['alerts_measured']} alerts)")
    print(f"  produce -> folded by the input stage: p50 {lat['fold_lag_p50_s']:.3f} s  p99 {lat['fold_lag_p99_s']:.3f} s")
    print(f"machine: {figures['machine']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
