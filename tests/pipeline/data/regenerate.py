"""Re-make the golden files of tests/pipeline/test_golden.py.

    .venv/bin/python tests/pipeline/data/regenerate.py            # golden alerts from the recorded events
    .venv/bin/python tests/pipeline/data/regenerate.py --events   # also re-record the events (simulator)

Run the first form when a detector change is *meant* to change the alerts,
and review the diff of recorded.alerts.jsonl like code: every line is an
alert an on-call engineer would get. The events are a fixed recording and
only change with --events.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

from fleetepi.contract import encode, format_ts
from fleetepi.pipeline import ListAlertSink, Pipeline

HERE = Path(__file__).parent
EVENTS = HERE / "recorded.jsonl.gz"
ALERTS = HERE / "recorded.alerts.jsonl"
#: Bad lines mixed into the recording (after these line numbers) so that the golden run
#: also proves they are skipped without changing any alert.
#: ``{ts}`` is the time of the event before, so only the intended reason applies.
BAD_LINES = {
    100: '{{"schema":"fleetepi.crash/v1","ts":"{ts}","host":"dc1-r01-n01","signa',
    2000: '{{"schema":"fleetepi.crash/v9","ts":"{ts}","host":"x","signature":"y"}}',
    4000: '{{"schema":"fleetepi.crash/v1","ts":"{ts}","host":"never-announced","signature":"z!z"}}',
}


def record_events() -> None:
    from fleetepi.simulate import SimConfig, simulate

    sim = simulate(SimConfig(hosts=100, days=2, seed=3))
    lines = []
    for i, ev in enumerate(sim.events(), 1):
        lines.append(encode(ev))
        if i in BAD_LINES:
            lines.append(BAD_LINES[i].format(ts=format_ts(ev.ts)).encode())
    EVENTS.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0))


def golden_alerts() -> None:
    sink = ListAlertSink()
    pipe = Pipeline(sink=sink)
    with gzip.open(EVENTS, "rb") as fh:
        pipe.run(fh)
    pipe.finish()
    ALERTS.write_bytes(b"".join(encode(a) + b"\n" for a in sink.alerts))
    print(f"{len(sink.alerts)} alerts -> {ALERTS.name}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", action="store_true", help="re-record the events from the simulator first")
    if ap.parse_args().events or not EVENTS.exists():
        record_events()
    golden_alerts()
