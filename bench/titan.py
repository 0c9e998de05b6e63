"""Titan benchmark: do the detectors, with their defaults, find what the Titan paper found?

Streams the GPU failures of Titan (18,687 nodes, 2013-2019; converted by
``bench/titan_data.py``, cached under .cache/bench/) through
``fleetepi.detectors.Engine`` and checks the targets of issue 9, dates
included:

1. **cage 2** over-represented within 8 weeks of the failure wave's start.
   The wave start is computed from the data (``titan_data.wave_start``:
   the first of three consecutive months in which more old-batch GPUs
   fail than three times the mean month of 2014; July 2015). A finding is
   any firing alert with ``attribute: cage``, ``value: "2"``.
2. **batch=old first**: from the first insert of a new-batch GPU (the day
   the fleet holds both batches), the first batch/cage/cabinet finding to
   fire is ``batch=old``. Col/row/slot/node findings and the ranking by
   strength (score, relative risk) are printed beside it.
3. **bursts flagged**: every host with >= 10 failure reports in one UTC
   calendar day gets a host-level alert (``host_spike``, or
   ``telemetry_spike`` naming the host) that day or the next (or the day
   before, when the storm began before midnight). Host alerts on hosts
   without such a burst are listed for context.

Also printed: the nodes that failed most often over the years (and whether
they were flagged, against the number of such nodes chance alone gives)
and the replay rate against decoding the same file alone.

    .venv/bin/python bench/titan.py                    # figures, and docs/bench/titan.md
    .venv/bin/python bench/titan.py --config my.yaml   # try settings (the page is not rewritten)
    .venv/bin/python bench/titan.py --json > titan.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scipy.stats import binom, poisson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import titan_data
from machine import describe

from fleetepi.contract import Alert, Event, Host, Telemetry, decode_event, ts_from_ms
from fleetepi.detectors import DetectorConfig, Engine
from fleetepi.replay import load_config

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
DOC = ROOT / "docs" / "bench" / "titan.md"

#: Targets of issue 9.
CAGE_DEADLINE_WEEKS = 8.0
BURST_MIN_ERRORS = 10
#: Attributes whose findings are ranked; the first three are the target's.
RANK_ATTRIBUTES = ("batch", "cage", "cabinet", "col", "row", "slot", "node")
TARGET_ATTRIBUTES = RANK_ATTRIBUTES[:3]
HOST_ALERT_KINDS = ("host_spike", "telemetry_spike")
DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS


# --------------------------------------------------------------------------- events
def cache_path(full: Path = titan_data.FULL_CSV, summary: Path = titan_data.SUMMARY_CSV) -> Path:
    """The converted file, named by what it depends on: the converter's source and both inputs."""
    h = hashlib.sha256(Path(titan_data.__file__).read_bytes())
    for p in (full, summary):
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return CACHE / f"titan-{h.hexdigest()[:12]}.jsonl.gz"


def ensure_events(refresh: bool = False) -> Path:
    path = cache_path()
    if refresh or not path.exists():
        print(f"converting the Titan CSVs into {path.relative_to(ROOT)} (cached) ...", file=sys.stderr, flush=True)
        titan_data.write_jsonl(titan_data.convert().events, path)
        for stale in CACHE.glob("titan-*.jsonl.gz"):
            if stale != path:
                stale.unlink()  # made by an older converter or from other inputs
    return path


def load_events(path: Path) -> tuple[list[Event], float]:
    """Decode the cached file (the contract's own decoder); returns the events and the CPU seconds it took."""
    c0 = time.process_time()
    with gzip.open(path, "rb") as fh:
        events = [decode_event(line) for line in fh]
    return events, time.process_time() - c0


# --------------------------------------------------------------------------- run
@dataclass
class Run:
    alerts: list[Alert]
    wall_s: float
    cpu_s: float
    counters: dict[str, dict[str, int]]


def run_engine(events: Sequence[Event], config: DetectorConfig) -> Run:
    """Every event through one Engine, then a day of event time to let alerts resolve.

    The engine's wall clock is pinned to the last event: Titan is dated in
    the past, and its quiet months are longer than ``max_future_s``.
    """
    last_ms = max(e.ts_ms for e in events)
    engine = Engine(config, clock_ms=lambda: last_ms)
    alerts: list[Alert] = []
    process = engine.process
    w0, c0 = time.perf_counter(), time.process_time()
    for ev in events:
        got = process(ev)
        if got:
            alerts.extend(got)
    alerts.extend(engine.advance(last_ms + DAY_MS))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return Run(alerts=alerts, wall_s=wall, cpu_s=cpu, counters={
        "events": dict(engine.events), "invalid": dict(engine.invalid), "alerts": dict(engine.alerts)})


# --------------------------------------------------------------------------- analysis
def day(ts_ms: int) -> str:
    return ts_from_ms(ts_ms).strftime("%Y-%m-%d")


@dataclass
class Finding:
    """One (attribute, value) that alerts named, from the day both batches are in the fleet."""

    attribute: str
    value: str
    first: str
    firings: int
    max_score: float
    max_relative_risk: float | None
    channels: list[str]


@dataclass
class Burst:
    host: str
    day: str
    errors: int
    flagged: str | None  # date of the host alert that day or the next, if any


@dataclass
class Repeater:
    host: str
    failure_days: int
    gpus: int
    reports: int
    first: str
    last: str
    flagged: str | None  # date of its first host alert, if any


@dataclass
class Report:
    """Every figure the benchmark prints, as plain data (``--json``, the docs page, tests)."""

    events: int
    hosts: int
    failures: int
    first_event: str
    last_event: str
    alerts_firing: dict[str, int]
    severities: dict[str, int]
    # 1. cage 2
    wave_start: str | None
    cage2_first: str | None
    cage2_alert: str | None
    cage2_delay_weeks: float | None
    cage2_pass: bool
    # 2. batch=old
    both_batches: str | None
    findings: list[Finding]
    active_at_both: list[str]
    batch_old_time_rank: int | None
    batch_old_score_rank: int | None
    batch_old_rr_rank: int | None
    batch_old_pass: bool
    #: the data's own evidence: first day an exact test on every report since both batches are in shows
    #: old > new at each of these p-values (``batch_evidence``)
    batch_evidence: dict[str, str | None]
    # 3. bursts
    bursts: list[Burst]
    bursts_pass: bool
    other_host_alerts: list[str]
    host_alerts: int
    # context
    repeaters: list[Repeater]
    repeaters_by_chance: float
    facts: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)


def _describe(a: Alert) -> str:
    what = a.telemetry_kind or a.signature or ""
    if a.code is not None:
        what += f":{a.code}"
    rr = f", RR {a.relative_risk:.1f}" if a.relative_risk is not None else ""
    return f"{a.kind} {what}".strip() + f" score {a.score:.2f}{rr}"


def _near(ts_ms: int, burst_day: int) -> bool:
    """Does a host alert at ``ts_ms`` answer a burst on ``burst_day`` (days since the epoch)?

    The burst's day or the next; or the day before, where the same storm
    began before midnight UTC and its alert is still firing.
    """
    return (burst_day - 1) * DAY_MS <= ts_ms < (burst_day + 2) * DAY_MS


#: p-values at which ``batch_evidence`` dates the first day the data shows old > new.
EVIDENCE_P = (1e-3, 1e-6)


def batch_evidence(events: Sequence[Event], both_ms: int, levels: Sequence[float] = EVIDENCE_P) -> dict[str, str | None]:
    """First day each p-value in ``levels`` is reached by the old batch against the new, from ``both_ms`` on.

    Why: whether ranking ``batch=old`` first is possible at all. The test
    is the best the data allows, with hindsight no detector has: every
    failure report since the new batch came, new ones among them against
    the new batch's share of the host-time since (exact binomial, lower
    tail). A detector cannot name the old batch before this says it could.
    """
    batch: dict[str, str] = {}
    n_hosts: Counter[str] = Counter()
    exposure: Counter[str] = Counter()
    fails: Counter[str] = Counter()
    last_ms = both_ms
    out: dict[str, str | None] = {f"{p:g}": None for p in levels}
    for e in sorted(events, key=lambda e: e.ts_ms):
        if e.ts_ms > last_ms:
            for b, n in n_hosts.items():
                exposure[b] += n * (e.ts_ms - last_ms)
            last_ms = e.ts_ms
        if isinstance(e, Host):
            old = batch.get(e.host)
            if old is not None:
                n_hosts[old] -= 1
            batch[e.host] = e.attributes.get("batch", "unknown")
            n_hosts[batch[e.host]] += 1
        elif isinstance(e, Telemetry) and e.ts_ms >= both_ms:
            fails[batch.get(e.host, "unknown")] += 1
            total = exposure["old"] + exposure["new"]
            if total <= 0:
                continue
            p = float(binom.cdf(fails["new"], fails["old"] + fails["new"], exposure["new"] / total))
            for level in levels:
                if p < level and out[f"{level:g}"] is None:
                    out[f"{level:g}"] = day(e.ts_ms)
    return out


def analyse(events: Sequence[Event], alerts: Sequence[Alert], top_repeaters: int = 5) -> Report:
    """Score one run against the targets (pure: events and alerts in, figures out)."""
    hosts = [e for e in events if isinstance(e, Host)]
    fails = [e for e in events if isinstance(e, Telemetry)]
    firing = sorted((a for a in alerts if a.state == "firing"), key=lambda a: a.ts_ms)
    start_ms = min(e.ts_ms for e in events)
    facts = titan_data.published_facts(events)  # type: ignore[arg-type]

    # 1. cage 2 after the wave start
    wave = facts.wave_start
    wave_ms = titan_data.month_start_ms(wave) if wave else None
    cage2 = next((a for a in firing if a.attribute == "cage" and a.value == "2"), None)
    delay_w = (cage2.ts_ms - wave_ms) / WEEK_MS if cage2 is not None and wave_ms is not None else None

    # 2. findings from the day the fleet holds both batches: the first re-announcement as "new"
    #    (the first new GPU inserted where an old one was; titan_data announces every host at the start)
    both_ms = next((h.ts_ms for h in hosts if h.ts_ms > start_ms and h.attributes.get("batch") == "new"), None)
    findings: dict[tuple[str, str], Finding] = {}
    active: dict[str, Alert] = {}
    for a in sorted(alerts, key=lambda a: a.ts_ms):
        if a.attribute not in RANK_ATTRIBUTES or a.value is None:
            continue
        if both_ms is not None and a.ts_ms < both_ms:
            if a.state == "firing":
                active[a.key] = a
            else:
                active.pop(a.key, None)
            continue
        if a.state != "firing" or both_ms is None:
            continue
        f = findings.get((a.attribute, a.value))
        chan = a.telemetry_kind if a.code is None else f"{a.telemetry_kind}:{a.code}"
        if f is None:
            f = findings[(a.attribute, a.value)] = Finding(a.attribute, a.value, day(a.ts_ms), 0, a.score,
                                                          a.relative_risk, [])
        f.firings += 1
        f.max_score = max(f.max_score, a.score)
        if a.relative_risk is not None:
            f.max_relative_risk = max(f.max_relative_risk or 0.0, a.relative_risk)
        if chan and chan not in f.channels:
            f.channels.append(chan)
    ranked = list(findings.values())  # already in order of first firing
    target = [f for f in ranked if f.attribute in TARGET_ATTRIBUTES]

    def rank_of(items: list[Finding]) -> int | None:
        return next((i + 1 for i, f in enumerate(items) if (f.attribute, f.value) == ("batch", "old")), None)

    time_rank = rank_of(target)
    score_rank = rank_of(sorted(target, key=lambda f: -f.max_score))
    rr_rank = rank_of(sorted(target, key=lambda f: -(f.max_relative_risk or 0.0)))

    # 3. bursts: >= 10 errors on one host in one UTC day, and host-level alerts
    per_day: Counter[tuple[str, int]] = Counter()
    for e in fails:
        per_day[(e.host, e.ts_ms // DAY_MS)] += e.n
    host_alerts = [a for a in firing if a.kind in HOST_ALERT_KINDS and a.host is not None]
    by_host: dict[str, list[Alert]] = defaultdict(list)
    for a in host_alerts:
        by_host[a.host].append(a)  # type: ignore[index]
    bursts = []
    burst_days: dict[str, list[int]] = defaultdict(list)
    for (host, d), n in sorted(per_day.items(), key=lambda kv: kv[0][1]):
        if n < BURST_MIN_ERRORS:
            continue
        burst_days[host].append(d)
        hit = next((a for a in by_host.get(host, ()) if _near(a.ts_ms, d)), None)
        bursts.append(Burst(host, day(d * DAY_MS), n, day(hit.ts_ms) if hit else None))
    others = [f"{day(a.ts_ms)} {a.host}: {_describe(a)}, {per_day.get((a.host, a.ts_ms // DAY_MS), 0)} errors that day"
              for a in host_alerts
              if not any(_near(a.ts_ms, d) for d in burst_days.get(a.host, ()))]  # type: ignore[arg-type]

    # context: nodes that fail again and again, against chance
    fail_days: dict[str, set[int]] = defaultdict(set)
    gpus: dict[str, set[str]] = defaultdict(set)
    reports: Counter[str] = Counter()
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for e in fails:
        fail_days[e.host].add(e.ts_ms // DAY_MS)
        gpus[e.host].add(e.device or "")
        reports[e.host] += 1
        first.setdefault(e.host, e.ts_ms)
        last[e.host] = e.ts_ms
    top = sorted(fail_days, key=lambda h: (-len(fail_days[h]), -len(gpus[h]), -reports[h], h))[:top_repeaters]
    repeaters = [Repeater(h, len(fail_days[h]), len(gpus[h]), reports[h], day(first[h]), day(last[h]),
                          day(by_host[h][0].ts_ms) if by_host.get(h) else None) for h in top]
    n_hosts = len({h.host for h in hosts})
    mean_days = sum(len(v) for v in fail_days.values()) / n_hosts if n_hosts else 0.0
    chance = float(n_hosts * poisson.sf(repeaters[-1].failure_days - 1, mean_days)) if repeaters else 0.0

    sev = Counter(a.severity or "page" for a in firing)
    return Report(
        events=len(events), hosts=n_hosts, failures=len(fails), first_event=day(start_ms),
        last_event=day(max(e.ts_ms for e in events)), alerts_firing=dict(Counter(a.kind for a in firing)),
        severities=dict(sev),
        wave_start=day(wave_ms) if wave_ms is not None else None,
        cage2_first=day(cage2.ts_ms) if cage2 else None, cage2_alert=_describe(cage2) if cage2 else None,
        cage2_delay_weeks=delay_w, cage2_pass=delay_w is not None and delay_w <= CAGE_DEADLINE_WEEKS,
        both_batches=day(both_ms) if both_ms is not None else None, findings=ranked,
        active_at_both=[f"{a.attribute}={a.value} since {day(a.ts_ms)} ({_describe(a)})" for a in active.values()],
        batch_old_time_rank=time_rank, batch_old_score_rank=score_rank, batch_old_rr_rank=rr_rank,
        batch_old_pass=time_rank == 1,
        batch_evidence=batch_evidence(events, both_ms) if both_ms is not None else {},
        bursts=bursts, bursts_pass=bool(bursts) and all(b.flagged for b in bursts), other_host_alerts=others,
        host_alerts=len(host_alerts), repeaters=repeaters, repeaters_by_chance=chance,
        facts={"old_new_ratio": facts.old_new_ratio, "cage2_cage0_ratio": facts.cage2_cage0_ratio,
               "wave_start_month": wave})


# --------------------------------------------------------------------------- output
def _pf(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _rank(r: int | None, of: int) -> str:
    return f"{r} of {of}" if r is not None else f"absent (of {of})"


def _evidence(r: Report) -> str:
    """``batch_evidence`` in words: each p-value and the first day the data reached it."""
    return ", ".join(f"p < {k} on {v or 'no day'}" for k, v in r.batch_evidence.items())


def text_lines(r: Report) -> list[str]:
    n_target = sum(f.attribute in TARGET_ATTRIBUTES for f in r.findings)
    out = [f"Titan: {r.hosts:,} hosts, {r.events:,} events ({r.failures:,} failure reports), "
           f"{r.first_event} .. {r.last_event}",
           "alerts firing: " + (", ".join(f"{k} {v}" for k, v in sorted(r.alerts_firing.items())) or "none")
           + "; by severity: " + (", ".join(f"{k} {v}" for k, v in sorted(r.severities.items())) or "-"),
           "",
           f"1. cage 2 within {CAGE_DEADLINE_WEEKS:g} weeks of the wave start: {_pf(r.cage2_pass)}",
           f"   wave start (first of {titan_data.WAVE_RUN_MONTHS} months > {titan_data.WAVE_FACTOR:g}x the "
           f"{titan_data.WAVE_BASELINE_YEAR} mean month of failed old GPUs): {r.wave_start}"]
    if r.cage2_first:
        out.append(f"   first cage=2 alert: {r.cage2_first} ({r.cage2_alert}), {r.cage2_delay_weeks:.1f} weeks after")
    else:
        out.append("   no alert named cage=2")
    out += ["", f"2. batch=old first among batch/cage/cabinet findings once both batches are in: {_pf(r.batch_old_pass)}",
            f"   first new-batch GPU inserted: {r.both_batches}",
            f"   batch=old: rank {_rank(r.batch_old_time_rank, n_target)} by first alert, "
            f"{_rank(r.batch_old_score_rank, n_target)} by score, {_rank(r.batch_old_rr_rank, n_target)} by relative risk"]
    if r.batch_evidence:
        out.append("   the data's own evidence (every report since, new-batch ones against the new batch's host-time, "
                   f"exact): old > new first at {_evidence(r)}")
    if r.active_at_both:
        out.append("   already firing then: " + "; ".join(r.active_at_both))
    out.append(f"   findings from then on, by first alert ({len(r.findings)}):")
    for i, f in enumerate(r.findings[:15]):
        rr = f"{f.max_relative_risk:.1f}" if f.max_relative_risk is not None else "-"
        out.append(f"   {i + 1:3d}. {f.first}  {f.attribute}={f.value}  firings {f.firings}, max score "
                   f"{f.max_score:.2f}, max RR {rr}  [{', '.join(f.channels)}]")
    if len(r.findings) > 15:
        out.append(f"        ... {len(r.findings) - 15} more")
    flagged = sum(1 for b in r.bursts if b.flagged)
    out += ["", f"3. hosts with a burst of >= {BURST_MIN_ERRORS} errors in a day flagged: {_pf(r.bursts_pass)} "
                f"({flagged} of {len(r.bursts)} burst days)"]
    for b in r.bursts:
        out.append(f"   {b.day}  {b.host:<14} {b.errors:3d} errors  " + (f"flagged {b.flagged}" if b.flagged else "NOT flagged"))
    out.append(f"   host alerts without such a burst: {len(r.other_host_alerts)} of {r.host_alerts}")
    out += [f"   {x}" for x in r.other_host_alerts[:10]]
    out += ["", "nodes failing most often over the years (distinct failure days):"]
    for p in r.repeaters:
        out.append(f"   {p.host:<14} {p.failure_days} days, {p.gpus} GPUs, {p.reports} reports, {p.first} .. {p.last}  "
                   + (f"flagged {p.flagged}" if p.flagged else "never flagged"))
    if r.repeaters:
        out.append(f"   by chance alone (Poisson at the fleet's mean): {r.repeaters_by_chance:.1f} nodes expected with "
                   f">= {r.repeaters[-1].failure_days} failure days")
    t = r.timing
    if t:
        out += ["", f"replay: {t['events_per_cpu_s']:,.0f} events/s of CPU ({t['engine_cpu_s']:.1f} s CPU, "
                    f"{t['engine_wall_s']:.1f} s wall, {t['steps']:,.0f} evaluation steps); decoding alone "
                    f"{t['decode_events_per_cpu_s']:,.0f} events/s; load average {t['loadavg']}"]
    return out


def markdown(r: Report, meta: dict[str, Any]) -> str:
    n_target = sum(f.attribute in TARGET_ATTRIBUTES for f in r.findings)
    t = r.timing
    ref = meta["reference"]
    lines = [
        "# Titan benchmark: real GPU failures, default detector settings", "",
        f"`bench/titan.py` on the GPU failures of the Titan supercomputer (ORNL): {r.hosts:,} nodes, "
        f"{r.failures:,} failure reports (DBE as `ecc_uncorrected`, OTB as `xid` 79), {r.first_event} .. "
        f"{r.last_event}, {r.events:,} events with the host announcements. Data: `olcf/TitanGPULife`, "
        "G. Ostrouchov et al., *GPU Lifetimes on Titan Supercomputer: Survival Analysis and Reliability*, "
        "SC '20 (cite it when you use the data). Conversion and its choices: `bench/titan_data.py`.", "",
        f"Run {meta['date']} on {meta['machine']}, detector settings: {meta['config']}.", "",
        "| target (issue 9) | result | figure |", "|---|---|---|",
        f"| cage 2 over-represented within {CAGE_DEADLINE_WEEKS:g} weeks of the wave start ({r.wave_start}) | "
        f"**{_pf(r.cage2_pass)}** | "
        + (f"first `cage=2` alert {r.cage2_first}, {r.cage2_delay_weeks:.1f} weeks after" if r.cage2_first
           else "no `cage=2` alert") + " |",
        f"| `batch=old` first among batch/cage/cabinet findings from {r.both_batches} | "
        f"**{_pf(r.batch_old_pass)}** | rank {_rank(r.batch_old_time_rank, n_target)} by first alert, "
        f"{_rank(r.batch_old_score_rank, n_target)} by score, {_rank(r.batch_old_rr_rank, n_target)} by RR"
        + (f"; the data itself shows old > new (every report since, exact) at {_evidence(r)}"
           if r.batch_evidence else "") + " |",
        f"| hosts with >= {BURST_MIN_ERRORS} errors in a day flagged | **{_pf(r.bursts_pass)}** | "
        f"{sum(1 for b in r.bursts if b.flagged)} of {len(r.bursts)} burst days, "
        f"{len({b.host for b in r.bursts} - {b.host for b in r.bursts if not b.flagged})} of "
        f"{len({b.host for b in r.bursts})} hosts; "
        f"{len(r.other_host_alerts)} of {r.host_alerts} host alerts without a burst |", "",
        "Definitions: the wave start is the first of "
        f"{titan_data.WAVE_RUN_MONTHS} consecutive months in which more old-batch GPUs fail (first report "
        f"per serial) than {titan_data.WAVE_FACTOR:g}x the mean month of {titan_data.WAVE_BASELINE_YEAR}; a "
        "finding is any firing alert with that `attribute`/`value`; the day both batches are in is the "
        "first insert of a new-batch GPU; a burst is a host's failure reports in one UTC calendar day, "
        "flagged by a `host_spike` or host `telemetry_spike` that day, the next or the day before.", "",
        "## Output", "", "```", *text_lines(r), "```", "",
        "## Published facts in the converted events", "",
        f"From the converted events: old/new failed GPUs per GPU-year {r.facts['old_new_ratio']:.1f}x, cage 2 / "
        f"cage 0 within the old batch {r.facts['cage2_cage0_ratio']:.2f}x, wave start {r.facts['wave_start_month']}. "
        "The README's ~25x and ~3x count GPUs *taken out* after a failure, each at the location where it spent "
        f"the longest time ({ref['dead']['old_new_ratio']:.1f}x and {ref['dead']['cage2_cage0_ratio']:.2f}x from "
        "the paper's summary file). Events tell a failure report, not a removal (GPUs with any report give "
        f"{ref['reported']['old_new_ratio']:.1f}x in the summary file), at the node that reported it: a GPU "
        "that moved is counted there, not where it spent the longest time, and for several hundred old GPUs "
        "the two are in different cages (mostly cage 2 in the paper, cage 0 or 1 at the failure). "
        "`.venv/bin/python bench/titan_data.py --check` prints all three.", "",
        "## Timing", "",
        f"- replay through the Engine: {t.get('engine_cpu_s', 0):.1f} s CPU, {t.get('engine_wall_s', 0):.1f} s wall = "
        f"{t.get('events_per_cpu_s', 0):,.0f} events per CPU-second; decoding the same file alone: "
        f"{t.get('decode_events_per_cpu_s', 0):,.0f} events/s (load average {t.get('loadavg', '?')}; shared "
        "machine: the lead re-measures on a quiet one). Few events over six years: the engine evaluates "
        f"every step boundary of event time ({t.get('steps', 0):,.0f} steps of `step_s`), so this rate "
        "measures the cost of time passing more than the cost of events.", "",
        "Reproduce: `.venv/bin/python bench/titan.py` (`--config FILE` to try settings, `--json` for scripts).", ""]
    return "\n".join(lines)




def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="examples:\n  python bench/titan.py\n  python bench/titan.py --config month.yaml"
                                        "\n  python bench/titan.py --json > titan.json")
    ap.add_argument("--config", type=Path, help="YAML mapping of DetectorConfig fields (default: the defaults)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON instead of text")
    ap.add_argument("--md", type=Path, default=None,
                    help=f"write the docs page here (default: {DOC.relative_to(ROOT)}, only with default settings)")
    ap.add_argument("--no-write", action="store_true", help="write no docs page")
    ap.add_argument("--refresh", action="store_true", help="convert again even if the cache is there")
    args = ap.parse_args(argv)
    try:
        config = load_config(args.config)
    except Exception as exc:  # noqa: BLE001 - ConfigError and friends: a bad file ends the run before any work
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = ensure_events(args.refresh)
    events, decode_cpu = load_events(path)
    run = run_engine(events, config)
    report = analyse(events, run.alerts)
    report.timing = {"engine_cpu_s": run.cpu_s, "engine_wall_s": run.wall_s,
                     "events_per_cpu_s": len(events) / run.cpu_s if run.cpu_s else 0.0,
                     "decode_cpu_s": decode_cpu,
                     "decode_events_per_cpu_s": len(events) / decode_cpu if decode_cpu else 0.0,
                     "steps": (events[-1].ts_ms - events[0].ts_ms) / 1000 / config.step_s,
                     "loadavg": _loadavg()}  # type: ignore[dict-item]
    if run.counters["invalid"]:
        print(f"engine rejected events: {run.counters['invalid']}", file=sys.stderr)
    if args.json:
        print(json.dumps({"config": str(args.config or "defaults"), "counters": run.counters, **asdict(report)},
                         indent=2, default=str))
    else:
        print("\n".join(text_lines(report)))
    md = args.md or (DOC if args.config is None else None)
    if md is not None and not args.no_write:
        meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": describe(),
                "config": f"`{args.config}`" if args.config else "defaults (`DetectorConfig()`)",
                "reference": titan_data.reference_facts()}
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(markdown(report, meta))
        print(f"wrote {md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
