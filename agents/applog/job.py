"""Which job a failing process belonged to: what makes 64 ranks of one job one case.

The detectors count a failure once per job where the event says its job, so
every event of one job must carry the same ``job`` string on every host.
Where it comes from, first match wins:

1. configuration (``fleetepi run --job``, ``job:`` of a source);
2. the scheduler's environment: ``FLEETEPI_JOB`` (set it from anything, e.g.
   a Kubernetes downward-API env var holding the job-name label),
   ``SLURM_JOB_ID`` (``slurm:4242``), ``TORCHELASTIC_RUN_ID`` (torchrun's
   rendezvous id, ``torchelastic:...``; its default ``none`` is no id), then
   any variables configured with ``job_env``;
3. for sources that read files or units, ``job_pattern``: a regex with a
   ``job`` group over the file path or unit name
   (``/var/log/jobs/(?P<job>\\d+)/rank\\d+\\.log``).

Pod names are not job ids (a PyTorchJob's pods are ``NAME-worker-3``): use
``job_pattern`` over ``POD_NAME`` through ``job_env``, or the label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: variable -> prefix of the job id it gives (the scheduler, so ids of two schedulers never collide)
DEFAULT_JOB_ENV: tuple[tuple[str, str], ...] = (
    ("FLEETEPI_JOB", ""),
    ("SLURM_JOB_ID", "slurm:"),
    ("TORCHELASTIC_RUN_ID", "torchelastic:"),
)
_NO_ID = {"", "none", "null", "0"}


def job_from_env(env: Mapping[str, str], extra: Sequence[str] = (), pattern: re.Pattern[str] | None = None) -> str | None:
    """The job id the environment names, or None.

    :param extra: more variables to try after the defaults (their value is the id as it is).
    :param pattern: a regex with a ``job`` group applied to the value found (e.g. over a pod name).
    """
    for var, prefix in (*DEFAULT_JOB_ENV, *((v, "") for v in extra)):
        value = env.get(var, "").strip()
        if value.lower() in _NO_ID:
            continue
        if pattern is not None and var in extra:
            m = pattern.search(value)
            if m is None:
                continue
            value = m.group("job")
        return f"{prefix}{value}"[:256]
    return None


def job_from_name(name: str, pattern: re.Pattern[str] | None) -> str | None:
    """The ``job`` group of ``pattern`` in a file path or unit name, or None."""
    if pattern is None:
        return None
    m = pattern.search(name)
    return m.group("job")[:256] if m and m.group("job") else None


def compile_job_pattern(pattern: str | None) -> re.Pattern[str] | None:
    """Compile a ``job_pattern`` option; it must have a ``job`` group.

    :raises ValueError: bad regex or no ``job`` group (a config error at start-up).
    """
    if pattern is None:
        return None
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"job_pattern {pattern!r}: {exc}") from None
    if "job" not in rx.groupindex:
        raise ValueError(f"job_pattern {pattern!r} needs a (?P<job>...) group")
    return rx


__all__ = ["DEFAULT_JOB_ENV", "compile_job_pattern", "job_from_env", "job_from_name"]
