"""Fault injection with figures: the broker stopped and restarted, workers killed -9, clocks skewed.

One run = a simulated fleet's events published *through the agent's own
publisher* (``KafkaPublisher``: fsync'd on-disk spool, acks=all) at a fixed
rate into a real broker (``fleetepi dev kafka``), consumed by real
``fleetepi worker`` processes, while faults are injected:

* ``--outage S``: the broker is stopped a third into the publishing, for S
  seconds (the agent spools, the worker waits), then restarted on the same
  data and port;
* ``--kill-every S``: the worker is killed with SIGKILL every S seconds and
  restarted on the same data directory (its state is rebuilt from the log);
* ``--skew-hosts N --skew-h H``: N hosts' clocks are off by +H hours (their
  events are shifted): they must still be delivered (what the detectors do
  with them is their admission rule's business).

A worker that exits on its own (faust gives up when the broker is away
while it joins its group) is restarted after 5 s on the same data, as
``deploy/systemd/fleetepi-worker.service`` (``Restart=always``) and the Helm
Deployment do; such restarts are counted and printed.

Printed: events in (published, spooled, dropped), records out on the input
topics (and duplicates), alerts of the disturbed run against the embedded
engine over the same events (firing kind + entity, time within one step),
and the time to drain after the last fault. The spool's disk-full case is
``tests/agents/test_faults.py`` (a 512 KiB tmpfs).

Usage::

    .venv/bin/python bench/faults.py --hosts 300 --days 2 --rate 2000 --outage 10 --kill-every 20
    .venv/bin/python bench/faults.py --hosts 2000 --days 60 --rate 5000 --outage 600 --kill-every 180 \
        --duration 1800   # the issue's run: 8.7 million events, ~37 min, by hand

The worker runs with ``--idle-release 0`` (the replay setting: the merge
waits for every partition) because the stream is compressed: 60 days in
30 minutes make one wall second 48 minutes of event time, so a partition
read a fraction of a second late would be hours late to a live merge.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))  # devbroker: a development tool, not in the package
_spec = importlib.util.spec_from_file_location("fleetepi_stream_fixtures", ROOT / "tests" / "stream" / "conftest.py")
assert _spec is not None and _spec.loader is not None
fixtures = importlib.util.module_from_spec(_spec)
sys.modules["fleetepi_stream_fixtures"] = fixtures
_spec.loader.exec_module(fixtures)


@dataclass
class FaultRun:
    """What one disturbed run did and how it compares with the undisturbed answer."""

    events_in: int = 0
    spooled: int = 0
    dropped: int = 0
    records_out: int = 0
    duplicates: int = 0
    faults: list[str] = field(default_factory=list)
    alerts_expected: int = 0
    alerts_matched: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    drain_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: The detectors' admission counts (rejected as out_of_order..., folded late...): embedded, and the stream's.
    admission_expected: dict[str, int] = field(default_factory=dict)
    admission: dict[str, int] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        return max(0, self.events_in - self.dropped - (self.records_out - self.duplicates))

    skewed: bool = False

    @property
    def ok(self) -> bool:
        """Nothing lost; alerts as undisturbed (with skewed clocks: delivery only, the alerts are the admission rule's)."""
        return self.lost == 0 and self.dropped == 0 and (self.skewed or not (self.missing or self.extra))


#: Partitions of the input topics of a run.
PARTITIONS = 4


def simulated_events(hosts: int, days: float, seed: int, skew_hosts: int, skew_h: float) -> list[Any]:
    """The simulator's events, in file order; the first ``skew_hosts`` hosts' clocks off by ``skew_h`` hours."""
    import msgspec

    from fleetepi.contract import Host
    from fleetepi.simulate import SimConfig, simulate

    sim = simulate(SimConfig(hosts=hosts, days=days, seed=seed))
    events = list(sim.events())
    events += fixtures.closing_events(events, sim.end_ms, PARTITIONS)  # the last boundaries get decided
    if not skew_hosts:
        return events
    skewed = sorted({e.host for e in events if isinstance(e, Host)})[:skew_hosts]
    shift = timedelta(hours=skew_h)
    return [msgspec.structs.replace(e, ts=e.ts + shift) if getattr(e, "host", None) in skewed and not isinstance(e, Host)
            else e for e in events]


def tally(bootstrap: str, topics: tuple[str, ...]) -> tuple[int, int]:
    """Records on ``topics`` and how many repeat an earlier one, by digest: millions of records, not held in memory."""
    import hashlib

    from kafka import KafkaConsumer, TopicPartition

    seen: Counter[bytes] = Counter()
    cons = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    try:
        tps = [TopicPartition(t, p) for t in topics for p in sorted(cons.partitions_for_topic(t) or ())]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        end = cons.end_offsets(tps)
        deadline = time.monotonic() + 1800
        while any(cons.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError("reading the input topics back took over 30 min")
            for recs in cons.poll(timeout_ms=500, max_records=50_000).values():
                seen.update(hashlib.blake2b(r.value, digest_size=16).digest() for r in recs)
    finally:
        cons.close()
    total = sum(seen.values())
    return total, total - len(seen)


def embedded(events: list[Any], admission: dict[str, int] | None = None) -> list[Any]:
    """The embedded engine's alerts; ``admission`` gets its rejections and flags (out_of_order, folded_late...)."""
    from fleetepi.detectors import Engine

    engine = Engine()
    out: list[Any] = []
    for e in events:
        out.extend(engine.process(e))
    if admission is not None:
        admission.update({k: v for k, v in (engine.invalid + engine.flags).items() if v})
    return out


def run(hosts: int = 300, days: float = 2.0, seed: int = 5, rate: float = 2000.0, outage_s: float = 0.0,
        kill_every_s: float = 0.0, skew_hosts: int = 0, skew_h: float = 0.0, partitions: int = 4,
        workdir: Path | None = None, duration_s: float = 0.0) -> FaultRun:
    """One disturbed run; see the module docstring."""
    import devbroker

    from fleetepi.agents.exceptions import SpoolFull
    from fleetepi.agents.publish.kafka import KafkaPublisher
    from fleetepi.contract import CRASH_SCHEMA, HOST_SCHEMA, TELEMETRY_SCHEMA

    res = FaultRun()
    events = simulated_events(hosts, days, seed, skew_hosts, skew_h)
    # the answer with every clock right: what a skewed host must not cost the others
    want = embedded(simulated_events(hosts, days, seed, 0, 0.0) if skew_hosts else events, res.admission_expected)
    res.skewed = bool(skew_hosts)
    tmp_ctx = tempfile.TemporaryDirectory() if workdir is None else None
    tmp = Path(tmp_ctx.name) if tmp_ctx is not None else workdir
    assert tmp is not None
    broker_data = tmp / "broker"
    port = devbroker.free_port()
    info = devbroker.start(data_dir=broker_data, port=port, fresh=True)
    env = fixtures.StreamEnv(info.bootstrap, tmp)
    t0 = time.monotonic()
    try:
        env.create_topics(partitions)
        worker_data = tmp / "worker-data"
        worker = env.start_worker("w0", extra=["--checkpoint-interval", "5"], data_dir=worker_data)
        env.wait_for(lambda: worker.status() is not None, what="worker up")
        topics = {HOST_SCHEMA: env.names.hosts, CRASH_SCHEMA: env.names.crashes, TELEMETRY_SCHEMA: env.names.telemetry}
        # the whole simulated fleet publishes through this one spool: it must hold the fleet's rate for the
        # outage (~400 bytes an event with its framing, doubled), where one host's agent holds its own rate
        spool_bytes = max(256 << 20, int(rate * (outage_s + 120) * 800))
        res.notes.append(f"spool cap {spool_bytes / 2**20:,.0f} MiB (the fleet's rate x the outage)")
        pub = KafkaPublisher([info.bootstrap], tmp / "spool", spool_max_bytes=spool_bytes, topics=topics,
                             max_block_ms=1000, fsync=False)
        outage_at = len(events) / rate / 3 if outage_s else None  # a third into the publishing
        state = {"broker_up": True, "next_kill": kill_every_s or None, "kills": 0, "restarts": 0, "worker": worker}
        start = time.monotonic()
        # faults keep coming for the whole run: publishing, the outage, and the kills after it
        end_s = max(len(events) / rate, (outage_at or 0) + outage_s, duration_s)

        def supervise() -> None:
            """systemd's Restart=always: a worker that exited on its own comes back after 5 s."""
            w = state["worker"]
            if w.alive() or w.proc.returncode == -9:
                return
            res.faults.append(f"worker exited {w.proc.returncode} at {time.monotonic() - start:.0f} s; restarted")
            time.sleep(5)
            state["restarts"] += 1
            state["worker"] = env.start_worker(f"r{state['restarts']}", extra=["--checkpoint-interval", "5"],
                                               data_dir=worker_data)

        def inject(elapsed: float) -> None:
            if outage_at is not None and state["broker_up"] and outage_at <= elapsed < outage_at + outage_s:
                devbroker.stop(broker_data)
                state["broker_up"] = False
                res.faults.append(f"broker stopped at {elapsed:.0f} s")
            if not state["broker_up"] and elapsed >= (outage_at or 0) + outage_s:
                devbroker.start(data_dir=broker_data, port=port)
                state["broker_up"] = True
                res.faults.append(f"broker restarted at {elapsed:.0f} s")
            if state["next_kill"] is not None and elapsed >= state["next_kill"] and elapsed < end_s:
                state["worker"].kill9()
                state["kills"] += 1
                state["worker"] = env.start_worker(f"w{state['kills']}", extra=["--checkpoint-interval", "5"],
                                                   data_dir=worker_data)
                res.faults.append(f"worker killed -9 at {elapsed:.0f} s")
                state["next_kill"] += kill_every_s

        for i, ev in enumerate(events):
            due = start + i / rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            try:
                pub.publish(ev)
                res.spooled += 1
            except SpoolFull:
                res.dropped += 1
            res.events_in += 1
            if i % 500 == 0:
                pub.flush(timeout_s=0.5)
                inject(time.monotonic() - start)
                supervise()
        while time.monotonic() - start < end_s or not state["broker_up"]:
            pub.flush(timeout_s=0.5)
            inject(time.monotonic() - start)
            supervise()
            time.sleep(0.5)
        worker = state["worker"]
        kills = state["kills"]
        supervised = state
        last_fault = time.monotonic()
        deadline = time.monotonic() + 1800
        while pub.spool.pending and time.monotonic() < deadline:
            pub._next_try = 0.0  # retry now, not after the backoff
            pub.flush(timeout_s=10)
        res.notes.append(f"spool pending after the flush: {pub.spool.pending}")
        pub.close()
        deadline = time.monotonic() + 3600
        while time.monotonic() < deadline:
            supervise()
            worker = state["worker"]
            if worker.alive() and env.drained([worker]):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"the worker did not drain: {worker.log_tail()}")
        res.drain_s = time.monotonic() - last_fault
        final = worker.status() or {}
        res.admission = {**final.get("engine_invalid", {}), **final.get("engine_flags", {})}
        res.records_out, res.duplicates = tally(env.bootstrap, (env.names.hosts, env.names.crashes, env.names.telemetry))
        got = env.alerts()
        if workdir is not None:  # kept, to compare two runs (a disturbed one and a clean one) alert by alert
            from fleetepi.contract import encode

            (workdir / "alerts.jsonl").write_bytes(b"".join(encode(a) + b"\n" for a in got))
        expected, streamed = fixtures.firing(want), fixtures.firing(got)
        res.alerts_expected = len(expected)
        res.missing = sorted(set(expected) - set(streamed))
        res.extra = sorted(set(streamed) - set(expected))
        res.alerts_matched = 0
        for key, times in expected.items():
            if key in streamed and len(streamed[key]) == len(times) and all(
                    abs(a - b) <= fixtures.STEP_MS for a, b in zip(times, streamed[key])):
                res.alerts_matched += 1
            elif key in streamed:
                res.missing.append(f"{key} (at other times: {streamed[key]} vs {times})")
        res.notes.append(f"{kills} kill(s), {supervised['restarts']} supervisor restart(s)")
    finally:
        res.wall_s = time.monotonic() - t0
        env.close()
        devbroker.stop(broker_data)
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
    return res


def report(res: FaultRun, args: argparse.Namespace) -> None:
    print(f"fleetepi faults: {args.hosts} hosts x {args.days} days at {args.rate:,.0f} events/s; "
          f"load {open('/proc/loadavg').read().split()[:3]}")
    for f in res.faults:
        print(f"  fault: {f}")
    print(f"  events in {res.events_in:,} (spooled {res.spooled:,}, dropped {res.dropped}); records out {res.records_out:,} "
          f"(duplicates {res.duplicates:,}); lost {res.lost}")
    print(f"  alerts: {res.alerts_matched}/{res.alerts_expected} identical to the undisturbed run (kind + entity, time "
          f"within one step); missing {len(res.missing)}, extra {len(res.extra)}"
          + ("  [clocks skewed: informational, the detectors' admission rule decides]" if res.skewed else ""))
    for k in (res.missing + res.extra)[:5]:
        print(f"    differs: {k}")
    print(f"  detectors' admission: stream {res.admission} vs embedded {res.admission_expected}")
    print(f"  drained {res.drain_s:.0f} s after the last fault; {res.wall_s:.0f} s wall in all")
    for n in res.notes:
        print(f"  {n}")
    print("  OK" if res.ok else "  FAILED")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--rate", type=float, default=2000.0, help="events/s published")
    ap.add_argument("--outage", type=float, default=10.0, help="broker stopped this long, this far into the run (0: none)")
    ap.add_argument("--kill-every", type=float, default=20.0, help="seconds between worker kill -9 (0: none)")
    ap.add_argument("--skew-hosts", type=int, default=0)
    ap.add_argument("--skew-h", type=float, default=6.0)
    ap.add_argument("--workdir", type=Path, default=None, help="keep broker, spool and worker logs here")
    ap.add_argument("--duration", type=float, default=0.0, help="keep injecting kills this long (s), after publishing too")
    args = ap.parse_args()
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    res = run(args.hosts, args.days, args.seed, args.rate, args.outage, args.kill_every, args.skew_hosts, args.skew_h,
              workdir=args.workdir, duration_s=args.duration)
    report(res, args)
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
