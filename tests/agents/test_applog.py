"""Application output -> crash events: real programs that fail, real log lines, and the sources that read them."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fleetepi.agents.applog.job import compile_job_pattern, job_from_env, job_from_name
from fleetepi.agents.applog.parser import AppLogParser, Failure
from fleetepi.agents.applog.rules import RULES_DIR, load_app_rules
from fleetepi.agents.exceptions import RuleFileError
from fleetepi.contract import ts_from_ms

DATA = Path(__file__).parent / "data"
APPS = DATA / "apps"
SITE = APPS / "site-packages"


def stderr_of(*args: str, env: dict[str, str] | None = None, limit_as: int | None = None) -> str:
    """Run a failing program (a real child process) and return what it wrote to stderr."""

    def preexec() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, preexec_fn=preexec if limit_as else None, check=False)
    assert "Traceback" in proc.stderr or "Fatal Python error" in proc.stderr, proc
    return proc.stderr


def failures_of(text: str, parser: AppLogParser | None = None, stream: str = "") -> list[Failure]:
    p = parser or AppLogParser()
    out: list[Failure] = []
    for i, line in enumerate(text.splitlines()):
        out += p.feed(line, i, stream=stream)
    return out + p.flush(10**9, force=True)


def one(text: str) -> Failure:
    got = failures_of(text)
    assert len(got) == 1, [f.signature for f in got]
    return got[0]


def fail(mode: str, site: str = "a", **kw: object) -> Failure:
    return one(stderr_of(str(APPS / "fail.py"), mode, site, **kw))  # type: ignore[arg-type]


class TestRealPrograms:
    """Python prints the tracebacks; the parser reads them back."""

    @pytest.mark.parametrize(("mode", "signature"), [
        # a plain exception: its type and the innermost frames, innermost first
        ("raise", "ZeroDivisionError | python:fail.py!site_a | python:fail.py!step | python:fail.py!work"),
        # raise ... from: the last exception and the root cause
        ("chained", "ValueError | python:fail.py!main | python:fail.py!<module> | cause KeyError@python:fail.py!load_config"),
        # an error while handling another
        ("context", "ZeroDivisionError | python:fail.py!site_a | python:fail.py!step | python:fail.py!work"
                    " | cause KeyError@python:fail.py!load_config"),
        # a thread's exception: threading's bootstrap frames are skipped
        ("thread", "ZeroDivisionError | python:fail.py!site_a | python:fail.py!step | python:fail.py!work"),
        # a multiprocessing worker's: the worker's frames lead, the pool's re-raise does not; the same
        # signature as the same failure raised in the main process
        ("pool", "ZeroDivisionError | python:fail.py!site_a | python:fail.py!step | python:fail.py!work"),
        ("futures", "ZeroDivisionError | python:fail.py!site_a | python:fail.py!step | python:fail.py!work"),
        # the CUDA OOM message of old PyTorch, raised as its RuntimeError: named by its class
        ("cuda_oom", "cuda_oom | python:fail.py!main | python:fail.py!<module>"),
    ])
    def test_traceback_signatures(self, mode, signature, validate):
        f = fail(mode)
        assert (f.origin, f.signature) == ("python_traceback", signature)
        crash = f.to_crash("gpu-a-001", ts_from_ms(1_700_000_000_000), "slurm:42")
        doc = validate(crash)
        assert doc["origin"] == "python_traceback" and doc["job"] == "slurm:42"
        assert all(fr["language"] == "python" and "/" not in fr["file"] or fr["file"].count("/") < 4 for fr in doc["frames"])

    def test_notes_say_what_happened(self):
        assert "in thread loader-<n>" in fail("thread").notes
        assert "in a worker process (RemoteTraceback)" in fail("pool").notes
        chained = fail("chained")
        assert "chain: KeyError -(direct cause of)-> ValueError" in chained.notes
        assert "exception ValueError: config has no learning rate" in chained.notes
        oom = fail("cuda_oom")
        # the message, normalised: sizes and the GPU number gone
        assert any(n.startswith("exception RuntimeError: CUDA out of memory. Tried to allocate <size> (<device_or_rank>;")
                   for n in oom.notes)

    def test_same_failure_twice_is_byte_identical_and_sites_differ(self):
        for mode in ("raise", "pool", "thread"):
            a1, a2, b = fail(mode, "a"), fail(mode, "a"), fail(mode, "b")
            assert a1.signature.encode() == a2.signature.encode()
            assert a1.signature != b.signature
            assert b.signature.startswith("IndexError | python:fail.py!site_b")

    def test_frames_are_host_independent(self, tmp_path):
        """The same program from two install paths gives one signature and the same frame files."""
        other = tmp_path / "home" / "alice" / "venvs" / "x"
        other.mkdir(parents=True)
        (other / "fail.py").write_bytes((APPS / "fail.py").read_bytes())
        here, there = fail("raise"), one(stderr_of(str(other / "fail.py"), "raise", "a"))
        assert here.signature == there.signature
        assert [(f.file, f.function, f.line) for f in here.frames] == [(f.file, f.function, f.line) for f in there.frames]

    def test_memory_exhausted_under_rlimit_as(self):
        f = one(stderr_of(str(APPS / "fail.py"), "memory", limit_as=512 << 20))
        assert f.signature == "MemoryError | python:fail.py!main | python:fail.py!<module>"

    def test_faulthandler_dump_of_a_segfault(self):
        text = stderr_of(str(APPS / "fail.py"), "segv")
        assert "Fatal Python error: Segmentation fault" in text
        f = one(text)
        assert f.signal == "SIGSEGV"
        assert f.signature.startswith("SIGSEGV | python:ctypes/__init__.py!string_at | python:fail.py!main")

    @pytest.mark.parametrize(("site", "signature"), [
        # torch-like layers (Module.__call__ -> _wrapped_call_impl -> _call_impl, _ops dispatch, the
        # no_grad decorator) are skipped: the model code leads
        ("a", "cuda_illegal_address | python:torch_like.py!forward | python:torch_like.py!forward | python:torch_like.py!train_step"),
        ("b", "KeyError | python:torch_like.py!forward | python:torch_like.py!forward | python:torch_like.py!train_step"),
    ])
    def test_torch_style_nested_wrappers_are_skipped(self, site, signature):
        f = one(stderr_of(str(APPS / "torch_like.py"), site, env={"PYTHONPATH": str(SITE)}))
        assert f.signature == signature
        skipped = next(n for n in f.notes if n.startswith("skipped"))
        assert "python:torch/nn/modules/module.py!_call_impl" in skipped
        assert len(f.frames or []) >= 11  # the event keeps every frame, the signature only the meaningful ones


class TestParser:
    def test_ranks_interleaved_line_by_line_are_read_apart(self):
        text = stderr_of(str(APPS / "fail.py"), "raise", "a").splitlines()
        other = stderr_of(str(APPS / "fail.py"), "raise", "b").splitlines()
        n = max(len(text), len(other))
        mixed = []
        for i in range(n):
            if i < len(text):
                mixed.append(f"[rank0]: {text[i]}")
            if i < len(other):
                mixed.append(f"[rank3]:{other[i]}")  # torchrun writes the prefix with or without a space
        got = failures_of("\n".join(mixed))
        assert sorted(f.signature.split(" | ")[1] for f in got) == ["python:fail.py!site_a", "python:fail.py!site_b"]
        assert {f.stream for f in got} == {"[rank0]", "[rank3]"}

    def test_a_traceback_cut_short(self):
        text = stderr_of(str(APPS / "fail.py"), "raise").splitlines()
        cut = text[: text.index(next(line for line in text if "in step" in line)) + 2]  # no exception line
        f = one("\n".join([*cut, "epoch 3 loss 0.12"]))
        assert f.signature.startswith("truncated-traceback | python:fail.py!step")
        assert "truncated: the traceback was cut before its end" in f.notes

    def test_ignored_exceptions_are_no_failure(self):
        p = AppLogParser()
        text = "Traceback (most recent call last):\n  File \"/x/train.py\", line 3, in <module>\n    main()\nKeyboardInterrupt\n"
        assert failures_of(text, p) == []
        assert p.outcomes["ignored_exception"] == 1

    def test_a_flood_of_one_traceback_becomes_one_counted_event(self):
        from fleetepi.agents.applog.sources import FailureSink

        text = stderr_of(str(APPS / "fail.py"), "flood", "a", "200")
        failures = failures_of(text)
        assert len(failures) == 200 and len({f.signature for f in failures}) == 1
        sink = FailureSink("h", dedup_interval_s=10)
        events = sink.take(failures, 1000, "job-1") + sink.flush(2000, force=True)
        assert [e.n for e in events] == [1, 199]
        assert sum(e.n for e in events) == 200

    def test_single_line_failures(self):
        got = {f.signature: f for f in failures_of("\n".join([
            "[rank2]:[E ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=12, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600351 milliseconds before timing out.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "ValueError: expected input of shape [32, 128] but got [16, 128] on rank 3",
        ]))}
        assert got["watchdog_timeout!BROADCAST"].origin == "watchdog"
        assert got["c10::DistBackendError"].signal == "SIGABRT"
        # the kernel's kill line for a process that touched poisoned memory, as syslog carries it
        mf = failures_of("Mar  9 19:48:24 n17 kernel: [77187.055103] Memory failure: 0x1840200: Killing cellsrv:33395 "
                         "due to hardware memory corruption")
        assert [(f.signature, f.signal, f.shape_flags) for f in mf] == [("memory_failure!cellsrv", "SIGBUS", ["memory_poisoned"])]
        # a lone exception line keeps its normalised message in the signature (no frames to tell it apart)
        assert "ValueError: expected input of shape <shape> but got <shape> on <device_or_rank>" in got


# --- the real lines of /work/shared/data/logs (copied with attribution to tests/agents/data) ---------------
def real_lines(name: str) -> list[str]:
    return [row.partition("\t")[2] for row in (DATA / name).read_text(encoding="utf-8").splitlines()]


def outcomes(name: str) -> tuple[list[str], list[Failure]]:
    p = AppLogParser()
    labels, failures = [], []
    for i, line in enumerate(real_lines(name)):
        got = p.feed(line, i)
        failures += got
        labels.append(p.last_outcome)
    failures += p.flush(10**9, force=True)
    return labels, failures


# Every line of every shared file through the application-output parser: an event or a named rejection.
EXPECTED_SUMMARY = {
    # 13 watchdog timeouts, 2 NET/IB completions, 2 other NCCL WARNs, 3 DistBackendErrors, 1 C++ terminate
    "nccl.txt": {"event": 21, "watchdog_detail": 3, "nccl_info": 5, "error_detail": 3, "nccl_detail": 1, "launcher_summary": 1},
    # 5 CUDA OOMs in old and new wording, 3 OOM kills; the lines around the kills are detail
    "oom.txt": {"event": 8, "oom_kill_detail": 3},
    "misc.txt": {"other_output": 5, "event": 5, "error_detail": 6, "debugger_output": 5},
    # kernel hardware lines are the kernel-log source's (tests/agents/test_kernel_log.py), not application output
    "xid.txt": {"other_output": 97},
    "ecc.txt": {"other_output": 38},
}

EXPECTED_SIGNATURES = {
    "nccl.txt": {"watchdog_timeout!ALLREDUCE": 10, "watchdog_timeout!_REDUCE_SCATTER_BASE": 3,
                 "nccl_warn!NET/IB completion status=12": 1, "nccl_warn!NET/IB completion status=5": 1,
                 "nccl_warn!Net : Call to recv from <peer> failed : Broken pipe": 1,
                 "nccl_warn![Proxy Service <n>] Failed to execute operation Connect from <device_or_rank>, retcode <n>": 1,
                 "nccl_remote_error": 4},
    # old ("RuntimeError: CUDA out of memory") and new ("torch.cuda.OutOfMemoryError") wording: one signature
    "oom.txt": {"cuda_oom": 5, "oom_kill!python": 3},
    "misc.txt": {"cuda_illegal_address": 2, "libnccl.so.2!0x69996": 1, "glog_fatal!padding_layer.cu:131": 1,
                 "glog_fatal!math_functions.cpp:45": 1},
    "xid.txt": {},
    "ecc.txt": {},
}


@pytest.mark.parametrize("name", list(EXPECTED_SUMMARY))
def test_every_real_line_has_a_named_outcome(name, validate):
    labels, failures = outcomes(name)
    assert len(labels) == len(real_lines(name))
    allowed = load_app_rules().reasons() | {"event", "in_traceback"}
    assert set(labels) <= allowed
    assert dict(Counter(labels)) == EXPECTED_SUMMARY[name]
    assert dict(Counter(f.signature for f in failures)) == EXPECTED_SIGNATURES[name]
    for f in failures:
        validate(f.to_crash("gpu-a-001", ts_from_ms(1_700_000_000_000)))


def test_real_line_details():
    _, nccl = outcomes("nccl.txt")
    hang = nccl[0]
    assert (hang.origin, hang.stream) == ("watchdog", "[rank0]")
    _, misc = outcomes("misc.txt")
    seg = next(f for f in misc if f.origin == "kernel_log")
    assert (seg.signal, seg.fault_address, seg.fault_class, seg.executable) == ("SIGSEGV", "0x7f797fe00000", "unmapped", "pt_main_thread")
    _, oom = outcomes("oom.txt")
    assert {f.origin for f in oom} == {"runtime_error", "oom_kill"}


class TestRules:
    def _copy(self, tmp_path: Path) -> Path:
        for f in RULES_DIR.iterdir():
            (tmp_path / f.name).write_bytes(f.read_bytes())
        return tmp_path

    def test_shipped_rules_load_and_every_sample_reaches_its_rule(self):
        rules = load_app_rules()
        for rule in rules.lines:
            p = AppLogParser(rules)
            p.feed("x", 0)
            for sample in (json.loads((RULES_DIR / "rules.json").read_text())["rules"][[r.name for r in rules.lines].index(rule.name)]["samples"]):
                p = AppLogParser(rules)
                p.feed(sample, 0)
                want = rule.reject or "event"
                assert p.last_outcome == want, (rule.name, sample, p.last_outcome)

    @pytest.mark.parametrize(("file", "edit", "message"), [
        ("rules.json", lambda d: d["rules"][0].update(pattern="(unclosed"), "bad regular expression"),
        ("rules.json", lambda d: d["rules"][0].update(samples=["nothing like it"]), "does not match its sample"),
        ("rules.json", lambda d: d["rules"][0].update(origin="telepathy"), "origin 'telepathy'"),
        ("rules.json", lambda d: d["rules"][0].update(signature="x!{nope}"), "unknown group 'nope'"),
        ("rules.json", lambda d: d.update(prefilter={"contains": ["NEVER"], "starts": "NEVER"}), "prefilter does not let its sample"),
    ])
    def test_bad_rule_file_names_file_and_line(self, tmp_path, file, edit, message):
        d = self._copy(tmp_path)
        doc = json.loads((d / file).read_text())
        edit(doc)
        (d / file).write_text(json.dumps(doc, indent=1))
        with pytest.raises(RuleFileError, match=message) as err:
            load_app_rules(d)
        assert str(err.value).startswith(str(d / file))

    def test_bad_list_lines_name_file_and_line(self, tmp_path):
        d = self._copy(tmp_path)
        (d / "python_skip_frames.txt").write_text("# ok\nfine\n(broken\n")
        with pytest.raises(RuleFileError, match=r"python_skip_frames.txt:3: bad regular expression"):
            load_app_rules(d)
        d = self._copy(tmp_path)
        (d / "normalize.tsv").write_text("pattern\treplacement\nonly-one-column\n")
        with pytest.raises(RuleFileError, match=r"normalize.tsv:2: expected 2 tab-separated columns"):
            load_app_rules(d)


class TestJob:
    @pytest.mark.parametrize(("env", "extra", "pattern", "want"), [
        ({"SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "r1"}, (), None, "slurm:4242"),
        ({"TORCHELASTIC_RUN_ID": "none"}, (), None, None),  # torchrun's default rendezvous id is no id
        ({"TORCHELASTIC_RUN_ID": "exp17"}, (), None, "torchelastic:exp17"),
        ({"FLEETEPI_JOB": "train-a", "SLURM_JOB_ID": "1"}, (), None, "train-a"),
        # a Kubernetes pod name through job_env and a pattern: the job, not the pod
        ({"POD_NAME": "llama-70b-worker-3"}, ("POD_NAME",), r"^(?P<job>.+)-(?:master|worker)-\d+$", "llama-70b"),
        ({}, (), None, None),
    ])
    def test_job_from_the_schedulers_environment(self, env, extra, pattern, want):
        assert job_from_env(env, extra, compile_job_pattern(pattern)) == want

    def test_job_from_a_path_and_bad_patterns(self):
        rx = compile_job_pattern(r"/jobs/(?P<job>[^/]+)/")
        assert job_from_name("/var/log/jobs/exp-9/rank3.log", rx) == "exp-9"
        with pytest.raises(ValueError, match="needs a"):
            compile_job_pattern(r"/jobs/([^/]+)/")
