"""The command lines a decision runs: built as argv lists, run without a shell.

Building (pure: config + host + alert -> argv) is apart from running
(``run_argv``, the one place that starts a process), so tests assert the
exact command lines and a dry run prints what would have been run.

Kubernetes goes through ``kubectl`` rather than the API client: the same
binary operators use by hand, its kubeconfig/in-cluster auth, and a command
line in the audit log that can be pasted to undo a decision.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetepi.hook.config import TAINT_RE, Action, CommandAction, KubernetesAction, SlurmAction
from fleetepi.hook.template import render, sanitize

Argv = tuple[str, ...]
DEFAULT_TIMEOUT_S = 30.0


def template_values(host: str, labels: Mapping[str, str], annotations: Mapping[str, str],
                    fingerprint: str, status: str) -> dict[str, str]:
    """Placeholder values: the (already validated) host as is, everything else sanitized."""
    return {
        "host": host,
        "alertname": sanitize(labels.get("alertname", "")),
        "kind": sanitize(labels.get("kind", "")),
        "severity": sanitize(labels.get("severity", "")),
        "fingerprint": sanitize(fingerprint),
        "status": sanitize(status),
        "summary": sanitize(annotations.get("summary", "")),
    }


def quarantine_argvs(action: Action, values: Mapping[str, str]) -> list[Argv]:
    """Command lines that take ``values['host']`` out of service."""
    host = values["host"]
    if isinstance(action, KubernetesAction):
        base = (action.kubectl, *action.kubectl_args)
        out: list[Argv] = []
        if action.cordon:
            out.append((*base, "cordon", host))
        if action.taint:
            out.append((*base, "taint", "nodes", host, action.taint, "--overwrite"))
        if action.label:
            out.append((*base, "label", "nodes", host, action.label, "--overwrite"))
        return out
    if isinstance(action, SlurmAction):
        reason = sanitize(render(action.reason, values)) or "fleetepi"
        return [(action.scontrol, "update", f"nodename={host}", "state=drain", f"reason={reason}")]
    return [tuple(render(part, values) for part in action.quarantine)]


def release_argvs(action: Action, values: Mapping[str, str]) -> list[Argv]:
    """Command lines that undo :func:`quarantine_argvs` (empty if there is no undo)."""
    host = values["host"]
    if isinstance(action, KubernetesAction):
        base = (action.kubectl, *action.kubectl_args)
        out: list[Argv] = []
        if action.cordon:
            out.append((*base, "uncordon", host))
        if action.taint:
            m = TAINT_RE.match(action.taint)
            assert m is not None  # checked at config load
            out.append((*base, "taint", "nodes", host, f"{m.group('key')}:{m.group('effect')}-"))
        if action.label:
            key = action.label.split("=", 1)[0]
            out.append((*base, "label", "nodes", host, f"{key}-"))
        return out
    if isinstance(action, SlurmAction):
        return [(action.scontrol, "update", f"nodename={host}", "state=resume")]
    return [tuple(render(part, values) for part in action.release)] if action.release else []


def timeout_of(action: Action) -> float:
    return action.timeout_s if isinstance(action, CommandAction) else DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class RunResult:
    """What one command did, for the audit log."""

    argv: Argv
    returncode: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_argv(argv: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S,
             env: Mapping[str, str] | None = None) -> RunResult:
    """Run one command (no shell), never raising: a failure is a result with its reason."""
    try:
        proc = subprocess.run(list(argv), shell=False, capture_output=True, text=True, timeout=timeout_s,
                              env=dict(os.environ if env is None else env), stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        return RunResult(tuple(argv), 127, f"{argv[0]}: not found on PATH")
    except subprocess.TimeoutExpired:
        return RunResult(tuple(argv), 124, f"timed out after {timeout_s:g} s")
    except OSError as exc:
        return RunResult(tuple(argv), 126, f"{argv[0]}: {exc.strerror}")
    text = (proc.stdout + proc.stderr).strip()
    return RunResult(tuple(argv), proc.returncode, text[-2000:])


__all__ = ["Argv", "RunResult", "quarantine_argvs", "release_argvs", "run_argv", "template_values", "timeout_of"]
