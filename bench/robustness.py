"""Seeded fuzzing of every entry point that takes outside input: how robust is fleetepi, in figures.

Mutations of *real* inputs (lines of ``/work/shared/data/logs`` and
``tests/agents/data``, the recorded stream ``tests/pipeline/data/recorded.jsonl.gz``,
cores of real programs crashed here, the shipped configs, Alertmanager
payloads and whole HTTP requests) are fed to:

================  ==============================================================
replay_lines      ``Pipeline.feed_line`` (``fleetepi replay``), the recorded stream with mutants mixed in
kafka_messages    the worker's decode path: ``decode_event``, then the dead letter of a rejection
kernel_log        ``KernelLogSource.poll`` over mutated kernel-log lines
cores             ``CoreAnalyzer.analyze`` and ``core-handler`` (subprocesses: a core can take a worker down)
configs           the agent, detector (replay/worker/demo) and hook config loaders
hook_http         the hook's handler in-process (bodies) and a real ``HookServer`` over sockets (requests)
big_inputs        a few inputs of <= 1 MiB compressed that expand a lot, each in a fresh process (peak RSS)
================  ==============================================================

For each: inputs tried, accepted, cleanly rejected (by reason), crashes
(tracebacks, first ones printed), hangs (> 5 s for one input), the slowest
input, events produced that fail the contract's JSON Schemas (every one is
validated), and events lost (an input that is neither accepted nor counted
as rejected). Targets (issue 10): 0 tracebacks, 0 hangs, 0 invalid events,
0 lost, peak RSS < 300 MB for any single input.

Usage::

    .venv/bin/python bench/robustness.py --budget 1000000          # the full run (hours on 2 cores)
    .venv/bin/python bench/robustness.py --budget 20000 --only kernel_log,configs
    .venv/bin/python bench/robustness.py --kernel-log-speed        # lines/s on hostile lines

``tests/test_robustness.py`` runs the same fuzzers with a small budget in CI.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED_LOGS = Path(os.environ.get("FLEETEPI_SHARED", "/work/shared")) / "data" / "logs"
HANG_S = 5.0
#: Share of the budget per entry point (cores are ~1,000x dearer than a line).
SHARES = {"replay_lines": 0.30, "kafka_messages": 0.25, "kernel_log": 0.30, "configs": 0.06, "hook_http": 0.085,
          "cores": 0.005}


# ------------------------------------------------------------------------------------------- tally
@dataclass
class Tally:
    """What one entry point did with its inputs."""

    name: str
    tried: int = 0
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    crashes: list[tuple[str, bytes]] = field(default_factory=list)
    hangs: list[tuple[float, bytes]] = field(default_factory=list)
    events: int = 0
    invalid_events: list[str] = field(default_factory=list)
    lost: int = 0
    slowest_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    notes: list[str] = field(default_factory=list)

    def timed(self, data: bytes, seconds: float) -> None:
        self.slowest_s = max(self.slowest_s, seconds)
        if seconds > HANG_S:
            self.hangs.append((seconds, data[:300]))

    def crash(self, data: bytes) -> None:
        self.crashes.append((traceback.format_exc(), data[:300]))

    @property
    def ok(self) -> bool:
        return not (self.crashes or self.hangs or self.invalid_events or self.lost)


# ------------------------------------------------------------------------------------------- mutation
INTERESTING_NUMBERS = [b"-1", b"0", b"18446744073709551616", b"-9223372036854775809", b"1e308", b"NaN", b"9" * 400,
                       b"3.14", b"true", b"null", b'"7"']
INTERESTING_BYTES = b'\x00\xff\x7f\x80"[]{}\\\n\r:,'
INSERTS = [b"[/x]", b"[bold red]", b"\x1b[31m", b"\r\n", b"\xef\xbb\xbf", b"\xc3\x28", b"\xed\xa0\x80", b"\\u0000",
           b"\\ud800", b"%s%n", b"{host.__class__}", b"../../etc/passwd", b"$(reboot)", b"\t", b"\x00"]


class Mutator:
    """Seeded mutations of real inputs: flips, splices, numbers, nesting, markup, repeats, cuts."""

    def __init__(self, seed: int, corpus: list[bytes], max_len: int = 1 << 16) -> None:
        self.rng = random.Random(seed)
        self.corpus = corpus
        self.max_len = max_len

    def pick(self) -> bytes:
        return self.rng.choice(self.corpus)

    def mutate(self, data: bytes | None = None) -> bytes:
        rng = self.rng
        buf = bytearray(self.pick() if data is None else data)
        for _ in range(rng.choice((1, 1, 2, 3, 4))):
            op = rng.randrange(12)
            n = len(buf)
            i = rng.randrange(n + 1)
            if op == 0 and n:  # bit flip
                buf[min(i, n - 1)] ^= 1 << rng.randrange(8)
            elif op == 1 and n:  # interesting byte
                buf[min(i, n - 1)] = rng.choice(INTERESTING_BYTES)
            elif op == 2:  # random bytes
                buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            elif op == 3 and n:  # delete a range
                j = min(n, i + rng.randint(1, 64))
                del buf[i:j]
            elif op == 4 and n:  # duplicate a range, sometimes many times
                j = min(n, i + rng.randint(1, 32))
                buf[i:i] = bytes(buf[i:j]) * rng.choice((1, 2, 10, 100))
            elif op == 5:  # splice with another real input
                other = self.pick()
                a = rng.randrange(len(other) + 1)
                buf[i:i] = other[a:a + rng.randint(1, 200)]
            elif op == 6:  # a number where one was
                digits = [k for k in range(n) if 48 <= buf[k] <= 57]
                if digits:
                    k = rng.choice(digits)
                    e = k
                    while e < n and 48 <= buf[e] <= 57:
                        e += 1
                    buf[k:e] = rng.choice(INTERESTING_NUMBERS)
            elif op == 7:  # nest
                depth = rng.choice((2, 50, 1_000, 5_000))
                buf[i:i] = b"[" * depth + b"]" * depth
            elif op == 8:  # markup, control characters, bad UTF-8
                buf[i:i] = rng.choice(INSERTS)
            elif op == 9 and n:  # cut
                del buf[rng.randrange(n):]
            elif op == 10 and rng.random() < 0.05:  # a long line of a repeated piece
                piece = bytes(buf[i:i + rng.randint(1, 4)]) or b"a["
                buf[i:i] = piece * (rng.choice((4_000, 40_000)) // len(piece))
            elif op == 11 and n:  # swap two bytes
                j = rng.randrange(n)
                k = min(i, n - 1)
                buf[k], buf[j] = buf[j], buf[k]
        return bytes(buf[: self.max_len * 4])


# ------------------------------------------------------------------------------------------- contract
class Contract:
    """The normative JSON Schemas, validating every event an entry point produced."""

    def __init__(self) -> None:
        import jsonschema

        schemas = ROOT / "fleetepi" / "contract" / "schemas"
        self._validators = {}
        for name in ("host", "crash", "telemetry", "alert"):
            schema = json.loads((schemas / f"{name}.schema.json").read_text())
            cls = jsonschema.validators.validator_for(schema)
            self._validators[f"fleetepi.{name}/v1"] = cls(schema, format_checker=jsonschema.FormatChecker())

    def problem(self, raw: bytes) -> str | None:
        """None when ``raw`` (one encoded message) is valid against its schema; else why not."""
        try:
            msg = json.loads(raw)
            validator = self._validators[msg["schema"]]
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            return f"not a contract message: {exc}"
        err = next(iter(validator.iter_errors(msg)), None)
        return None if err is None else f"{err.message} at {list(err.absolute_path)}"


# ------------------------------------------------------------------------------------------- corpora
def recorded_lines() -> list[bytes]:
    return gzip.decompress((ROOT / "tests/pipeline/data/recorded.jsonl.gz").read_bytes()).splitlines()


def kernel_lines() -> list[bytes]:
    out: list[bytes] = []
    for f in sorted(SHARED_LOGS.glob("*.txt")) + sorted((ROOT / "tests/agents/data").glob("*.txt")):
        for row in f.read_bytes().splitlines():
            if row and not row.startswith(b"#"):
                out.append(row.split(b"\t", 1)[-1])
    return out


def config_corpus() -> dict[str, list[bytes]]:
    import yaml

    from fleetepi.detectors import DetectorConfig

    detectors = yaml.safe_dump({k: list(v) if isinstance(v, tuple) else v
                                for k, v in __import__("dataclasses").asdict(DetectorConfig()).items()}).encode()
    return {
        "agent": [(ROOT / "docs/agent.example.yaml").read_bytes(), (ROOT / "deploy/systemd/agent.yaml.example").read_bytes()],
        "detectors": [detectors, b"sig_alpha: 1.0e-6\nsig_windows_s: [3600, 21600]\n"],
        "hook": [(ROOT / "deploy/hook/hook.example.yaml").read_bytes()],
    }


def webhook_bodies() -> list[bytes]:
    import orjson

    def alert(host: str, status: str, fp: str) -> dict[str, Any]:
        return {"status": status, "fingerprint": fp, "labels": {"alertname": "FleetepiHostSick", "host": host,
                "severity": "page", "kind": "host_spike"}, "annotations": {"summary": f"Host {host} is sick"},
                "startsAt": "2026-03-02T08:15:00Z", "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://p/g"}

    out = []
    for i in range(4):
        alerts = [alert(f"gpu-{i:03d}", "firing", f"fp{i}"), alert(f"gpu-{i + 10:03d}", "resolved", f"fq{i}")]
        out.append(orjson.dumps({"version": "4", "status": "firing", "receiver": "quarantine-hook", "groupKey": "{}:{}",
                                 "truncatedAlerts": 0, "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
                                 "externalURL": "http://alertmanager:9093", "alerts": alerts}))
    return out


# ------------------------------------------------------------------------------------------- entry points
def fuzz_replay_lines(budget: int, seed: int, contract: Contract) -> Tally:
    """The recorded stream with mutants mixed in: every line accepted or counted, every alert valid."""
    from fleetepi.contract import encode
    from fleetepi.pipeline import ListAlertSink, Pipeline

    t = Tally("replay_lines")
    real = recorded_lines()
    mut = Mutator(seed, real)
    rng = random.Random(seed + 1)
    cpu0 = time.process_time()
    while t.tried < budget:
        sink = ListAlertSink()
        pipe = Pipeline(sink=sink)
        fed = 0
        for lineno, good in enumerate(real, 1):
            if t.tried >= budget:
                break
            feeds = [good] + ([mut.mutate(good if rng.random() < 0.7 else None)] if rng.random() < 0.5 else [])
            for line in feeds:
                t.tried += 1
                before = pipe.summary.lines
                start = time.monotonic()
                try:
                    pipe.feed_line(line, lineno)
                except Exception:  # noqa: BLE001 - the finding
                    t.crash(line)
                    continue
                finally:
                    t.timed(line, time.monotonic() - start)
                if pipe.summary.lines != before + 1:
                    t.lost += 1
                else:
                    fed += 1
        pipe.finish()
        # Judged at the end of the run, not line by line: an event held aside for clock skew is
        # admitted when other hosts confirm its time, or dropped as clock_skew at the end of input.
        # Every line is a decode rejection, an admission rejection, or an admitted event (an event
        # flagged unknown_host is admitted and flagged: counted once, under its flag).
        rejected = 0
        for reason, sample in pipe.summary.invalid.items():
            t.rejected[reason] += sample.count
            rejected += sample.count
        flagged = pipe.summary.invalid["unknown_host"].count if "unknown_host" in pipe.summary.invalid else 0
        admitted = sum(pipe.engine.events.values()) - flagged
        t.accepted += admitted
        t.lost += abs(fed - admitted - rejected)
        for alert in sink.alerts:
            t.events += 1
            why = contract.problem(encode(alert))
            if why:
                t.invalid_events.append(why)
    t.cpu_s = time.process_time() - cpu0
    return t


def fuzz_kafka_messages(budget: int, seed: int, contract: Contract) -> Tally:
    """The worker's decode path (stream/state.py, stream/app.py): decode or dead-letter, never raise."""
    from fleetepi.contract import decode_event, encode
    from fleetepi.exceptions import InvalidMessage

    try:
        from fleetepi.stream.deadletter import decode_letter, encode_letter, make_letter, original_value
    except ImportError:  # no [stream] extra: the decode alone
        make_letter = None  # type: ignore[assignment]
    t = Tally("kafka_messages")
    mut = Mutator(seed, recorded_lines())
    cpu0 = time.process_time()
    for _ in range(budget):
        raw = mut.mutate()
        t.tried += 1
        start = time.monotonic()
        try:
            try:
                event = decode_event(raw)
            except InvalidMessage as exc:
                t.rejected[exc.reason] += 1
                if make_letter is not None:
                    letter = decode_letter(encode_letter(make_letter(exc.reason, exc.detail, "fleetepi.crashes", 0, 1, b"k", raw)))
                    if original_value(letter) != raw[: len(original_value(letter))]:
                        t.lost += 1
                continue
            t.accepted += 1
            why = contract.problem(encode(event))
            if why:
                t.invalid_events.append(why)
        except Exception:  # noqa: BLE001
            t.crash(raw)
        finally:
            t.timed(raw, time.monotonic() - start)
    t.cpu_s = time.process_time() - cpu0
    return t


def fuzz_kernel_log(budget: int, seed: int, contract: Contract) -> Tally:
    """Mutated kernel-log lines through the agent's source: each line one outcome, each event valid."""
    from fleetepi.agents.publish.conform import conforming_bytes
    from fleetepi.agents.telemetry.kmsg import FakeLogSource, KernelLogSource

    t = Tally("kernel_log")
    mut = Mutator(seed, kernel_lines(), max_len=1 << 14)
    reader = FakeLogSource()
    src = KernelLogSource("fuzz-host", reader, dedup_interval_s=0.001)
    now = 1_700_000_000_000
    cpu0 = time.process_time()
    while t.tried < budget:
        batch = [mut.mutate().decode("utf-8", "replace") for _ in range(min(500, budget - t.tried))]
        reader.feed(batch)
        t.tried += len(batch)
        start = time.monotonic()
        try:
            events = list(src.poll(now))
        except Exception:  # noqa: BLE001
            t.crash("\n".join(batch).encode()[:300])
            continue
        finally:
            t.timed(b"<batch of 500>", (time.monotonic() - start) / max(1, len(batch)))
        now += 1000
        seen = sum(src.outcomes.values())
        if seen != len(batch):
            t.lost += len(batch) - seen
        for outcome, n in src.outcomes.items():
            if outcome == "event":
                t.accepted += n
            else:
                t.rejected[outcome] += n
        src.outcomes.clear()
        for ev in events + src.drain(now):
            t.events += 1
            try:
                why = contract.problem(conforming_bytes(ev))
            except Exception as exc:  # noqa: BLE001 - PublishError: an event the agent built wrong
                why = f"refused at publish: {exc}"
            if why:
                t.invalid_events.append(why)
    t.cpu_s = time.process_time() - cpu0
    return t


def fuzz_configs(budget: int, seed: int, contract: Contract) -> Tally:
    """Mutated real config files through every loader: a config or one ConfigError, nothing else."""
    from fleetepi.agents.config import load_config as load_agent
    from fleetepi.exceptions import ConfigError
    from fleetepi.hook.config import load_config as load_hook
    from fleetepi.replay import load_config as load_detectors

    loaders: dict[str, Callable[[str], object]] = {"agent": lambda p: load_agent(p, host="fuzz"),
                                                    "detectors": load_detectors, "hook": load_hook}
    corpora = config_corpus()
    t = Tally("configs")
    muts = {k: Mutator(seed + i, v) for i, (k, v) in enumerate(corpora.items())}
    kinds = list(loaders)
    rng = random.Random(seed)
    cpu0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        for _ in range(budget):
            kind = rng.choice(kinds)
            data = muts[kind].mutate()
            path.write_bytes(data)
            t.tried += 1
            start = time.monotonic()
            try:
                loaders[kind](str(path))
                t.accepted += 1
            except ConfigError as exc:
                msg = str(exc)
                t.rejected[kind] += 1
                if "\n" in msg or not msg.startswith(str(path)):
                    t.notes.append(f"{kind}: message not one line naming the file: {msg[:120]!r}")
            except Exception:  # noqa: BLE001
                t.crash(data)
            finally:
                t.timed(data, time.monotonic() - start)
    t.notes = t.notes[:5]
    t.cpu_s = time.process_time() - cpu0
    return t


def fuzz_hook_http(budget: int, seed: int, contract: Contract) -> Tally:
    """Mutated webhook bodies through the decision engine, and whole mutated requests to a real server."""
    import logging

    from prometheus_client import CollectorRegistry

    from fleetepi.hook.audit import AuditLog
    from fleetepi.hook.config import parse_config
    from fleetepi.hook.decider import QuarantineHook
    from fleetepi.hook.exceptions import InvalidPayload
    from fleetepi.hook.payload import decode_payload
    from fleetepi.hook.server import HookServer

    logging.getLogger("fleetepi.hook").setLevel(logging.CRITICAL)
    t = Tally("hook_http")
    bodies = webhook_bodies()
    token = "fuzz-token"
    rule = {"name": "k8s", "match": {"alertname": "FleetepiHostSick"}, "actions": [{"type": "kubernetes", "cordon": True}]}
    cpu0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = parse_config({"token_env": "X", "audit_log": f"{tmp}/audit.jsonl", "dry_run": True, "release_on_resolved": True,
                            "breaker": {"fleet_size": 100000, "max_hosts": 1000000, "max_percent": 100}, "rules": [rule]})
        hook = QuarantineHook(cfg, CollectorRegistry(), AuditLog(cfg.audit_log))
        mut = Mutator(seed, bodies)
        n_body = budget * 3 // 4
        for _ in range(n_body):
            body = mut.mutate()
            t.tried += 1
            start = time.monotonic()
            try:
                payload = decode_payload(body)
            except InvalidPayload:
                t.rejected["400 body"] += 1
                continue
            except Exception:  # noqa: BLE001
                t.crash(body)
                continue
            finally:
                t.timed(body, time.monotonic() - start)
            try:
                hook.handle(payload, remote="fuzz")
                t.accepted += 1
            except Exception:  # noqa: BLE001
                t.crash(body)
        # whole requests over real sockets
        errors: list[str] = []
        registry = CollectorRegistry()
        server = HookServer("127.0.0.1:0", QuarantineHook(cfg, registry, AuditLog(f"{tmp}/audit2.jsonl")), token, registry,
                            read_timeout_s=1.0)
        server.handle_error = lambda request, addr: errors.append(traceback.format_exc())  # type: ignore[method-assign]
        server.start_background()
        host, port = server.server_address[:2]
        requests = [b"POST /alerts HTTP/1.1\r\nHost: hook\r\nAuthorization: Bearer " + token.encode()
                    + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b
                    for b in bodies]
        rmut = Mutator(seed + 7, requests)
        try:
            for _ in range(budget - n_body):
                req = rmut.mutate()
                t.tried += 1
                start = time.monotonic()
                status = _send(host, port, req)
                t.timed(req, time.monotonic() - start)
                if status == 500:  # dry run: no command can fail, so a 500 is a bug (501/505: protocol refusals)
                    t.crashes.append((f"HTTP {status}", req[:300]))
                elif status is None:
                    t.rejected["no answer (closed or timed out)"] += 1
                elif status < 300:
                    t.accepted += 1
                else:
                    t.rejected[f"HTTP {status}"] += 1
            if _send(host, port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") != 200:
                t.crashes.append(("the server stopped answering /healthz", b""))
        finally:
            server.shutdown()
            server.server_close()
        t.crashes += [(e, b"<server-side>") for e in errors]
    t.cpu_s = time.process_time() - cpu0
    return t


def _send(host: str, port: int, request: bytes) -> int | None:
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(request)
            s.shutdown(socket.SHUT_WR)
            head = s.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else None


# ------------------------------------------------------------------------------------------- cores
def _build_cores(workdir: Path) -> list[bytes]:
    """Real cores: the test program in four builds, crashed four ways, by the kernel (or gdb)."""
    sys.path.insert(0, str(ROOT / "tests" / "agents_core"))
    import cores  # type: ignore[import-not-found]

    out = []
    for variant in ("pie_fp_g", "nopie_nofp", "pie_nofp_stripped"):
        exe = cores.compile_program(cores.VARIANTS[variant], workdir / "build" / variant)
        for mode in ("segv", "abort", "null", "handler"):
            out.append(cores.make_core([str(exe), mode], workdir / "cores" / variant / mode).read_bytes())
    return out


def _core_task(args: tuple[bytes, str, int, str]) -> tuple[str, bytes | str, float, float]:
    """In a worker process: one mutated core -> ("ok", event bytes) | ("crash", traceback); elapsed, peak RSS."""
    data, how, seed, tmp = args
    start = time.monotonic()
    try:
        from fleetepi.agents.core.limits import CoreLimits
        from fleetepi.agents.core.signature import CoreAnalyzer
        from fleetepi.agents.publish.conform import conforming_bytes

        path = Path(tmp) / f"core.{os.getpid()}.{seed}"
        path.write_bytes(data)
        try:
            if how == "core-handler":
                from click.testing import CliRunner

                from fleetepi.agents.core.cli import core_handler_command

                out = Path(tmp) / f"ev.{os.getpid()}.{seed}.jsonl"
                rng = random.Random(seed)
                crash_time = rng.choice(["1763800000", "0", "99999999999999999999", str(int(time.time())), "x"])
                res = CliRunner().invoke(core_handler_command, ["42", "11", rng.choice(["crashy", "[/x]", "a\nb", ""]) or "e",
                                                                crash_time, "--publish", str(out), "--host", "fuzz",
                                                                "--no-pyspy", "--timeout", "3"], input=data)
                if res.exit_code != 0:
                    raise RuntimeError(f"core-handler exit {res.exit_code}: {res.output[-500:]}") from res.exception
                result = out.read_bytes().splitlines()[0]
                out.unlink()
            else:
                analyzer = CoreAnalyzer(limits=CoreLimits(parse_timeout_s=3.0), use_pyspy=False, tmp_dir=tmp)
                try:
                    result = conforming_bytes(analyzer.analyze(path, host="fuzz").crash)
                finally:
                    analyzer.close()
        finally:
            path.unlink(missing_ok=True)
        status: str = "ok"
        payload: bytes | str = result
    except Exception:  # noqa: BLE001
        status, payload = "crash", traceback.format_exc()
    return status, payload, time.monotonic() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _mutate_core(rng: random.Random, base: bytes) -> tuple[bytes, str]:
    import lz4.frame
    import zstandard

    buf = bytearray(base)
    n = len(buf)
    for _ in range(rng.choice((1, 2, 4, 16))):
        op = rng.randrange(6)
        # the notes and headers sit in the first pages: most damage goes there
        i = rng.randrange(min(n, 16384)) if rng.random() < 0.7 else rng.randrange(n)
        if op == 0:
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[i:i + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, (1 << 63).to_bytes(8, "little"), rng.randbytes(8)])
        elif op == 2 and n > 65:  # cut the core short
            del buf[rng.randrange(64, n):]
            n = len(buf)
        elif op == 3:
            buf[i:i + 4] = rng.randbytes(4)
        elif op == 4:
            j = rng.randrange(n)
            buf[i:i + 16] = bytes(buf[j:j + 16])
        else:
            buf[i] = rng.randrange(256)
        n = len(buf)
    data = bytes(buf)
    r = rng.random()
    if r < 0.08:
        data = zstandard.ZstdCompressor(level=1).compress(data)
    elif r < 0.12:
        data = lz4.frame.compress(data)
    how = "core-handler" if rng.random() < 0.1 else "analyze"
    return data, how


def fuzz_cores(budget: int, seed: int, contract: Contract, workers: int = 2) -> Tally:
    """Mutated real cores in worker processes (killed and replaced when one stops answering)."""
    t = Tally("cores")
    rng = random.Random(seed)
    wall0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = _build_cores(Path(tmp))
        pool = ProcessPoolExecutor(workers)
        try:
            pending = []
            for k in range(budget):
                data, how = _mutate_core(rng, rng.choice(corpus))
                pending.append((data, pool.submit(_core_task, (data, how, seed * 1_000_003 + k, tmp))))
                if len(pending) >= 4 * workers or k == budget - 1:
                    for data_k, fut in pending:
                        t.tried += 1
                        try:
                            status, payload, elapsed, rss = fut.result(timeout=60)
                        except FutureTimeout:
                            t.hangs.append((60.0, data_k[:300]))
                            pool.shutdown(wait=False, cancel_futures=True)
                            for p in list(getattr(pool, "_processes", {}).values()):
                                p.kill()
                            pool = ProcessPoolExecutor(workers)
                            break
                        except Exception:  # noqa: BLE001 - a worker died: the core took it down
                            t.crash(data_k)
                            pool = ProcessPoolExecutor(workers)
                            continue
                        t.timed(data_k, elapsed)
                        t.peak_rss_mb = max(t.peak_rss_mb, rss)
                        if status == "crash":
                            t.crashes.append((str(payload), data_k[:64]))
                            continue
                        t.accepted += 1
                        t.events += 1
                        why = contract.problem(payload)  # type: ignore[arg-type]
                        if why:
                            t.invalid_events.append(why)
                    pending = []
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    t.cpu_s = time.perf_counter() - wall0  # the work is in the workers: inputs/s over wall time
    t.notes.append(f"{workers} worker processes; inputs/s over wall time; peak RSS is a worker's over all its cores")
    return t


# ------------------------------------------------------------------------------------------- big inputs
def fuzz_big_inputs(budget: int, seed: int, contract: Contract) -> Tally:
    """Inputs of <= 1 MiB compressed that expand a lot, each in a fresh process: peak RSS and time."""
    import zlib

    import zstandard

    fleetepi = str(Path(sys.executable).with_name("fleetepi"))
    t = Tally("big_inputs")
    good = recorded_lines()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # replay: a 512 MiB line inside a ~500 KiB .gz, between good lines
        gz = d / "huge-line.jsonl.gz"
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        with open(gz, "wb") as fh:
            fh.write(z.compress(b"\n".join(good[:1000]) + b"\n"))
            block = b"7" * (1 << 20)
            for _ in range(512):
                fh.write(z.compress(block))
            fh.write(z.compress(b"\n" + b"\n".join(good[1000:2000]) + b"\n") + z.flush())
        # replay: one line nested a million levels deep (2 MB raw, ~10 KiB gzip)
        deep = d / "deep.jsonl.gz"
        deep.write_bytes(gzip.compress(good[0][:-1] + b',"x":' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}\n"))
        # a core that decompresses to 3 GiB
        bomb = d / "core.bomb.zst"
        cctx = zstandard.ZstdCompressor(level=1)
        with open(bomb, "wb") as fh, cctx.stream_writer(fh) as w:
            for _ in range(3 * 1024):
                w.write(bytes(1 << 20))
        # a kernel log of one 1 MiB line of "a[" and 1,000 real lines, through the agent
        klog = d / "kern.log"
        klog.write_bytes(b"a[" * (1 << 19) + b"\n" + b"\n".join(kernel_lines()[:1000]) + b"\n")
        agent_cfg = d / "agent.yaml"
        agent_cfg.write_text(f"host: big\nsources: [{{kind: logfile, path: {klog}}}]\n")
        # a config of 1 MiB of anchors and aliases
        cfg = d / "big.yaml"
        cfg.write_text("x: &a [" + ", ".join(["1"] * 100_000) + "]\n" + "".join(f"y{i}: *a\n" for i in range(1000)))
        small = d / "small.jsonl"
        small.write_bytes(b"\n".join(good[:10]) + b"\n")
        runs = [
            ("replay, a 512 MiB line in a .gz", [fleetepi, "replay", "-i", str(gz), "-o", os.devnull, "-q"], gz),
            ("replay, 1,000,000 levels deep", [fleetepi, "replay", "-i", str(deep), "-o", os.devnull, "-q"], deep),
            ("signature, 3 GiB .zst bomb", [fleetepi, "signature", "--json", "--no-pyspy", str(bomb)], bomb),
            ("agent --once, a 1 MiB kernel-log line", [fleetepi, "agent", "--config", str(agent_cfg), "--output", os.devnull,
                                                       "--once"], klog),
            ("replay -c, 1 MiB of YAML aliases", [fleetepi, "replay", "-i", str(small), "-o", os.devnull, "-q", "-c", str(cfg)], cfg),
        ]
        # start-up cost (imports) of the same kind of run, on 10 good lines: subtracted before judging a hang
        _rc, _err, base_rss, base_cpu, base_wall = _measured([fleetepi, "replay", "-i", str(small), "-o", os.devnull, "-q"])
        t.notes.append(f"baseline (replay of 10 good lines): {base_cpu:.1f} s CPU, {base_wall:.1f} s wall, peak RSS {base_rss:.0f} MiB")
        for what, argv, src in runs[: max(1, budget)]:
            t.tried += 1
            rc, err, rss, cpu, wall = _measured(argv)
            t.timed(what.encode(), max(0.0, cpu - base_cpu))
            t.peak_rss_mb = max(t.peak_rss_mb, rss)
            t.notes.append(f"{what}: {src.stat().st_size / 1024:,.0f} KiB on disk, exit {rc}, "
                           f"{cpu:.1f} s CPU ({wall:.1f} s wall), peak RSS {rss:.0f} MiB")
            if rc in (0, 2) and b"Traceback" not in err:
                t.accepted += 1
            else:
                t.crashes.append((err.decode(errors="replace")[-2000:], what.encode()))
    return t


def _measured(argv: list[str]) -> tuple[int, bytes, float, float, float]:
    """``(exit code, stderr, peak RSS MiB, CPU s, wall s)`` of one run, by GNU time (``/usr/bin/time``)."""
    marker = "FLEETEPI-BENCH-TIME"
    proc = subprocess.run(["/usr/bin/time", "-f", f"{marker} %M %U %S %e", *argv], capture_output=True, timeout=900,
                          check=False)
    lines = proc.stderr.splitlines()
    stat = next((x for x in reversed(lines) if x.startswith(marker.encode())), None)
    err = b"\n".join(x for x in lines if not x.startswith(marker.encode()))
    if stat is None:
        return proc.returncode, err, 0.0, 0.0, 0.0
    _m, rss_kb, user, sys_s, wall = stat.split()
    return proc.returncode, err, int(rss_kb) / 1024, float(user) + float(sys_s), float(wall)


# ------------------------------------------------------------------------------------------- speed
def kernel_log_speed(lines_per_family: int = 2000, seed: int = 1) -> list[tuple[str, float, float]]:
    """Lines/s (CPU) of the kernel-log parser on hostile lines at the length cap, by family."""
    from fleetepi.agents.telemetry.logparse import MAX_LINE_CHARS, KernelLogParser

    real = [x.decode("utf-8", "replace") for x in kernel_lines()]
    parser0 = KernelLogParser()
    literals = sorted(parser0._index._literals)
    rng = random.Random(seed)
    cap = MAX_LINE_CHARS

    def fill(unit: str, i: int) -> str:
        return (unit * (cap // len(unit) + 1))[: cap - 6] + f"{i:06d}"

    families: dict[str, list[str]] = {
        "real lines (baseline)": [rng.choice(real) + f" {i}" for i in range(lines_per_family)],
        "real lines joined to the cap": [fill(" ".join(rng.sample(real, 12)), i) for i in range(lines_per_family)],
        "'a[' x 576 (issue 10)": [fill("a[", i) for i in range(lines_per_family)],
        "'a' x 1152": [fill("a", i) for i in range(lines_per_family)],
        "digits": [fill("0", i) for i in range(lines_per_family)],
        "'NVRM: ' repeated": [fill("NVRM: ", i) for i in range(lines_per_family)],
        "'[Hardware Error]: ' repeated": [fill("[Hardware Error]: ", i) for i in range(lines_per_family)],
        "PCI addresses": [fill("0000:00:00.0 ", i) for i in range(lines_per_family)],
        "SXid prefixes repeated": [fill("nvidia-nvswitch0: SXid (0000:00:00.0): 12, ", i) for i in range(lines_per_family)],
        "Xid lines repeated": [fill("NVRM: Xid (PCI:0000:00:00): 1, ", i) for i in range(lines_per_family)],
        "every rule literal at once": [fill(" ".join(rng.sample(literals, len(literals))), i) for i in range(lines_per_family // 4)],
        "64 KiB lines (over the cap)": [fill("a[", i) * 57 for i in range(lines_per_family)],
    }
    out = []
    for name, lines in families.items():
        parser = KernelLogParser()
        c0, w0 = time.process_time(), time.perf_counter()
        for line in lines:
            parser.parse(line)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        out.append((name, len(lines) / max(cpu, 1e-9), len(lines) / max(wall, 1e-9)))
    return out


# ------------------------------------------------------------------------------------------- main
FUZZERS: dict[str, Callable[[int, int, Contract], Tally]] = {
    "replay_lines": fuzz_replay_lines,
    "kafka_messages": fuzz_kafka_messages,
    "kernel_log": fuzz_kernel_log,
    "configs": fuzz_configs,
    "hook_http": fuzz_hook_http,
    "cores": fuzz_cores,
    "big_inputs": fuzz_big_inputs,
}


def run(budget: int, seed: int, only: Iterable[str] | None = None) -> list[Tally]:
    contract = Contract()
    names = list(only) if only else list(FUZZERS)
    out = []
    for name in names:
        n = 5 if name == "big_inputs" else max(1, int(budget * SHARES.get(name, 0.1)))
        print(f"... {name}: {n:,} inputs", file=sys.stderr, flush=True)
        w0 = time.perf_counter()
        tally = FUZZERS[name](n, seed, contract)
        tally.notes.append(f"{time.perf_counter() - w0:.1f} s wall")
        out.append(tally)
        report([tally])  # as it comes: a long run that stops later keeps what it measured
    return out


def report(tallies: list[Tally]) -> None:
    print(f"\nfleetepi robustness (seed-reproducible); load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'entry point':16s} {'tried':>9s} {'accepted':>9s} {'rejected':>9s} {'crashes':>7s} {'hangs':>5s} "
          f"{'slowest':>8s} {'events':>7s} {'invalid':>7s} {'lost':>5s} {'inputs/s':>9s}")
    for t in tallies:
        rate = t.tried / t.cpu_s if t.cpu_s else 0.0
        print(f"{t.name:16s} {t.tried:>9,} {t.accepted:>9,} {sum(t.rejected.values()):>9,} {len(t.crashes):>7} "
              f"{len(t.hangs):>5} {t.slowest_s:>7.2f}s {t.events:>7,} {len(t.invalid_events):>7} {t.lost:>5} {rate:>9,.0f}")
    total = sum(t.tried for t in tallies)
    peak = max([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024] + [t.peak_rss_mb for t in tallies])
    print(f"{'total':16s} {total:>9,} inputs; crashes {sum(len(t.crashes) for t in tallies)}, "
          f"hangs > {HANG_S:.0f} s {sum(len(t.hangs) for t in tallies)}, invalid events "
          f"{sum(len(t.invalid_events) for t in tallies)}, lost {sum(t.lost for t in tallies)}; "
          f"peak RSS {peak:.0f} MiB (this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")
    for t in tallies:
        top = ", ".join(f"{r} {n:,}" for r, n in t.rejected.most_common(6))
        if top:
            print(f"  {t.name} rejections: {top}")
        for note in t.notes:
            print(f"  {t.name}: {note}")
        for tb, sample in t.crashes[:3]:
            print(f"  CRASH in {t.name} on {sample[:120]!r}:\n    " + tb.strip().replace("\n", "\n    ")[-1500:])
        for seconds, sample in t.hangs[:3]:
            print(f"  HANG in {t.name}: {seconds:.1f} s on {sample[:120]!r}")
        for why in t.invalid_events[:3]:
            print(f"  INVALID EVENT from {t.name}: {why}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=20_000, help="inputs across the entry points (10^6 for the full run)")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(FUZZERS)}")
    ap.add_argument("--kernel-log-speed", action="store_true", help="only the kernel-log parser's lines/s on hostile lines")
    args = ap.parse_args()
    if args.kernel_log_speed:
        print(f"kernel-log parser, lines/s on lines at the cap; load {open('/proc/loadavg').read().split()[:3]}")
        for name, cpu_rate, wall_rate in kernel_log_speed():
            print(f"  {name:36s} {cpu_rate:>10,.0f} lines/s CPU  {wall_rate:>10,.0f} lines/s wall")
        return 0
    only = [x for x in args.only.split(",") if x]
    tallies = run(args.budget, args.seed, only)
    print("\n=== all entry points ===")
    report(tallies)
    return 0 if all(t.ok for t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
