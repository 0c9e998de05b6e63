"""The questions ``investigate`` and ``report`` ask the archive, as SQL over its views, answers as dataclasses.

Each function takes an open :class:`fleetepi.archive.reader.Archive` and
returns plain data (printed by ``fleetepi investigate``, drawn by
``fleetepi report``, or encoded as JSON with ``--json``). Cohorts are
computed for every ``attr.*`` column there is, never for named keys.

Denominators come from the ``hostday`` table (one row per host, day and
attribute set): *hosts in the cohort* are the distinct hosts observed with
that value in the period, *host-days* the (host, day) pairs observed with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetepi.archive.epi import rate_per_1000, rate_ratio
from fleetepi.archive.exceptions import NoMatch
from fleetepi.archive.reader import Archive, quote
from fleetepi.archive.schema import ATTR_PREFIX, attr_column
from fleetepi.contract.shapes import BITFLIP_MIN  # a crash at or above it counts as a bit-flip shape

_ATTR_RE = "'^" + ATTR_PREFIX.replace(".", "\\.") + "'"


# ---------------------------------------------------------------------- answers
@dataclass
class Series:
    """Counts per time bin (``bin`` is ``hour``, ``day`` or ``week``)."""

    bin: str
    starts: list[datetime] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)


@dataclass
class CohortRow:
    attribute: str
    value: str
    cases: int  # crashes (or events) in the cohort
    hosts_affected: int
    hosts: int  # hosts observed in the cohort
    host_days: int
    rate_per_1000_host_days: float
    relative_risk: float
    ci_low: float
    ci_high: float


@dataclass
class ShapeRow:
    signal: str | None
    fault_class: str | None
    flags: str
    cases: int
    hosts: int
    top_host: str
    top_host_cases: int
    bitflip_cases: int


@dataclass
class HostRow:
    host: str
    cases: int
    first: datetime
    last: datetime
    shapes: int


@dataclass
class AlertRow:
    ts: datetime
    state: str
    kind: str
    entity: str
    score: float
    severity: str | None
    summary: str | None


@dataclass
class SignatureAnswer:
    signature: str
    cases: int
    hosts: int
    jobs: int
    first_seen: datetime | None
    last_seen: datetime | None
    series: Series
    shapes: list[ShapeRow]
    bitflip_share: float
    cpus: list[tuple[int, int, int]]  # cpu, cases, hosts
    top_hosts: list[HostRow]
    cohorts: list[CohortRow]
    alerts: list[AlertRow]
    other_matches: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class HostAnswer:
    host: str
    attributes: list[tuple[datetime, dict[str, str]]]
    crashes: int
    first_seen: datetime | None
    last_seen: datetime | None
    series: Series
    signatures: list[tuple[str, int]]
    shapes: list[ShapeRow]
    bitflip_share: float
    telemetry: list[tuple[str, int | None, int, int]]  # kind, code, events, errors
    host_days: int
    fleet_rate_per_1000_host_days: float
    alerts: list[AlertRow]


@dataclass
class CohortAnswer:
    attribute: str
    value: str
    hosts: int
    host_days: int
    crashes: int
    rate_per_1000_host_days: float
    rest_rate_per_1000_host_days: float
    series: Series
    signatures: list[CohortRow]  # signatures over-represented in the cohort (attribute = signature)
    telemetry: list[tuple[str, int, float, float]]  # kind, events, rate in, rate out
    top_hosts: list[HostRow]
    alerts: list[AlertRow]


# ---------------------------------------------------------------------- helpers
def pick_bin(first: datetime | None, last: datetime | None) -> str:
    if first is None or last is None:
        return "day"
    span = last - first
    if span <= timedelta(days=3):
        return "hour"
    if span <= timedelta(days=180):
        return "day"
    return "week"


def series(arc: Archive, table: str, where: str, params: list[Any], bin_: str,
           first: datetime | None, last: datetime | None) -> Series:
    """Counts per bin, zeros filled, between ``first`` and ``last``."""
    out = Series(bin_)
    if first is None or last is None:
        return out
    rows = arc.query(f"SELECT date_trunc('{bin_}', ts) AS b, count(*) FROM {table} WHERE {where} GROUP BY b ORDER BY b",
                     params)
    counts = {_utc(b): n for b, n in rows}
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}[bin_]
    at = _trunc(first, bin_)
    end = _trunc(last, bin_)
    while at <= end and len(out.starts) < 5000:
        out.starts.append(at)
        out.counts.append(counts.get(at, 0))
        at += step
    return out


def _utc(v: Any) -> datetime:
    return v.astimezone(UTC) if isinstance(v, datetime) else datetime.fromisoformat(str(v)).astimezone(UTC)


def _trunc(t: datetime, bin_: str) -> datetime:
    t = t.astimezone(UTC)
    if bin_ == "hour":
        return t.replace(minute=0, second=0, microsecond=0)
    d = t.replace(hour=0, minute=0, second=0, microsecond=0)
    return d - timedelta(days=d.weekday()) if bin_ == "week" else d


def _attr_cols(arc: Archive, table: str) -> list[str]:
    return [attr_column(k) for k in arc.attribute_keys(table)]


def period_bounds(arc: Archive) -> tuple[datetime | None, datetime | None]:
    """Start and end of the period: ``--since``/``--until``, else the first and last event (cached)."""
    cached = getattr(arc, "_bounds", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    # the first and the last event are in the first and the last day partition: read those files only
    ranges = [r for r in (arc.day_range(t) for t in ("crash", "telemetry", "host")) if r is not None]
    parts = ["SELECT NULL::TIMESTAMPTZ AS lo, NULL::TIMESTAMPTZ AS hi"]
    if ranges:
        cond = []
        if arc.since:
            cond.append(f"ts >= TIMESTAMPTZ '{arc.since.isoformat()}'")
        if arc.until:
            cond.append(f"ts < TIMESTAMPTZ '{arc.until.isoformat()}'")
        where = (" WHERE " + " AND ".join(cond)) if cond else ""
        for day in sorted({min(r[0] for r in ranges), max(r[1] for r in ranges)}):
            for t in ("crash", "telemetry", "host"):
                files = ", ".join("'" + f.replace("'", "''") + "'" for f in arc.files_of_day(t, day))
                if files:
                    parts.append(f"SELECT min(ts), max(ts) FROM read_parquet([{files}]){where}")
    lo, hi = arc.query("SELECT min(lo), max(hi) FROM (" + " UNION ALL ".join(parts) + ")")[0]
    bounds = (arc.since or (_utc(lo) if lo is not None else None), arc.until or (_utc(hi) if hi is not None else None))
    arc._bounds = bounds  # type: ignore[attr-defined]
    return bounds


def exposure_sql(arc: Archive) -> str | None:
    """SQL of the population at risk: one row per host and announcement interval within the period.

    Columns ``host``, ``days`` (the interval's length inside the period) and
    the ``attr.*`` columns in force. From the inventory, not from activity:
    a host that sends nothing but its failures (Titan's nodes) is at risk
    every day it is in the fleet. None when the archive has no announcements.
    """
    lo, hi = period_bounds(arc)
    if lo is None or hi is None or not arc.query("SELECT 1 FROM host_all LIMIT 1"):
        return None
    cols = _attr_cols(arc, "host")
    sel = "".join(f", {quote(c)}" for c in cols)
    p0, p1 = f"TIMESTAMPTZ '{lo.isoformat()}'", f"TIMESTAMPTZ '{hi.isoformat()}'"
    return (f"(SELECT host{sel}, (epoch_ms(least(coalesce(nx, {p1}), {p1})) - epoch_ms(greatest(ts, {p0}))) / 86400000.0 "
            f"AS days FROM (SELECT *, lead(ts) OVER (PARTITION BY host ORDER BY ts) AS nx FROM host_all) "
            f"WHERE coalesce(nx, {p1}) > {p0} AND ts < {p1} AND coalesce(nx, {p1}) > ts)")


def denominators(arc: Archive) -> tuple[dict[tuple[str, str], tuple[int, int]], dict[str, tuple[int, int]], int, int]:
    """Hosts and host-days per (attribute, value); per attribute; and the fleet's totals (cached per archive).

    From the inventory's intervals (:func:`exposure_sql`) when the archive has
    announcements, else from the hosts seen active each day (``hostday``).
    """
    cached = getattr(arc, "_denominators", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    per_value: dict[tuple[str, str], tuple[int, int]] = {}
    per_attr: dict[str, tuple[int, int]] = {}
    exp = exposure_sql(arc)
    if exp is not None:
        cols = _attr_cols(arc, "host")
        hosts, host_days = arc.query(f"SELECT count(DISTINCT host), round(sum(days)) FROM {exp}")[0]
        if cols:
            sel = ", ".join(quote(c) for c in cols)
            unp = f"(UNPIVOT (SELECT host, days, {sel} FROM {exp}) ON COLUMNS({_ATTR_RE}) INTO NAME attr VALUE val)"
            for attr, val, h, hd in arc.query(f"SELECT attr, val, count(DISTINCT host), round(sum(days)) FROM {unp} "
                                              "GROUP BY attr, val"):
                per_value[(attr[len(ATTR_PREFIX):], val)] = (h, int(hd))
            for attr, h, hd in arc.query(f"SELECT attr, count(DISTINCT host), round(sum(days)) FROM {unp} GROUP BY attr"):
                per_attr[attr[len(ATTR_PREFIX):]] = (h, int(hd))
        result = (per_value, per_attr, hosts or 0, int(host_days or 0))
        arc._denominators = result  # type: ignore[attr-defined]
        return result
    cols = _attr_cols(arc, "hostday")
    total = arc.query("SELECT count(DISTINCT host), count(*) FROM (SELECT DISTINCT host, day FROM hostday)")
    hosts, host_days = total[0] if total else (0, 0)
    if cols:
        sel = ", ".join(quote(c) for c in cols)
        rows = arc.query(
            f"SELECT attr, val, count(DISTINCT host), count(*) FROM (UNPIVOT (SELECT DISTINCT host, day, {sel} "
            f"FROM hostday) ON COLUMNS({_ATTR_RE}) INTO NAME attr VALUE val) GROUP BY attr, val")
        for attr, val, h, hd in rows:
            per_value[(attr[len(ATTR_PREFIX):], val)] = (h, hd)
        rows = arc.query(
            f"SELECT attr, count(DISTINCT host), count(DISTINCT (host, day)) FROM (UNPIVOT (SELECT DISTINCT host, day, "
            f"{sel} FROM hostday) ON COLUMNS({_ATTR_RE}) INTO NAME attr VALUE val) GROUP BY attr")
        for attr, h, hd in rows:
            per_attr[attr[len(ATTR_PREFIX):]] = (h, hd)
    result = (per_value, per_attr, hosts or 0, host_days or 0)
    arc._denominators = result  # type: ignore[attr-defined]
    return result


def cohort_rows(arc: Archive, table: str, where: str, params: list[Any], *, min_hosts: int = 2,
                over_only: bool = True) -> list[CohortRow]:
    """Every (attribute, value) the matching rows fall in, with its relative risk against the rest of the fleet.

    The risk is the rate of *case host-days* (days on which a host had at
    least one matching event) per host-day at risk in the cohort, against
    the same rate in the hosts-days outside it (:func:`fleetepi.archive.epi.rate_ratio`).
    Counting a host once a day keeps one host that crashes fifty times an hour
    from making its rack look guilty by itself, and rates per host-day stay
    right when attributes change over time (a node that held an old GPU, then
    a new one, is at risk in each cohort for the days it was in it).
    """
    cols = _attr_cols(arc, table)
    per_value, per_attr, _, _ = denominators(arc)
    if not cols or not per_value:
        return []
    sel = ", ".join(quote(c) for c in cols)
    unp = (f"(UNPIVOT (SELECT host, day, {sel} FROM {table} WHERE {where}) ON COLUMNS({_ATTR_RE}) "
           "INTO NAME attr VALUE val)")
    rows = arc.query(f"SELECT attr, val, count(*), count(DISTINCT host), count(DISTINCT (host, day)) FROM {unp} "
                     "GROUP BY attr, val", params)
    totals = dict(arc.query(f"SELECT attr, count(DISTINCT (host, day)) FROM {unp} GROUP BY attr", params))
    out = []
    for attr, val, cases, affected, case_days in rows:
        key = attr[len(ATTR_PREFIX):]
        hosts, host_days = per_value.get((key, val), (0, 0))
        fleet_days = per_attr.get(key, (0, 0))[1]
        if hosts < min_hosts:
            continue
        rest_days = fleet_days - host_days
        if rest_days <= 0 or host_days <= 0:
            continue  # the whole fleet all the time: nothing to compare with
        r = rate_ratio(case_days, host_days, max(totals.get(attr, 0) - case_days, 0), rest_days)
        out.append(CohortRow(key, val, cases, affected, hosts, host_days, rate_per_1000(cases, host_days),
                             r.rr, r.lower, r.upper))
    if over_only:
        out = [r for r in out if r.relative_risk > 1.0]
    out.sort(key=lambda r: (-(r.ci_low if not math.isnan(r.ci_low) else 0.0), -r.relative_risk))
    return out


def shape_rows(arc: Archive, where: str, params: list[Any], limit: int = 12, table: str = "crash"
               ) -> tuple[list[ShapeRow], float]:
    rows = arc.query(
        "WITH c AS (SELECT host, signal, fault_class, coalesce(array_to_string(list_sort(shape_flags), ','), '') AS flags, "
        f"bitflip_score FROM {table} WHERE {where}), "
        "per AS (SELECT signal, fault_class, flags, host, count(*) AS n, "
        f"count(*) FILTER (WHERE bitflip_score >= {BITFLIP_MIN}) AS bf FROM c GROUP BY ALL) "
        "SELECT signal, fault_class, flags, sum(n)::BIGINT, count(*), arg_max(host, n), max(n), sum(bf)::BIGINT "
        "FROM per GROUP BY signal, fault_class, flags ORDER BY 4 DESC", params)
    shapes = [ShapeRow(s, f, fl, n, h, th, tn, bf) for s, f, fl, n, h, th, tn, bf in rows]
    total = sum(s.cases for s in shapes)
    share = sum(s.bitflip_cases for s in shapes) / total if total else 0.0
    return shapes[:limit], share


def alert_rows(arc: Archive, where: str, params: list[Any], limit: int = 50) -> list[AlertRow]:
    rows = arc.query(
        "SELECT ts, state, kind, signature, host, attribute, value, telemetry_kind, code, score, severity, summary "
        f"FROM alert WHERE {where} ORDER BY ts LIMIT {int(limit)}", params)
    return [AlertRow(_utc(ts), st, kind, alert_entity(kind, sig, host, attr, val, tk, code), score or 0.0, sev, summ)
            for ts, st, kind, sig, host, attr, val, tk, code, score, sev, summ in rows]


def alert_entity(kind: str, sig: str | None, host: str | None, attr: str | None, val: str | None,
                 tk: str | None, code: int | None) -> str:
    if kind == "signature_spike":
        return sig or "?"
    if kind == "host_spike":
        return host or "?"
    if kind == "hardware_correlation":
        return f"{sig} @ {attr}={val}"
    what = (tk or "telemetry") + (f" {code}" if code is not None else "")
    if host:
        return f"{what} on {host}"
    return f"{what} in {attr}={val}" if attr else what


def top_hosts(arc: Archive, where: str, params: list[Any], limit: int = 10, table: str = "crash") -> list[HostRow]:
    rows = arc.query(
        "SELECT host, count(*), min(ts), max(ts), count(DISTINCT (signal, fault_class, shape_flags)) "
        f"FROM {table} WHERE {where} GROUP BY host ORDER BY 2 DESC, 1 LIMIT {int(limit)}", params)
    return [HostRow(h, n, _utc(a), _utc(b), s) for h, n, a, b, s in rows]


# ---------------------------------------------------------------------- signature
def resolve_signature(arc: Archive, text: str, table: str = "crash") -> tuple[str, list[tuple[str, int]]]:
    """The one signature ``text`` names: exact, else the most frequent with that prefix, else containing it.

    Returns the signature and the other candidates (most frequent first).
    :raises NoMatch: nothing matches.
    """
    for cond in ("starts_with(signature, ?)", "contains(signature, ?)"):
        rows = arc.query(f"SELECT signature, count(*) AS n FROM {table} WHERE {cond} GROUP BY 1 ORDER BY n DESC, 1 "
                         "LIMIT 20", [text])
        if any(s == text for s, _ in rows):
            return text, [(s, n) for s, n in rows if s != text]
        if rows:
            return rows[0][0], [(s, n) for s, n in rows[1:]]
    raise NoMatch(f"no crash signature starts with or contains {text!r} in this archive"
                  + _period(arc))


def _period(arc: Archive) -> str:
    if arc.since is None and arc.until is None:
        return ""
    return f" between {arc.since or 'the start'} and {arc.until or 'the end'}"


def signature_answer(arc: Archive, text: str, cohorts: int = 10) -> SignatureAnswer:
    # one read of the crash files: the rows the text could name (without the bulky frames); the signature is
    # resolved among them, and every later question asks the signature's rows in memory
    arc.materialize("candidates", "SELECT * EXCLUDE (frames, modules, notes) FROM crash WHERE "
                    "starts_with(signature, ?) OR contains(signature, ?)", [text, text])
    sig, others = resolve_signature(arc, text, "candidates")
    arc.materialize("cases", "SELECT * FROM candidates WHERE signature = ?", [sig])
    where, p = "signature = ?", [sig]
    n, hosts, jobs, first, last = arc.query(
        f"SELECT count(*), count(DISTINCT host), count(DISTINCT job), min(ts), max(ts) FROM cases WHERE {where}", p)[0]
    first, last = (_utc(first), _utc(last)) if first is not None else (None, None)
    shapes, share = shape_rows(arc, where, p, table="cases")
    cpus = [(int(c), k, h) for c, k, h in arc.query(
        f"SELECT cpu, count(*), count(DISTINCT host) FROM cases WHERE {where} AND cpu IS NOT NULL "
        "GROUP BY cpu ORDER BY 2 DESC LIMIT 10", p)]
    return SignatureAnswer(
        signature=sig, cases=n, hosts=hosts, jobs=jobs, first_seen=first, last_seen=last,
        series=series(arc, "cases", where, p, pick_bin(first, last), first, last),
        shapes=shapes, bitflip_share=share, cpus=cpus, top_hosts=top_hosts(arc, where, p, table="cases"),
        cohorts=cohort_rows(arc, "cases", where, p)[:cohorts],
        alerts=alert_rows(arc, "signature = ?", p), other_matches=others)


# ---------------------------------------------------------------------- host
def host_answer(arc: Archive, host: str) -> HostAnswer:
    known = any(arc.query(f"SELECT 1 FROM {t} WHERE host = ? LIMIT 1", [host])
                for t in ("hostday", "host", "crash", "telemetry"))
    if not known:
        like = arc.query("SELECT DISTINCT host FROM hostday WHERE contains(host, ?) ORDER BY 1 LIMIT 8", [host])
        hint = f"; hosts containing it: {', '.join(h for (h,) in like)}" if like else ""
        raise NoMatch(f"host {host!r} is not in this archive{_period(arc)}{hint}")
    keys = arc.attribute_keys("host")
    sel = ", ".join(quote(attr_column(k)) for k in keys)
    attrs = []
    if keys:
        for row in arc.query(f"SELECT ts, {sel} FROM host WHERE host = ? ORDER BY ts", [host]):
            cur = {k: v for k, v in zip(keys, row[1:]) if v is not None}
            if not attrs or attrs[-1][1] != cur:
                attrs.append((_utc(row[0]), cur))
    where, p = "host = ?", [host]
    n, first, last = arc.query(f"SELECT count(*), min(ts), max(ts) FROM crash WHERE {where}", p)[0]
    first, last = (_utc(first), _utc(last)) if first is not None else (None, None)
    sigs = arc.query(f"SELECT signature, count(*) FROM crash WHERE {where} GROUP BY 1 ORDER BY 2 DESC LIMIT 15", p)
    shapes, share = shape_rows(arc, where, p)
    tel = arc.query(f"SELECT kind, code, count(*), sum(coalesce(count, 1))::BIGINT FROM telemetry WHERE {where} "
                    "AND kind <> 'thermal' GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20", p)
    hd = arc.query("SELECT count(*) FROM (SELECT DISTINCT day FROM hostday WHERE host = ?)", p)[0][0]
    fleet = arc.query("SELECT sum(crashes), count(*) FROM (SELECT host, day, sum(crashes) AS crashes FROM hostday "
                      "GROUP BY ALL)")[0]
    return HostAnswer(
        host=host, attributes=attrs, crashes=n, first_seen=first, last_seen=last,
        series=series(arc, "crash", where, p, pick_bin(first, last), first, last),
        signatures=[(s, c) for s, c in sigs], shapes=shapes, bitflip_share=share,
        telemetry=[(k, c, e, x) for k, c, e, x in tel], host_days=hd,
        fleet_rate_per_1000_host_days=rate_per_1000(fleet[0] or 0, fleet[1] or 0),
        alerts=alert_rows(arc, "host = ?", p))


# ---------------------------------------------------------------------- cohort
def cohort_answer(arc: Archive, attribute: str, value: str, signatures: int = 10) -> CohortAnswer:
    keys = arc.attribute_keys("hostday")
    if attribute not in keys:
        raise NoMatch(f"no attribute {attribute!r} in this archive; attributes: {', '.join(keys) or 'none'}")
    col = quote(attr_column(attribute))
    per_value, per_attr, _, _ = denominators(arc)
    hosts, host_days = per_value.get((attribute, value), (0, 0))
    if not hosts:
        vals = arc.query(f"SELECT {col}, count(DISTINCT host) FROM hostday GROUP BY 1 ORDER BY 2 DESC LIMIT 12")
        raise NoMatch(f"no host has {attribute}={value!r}; values: "
                      + ", ".join(f"{v} ({n} hosts)" for v, n in vals if v is not None))
    fleet_hosts, fleet_hd = per_attr.get(attribute, (0, 0))
    where, p = f"{col} = ?", [value]
    crashes, first, last = arc.query(f"SELECT count(*), min(ts), max(ts) FROM crash WHERE {where}", p)[0]
    rest = arc.query(f"SELECT count(*) FROM crash WHERE {col} IS DISTINCT FROM ?", p)[0][0]
    first, last = (_utc(first), _utc(last)) if first is not None else (None, None)
    # signatures over-represented in the cohort: case host-days in and out, as in cohort_rows
    rows = arc.query(
        f"SELECT signature, count(*) FILTER (WHERE {col} = ?), count(DISTINCT host) FILTER (WHERE {col} = ?), "
        f"count(DISTINCT (host, day)) FILTER (WHERE {col} = ?), "
        f"count(DISTINCT (host, day)) FILTER (WHERE {col} IS DISTINCT FROM ?) FROM crash GROUP BY 1 "
        f"HAVING count(*) FILTER (WHERE {col} = ?) > 0", [value] * 5)
    sigs = []
    rest_days = fleet_hd - host_days
    for sig, cases, a, a_days, c_days in rows:
        if rest_days <= 0 or host_days <= 0:
            break
        r = rate_ratio(a_days, host_days, c_days, rest_days)
        sigs.append(CohortRow("signature", sig, cases, a, hosts, host_days, rate_per_1000(cases, host_days),
                              r.rr, r.lower, r.upper))
    sigs.sort(key=lambda r: (-(r.ci_low if not math.isnan(r.ci_low) else 0.0), -r.cases))
    tel_rows = arc.query(
        f"SELECT kind, count(*) FILTER (WHERE {col} = ?), count(*) FILTER (WHERE {col} IS DISTINCT FROM ?) "
        "FROM telemetry WHERE kind <> 'thermal' GROUP BY 1 ORDER BY 2 DESC", [value, value])
    rest_hd = fleet_hd - host_days
    tel = [(k, i, rate_per_1000(i, host_days), rate_per_1000(o, rest_hd)) for k, i, o in tel_rows]
    return CohortAnswer(
        attribute=attribute, value=value, hosts=hosts, host_days=host_days, crashes=crashes,
        rate_per_1000_host_days=rate_per_1000(crashes, host_days),
        rest_rate_per_1000_host_days=rate_per_1000(rest, rest_hd),
        series=series(arc, "crash", where, p, pick_bin(first, last), first, last),
        signatures=sigs[:signatures], telemetry=tel, top_hosts=top_hosts(arc, where, p),
        alerts=alert_rows(arc, "attribute = ? AND value = ?", [attribute, value]))


__all__ = [
    "BITFLIP_MIN",
    "AlertRow",
    "CohortAnswer",
    "CohortRow",
    "HostAnswer",
    "HostRow",
    "Series",
    "ShapeRow",
    "SignatureAnswer",
    "alert_entity",
    "alert_rows",
    "cohort_answer",
    "cohort_rows",
    "denominators",
    "exposure_sql",
    "period_bounds",
    "host_answer",
    "pick_bin",
    "resolve_signature",
    "series",
    "shape_rows",
    "signature_answer",
    "top_hosts",
]
