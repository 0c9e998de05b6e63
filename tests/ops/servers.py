"""Real Prometheus, Alertmanager, a fleetepi exporter and the hook, as test fixtures.

Imported by ``tests/ops/conftest.py``. The session fixture ``ops_stack`` is the
whole chain of the end-to-end test (fleetepi /metrics -> Prometheus with the
shipped rules -> Alertmanager with the shipped routes -> quarantine hook ->
fake kubectl); the dashboard test reuses its Prometheus to run every panel's
PromQL (``ops_stack.prometheus.query(expr)``).

Every process gets a free port on 127.0.0.1, a directory under the test's
tmp, bounded waits, and is terminated (then killed) at the end. Debian ships
Alertmanager as ``prometheus-alertmanager``; both names are looked up.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "tests"
AM_EXAMPLE = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
HOOK_EXAMPLE = REPO / "deploy" / "hook" / "hook.example.yaml"
PROM_EXAMPLE = REPO / "deploy" / "prometheus" / "prometheus.example.yml"

#: Host the recorded stream makes sick (fires FleetepiHostSick).
SICK_HOST = "gpu-017"


# ---------------------------------------------------------------------- binaries and ports
def find_binary(*names: str) -> str | None:
    """First of ``names`` on PATH (Debian: prometheus-alertmanager, upstream: alertmanager)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def require_binary(*names: str) -> str:
    path = find_binary(*names)
    if path is None:
        pytest.fail(f"{' or '.join(names)} not on PATH: run scripts/install-services.sh (make services)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, check: Callable[[], Any], timeout_s: float = 90.0, every_s: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (httpx.HTTPError, OSError, ValueError, KeyError) as exc:
            last_exc = exc
        time.sleep(every_s)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else ""))


@dataclass
class Proc:
    """A started server process with its log file; ``stop()`` terminates, then kills."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    url: str

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def get(self, path: str, **params: Any) -> Any:
        resp = httpx.get(self.url + path, params=params, timeout=5.0)
        resp.raise_for_status()
        return resp.json()


def start_proc(name: str, argv: list[str], workdir: Path, url: str, ready_path: str,
               env: dict[str, str] | None = None, timeout_s: float = 60.0) -> Proc:
    log = workdir / f"{name}.log"
    fh = open(log, "wb")  # noqa: SIM115 - the child owns it
    popen = subprocess.Popen(argv, cwd=workdir, stdout=fh, stderr=subprocess.STDOUT, env=env)
    fh.close()
    proc = Proc(name, popen, log, url)

    def ready() -> bool:
        if popen.poll() is not None:
            pytest.fail(f"{name} exited with {popen.returncode}:\n{proc.log_tail()}")
        return httpx.get(url + ready_path, timeout=2.0).status_code == 200

    try:
        wait_until(f"{name} at {url}{ready_path}", ready, timeout_s=timeout_s, every_s=0.2)
    except BaseException:
        proc.stop()
        raise
    return proc


# ---------------------------------------------------------------------- Prometheus
class Prometheus(Proc):
    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector (``[{"metric": {...}, "value": [ts, "v"]}, ...]``)."""
        body = self.get("/api/v1/query", query=expr)
        if body.get("status") != "success":
            raise ValueError(f"query {expr!r} failed: {body}")
        result = body["data"]["result"]
        return result if isinstance(result, list) else [result]

    def query_range(self, expr: str, start: float, end: float, step_s: float = 1.0) -> list[dict[str, Any]]:
        body = self.get("/api/v1/query_range", query=expr, start=start, end=end, step=step_s)
        if body.get("status") != "success":
            raise ValueError(f"query_range {expr!r} failed: {body}")
        return list(body["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/alerts")["data"]["alerts"])


def prometheus_config(targets: dict[str, str], rule_files: list[Path], alertmanager: str | None,
                      interval_s: float = 1.0) -> dict[str, Any]:
    """A Prometheus config in the shape of deploy/prometheus/prometheus.example.yml, with short intervals."""
    cfg: dict[str, Any] = {
        "global": {"scrape_interval": f"{interval_s:g}s", "evaluation_interval": f"{interval_s:g}s",
                   "scrape_timeout": f"{interval_s:g}s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}
                           for job, target in targets.items()],
    }
    if alertmanager:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return cfg


def start_prometheus(workdir: Path, config: dict[str, Any]) -> Prometheus:
    binary = require_binary("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / "prometheus.yml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    argv = [binary, f"--config.file={cfg_path}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    p = start_proc("prometheus", argv, workdir, f"http://127.0.0.1:{port}", "/-/ready")
    return Prometheus(p.name, p.popen, p.log, p.url)


# ---------------------------------------------------------------------- Alertmanager
def start_alertmanager(workdir: Path, config: dict[str, Any]) -> Proc:
    binary = require_binary("alertmanager", "prometheus-alertmanager")
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / "alertmanager.yml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    argv = [binary, f"--config.file={cfg_path}", f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]
    return start_proc("alertmanager", argv, workdir, f"http://127.0.0.1:{port}", "/-/ready")


def alertmanager_test_config(hook_url: str, token_file: Path, group_wait_s: float = 1.0) -> dict[str, Any]:
    """The shipped example with its routing tree intact, pointed at local ports and fast.

    Only what cannot work on a test machine changes: the hook URL and token
    file, the human receivers (PagerDuty, the ticket bridge) emptied so
    nothing tries the network, and the waits and repeats shortened.
    """
    cfg = yaml.safe_load(AM_EXAMPLE.read_text())
    wait = f"{group_wait_s:g}s"

    def shorten(route: dict[str, Any]) -> None:
        if "group_wait" in route or route is cfg["route"]:
            route["group_wait"] = wait
        route["group_interval"] = wait
        route["repeat_interval"] = f"{2 * group_wait_s:g}s"  # repeats reach the hook within seconds
        for child in route.get("routes", []):
            shorten(child)

    shorten(cfg["route"])
    for recv in cfg["receivers"]:
        if recv["name"] == "quarantine-hook":
            wh = recv["webhook_configs"][0]
            wh["url"] = hook_url
            wh["http_config"]["authorization"]["credentials_file"] = str(token_file)
        else:
            for key in [k for k in recv if k.endswith("_configs")]:
                del recv[key]
    return cfg


# ---------------------------------------------------------------------- fake kubectl / scontrol
def fake_tools(bindir: Path, names: tuple[str, ...] = ("kubectl", "scontrol")) -> Path:
    """Executables that append their argv (one JSON list per line) to ``bindir/<name>.argv``.

    Put ``bindir`` first on PATH: the hook runs them exactly as it would run
    the real tools. ``FAKE_<NAME>_RC`` makes one exit with that code.
    """
    bindir.mkdir(parents=True, exist_ok=True)
    for name in names:
        script = bindir / name
        script.write_text(textwrap.dedent(f"""\
            #!{sys.executable} -IS
            import json, os, sys
            with open({str(bindir / (name + '.argv'))!r}, "a") as fh:
                fh.write(json.dumps(sys.argv) + "\\n")
            print("{name} (fake):", " ".join(sys.argv[1:]))
            sys.exit(int(os.environ.get("FAKE_{name.upper()}_RC", "0")))
            """))
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir


def recorded_argv(bindir: Path, name: str) -> list[list[str]]:
    import json

    path = bindir / f"{name}.argv"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------------- the recorded stream
def sick_host_stream(n_hosts: int = 60, hours: float | None = None, seed: int = 5) -> list[Any]:
    """Contract events of a small fleet in which one host turns sick in the last hour.

    60 hosts in 6 racks (BIOS 2.4 on r06), background crashes of ordinary
    signatures and a trickle of Xid 13 for the detectors' warm-up plus 3 hours,
    then ``SICK_HOST`` crashes ~40 times in the last 45 minutes with odd shapes
    (misaligned stack pointers, bit-flipped addresses, all different
    signatures): the founding case's bad CPU. It is still firing at the end,
    so the exporter keeps ``fleetepi_alert_active{kind="host_spike"}`` up.
    For the other rules and the dashboard's panels it also holds a libunwind
    crash on BIOS 2.4 only (signature_spike + hardware_correlation), an Xid 79
    wave in rack r03 and Xid 13 on ``gpu-044`` (telemetry_spike).
    """
    from fleetepi.contract import Crash, Host, Telemetry
    from fleetepi.detectors import DetectorConfig

    if hours is None:
        hours = DetectorConfig().warmup_s / 3600.0 + 3.0
    rng = random.Random(seed)
    t0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
    hosts = [f"gpu-{i:03d}" for i in range(n_hosts)]
    out: list[Any] = []
    for i, h in enumerate(hosts):
        rack = f"r{i // 10 + 1:02d}"
        out.append(Host(ts=t0, host=h, attributes={"rack": rack, "bios": "2.4" if rack == "r06" else "2.3",
                                                   "gpu_model": "H100", "driver": "550.54"}))
    sigs = [f"SIGABRT | trainer::step{j} | libtorch_cuda.so" for j in range(8)]
    timed: list[tuple[float, Any]] = []
    end_s = hours * 3600.0
    for h in hosts:
        t = rng.expovariate(0.4 / 3600.0)
        while t < end_s:
            timed.append((t, Crash(ts=t0 + timedelta(seconds=t), host=h, signature=rng.choice(sigs), signal="SIGABRT")))
            t += rng.expovariate(0.4 / 3600.0)
        t = rng.expovariate(0.2 / 3600.0)
        while t < end_s:
            timed.append((t, Telemetry(ts=t0 + timedelta(seconds=t), host=h, kind="xid", code=13)))
            t += rng.expovariate(0.2 / 3600.0)
    for k in range(40):
        t = end_s - 2700.0 + k * 65.0
        timed.append((t, Crash(ts=t0 + timedelta(seconds=t), host=SICK_HOST, signal="SIGSEGV",
                               signature=f"SIGSEGV | fn_{k} | libfoo.so", fault_address=f"0x{(1 << 40) + (1 << (k % 40)):x}",
                               shape_flags=["misaligned_sp", "bit_flip_address"], bitflip_score=0.9)))
    # For the dashboard's panels: a libunwind crash living on BIOS 2.4 (rack r06)
    # and an Xid 79 storm in rack r03, both in the last hours.
    for i in range(50, 60):
        for _ in range(4):
            t = end_s - 4 * 3600.0 + rng.uniform(0, 4 * 3600.0 - 60)
            timed.append((t, Crash(ts=t0 + timedelta(seconds=t), host=hosts[i], signal="SIGSEGV",
                                   signature="SIGSEGV | unw_step | libunwind.so.8", fault_class="null_page",
                                   shape_flags=["return_to_null"])))
    for i in range(20, 30):
        for _ in range(4):
            t = end_s - 3600.0 + rng.uniform(0, 3540.0)
            timed.append((t, Telemetry(ts=t0 + timedelta(seconds=t), host=hosts[i], kind="xid", code=79)))
    # and one GPU host throwing Xid 13 (graphics engine exception): an application Xid,
    # a telemetry spike on that host but no evidence of sick hardware, so it must not be
    # quarantined. (A double-bit ECC Xid 48 storm would rightly make the host sick too.)
    for k in range(12):
        t = end_s - 3600.0 + k * 280.0
        timed.append((t, Telemetry(ts=t0 + timedelta(seconds=t), host="gpu-044", kind="xid", code=13, count=3)))
    timed.sort(key=lambda te: te[0])
    out.extend(e for _, e in timed)
    return out


@dataclass
class Exporter:
    """A real fleetepi pipeline (Engine + PipelineMetrics) that ran a stream and keeps serving."""

    url: str
    target: str
    pipeline: Any
    server: Any

    def stop(self) -> None:
        self.server.shutdown()


def start_exporter(events: list[Any] | None = None, prepare: Callable[[Any], None] | None = None) -> Exporter:
    from fleetepi.metrics import PipelineMetrics, serve
    from fleetepi.pipeline import ListAlertSink, Pipeline

    metrics = PipelineMetrics()
    pipe = Pipeline(metrics=metrics, sink=ListAlertSink())
    if prepare is not None:
        prepare(pipe)
    for ev in sick_host_stream() if events is None else events:
        pipe.feed_event(ev)
    pipe.report()
    server = serve(metrics.registry, 0)
    port = server.server_port
    return Exporter(url=f"http://127.0.0.1:{port}/metrics", target=f"127.0.0.1:{port}", pipeline=pipe, server=server)


# ---------------------------------------------------------------------- the hook as a process
HOOK_TOKEN = "e2e-token-3f9a"


def hook_test_config(workdir: Path, **overrides: Any) -> Path:
    """The shipped hook example, acting (not dry run), on local files; returns the config path."""
    cfg = yaml.safe_load(HOOK_EXAMPLE.read_text())
    token_file = workdir / "hook-token"
    token_file.write_text(HOOK_TOKEN + "\n")
    cfg.update(token_file=str(token_file), audit_log=str(workdir / "audit.jsonl"), dry_run=False,
               release_on_resolved=True)
    cfg.pop("token_env", None)
    cfg.update(overrides)
    path = workdir / "hook.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def start_hook(workdir: Path, bindir: Path, config_path: Path) -> Proc:
    """``fleetepi hook`` as its own process, fake kubectl/scontrol first on PATH."""
    port = free_port()
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    fleetepi = Path(sys.executable).with_name("fleetepi")
    argv = [str(fleetepi), "hook", "--config", str(config_path), "--listen", f"127.0.0.1:{port}"]
    return start_proc("hook", argv, workdir, f"http://127.0.0.1:{port}", "/healthz", env=env)


# ---------------------------------------------------------------------- the whole chain
@dataclass
class OpsStack:
    exporter: Exporter
    prometheus: Prometheus
    alertmanager: Proc
    hook: Proc
    bindir: Path
    audit_log: Path
    procs: list[Proc] = field(default_factory=list)


def ops_stack_fixture(tmp: Path) -> Iterator[OpsStack]:
    """Start exporter -> Prometheus -> Alertmanager -> hook; stop all of them afterwards."""
    yield from stack(tmp)


def stack(tmp: Path, events: list[Any] | None = None, am_config: Callable[[str, Path], dict[str, Any]] | None = None,
          hook_overrides: dict[str, Any] | None = None, prepare: Callable[[Any], None] | None = None,
          ) -> Iterator[OpsStack]:
    """The whole chain over ``events`` (the sick-host stream by default).

    :param am_config: ``(hook_url, token_file) -> Alertmanager config``; the shipped one, shortened, by default.
    :param hook_overrides: keys of the hook config to change (``hook_test_config``).
    :param prepare: called with the exporter's ``Pipeline`` before any event (maintenance windows, ...).
    """
    require_binary("prometheus")
    require_binary("alertmanager", "prometheus-alertmanager")
    started: list[Proc] = []
    exporter = start_exporter(events, prepare=prepare)
    try:
        bindir = fake_tools(tmp / "bin")
        hook_cfg = hook_test_config(tmp, **(hook_overrides or {}))
        hook = start_hook(tmp, bindir, hook_cfg)
        started.append(hook)
        make_am = am_config or alertmanager_test_config
        am = start_alertmanager(tmp / "alertmanager", make_am(f"{hook.url}/alerts", tmp / "hook-token"))
        started.append(am)
        prom = start_prometheus(tmp / "prometheus", prometheus_config(
            {"fleetepi": exporter.target, "fleetepi-hook": hook.url.removeprefix("http://")},
            [RULES], am.url.removeprefix("http://")))
        started.append(prom)
        yield OpsStack(exporter, prom, am, hook, bindir, tmp / "audit.jsonl", started)
    finally:
        for p in reversed(started):
            p.stop()
        exporter.stop()


# ---------------------------------------------------------------------- a webhook receiver of the test's own
class Recorder:
    """An HTTP server that keeps every Alertmanager notification POSTed to it, by path (``/page``, ``/ticket``)."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: list[tuple[str, dict[str, Any]]] = []
        lock = threading.Lock()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    received.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def at(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in list(self.received) if p == path]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def incident_alertmanager_config(recorder_url: str, repeat_s: float = 3600.0) -> Callable[[str, Path], dict[str, Any]]:
    """The shipped config, fast, with the pager and ticket receivers sent to a :class:`Recorder`.

    Repeats are an hour apart, so each notification the recorder gets is a
    group (an incident) notified, not a repeat.
    """

    def make(hook_url: str, token_file: Path) -> dict[str, Any]:
        cfg = alertmanager_test_config(hook_url, token_file)

        def slow_repeats(route: dict[str, Any]) -> None:
            route["repeat_interval"] = f"{repeat_s:g}s"
            for child in route.get("routes", []):
                slow_repeats(child)

        slow_repeats(cfg["route"])
        for recv in cfg["receivers"]:
            if recv["name"] == "fleet-sre-page":
                recv["webhook_configs"] = [{"url": f"{recorder_url}/page", "send_resolved": False}]
            elif recv["name"] == "fleet-sre-ticket":
                recv["webhook_configs"] = [{"url": f"{recorder_url}/ticket", "send_resolved": False}]
        return cfg

    return make


__all__ = [
    "HOOK_TOKEN",
    "SICK_HOST",
    "OpsStack",
    "Prometheus",
    "Proc",
    "Recorder",
    "alertmanager_test_config",
    "fake_tools",
    "find_binary",
    "free_port",
    "hook_test_config",
    "incident_alertmanager_config",
    "ops_stack_fixture",
    "prometheus_config",
    "recorded_argv",
    "require_binary",
    "sick_host_stream",
    "stack",
    "start_alertmanager",
    "start_exporter",
    "start_hook",
    "start_prometheus",
    "wait_until",
]
