"""The systemd units of deploy/systemd/ (bare metal / Slurm): they parse, verify, and ask for little.

``systemd-analyze verify`` needs the ExecStart binary to exist, so the units
are checked on a copy whose /opt/fleetepi/bin/fleetepi points at this
checkout's ``fleetepi``. Each ExecStart command line (with the example
environment file's values) is parsed by the real click command, so a flag the
CLI does not have fails here, not on a host at 3 a.m.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "deploy" / "systemd"
INSTALLED_BIN = "/opt/fleetepi/bin/fleetepi"
COMPONENTS = ("agent", "worker", "hook")


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values (systemd allows repeated keys; ``\\`` continues a line)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path.name}:{n}: not KEY=VALUE inside a section: {line!r}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def env_example() -> dict[str, str]:
    env = {}
    for line in (UNITS / "fleetepi.env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def unit(component: str) -> dict[str, dict[str, list[str]]]:
    return parse_unit(UNITS / f"fleetepi-{component}.service")


@pytest.mark.parametrize("component", COMPONENTS)
def test_unit_parses_and_runs_fleetepi_as_a_system_user(component: str) -> None:
    u = unit(component)
    assert set(u) == {"Unit", "Service", "Install"}
    svc = u["Service"]
    (exec_start,) = svc["ExecStart"]
    argv = shlex.split(exec_start)
    assert argv[:2] == [INSTALLED_BIN, component]
    assert svc["User"] == ["fleetepi"] and svc["NoNewPrivileges"] == ["yes"]
    assert svc["ProtectSystem"] == ["strict"] and svc["Restart"] == ["always"]
    assert u["Install"]["WantedBy"] == ["multi-user.target"]


@pytest.mark.parametrize("component", COMPONENTS)
def test_exec_start_flags_exist_in_the_cli(component: str) -> None:
    """Expand ${VAR}/$VAR with the example env file and let the real click command parse the argv."""
    from deploycheck import parse_command_line

    env = dict(env_example())
    svc = unit(component)["Service"]
    for assignment in svc.get("Environment", []):
        for pair in shlex.split(assignment):
            key, _, value = pair.partition("=")
            env.setdefault(key, value)
    (exec_start,) = svc["ExecStart"]
    # systemd: ${VAR} is one word, $VAR alone splits on whitespace (empty -> no word).
    words: list[str] = []
    for word in shlex.split(exec_start)[1:]:
        m = re.fullmatch(r"\$([A-Z_]+)", word)
        if m:
            words.extend(env.get(m.group(1), "").split())
        else:
            words.append(re.sub(r"\$\{([A-Z_]+)\}", lambda mm: env[mm.group(1)], word))
    parse_command_line(component, words[1:])


def test_agent_has_exactly_the_two_capabilities_it_needs() -> None:
    svc = unit("agent")["Service"]
    for key in ("AmbientCapabilities", "CapabilityBoundingSet"):
        assert sorted(" ".join(svc[key]).split()) == ["CAP_DAC_READ_SEARCH", "CAP_SYSLOG"]
    assert svc["ReadWritePaths"] == ["/var/lib/fleetepi"]
    assert "/dev/kmsg r" in svc["DeviceAllow"] and svc["DevicePolicy"] == ["closed"]


@pytest.mark.parametrize("component", ["worker", "hook"])
def test_worker_and_hook_have_no_capabilities(component: str) -> None:
    svc = unit(component)["Service"]
    assert svc["CapabilityBoundingSet"] == [""] and svc["AmbientCapabilities"] == [""]
    assert svc["PrivateDevices"] == ["yes"]


def test_agent_example_config_passes_the_agents_validation() -> None:
    import yaml

    from fleetepi.agents.config import parse_config

    cfg = parse_config(yaml.safe_load((UNITS / "agent.yaml.example").read_text()), host="gpu-017")
    assert cfg.publish.spool_dir.startswith("/var/lib/fleetepi/")
    assert {s.kind for s in cfg.sources} >= {"inventory", "kmsg", "coredir"}


@pytest.fixture(scope="module")
def runnable_units(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Copies of the units whose ExecStart points at this checkout's fleetepi."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed (the parse tests above still ran)")
    fleetepi = Path(sys.executable).with_name("fleetepi")
    assert fleetepi.exists(), f"{fleetepi} missing: pip install -e ."
    out = tmp_path_factory.mktemp("units")
    for path in UNITS.glob("*.service"):
        (out / path.name).write_text(path.read_text().replace(INSTALLED_BIN, str(fleetepi)))
    return out


@pytest.mark.parametrize("component", COMPONENTS)
def test_systemd_analyze_verify(runnable_units: Path, component: str) -> None:
    path = runnable_units / f"fleetepi-{component}.service"
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    # verify prints warnings (unknown keys, bad values) without failing on all of them.
    assert path.name not in proc.stderr, proc.stderr


@pytest.mark.parametrize("component", COMPONENTS)
def test_systemd_analyze_security_exposure_is_low(runnable_units: Path, component: str) -> None:
    """systemd's own sandboxing score (0 = locked down, 10 = exposed); 'OK' is below 5."""
    path = runnable_units / f"fleetepi-{component}.service"
    proc = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(path)],
                          capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout + proc.stderr)
    if m is None:
        pytest.skip(f"this systemd-analyze has no offline security scoring: {proc.stderr.strip()[:200]}")
    assert float(m.group(1)) < 5.0, proc.stdout
