"""FAULTS (issue 10), compressed for CI: the broker stopped and restarted mid-stream under the agent's
publisher and a worker, and the worker killed -9 twice; every event delivered, alerts as undisturbed.

``bench/faults.py`` is the same run at full length (10-minute outage, a kill
every few minutes for 30 minutes at 5,000 events/s), by hand.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

_spec = importlib.util.spec_from_file_location("fleetepi_bench_faults", Path(__file__).resolve().parents[2] / "bench" / "faults.py")
assert _spec is not None and _spec.loader is not None
faults = importlib.util.module_from_spec(_spec)
sys.modules["fleetepi_bench_faults"] = faults
_spec.loader.exec_module(faults)


def test_broker_outage_and_worker_kills_lose_nothing_and_change_no_alert(tmp_path):
    res = faults.run(hosts=300, days=2.0, seed=5, rate=3000.0, outage_s=5.0, kill_every_s=6.0, skew_hosts=0,
                     workdir=tmp_path)
    summary = f"faults {res.faults}; notes {res.notes}; missing {res.missing[:5]}; extra {res.extra[:5]}"
    assert any("broker stopped" in f for f in res.faults) and any("killed" in f for f in res.faults), summary
    assert res.dropped == 0 and res.lost == 0, summary
    assert res.records_out - res.duplicates == res.events_in, summary
    assert res.alerts_expected > 0 and not res.missing and not res.extra, summary
