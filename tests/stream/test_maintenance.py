"""A worker takes maintenance windows from a file and from a real Alertmanager's silences.

Silences live in wall time (Alertmanager moves a start in the past to the
moment it is created), so this test dates its events from now on: what a
live worker sees.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from devbroker import free_port

from fleetepi.contract import Host, Telemetry, encode, format_ts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _alertmanager(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")
    if binary is None:
        pytest.fail("alertmanager not on PATH: run scripts/install-services.sh (make services)")
    cfg = tmp / "am.yml"
    cfg.write_text("route: {receiver: nobody}\nreceivers: [{name: nobody}]\n")
    port = free_port()
    proc = subprocess.Popen([binary, f"--config.file={cfg}", f"--storage.path={tmp / 'am-data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("alertmanager did not start")


def test_worker_drops_events_of_hosts_in_file_windows_and_in_silences(stream_env: Any, tmp_path: Path) -> None:
    am, am_url = _alertmanager(tmp_path)
    try:
        now = datetime.now(UTC).replace(microsecond=0)
        r = httpx.post(am_url + "/api/v2/silences", timeout=5, json={
            "matchers": [{"name": "host", "value": "h2", "isRegex": False, "isEqual": True}],
            "startsAt": format_ts(now), "endsAt": format_ts(now + timedelta(hours=3)),
            "createdBy": "dcops", "comment": "planned reboot of h2"})
        assert r.status_code == 200, r.text
        t0 = now + timedelta(seconds=30)  # after the silence's start (Alertmanager makes it "now")
        mfile = tmp_path / "maintenance.yaml"
        mfile.write_text(f"windows:\n  - hosts: [h1]\n    start: {format_ts(t0)}\n"
                         f"    end: {format_ts(t0 + timedelta(hours=3))}\n    reason: reboot\n")
        env = stream_env
        env.create_topics(partitions=2)
        w = env.start_worker("w", extra=["--idle-release", "1", "--maintenance", str(mfile),
                                         "--alertmanager", am_url, "--maintenance-refresh", "1"])
        env.wait_for(lambda: w.status() is not None, what="worker up")
        hosts = ["h1", "h2", "h3"]
        env.produce_raw(env.names.hosts, [(h.encode(), encode(Host(ts=t0, host=h, attributes={"rack": "r1"})))
                                          for h in hosts])
        reports = [(h.encode(), encode(Telemetry(ts=t0 + timedelta(minutes=2 * m), host=h, kind="ecc_corrected",
                                                 count=3)))
                   for m in range(1, 41) for h in hosts]
        cool = [(h.encode(), encode(Telemetry(ts=t0 + timedelta(minutes=100), host=h, kind="thermal", value=50.0)))
                for h in hosts]
        env.produce_raw(env.names.telemetry, reports + cool)

        def folded() -> bool:
            return bool(w.counts()["detectors"].get("telemetry_host"))

        env.wait_for(folded, timeout_s=90, what="the reports to be folded")
        # h1 (file) and h2 (silence) are out: neither cases nor baselines; h3's reports count
        assert w.counts()["detectors"]["telemetry_host"] == {"h3|ecc_corrected": 120.0}
        assert w.status()["engine_flags"]["in_maintenance"] == 80
        text = w.metrics_text()
        assert "fleetepi_events_in_maintenance_total 80.0" in text
        assert "fleetepi_maintenance_windows 2.0" in text
    finally:
        am.terminate()
        am.wait(timeout=10)
