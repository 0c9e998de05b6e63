"""``fleetepi report``: one self-contained HTML file that a real browser renders offline without errors.

The browser is Debian's ``chromium`` (scripts/install-services.sh installs
it), run headless with networking off: the page must need nothing from the
network. Console errors are read from Chromium's log on stderr. Set
``FLEETEPI_UPDATE_SCREENSHOTS=1`` to refresh docs/images/report.png from this
test's screenshot.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fleetepi.report.build import ReportOptions, build_report
from fleetepi.report.locate import find_places

from .conftest import FLEETEPI, FleetArchive

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=8000"]


def _chromium(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    assert CHROMIUM, "chromium is not installed: run scripts/install-services.sh"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def report(fleet_archive: FleetArchive, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    proc = subprocess.run([FLEETEPI, "report", "--archive", str(fleet_archive.path), "-o", str(out),
                           "--title", "fleetepi report: simulated fleet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_report_is_one_self_contained_file(report: Path, fleet_archive: FleetArchive) -> None:
    html = report.read_text()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"http", html)  # nothing fetched
    assert "Plotly.newPlot" in html and "plotly.js" in html.lower()
    o = next(o for o in fleet_archive.truth if o.template == "signature_spike/new")
    assert o.signature in html  # the libunwind race raised alerts: it gets a section
    for section in ("what-changed", "founding", "alerts", "sig1", "heat", "silicon", "hardware"):
        assert f"id='{section}'" in html


def test_chromium_renders_it_offline_without_errors(report: Path, tmp_path: Path) -> None:
    proc = _chromium(report, tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert dom.count('class="plot-container plotly"') >= 8  # Plotly drew every figure
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    errors = [line for line in console if re.search(r"error|uncaught|failed", line, re.I)]
    assert not errors, errors
    shot = tmp_path / "report.png"
    proc = _chromium(report, tmp_path, "--window-size=1400,2600", f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.stat().st_size > 50_000
    if os.environ.get("FLEETEPI_UPDATE_SCREENSHOTS"):
        shutil.copy(shot, ROOT / "docs" / "images" / "report.png")


def test_places_are_found_from_nesting_not_names(report: Path) -> None:
    """Renamed keys (no 'datacenter', no 'rack') are found the same way."""
    hosts = [{"site": f"s{i % 3}", "row": f"s{i % 3}-row{i % 12}", "model": "A" if i % 24 < 12 else "B",
              "kernel": f"k{i % 5}"} for i in range(240)]
    places = find_places(hosts)
    assert (places.coarse, places.fine) == ("site", "row")


def test_report_options_override_places(fleet_archive: FleetArchive, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = build_report(fleet_archive.path, out, ReportOptions(by="rack", heat=("gpu_model", "bios"), top=2))
    assert r.by == "rack" and r.heat == ("gpu_model", "bios") and len(r.signatures) == 2
    assert "stacked by rack" in out.read_text()
