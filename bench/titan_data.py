"""Titan's GPU failures (ORNL, 2013-2019) as fleetepi contract events.

Why this exists: the detectors were tuned on our own simulator (issue 9);
Titan is a real, independent fleet of 18,687 GPU nodes over six years, with
effects published in a peer-reviewed paper that the detectors should find
(an old batch that failed ~25x as often per GPU-year, a failure wave from
mid-2015, cage 2 failing ~3x as often as cage 0). ``bench/titan.py`` streams
these events through the detectors; issue 14's report reads them too.

Source: ``/work/shared/data/real/titan/`` (``gc_full.csv.gz``,
``gc_summary_loc.csv.gz``) from the public repository ``olcf/TitanGPULife``;
cite G. Ostrouchov, D. Maxwell, R. A. Ashraf, C. Engelmann, M. Shankar,
J. H. Rogers, *GPU Lifetimes on Titan Supercomputer: Survival Analysis and
Reliability*, SC '20.

How the files map to events, and why (read with the paper's
``code/TitanGPUmodel.Rmd``, which wrote ``gc_full.csv``):

- **Times** are Eastern wall-clock (the paper parses them with
  ``tz = "America/New_York"``; its ``duration`` column is the DST-correct
  difference, which tests/bench checks) and are converted to UTC.
- **A host is a node location** (``c11-2c1s4n1``: cabinet column 11, row 2,
  cage 1, slot 4, node 1). Every location is announced once at the start of
  the stream (the earliest ``insert``) with ``cabinet``, ``col``, ``row``,
  ``cage``, ``slot``, ``node`` and the ``batch`` (``old``/``new``, from
  ``gc_summary_loc``) of the GPU it holds; it is re-announced at the
  ``insert`` of a GPU whose batch differs from the one it had.
- **A node with no GPU installed** (between a pull and the next insert, a
  few days at most; or before its first recorded insert) is still a node
  of the machine: a position in a cage that sends nothing while empty. It
  keeps the ``batch`` of the last GPU it held, or, before its first one, of
  the first GPU it will hold. Announcing removals instead (``batch`` absent
  or ``none`` while empty) would double the announcements, add a cohort
  that can never fail, and -- since a failure is logged at the very time
  of the pull -- risk dating a failure after its own host went empty. The
  price: empty node-time counts in its batch's denominator
  (:func:`empty_share` measures it: 5.3 % of node-time, 2.4 % after the
  inventory of 2014-01-21 that first saw most nodes).
  Five locations got their first GPU only in 2017-2018, four of them a
  new one: by this rule those four are new-batch hosts from the start.
- **A failure is one DBE or OTB row**, dated by its ``remove`` column:
  DBE (double-bit ECC error) -> ``ecc_uncorrected`` with ``count`` 1, OTB
  (GPU fell off the bus) -> ``xid`` 79 (NVIDIA's "GPU has fallen off the
  bus"); ``device`` is the GPU serial. The paper's script full-joins the
  error log onto the inventory stays by (serial, location, time): a stay
  row that carries an event is an error dated at the stay's end (the error
  ended the stay); a row without ``insert`` (1,158) is an error logged
  while the GPU stayed in place -- 1,048 of them earlier reports by a GPU
  whose stay then ended with an error (median 24 minutes before, a tenth
  more than four weeks), 74 by a GPU whose stay ended without one. Each
  row is a real line of the error log, so each becomes one event;
  ``message`` says ``repeat`` when the same serial already reported at
  that location (:data:`REPEAT`), and :func:`published_facts` counts
  failed GPUs, not reports, where it compares with the paper. 40 reports
  name a serial that the inventory places elsewhere (or nowhere) at that
  time; they stay at the node the error log names (noted as
  ``serial_not_in_place``). ``out`` (last seen before the final
  inventory) and ``duration`` only restate the stay; no event needs them.
- Rows that cannot be used are skipped with a counted reason
  (:data:`SKIP_REASONS`); the run goes on.

    .venv/bin/python bench/titan_data.py -o titan.jsonl.gz        # convert and print the summary
    .venv/bin/python bench/titan_data.py --check                   # summary and published facts only
"""

from __future__ import annotations

import argparse
import bisect
import csv
import gzip
import io
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from fleetepi.contract import Host, Telemetry, encode, ts_from_ms

DATA_DIR = Path("/work/shared/data/real/titan")
FULL_CSV = DATA_DIR / "gc_full.csv.gz"
SUMMARY_CSV = DATA_DIR / "gc_summary_loc.csv.gz"

#: The paper parses every date-time in this zone (TitanGPUmodel.Rmd, ``time_zone``).
SOURCE_TZ = ZoneInfo("America/New_York")
#: Attributes of every host, in announcement order.
HOST_ATTRIBUTES = ("cabinet", "col", "row", "cage", "slot", "node", "batch")
#: Failure column value -> (telemetry kind, Xid code or None).
FAILURE_KINDS: dict[str, tuple[str, int | None]] = {"DBE": ("ecc_uncorrected", None), "OTB": ("xid", 79)}
#: ``message`` prefix of a failure report by a serial that already reported at that location.
REPEAT = "repeat"
#: Why a gc_full row can produce no event (counted, never fatal).
SKIP_REASONS = ("same_batch_swap", "bad_location", "bad_time", "unknown_event", "unknown_serial")

_LOCATION = re.compile(r"^c(\d{1,2})-(\d)c([0-2])s([0-7])n([0-3])$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS_PER_YEAR = 365.25 * 86400 * 1000


class TitanDataError(ValueError):
    """A file that is not the Titan data (missing columns): nothing sensible can be converted."""


def parse_location(location: str) -> dict[str, str] | None:
    """Host attributes of a node location, or None when it is not one (``c11-2c1s4n1`` -> col 11, ...)."""
    m = _LOCATION.match(location)
    if m is None:
        return None
    col, row, cage, slot, node = m.groups()
    return {"cabinet": f"c{col}-{row}", "col": col, "row": row, "cage": cage, "slot": slot, "node": node}


def eastern_to_ms(text: str, _cache: dict[str, int | None] = {}) -> int | None:  # noqa: B006 - a deliberate memo
    """Epoch ms of an Eastern wall-clock ``YYYY-MM-DD HH:MM:SS``; None if unparseable.

    Memoized: a few thousand inventory times repeat over 37,000 rows. A time
    in the repeated autumn hour is read as standard time (``fold=1``), as the
    paper's lubridate read it: with that, every ``duration`` of gc_full is
    exactly ``remove - insert`` (tests/bench checks all 36,185 of them).
    """
    got = _cache.get(text, -1)
    if got != -1:
        return got
    try:
        local = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=SOURCE_TZ, fold=1)
        ms: int | None = int((local - _EPOCH).total_seconds()) * 1000
    except ValueError:
        ms = None
    _cache[text] = ms
    return ms


@dataclass(frozen=True, slots=True)
class Row:
    """One row of gc_full, parsed (``line``: its line in the CSV, header = 1)."""

    line: int
    sn: str
    location: str
    insert_ms: int | None
    remove_ms: int | None
    event: str


def _open_text(path: Path) -> io.TextIOBase:
    return gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="")  # type: ignore[return-value]  # noqa: SIM115


def read_rows(path: Path = FULL_CSV) -> Iterator[Row]:
    """The rows of gc_full.csv(.gz) with times in epoch ms (None where empty or bad)."""
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        need = {"SN", "location", "insert", "remove", "event"}
        if not need <= set(reader.fieldnames or ()):
            raise TitanDataError(f"{path}: expected columns {sorted(need)}, got {reader.fieldnames}")
        for i, r in enumerate(reader):
            ins, rem = r["insert"], r["remove"]
            yield Row(line=i + 2, sn=r["SN"], location=r["location"],
                      insert_ms=eastern_to_ms(ins) if ins else None,
                      remove_ms=eastern_to_ms(rem) if rem else None, event=r["event"])


def read_batches(path: Path = SUMMARY_CSV) -> dict[str, str]:
    """GPU serial -> ``old``/``new`` (the paper: first insert after 2016-01-01 is the new batch)."""
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        if not {"SN", "batch"} <= set(reader.fieldnames or ()):
            raise TitanDataError(f"{path}: expected columns SN and batch, got {reader.fieldnames}")
        return {r["SN"]: r["batch"] for r in reader}


@dataclass
class Conversion:
    """The events of one conversion, and what became of every row.

    ``fates`` holds one entry per gc_full row: ``failure``, ``announcement``,
    ``failure+announcement`` or a skip reason of :data:`SKIP_REASONS`.
    ``notes`` counts oddities that are kept (repeat reports, a serial
    reported where the inventory never saw it at that time, ...).
    """

    events: list[Host | Telemetry]
    fates: Counter[str]
    notes: Counter[str]
    start_ms: int
    end_ms: int
    #: location -> [(insert ms, serial)] of the GPU stays used (sorted): what each host held when.
    stays: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    @property
    def hosts(self) -> list[Host]:
        return [e for e in self.events if isinstance(e, Host)]

    @property
    def failures(self) -> list[Telemetry]:
        return [e for e in self.events if isinstance(e, Telemetry)]


def convert(full_path: Path = FULL_CSV, summary_path: Path = SUMMARY_CSV) -> Conversion:
    """Read both files and build the event stream (see the module docstring for every choice)."""
    batches = read_batches(summary_path)
    fates: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    places: dict[str, dict[str, str]] = {}
    # location -> [(insert_ms, line, sn, batch)]; failures as (ts, line, row)
    stays: dict[str, list[tuple[int, int, str, str]]] = defaultdict(list)
    failures: list[Row] = []
    row_fate: dict[int, str] = {}
    for row in read_rows(full_path):
        attrs = places.get(row.location) or parse_location(row.location)
        if attrs is None:
            fates["bad_location"] += 1
            continue
        places[row.location] = attrs
        if row.event and row.event not in FAILURE_KINDS:
            fates["unknown_event"] += 1
            continue
        if row.remove_ms is None or (row.insert_ms is None and not row.event):
            fates["bad_time"] += 1
            continue
        if row.insert_ms is not None:
            batch = batches.get(row.sn)
            if batch is None:
                notes["stay_of_unknown_serial"] += 1
                if not row.event:
                    fates["unknown_serial"] += 1
                    continue
            else:
                stays[row.location].append((row.insert_ms, row.line, row.sn, batch))
        if row.event:
            failures.append(row)
            row_fate[row.line] = "failure"
    if not places:
        raise TitanDataError(f"{full_path}: no usable rows")
    start_ms = min([s[0][0] for s in stays.values() if s] + [r.remove_ms for r in failures if r.remove_ms])
    end_ms = max([r.remove_ms for r in failures if r.remove_ms is not None] + [start_ms])

    events: list[tuple[int, int, int, Host | Telemetry]] = []  # (ts, 0 host / 1 failure, line, event)
    start = ts_from_ms(start_ms)
    for loc, attrs in places.items():
        held = sorted(stays.get(loc, ()))
        if not held:
            notes["host_without_stays"] += 1
            events.append((start_ms, 0, 0, Host(ts=start, host=loc, attributes=attrs)))  # 0: first seen, first
            continue
        # The GPU in place at the start, or else the first one to come (see "no GPU installed").
        first = max(bisect.bisect_right(held, (start_ms, sys.maxsize)) - 1, 0)
        current = held[first][3]
        events.append((start_ms, 0, 0, Host(ts=start, host=loc, attributes={**attrs, "batch": current})))
        row_fate[held[first][1]] = _with_announcement(row_fate.get(held[first][1]))
        for ins_ms, line, _sn, batch in held[first + 1:]:
            if batch == current:
                row_fate.setdefault(line, "same_batch_swap")
                continue
            current = batch
            events.append((ins_ms, 0, line, Host(ts=ts_from_ms(ins_ms), host=loc, attributes={**attrs, "batch": batch})))
            row_fate[line] = _with_announcement(row_fate.get(line))
        for _ins, line, _sn, _b in held[:first]:
            row_fate.setdefault(line, "same_batch_swap")  # stays that ended before the stream began (none on Titan)

    seen: set[tuple[str, str]] = set()
    held_at = {loc: ([s[0] for s in v], [s[2] for s in v]) for loc, v in ((k, sorted(v)) for k, v in stays.items())}
    for row in sorted(failures, key=lambda r: (r.remove_ms, r.line)):
        assert row.remove_ms is not None
        kind, code = FAILURE_KINDS[row.event]
        key = (row.sn, row.location)
        repeat = key in seen
        seen.add(key)
        if repeat:
            notes["repeat_report"] += 1
        times, sns = held_at.get(row.location, ([], []))
        k = bisect.bisect_right(times, row.remove_ms) - 1
        if k < 0 or sns[k] != row.sn:
            notes["serial_not_in_place"] += 1  # the inventory shows another (or no) GPU there at that time
        message = f"{REPEAT + ' ' if repeat else ''}{row.event} (gc_full.csv line {row.line})"
        events.append((row.remove_ms, 1, row.line, Telemetry(
            ts=ts_from_ms(row.remove_ms), host=row.location, kind=kind, code=code,  # type: ignore[arg-type]
            count=1 if kind == "ecc_uncorrected" else None, device=row.sn, message=message)))
    events.sort(key=lambda e: e[:3])  # stable: the start's announcements stay in the order locations were seen
    fates.update(row_fate.values())
    return Conversion(events=[e[3] for e in events], fates=fates, notes=notes, start_ms=start_ms, end_ms=end_ms,
                      stays={loc: [(s[0], s[2]) for s in sorted(v)] for loc, v in stays.items()})


def _with_announcement(fate: str | None) -> str:
    return "failure+announcement" if fate == "failure" else "announcement"


def write_jsonl(events: Iterable[Host | Telemetry], path: Path) -> int:
    """Write contract JSON lines (gzipped when the name ends in .gz), atomically; returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    n = 0
    raw = open(tmp, "wb")  # noqa: SIM115 - closed below, after the gzip layer
    try:
        fh = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if path.suffix == ".gz" else raw
        for ev in events:
            fh.write(encode(ev))
            fh.write(b"\n")
            n += 1
        if fh is not raw:
            fh.close()
    finally:
        raw.close()
    tmp.replace(path)
    return n


# --------------------------------------------------------------------------- facts
@dataclass(frozen=True)
class Facts:
    """The paper's headline effects, recomputed from contract events alone.

    A *failed GPU* is a serial (``device``) with at least one failure
    report; it is counted once, at its first report, in the batch and cage
    its host had then. Exposure is host-years per batch (and per cage
    within the old batch) from the announcements' attribute history, up to
    the last event. Reports (every event, repeats included) are kept beside.
    """

    host_years: dict[str, float]
    failed_gpus: dict[str, int]
    reports: dict[str, int]
    old_cage_host_years: dict[str, float]
    old_cage_failed_gpus: dict[str, int]
    #: ``YYYY-MM`` -> failed old-batch GPUs (first reports) that month.
    old_monthly: dict[str, int]

    def rate(self, batch: str) -> float:
        """Failed GPUs per host-year of the batch."""
        return self.failed_gpus.get(batch, 0) / self.host_years[batch] if self.host_years.get(batch) else 0.0

    @property
    def old_new_ratio(self) -> float:
        new = self.rate("new")
        return self.rate("old") / new if new else float("inf")

    def cage_rate(self, cage: str) -> float:
        y = self.old_cage_host_years.get(cage, 0.0)
        return self.old_cage_failed_gpus.get(cage, 0) / y if y else 0.0

    @property
    def cage2_cage0_ratio(self) -> float:
        c0 = self.cage_rate("0")
        return self.cage_rate("2") / c0 if c0 else float("inf")

    @property
    def wave_start(self) -> str | None:
        return wave_start(self.old_monthly)


def _month(ts_ms: int) -> str:
    return ts_from_ms(ts_ms).strftime("%Y-%m")


def published_facts(events: Iterable[Host | Telemetry]) -> Facts:
    """Recompute the paper's effects from an event stream in event-time order (see :class:`Facts`)."""
    batch_of: dict[str, str] = {}
    cage_of: dict[str, str] = {}
    since: dict[str, int] = {}
    years: defaultdict[str, float] = defaultdict(float)
    cage_years: defaultdict[str, float] = defaultdict(float)
    failed: Counter[str] = Counter()
    reports: Counter[str] = Counter()
    cage_failed: Counter[str] = Counter()
    monthly: Counter[str] = Counter()
    devices: set[str] = set()
    last_ms = 0

    def close(host: str, now_ms: int) -> None:
        span = (now_ms - since[host]) / _MS_PER_YEAR
        years[batch_of[host]] += span
        if batch_of[host] == "old":
            cage_years[cage_of[host]] += span

    for ev in events:
        ts = ev.ts_ms
        last_ms = max(last_ms, ts)
        if isinstance(ev, Host):
            if ev.host in since:
                close(ev.host, ts)
            batch_of[ev.host] = ev.attributes.get("batch", "unknown")
            cage_of[ev.host] = ev.attributes.get("cage", "?")
            since[ev.host] = ts
            continue
        batch = batch_of.get(ev.host, "unknown")
        reports[batch] += 1
        dev = ev.device or f"{ev.host}?"
        if dev in devices:
            continue
        devices.add(dev)
        failed[batch] += 1
        if batch == "old":
            cage_failed[cage_of.get(ev.host, "?")] += 1
            monthly[_month(ts)] += 1
    for host in since:
        close(host, last_ms)
    return Facts(host_years=dict(years), failed_gpus=dict(failed), reports=dict(reports),
                 old_cage_host_years=dict(cage_years), old_cage_failed_gpus=dict(cage_failed),
                 old_monthly=dict(sorted(monthly.items())))


#: Wave rule: baseline year, factor over its monthly mean, consecutive months above it.
WAVE_BASELINE_YEAR = "2014"
WAVE_FACTOR = 3.0
WAVE_RUN_MONTHS = 3


def wave_start(monthly: dict[str, int], baseline_year: str = WAVE_BASELINE_YEAR, factor: float = WAVE_FACTOR,
               run: int = WAVE_RUN_MONTHS) -> str | None:
    """First month (``YYYY-MM``) of the first ``run`` consecutive months whose count exceeds
    ``factor`` times the mean month of ``baseline_year``; None if there is none.

    Why this rule: 2014 is the first full year after the paper's break-in
    period, a quiet year of the old batch; three months in a row above
    three times its mean ignores a single bad month (June 2014 had 2.7x)
    and is met first by July 2015 -- the paper's "mid-2015".
    """
    base = [monthly.get(f"{baseline_year}-{m:02d}", 0) for m in range(1, 13)]
    limit = factor * sum(base) / 12
    months = _month_range(min(monthly), max(monthly)) if monthly else []
    for i in range(len(months) - run + 1):
        if all(monthly.get(m, 0) > limit for m in months[i:i + run]):
            return months[i]
    return None


def _month_range(first: str, last: str) -> list[str]:
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def month_start_ms(month: str) -> int:
    """Epoch ms of 00:00 UTC on the first day of ``YYYY-MM``."""
    return int(datetime(int(month[:4]), int(month[5:7]), 1, tzinfo=UTC).timestamp()) * 1000


def reference_facts(summary_path: Path = SUMMARY_CSV) -> dict[str, dict[str, float]]:
    """The same effects the paper's way, from gc_summary_loc, per GPU and GPU-year in service.

    Two failure definitions: ``dead`` (the paper's: taken out after a DBE or
    OTB; what the README's ~25x and ~3x are), and ``reported`` (at least one
    DBE/OTB report, taken out or not: what events can tell). The cage is
    where the GPU spent the longest time.
    """
    counts: dict[str, Counter[str]] = {"dead": Counter(), "reported": Counter()}
    yrs: defaultdict[str, float] = defaultdict(float)
    with _open_text(summary_path) as fh:
        for r in csv.DictReader(fh):
            key = r["batch"] if r["batch"] == "new" else f"old/{r['cage']}"
            yrs[key] += float(r["years"])
            counts["dead"][key] += r["dead"] == "TRUE"
            counts["reported"][key] += int(r["dbe"]) + int(r["otb"]) > 0
    old_yrs = sum(v for k, v in yrs.items() if k.startswith("old"))
    out: dict[str, dict[str, float]] = {}
    for name, n in counts.items():
        old_rate = sum(v for k, v in n.items() if k.startswith("old")) / old_yrs
        new_rate = n["new"] / yrs["new"]
        out[name] = {"old_rate": old_rate, "new_rate": new_rate, "old_new_ratio": old_rate / new_rate,
                     "cage2_cage0_ratio": (n["old/2"] / yrs["old/2"]) / (n["old/0"] / yrs["old/0"])}
    return out


def empty_share(conv: Conversion, full_path: Path = FULL_CSV) -> float:
    """Share of node-time (stream start to end) with no GPU installed, from the stays' own insert/remove."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for row in read_rows(full_path):
        if row.insert_ms is not None and row.remove_ms is not None:
            spans[row.location].append((max(row.insert_ms, conv.start_ms), min(row.remove_ms, conv.end_ms)))
    total = (conv.end_ms - conv.start_ms) * len(spans)
    covered = 0
    for intervals in spans.values():
        at = conv.start_ms
        for a, b in sorted(intervals):
            a = max(a, at)
            if b > a:
                covered += b - a
                at = b
    return 1.0 - covered / total if total else 0.0


# --------------------------------------------------------------------------- summary
def summary_lines(conv: Conversion) -> list[str]:
    """What a reader checks first: sizes, per-year counts, the batch mix over time, row fates."""
    hosts = {e.host for e in conv.hosts}
    fails = conv.failures
    out = [f"{len(hosts):,} hosts, {len(conv.hosts):,} announcements "
           f"({len(conv.hosts) - len(hosts):,} batch changes), {len(fails):,} failure reports, "
           f"{_day(conv.start_ms)} .. {_day(conv.end_ms)}"]
    per_year: dict[str, Counter[str]] = defaultdict(Counter)
    for e in fails:
        per_year[_day(e.ts_ms)[:4]][e.kind if e.code is None else f"{e.kind}:{e.code}"] += 1
    out.append("failure reports per year (DBE = ecc_uncorrected, OTB = xid:79):")
    for y in sorted(per_year):
        c = per_year[y]
        out.append(f"  {y}: {sum(c.values()):5d}  (DBE {c['ecc_uncorrected']}, OTB {c['xid:79']})")
    out.append("hosts by batch (attribute in force), on 1 January and 1 July:")
    for when, mix in batch_mix(conv.events):
        out.append(f"  {when}: old {mix.get('old', 0):6,d}  new {mix.get('new', 0):6,d}")
    out.append("rows: " + ", ".join(f"{k} {v:,}" for k, v in sorted(conv.fates.items())))
    out.append("kept, noted: " + ", ".join(f"{k} {v:,}" for k, v in sorted(conv.notes.items())))
    return out


def batch_mix(events: Iterable[Host | Telemetry]) -> list[tuple[str, Counter[str]]]:
    """Hosts per batch at each 1 January and 1 July the stream spans."""
    batch_of: dict[str, str] = {}
    out: list[tuple[str, Counter[str]]] = []
    marks: list[str] = []
    last = ""
    for ev in events:
        day = _day(ev.ts_ms)
        if not marks:
            y = int(day[:4])
            marks = [f"{yy}-{mm}-01" for yy in range(y, y + 10) for mm in ("01", "07") if f"{yy}-{mm}-01" > day]
        while marks and day >= marks[0]:
            out.append((marks.pop(0), Counter(batch_of.values())))
        if isinstance(ev, Host):
            batch_of[ev.host] = ev.attributes.get("batch", "unknown")
        last = day
    if last:
        out.append((last, Counter(batch_of.values())))
    return out


def facts_lines(facts: Facts, reference: dict[str, dict[str, float]]) -> list[str]:
    """The published effects: from the converted events, and the paper's way (dead | reported GPUs)."""
    dead, rep = reference["dead"], reference["reported"]
    return [
        "published facts: converted events (failed GPU = any report, at its host's batch/cage then) "
        "| paper's way, dead GPUs | paper's way, reported GPUs (cage = longest location):",
        f"  old/new failed GPUs per GPU-year (README ~25x): {facts.old_new_ratio:.1f}x "
        f"(old {facts.rate('old'):.4f}, new {facts.rate('new'):.4f} per host-year) "
        f"| {dead['old_new_ratio']:.1f}x | {rep['old_new_ratio']:.1f}x",
        f"  cage 2 / cage 0 within the old batch (README ~3x): {facts.cage2_cage0_ratio:.2f}x "
        f"| {dead['cage2_cage0_ratio']:.2f}x | {rep['cage2_cage0_ratio']:.2f}x",
        f"  wave start (README mid-2015; first of {WAVE_RUN_MONTHS} months > {WAVE_FACTOR:g}x the "
        f"{WAVE_BASELINE_YEAR} monthly mean of failed old GPUs): {facts.wave_start}",
    ]


def _day(ts_ms: int) -> str:
    return ts_from_ms(ts_ms).strftime("%Y-%m-%d")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="examples:\n  python bench/titan_data.py -o titan.jsonl.gz\n"
                                        "  python bench/titan_data.py --check")
    ap.add_argument("-o", "--output", type=Path, help="events file to write (.jsonl or .jsonl.gz)")
    ap.add_argument("--full", type=Path, default=FULL_CSV, help="gc_full.csv(.gz)")
    ap.add_argument("--summary", type=Path, default=SUMMARY_CSV, help="gc_summary_loc.csv(.gz)")
    ap.add_argument("--check", action="store_true", help="print summary and facts; write nothing")
    args = ap.parse_args(argv)
    if args.output is None and not args.check:
        ap.error("give -o FILE or --check")
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        conv = convert(args.full, args.summary)
    except (OSError, TitanDataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"converted in {time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU")
    for line in summary_lines(conv):
        print(line)
    print(f"node-time with no GPU installed: {empty_share(conv, args.full):.1%}")
    for line in facts_lines(published_facts(conv.events), reference_facts(args.summary)):
        print(line)
    if args.output is not None:
        n = write_jsonl(conv.events, args.output)
        print(f"wrote {n:,} events to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
