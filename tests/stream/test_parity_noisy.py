"""PARITY on a busy fleet (issue 9): the noisy preset, 300 hosts x 5 days, through one and two workers.

The shared recording of the other stream tests is the classic fleet over two
days. This one has what makes a fleet hard to keep in step: ~5 crashes per
host-day, crash loops, job-wide aborts, chronic hosts, static associations,
roll-outs and every outbreak template, so host peers, the cohort family
and the burst caps all carry state across partitions. With default settings
the workers must fire the same alerts (kind and entity) as ``fleetepi
replay``, each within one evaluation step.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import PARTITIONS, closing_events, last_boundary, replay_alerts

#: ``HOSTSxDAYS`` to run the same test on a larger recording by hand (``2000x14``: the issue's 2,000 hosts
#: over two weeks, ~2.2 million events, about a quarter of an hour): CI runs the issue's 300 hosts x 5 days.
FLEET_ENV = "FLEETEPI_PARITY_FLEET"
_hosts, _, _days = os.environ.get(FLEET_ENV, "300x5").partition("x")

#: The issue's recording: 300 hosts, 5 days of the noisy preset (a seed outside the detection benchmark's).
NOISY = {"preset": "noisy", "seed": 7, "hosts": int(_hosts), "days": float(_days)}
#: Seconds the workers get to drain it: 7 minutes, or ~2,000 of its ~80 events per host-day a second.
DRAIN_S = max(420.0, int(_hosts) * float(_days) * 80 / 2000.0)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(int(DRAIN_S) + 180)]


@pytest.fixture(scope="module")
def noisy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fleetepi.contract import encode
    from fleetepi.simulate import preset, simulate, write_jsonl

    path = tmp_path_factory.mktemp("stream-noisy") / "noisy.jsonl"
    cfg = dataclasses.replace(preset(NOISY["preset"], NOISY["seed"]), hosts=NOISY["hosts"], days=NOISY["days"])
    sim = simulate(cfg)
    write_jsonl(sim, path)
    with open(path, "ab") as fh:
        for e in closing_events(sim.events(), sim.end_ms, PARTITIONS):
            fh.write(encode(e) + b"\n")
    return path


@pytest.fixture(scope="module")
def noisy_replayed(noisy_file: Path) -> list[Any]:
    return replay_alerts(noisy_file)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_busy_fleet_fires_the_same_alerts_through_the_workers(stream_env: Any, noisy_file: Path,
                                                                noisy_replayed: list[Any], assert_parity: Any,
                                                                workers: int) -> None:
    kinds = {a.kind for a in noisy_replayed if a.state == "firing"}
    assert {"signature_spike", "hardware_correlation", "host_spike", "telemetry_spike"} <= kinds, kinds
    env = stream_env
    env.create_topics(partitions=PARTITIONS)
    started = [env.start_worker(f"w{i}") for i in range(workers)]
    env.wait_for(lambda: all(w.status() is not None for w in started), what="workers up")
    env.publish(noisy_file)
    env.wait_for(lambda: env.drained() and env.decided(last_boundary(noisy_file)), timeout_s=DRAIN_S,
                 what=f"{workers} worker(s) to drain the noisy recording and decide its last boundary")
    assert_parity(noisy_replayed, env.alerts())
