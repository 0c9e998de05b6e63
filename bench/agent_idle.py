"""Benchmark: the node agent at rest (CPU % of one core, RSS) and under a log flood.

Targets (issue 4): idle < 1 % of a core and < 60 MB RSS. Runs the real
``fleetepi agent`` as a subprocess for ``--seconds`` (default 30) with the
fixture sources of the tests (EDAC, hwmon, DMI trees under
``tests/agents/data/sysfs``, a log file, this host's ``/dev/kmsg`` when
readable; NVML is off on hosts without a GPU), metrics served on a free
port, output to a JSON-lines file; reads utime+stime and VmRSS/VmHWM from
``/proc``. Baseline in the same run: a bare ``python3 -c 'sleep'`` and a
process that only imports what the agent imports.

Then, in-process: kernel-log lines per second through parse + dedup for a
flood of one Xid line (the 800k-line report) and for the real lines of
``tests/agents/data/xid.txt``.

    .venv/bin/python bench/agent_idle.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "agents" / "data"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(cmd: list[str], seconds: float, warmup_s: float = 3.0) -> tuple[float, float, float]:
    """(CPU % of one core, RSS MB, peak RSS MB) of a process after its start-up."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(warmup_s)
        if proc.poll() is not None:
            raise SystemExit(f"{cmd[0]} exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        return 100.0 * (c1 - c0) / (t1 - t0), rss_mb(proc.pid), rss_mb(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def config(tmp: Path) -> Path:
    import yaml

    log = tmp / "kern.log"
    log.write_text("[  170.053881] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013, engmask 00000101, intr 10000000\n")
    sources = [
        {"kind": "inventory", "dmi_root": str(DATA / "sysfs" / "dmi" / "id"), "cpuinfo": str(DATA / "sysfs" / "cpuinfo")},
        {"kind": "logfile", "path": str(log)},
        {"kind": "edac", "root": str(DATA / "sysfs" / "edac" / "mc")},
        {"kind": "hwmon", "root": str(DATA / "sysfs" / "hwmon")},
        {"kind": "nvml"},
        # application output (issue 12): a glob of job logs with a state file, and journald units
        {"kind": "applog", "paths": [str(tmp / "jobs" / "*" / "rank*.log")], "job_pattern": r"/jobs/(?P<job>[^/]+)/",
         "state_path": str(tmp / "applog.json")},
        {"kind": "appjournal", "units": ["train.service"], "state_path": str(tmp / "appjournal.json")},
    ]
    (tmp / "jobs" / "exp-1").mkdir(parents=True)
    (tmp / "jobs" / "exp-1" / "rank0.log").write_text("step 1 loss 0.5\n")
    if os.access("/dev/kmsg", os.R_OK):
        sources.append({"kind": "kmsg"})
    cfg = {"host": "bench-host", "labels": {"rack": "r1"}, "metrics": {"port": free_port()}, "sources": sources}
    path = tmp / "agent.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def flood_rate(n: int = 200_000) -> tuple[float, float]:
    sys.path.insert(0, str(ROOT))
    from fleetepi.agents.telemetry.kmsg import FakeLogSource, KernelLogSource

    line = "[{:>12.6f}] NVRM: Xid (PCI:0000:cb:00): 13, pid=1797828, name=pt_main_thread, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
    src = KernelLogSource("h", FakeLogSource(line.format(100 + i * 1e-5) for i in range(n)), max_lines_per_poll=n)
    t = time.perf_counter()
    events = list(src.poll(0)) + src.drain(1)
    flood = n / (time.perf_counter() - t)
    assert sum(e.n for e in events) == n and len(events) == 2
    real = [row.partition("\t")[2] for row in (DATA / "xid.txt").read_text().splitlines()] * 200
    src = KernelLogSource("h", FakeLogSource(real), max_lines_per_poll=len(real))
    t = time.perf_counter()
    list(src.poll(0))
    return flood, len(real) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    py = sys.executable
    fleetepi = str(Path(py).parent / "fleetepi")
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(Path(tmp))
        bare = measure([py, "-c", "import time; time.sleep(3600)"], 5.0, 1.0)
        imports = measure([py, "-c", "import time, fleetepi.agents.agent, fleetepi.agents.cli, fleetepi.agents.publish.jsonl, "
                                     "fleetepi.agents.telemetry.kmsg, fleetepi.agents.telemetry.edac, fleetepi.agents.telemetry.hwmon, "
                                     "fleetepi.agents.inventory, fleetepi.agents.applog.sources, prometheus_client, yaml;"
                                     " time.sleep(3600)"], 5.0, 2.0)
        agent = measure([fleetepi, "agent", "--config", str(cfg), "--output", str(Path(tmp) / "events.jsonl")], args.seconds)
    print(f"{'process':<28}{'CPU % of a core':>16}{'RSS MB':>10}{'peak RSS MB':>13}")
    for name, (cpu, rss, hwm) in (("python3 sleep (baseline)", bare), ("agent imports only", imports), ("fleetepi agent (idle)", agent)):
        print(f"{name:<28}{cpu:>16.2f}{rss:>10.1f}{hwm:>13.1f}")
    print(f"agent RSS / bare interpreter: {agent[1] / bare[1]:.1f}x; agent RSS - imports: {agent[1] - imports[1]:+.1f} MB")
    print(f"targets: CPU < 1 %: {'ok' if agent[0] < 1 else 'MISSED'}; RSS < 60 MB: {'ok' if agent[1] < 60 else 'MISSED'}")
    flood, real = flood_rate()
    print(f"kernel-log parse + dedup: flood of one Xid line {flood:,.0f} lines/s; real xid.txt lines {real:,.0f} lines/s")


if __name__ == "__main__":
    main()
