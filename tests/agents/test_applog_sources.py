"""The applog / appjournal sources and the ``fleetepi run`` wrapper, end to end with real files, processes and journald."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from fleetepi.agents.applog.sources import AppJournalSource, AppLogSource, journal_command, parse_journal_line
from fleetepi.agents.telemetry.kmsg import FakeLogSource
from fleetepi.contract import decode_event

DATA = Path(__file__).parent / "data"
APPS = DATA / "apps"
FLEETEPI = str(Path(sys.executable).parent / "fleetepi")
T0 = 1_700_000_000_000


def traceback_text(mode: str = "raise", site: str = "a") -> str:
    proc = subprocess.run([sys.executable, str(APPS / "fail.py"), mode, site], capture_output=True, text=True, timeout=60, check=False)
    return proc.stderr


def drain(src, t: int = T0) -> list:
    out = list(src.poll(t))
    out += list(src.poll(t + 5000))  # the traceback closes by silence
    return out + src.drain(t + 6000)


class TestAppLogFiles:
    def test_follows_a_glob_across_rotation_and_truncation(self, tmp_path, validate):
        logs = tmp_path / "jobs" / "exp-9"
        logs.mkdir(parents=True)
        rank0 = logs / "rank0.log"
        rank0.write_text("epoch 1 loss 0.5\n")
        src = AppLogSource("gpu-a-001", [str(tmp_path / "jobs" / "*" / "rank*.log")], job_pattern=r"/jobs/(?P<job>[^/]+)/",
                           from_start=True, rescan_s=0.001)
        assert drain(src) == []  # ordinary output
        with rank0.open("a") as fh:
            fh.write(traceback_text("raise", "a"))
        (ev,) = drain(src, T0 + 10_000)
        assert (ev.origin, ev.job, ev.host) == ("python_traceback", "exp-9", "gpu-a-001")
        assert ev.signature.startswith("ZeroDivisionError | python:fail.py!site_a")
        validate(ev)
        # logrotate: the old file renamed, a new one created; the end of the old one is still read
        with rank0.open("a") as fh:  # a traceback cut by the rotation
            fh.write('Traceback (most recent call last):\n  File "/srv/train.py", line 9, in <module>\n')
        rank0.rename(logs / "rank0.log.1")
        rank0.write_text(traceback_text("raise", "b"))
        got = drain(src, T0 + 20_000)
        assert sorted(e.signature.split(" | ")[0] for e in got) == ["IndexError", "truncated-traceback"]
        # copytruncate: the same file emptied in place (seen at the next poll), then written again.
        # Truncation is noticed by the size falling below what was read: a file truncated and
        # refilled beyond that size between two polls reads as appended output (tail -F's limit;
        # docs/agents.md)
        with rank0.open("r+") as fh:
            fh.truncate(0)
        assert drain(src, T0 + 25_000) == []
        with rank0.open("a") as fh:
            fh.write(traceback_text("chained"))
        (ev,) = drain(src, T0 + 30_000)
        assert ev.signature.startswith("ValueError | ")
        # a new rank's file appears: found at the next scan, read from its start
        (logs / "rank1.log").write_text(traceback_text("raise", "a"))
        (ev,) = drain(src, T0 + 40_000)
        assert ev.signature.startswith("ZeroDivisionError") and ev.job == "exp-9"
        src.close()

    def test_resumes_where_it_stopped_after_a_restart(self, tmp_path):
        log = tmp_path / "train.log"
        log.write_text(traceback_text("raise", "a"))
        state = tmp_path / "state" / "applog.json"
        src = AppLogSource("h", [str(log)], from_start=True, state_path=str(state))
        assert len(drain(src)) == 1
        src.close()
        assert json.loads(state.read_text())["files"][str(log)][1] == log.stat().st_size
        with log.open("a") as fh:  # written while the agent was down
            fh.write(traceback_text("raise", "b"))
        src = AppLogSource("h", [str(log)], state_path=str(state))
        (ev,) = drain(src)  # only the new failure, not the old one again
        assert ev.signature.startswith("IndexError")
        src.close()

    def test_starts_at_the_end_of_existing_files_by_default(self, tmp_path):
        log = tmp_path / "old.log"
        log.write_text(traceback_text("raise"))
        src = AppLogSource("h", [str(log)])
        assert drain(src) == []
        src.close()

    def test_a_flood_of_one_traceback_is_counted(self, tmp_path, registry):
        log = tmp_path / "flood.log"
        log.write_text("")
        src = AppLogSource("h", [str(log)], dedup_interval_s=60, job="j1")
        with log.open("a") as fh:
            fh.write(subprocess.run([sys.executable, str(APPS / "fail.py"), "flood", "a", "300"], capture_output=True,
                                    text=True, check=False).stderr)
        events = drain(src)
        assert [e.n for e in events] == [1, 299] and len({e.signature for e in events}) == 1
        assert src.outcomes["event"] == 300
        src.close()

    def test_through_the_agent_config(self, tmp_path, validate):
        from fleetepi.agents.agent import Agent
        from fleetepi.agents.config import parse_config
        from fleetepi.agents.publish import JsonlPublisher

        log = tmp_path / "rank0.log"
        log.write_text(traceback_text("cuda_oom"))
        cfg = parse_config({"host": "gpu-a-001", "sources": [
            {"kind": "applog", "paths": [str(tmp_path / "*.log")], "from_start": True, "job": "exp-1",
             "state_path": str(tmp_path / "st.json")}]})
        out = tmp_path / "events.jsonl"
        agent = Agent(cfg, JsonlPublisher(out))
        agent.run_once()
        agent.close()
        (doc,) = [validate(decode_event(line)) for line in out.read_bytes().splitlines()]
        assert (doc["signature"], doc["job"], doc["origin"]) == ("cuda_oom | python:fail.py!main | python:fail.py!<module>",
                                                                 "exp-1", "python_traceback")


class TestAppJournal:
    def test_command_line(self):
        assert journal_command(["train.service"]) == [
            "journalctl", "--output=json", "--all", "--follow", "--no-pager", "--quiet", "--unit=train.service", "--lines=0"]
        assert journal_command(["a.service", "b.service"], cursor="s=1;i=2", identifiers=["trainer"])[-4:] == [
            "--unit=a.service", "--unit=b.service", "--identifier=trainer", "--after-cursor=s=1;i=2"]

    def test_real_journalctl_json_is_read(self, tmp_path, validate):
        """``journalctl -o json`` lines captured from a real journald (tests/agents/data/journal/README.md):
        a traceback in five entries, a non-UTF-8 MESSAGE as an array of bytes."""
        lines = (DATA / "journal" / "capture.jsonl").read_text().splitlines()
        entries = [parse_journal_line(line) for line in lines]
        assert entries[-1] is not None and entries[-1].text() == "bad byte \ufffd here"
        assert parse_journal_line("not json") is None
        src = AppJournalSource("h", identifiers=["train"], reader=FakeLogSource(lines), job="j", state_path=str(tmp_path / "c.json"))
        (ev,) = drain(src)
        assert ev.signature == "ValueError | python:train.py!<module>"
        assert ev.ts_ms == int(json.loads(lines[-2])["__REALTIME_TIMESTAMP"]) // 1000 or ev.ts_ms > 0
        validate(ev)
        src.close()
        assert json.loads((tmp_path / "c.json").read_text())["cursor"] == json.loads(lines[-1])["__CURSOR"]
        # a restart resumes after that cursor
        again = AppJournalSource("h", identifiers=["train"], reader=FakeLogSource([]), state_path=str(tmp_path / "c.json"))
        assert again.command[-1] == "--after-cursor=" + json.loads(lines[-1])["__CURSOR"]

    def test_needs_something_to_follow(self):
        from fleetepi.agents.config import parse_config
        from fleetepi.agents.exceptions import AgentConfigError
        from fleetepi.agents.sources.registry import SourceContext, create

        cfg = parse_config({"sources": [{"kind": "appjournal"}]}, host="h")
        with pytest.raises(AgentConfigError, match="units and/or identifiers"):
            create("appjournal", cfg.sources[0].options, SourceContext(host="h"))


@pytest.fixture
def journald():
    """A real systemd-journald in a private namespace (root and the binary needed): yields its namespace name."""
    binary = shutil.which("systemd-journald") or "/lib/systemd/systemd-journald"
    if os.geteuid() != 0 or not os.path.exists(binary) or shutil.which("journalctl") is None:
        pytest.skip("needs root, systemd-journald and journalctl")
    ns = f"fleetepitest{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([binary, ns], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = Path(f"/run/systemd/journal.{ns}/socket")
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.skip("systemd-journald did not start here")
    try:
        yield ns
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        machine = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else ""
        shutil.rmtree(f"/var/log/journal/{machine}.{ns}", ignore_errors=True)
        shutil.rmtree(f"/run/log/journal/{machine}.{ns}", ignore_errors=True)
        shutil.rmtree(f"/run/systemd/journal.{ns}", ignore_errors=True)


def test_appjournal_against_a_real_journald(journald, validate):
    src = AppJournalSource("gpu-a-001", identifiers=["train"], journalctl=["journalctl", f"--namespace={journald}"], job="exp-3")
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

        def send(line: str) -> None:
            msg = line.encode()
            s.sendto(b"MESSAGE\n" + struct.pack("<Q", len(msg)) + msg + b"\nSYSLOG_IDENTIFIER=train\n",
                     f"/run/systemd/journal.{journald}/socket")

        # journalctl -f starts from now: wait until it reads what the job writes
        deadline = time.monotonic() + 15
        while not src.outcomes["other_output"] and time.monotonic() < deadline:
            send("waiting for the reader")
            time.sleep(0.2)
            src.poll(T0)
        for line in traceback_text("raise", "b").splitlines():
            send(line)
        # the poll clock follows the wall clock: a traceback closes after a silence of real time, so
        # journald delivering its lines in bursts (a loaded machine) does not cut it in two
        events: list = []
        start = time.monotonic()
        deadline = start + 30
        while not events and time.monotonic() < deadline:
            events += src.poll(T0 + int((time.monotonic() - start) * 1000))
            time.sleep(0.2)
        (ev,) = events
        assert ev.signature.startswith("IndexError | python:fail.py!site_b") and ev.job == "exp-3"
        validate(ev)
    finally:
        src.close()


# --- fleetepi run --------------------------------------------------------------------------------
def run_wrapped(tmp_path: Path, *cmd: str, env: dict[str, str] | None = None, **kw) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "crashes.jsonl"
    e = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "FLEETEPI_JOB")}
    proc = subprocess.run([FLEETEPI, "run", "--output", str(out), "--host", "gpu-a-001", "--", *cmd],
                          capture_output=True, env={**e, **(env or {})}, timeout=120, check=False, **kw)
    docs = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return proc, docs


class TestRun:
    def test_output_passes_through_unchanged_and_the_failure_is_published(self, tmp_path, validate):
        direct = subprocess.run([sys.executable, str(APPS / "fail.py"), "chained"], capture_output=True, check=False)
        proc, docs = run_wrapped(tmp_path, sys.executable, str(APPS / "fail.py"), "chained", env={"SLURM_JOB_ID": "777"})
        assert proc.returncode == direct.returncode == 1
        assert (proc.stdout, proc.stderr) == (direct.stdout, direct.stderr)
        (doc,) = docs
        validate(decode_event(json.dumps(doc).encode()))
        assert (doc["origin"], doc["job"], doc["host"]) == ("python_traceback", "slurm:777", "gpu-a-001")
        assert doc["signature"] == "ValueError | python:fail.py!main | python:fail.py!<module> | cause KeyError@python:fail.py!load_config"

    def test_bytes_that_are_not_text_pass_through(self, tmp_path):
        blob = bytes(range(256)) * 64 + b"no newline at the end \xff"
        code = f"import sys; sys.stdout.buffer.write({blob!r}); sys.stderr.buffer.write({blob[::-1]!r})"
        proc, docs = run_wrapped(tmp_path, sys.executable, "-c", code)
        assert (proc.returncode, proc.stdout, proc.stderr, docs) == (0, blob, blob[::-1], [])

    @pytest.mark.parametrize(("cmd", "status", "signature"), [
        # the job's own exit status, no event for a deliberate exit
        ([str(APPS / "fail.py"), "exit", "7"], 7, None),
        # died of SIGABRT, nothing in its output: 128+6 and an event naming the signal
        ([str(APPS / "fail.py"), "abort"], 134, "python!SIGABRT"),
        # a faulthandler dump: the Python stack is the event, the signal is on it; no second event
        ([str(APPS / "fail.py"), "segv"], 139, "SIGSEGV | python:ctypes/__init__.py!string_at | python:fail.py!main | python:fail.py!<module>"),
    ])
    def test_exit_status_like_a_shell(self, tmp_path, cmd, status, signature):
        proc, docs = run_wrapped(tmp_path, sys.executable, *cmd)
        assert proc.returncode == status
        assert [d["signature"] for d in docs] == ([signature] if signature else [])
        if signature:
            assert docs[0]["signal"] in ("SIGABRT", "SIGSEGV")

    def test_signals_reach_the_job(self, tmp_path):
        out = tmp_path / "crashes.jsonl"
        proc = subprocess.Popen([FLEETEPI, "run", "--output", str(out), "--", sys.executable, "-c",
                                 "import time; print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert not out.exists() or out.read_text() == ""  # a job stopped by its scheduler did not crash

    def test_missing_command_and_missing_output(self, tmp_path):
        proc, _ = run_wrapped(tmp_path, str(tmp_path / "no-such-program"))
        assert proc.returncode == 127 and b"command not found" in proc.stderr
        bad = subprocess.run([FLEETEPI, "run", "--", "true"], capture_output=True, check=False,
                             env={k: v for k, v in os.environ.items() if k not in ("FLEETEPI_RUN_OUTPUT", "FLEETEPI_BROKER")})
        assert bad.returncode == 2 and b"exactly one of --output" in bad.stderr

    def test_interleaved_ranks_of_one_job_are_one_counted_event(self, tmp_path):
        """Eight ranks print the same traceback with torchrun prefixes: one event and a count, one job."""
        script = tmp_path / "ranks.py"
        script.write_text(
            "import subprocess, sys\n"
            f"tb = subprocess.run([sys.executable, {str(APPS / 'fail.py')!r}, 'raise', 'a'], capture_output=True, text=True).stderr.splitlines()\n"
            "for line in tb:\n"
            "    for r in range(8):\n"
            "        print(f'[rank{r}]: {line}', file=sys.stderr)\n"
            "sys.exit(1)\n")
        proc, docs = run_wrapped(tmp_path, sys.executable, str(script), env={"TORCHELASTIC_RUN_ID": "exp-5"})
        assert proc.returncode == 1
        assert [(d.get("count", 1), d["job"]) for d in docs] == [(1, "torchelastic:exp-5"), (7, "torchelastic:exp-5")]
        assert len({d["signature"] for d in docs}) == 1


@pytest.mark.integration
def test_run_publishes_to_a_real_kafka_broker(kafka_broker, tmp_path):
    """fleetepi run --broker: the crash reaches the contract's topic, keyed by host, through the spool."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker, client_id="fleetepi-run-test")
    try:
        admin.create_topics([NewTopic("fleetepi.crashes", num_partitions=1, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    host = f"run-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run([FLEETEPI, "run", "--broker", f"kafka://{kafka_broker}", "--host", host, "--job", "exp-k",
                           "--spool-dir", str(tmp_path / "spool"), "--", sys.executable, str(APPS / "fail.py"), "raise"],
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    consumer = KafkaConsumer("fleetepi.crashes", bootstrap_servers=kafka_broker, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000)
    got = []
    deadline = time.monotonic() + 30
    try:
        while not got and time.monotonic() < deadline:
            got += [decode_event(r.value) for r in consumer if r.key == host.encode()]
    finally:
        consumer.close()
    (ev,) = got
    assert (ev.host, ev.job, ev.origin) == (host, "exp-k", "python_traceback")
    assert ev.signature.startswith("ZeroDivisionError | python:fail.py!site_a")
