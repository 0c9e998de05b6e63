"""The README's live-pipeline commands, run verbatim and in order on a fresh clone.

A README whose commands fail as written is the first thing a new user
meets. The block under "The live pipeline on one machine" is read from the
README itself (not copied here), so editing it re-tests it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import devbroker
import pytest

ROOT = Path(__file__).resolve().parents[1]


def live_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The live pipeline on one machine", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: no sh block under 'The live pipeline on one machine'"
    return [ln for ln in block.group(1).splitlines() if ln.strip()]


@pytest.mark.integration
def test_readme_live_commands_run_verbatim(tmp_path: Path) -> None:
    lines = live_block()
    assert [ln.split()[1] for ln in lines[:5]] == ["simulate", "dev", "publish", "worker", "alerts"]
    assert devbroker.port_is_free(9092), "port 9092 is taken: the README's broker cannot start as written"
    clone = tmp_path / "clone"
    if (ROOT / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    else:
        shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".venv", ".cache"))
    # a fresh broker state, but the jars already installed by scripts/install-services.sh
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "kafka").symlink_to(devbroker.cache_root() / "kafka")
    env = {**os.environ, "FLEETEPI_CACHE": str(cache), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    # output to files, not pipes: the backgrounded worker (and, on a failure, the broker) would hold
    # a pipe open after the script ends
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with out_path.open("w") as out_f, err_path.open("w") as err_f:
        proc = subprocess.Popen(["bash", "-c", script], cwd=clone, env=env, stdout=out_f, stderr=err_f,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=540)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever the script left running (the worker on a failure)
            proc.wait()
            subprocess.run([str(Path(sys.executable).parent / "fleetepi"), "dev", "kafka", "stop"], env=env,
                           capture_output=True, check=False, timeout=120)
    run = subprocess.CompletedProcess(proc.args, proc.returncode, out_path.read_text(), err_path.read_text())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "running" in run.stdout and "127.0.0.1:9092" in run.stdout        # dev kafka start said where
    firing = [ln for ln in run.stdout.splitlines() if "firing" in ln]
    assert len(firing) >= 3, run.stdout[-3000:]
    assert all(" page " in ln or "ticket" in ln for ln in firing)
