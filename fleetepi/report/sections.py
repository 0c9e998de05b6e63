"""The report's sections: each one a few SQL queries over the archive and a Plotly figure or a table.

Every function takes the open :class:`fleetepi.archive.reader.Archive` and
returns an HTML fragment (a figure ``<div>`` without its JavaScript library,
which ``html.py`` inlines once for the whole page, or a ``<table>``). User
data is escaped with :func:`html.escape`; Plotly escapes what it draws.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go

from fleetepi.archive.epi import rate_per_1000, rate_ratio
from fleetepi.archive.queries import (
    BITFLIP_MIN,
    CohortRow,
    alert_rows,
    cohort_rows,
    denominators,
    exposure_sql,
    pick_bin,
)
from fleetepi.archive.reader import Archive, quote
from fleetepi.archive.schema import attr_column

_CONFIG = {"displaylogo": False, "responsive": True, "displayModeBar": False}
_LAYOUT = {"template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "font": {"size": 12}}
_MAX_STACK = 10  # location values drawn; the rest is "other"


@dataclass
class Period:
    first: datetime | None
    last: datetime | None
    bin: str


def figure_html(fig: go.Figure, height: int = 360) -> str:
    fig.update_layout(height=height, **_LAYOUT)
    return fig.to_html(full_html=False, include_plotlyjs=False, config=_CONFIG)


def esc(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def table_html(headers: list[str], rows: list[list[Any]], cls: str = "", numeric_from: int = 1,
               numeric_to: int | None = None) -> str:
    if not rows:
        return '<p class="empty">nothing in this period</p>'

    def kind(i: int) -> str:
        return "num" if i >= numeric_from and (numeric_to is None or i < numeric_to) else ""

    head = "".join(f'<th class="{kind(i)}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for r in rows:
        cells = "".join(f'<td class="{kind(i)}">{c if isinstance(c, _Raw) else esc(c)}</td>' for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


class _Raw(str):
    """Already-escaped HTML for a table cell."""


def fmt_rate(v: float) -> str:
    """Three significant digits: 0.213 per 1k host-days on Titan, 412 on a crashing rack."""
    return "-" if math.isnan(v) else f"{v:.3g}" if v < 100 else f"{v:,.0f}"


def fmt_ts(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M")


def _ci(lo: float, hi: float) -> str:
    return "-" if math.isnan(lo) else (f"{lo:.1f}–{hi:.1f}" if hi < 1000 else f"{lo:.1f}–∞")


def period(arc: Archive) -> Period:
    first, last = arc.query("SELECT min(ts), max(ts) FROM (SELECT ts FROM crash UNION ALL SELECT ts FROM host "
                            "UNION ALL SELECT ts FROM alert)")[0]
    return Period(first, last, pick_bin(first, last))


def _bins(p: Period) -> list[datetime]:
    if p.first is None or p.last is None:
        return []
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}[p.bin]
    rows = []
    at = _trunc(p.first, p.bin)
    while at <= p.last and len(rows) < 3000:
        rows.append(at)
        at += step
    return rows


def _trunc(t: datetime, bin_: str) -> datetime:
    if bin_ == "hour":
        return t.replace(minute=0, second=0, microsecond=0)
    d = t.replace(hour=0, minute=0, second=0, microsecond=0)
    return d - timedelta(days=d.weekday()) if bin_ == "week" else d


# ---------------------------------------------------------------------- summary
def summary(arc: Archive, p: Period) -> dict[str, Any]:
    counts = {t: arc.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("crash", "telemetry", "host", "alert")}
    _, _, hosts, host_days = denominators(arc)  # the inventory's population at risk
    sigs = arc.query("SELECT count(DISTINCT signature) FROM crash")[0][0]
    fired = arc.query("SELECT count(*) FROM alert WHERE state = 'firing'")[0][0]
    return {"counts": counts, "hosts": hosts, "host_days": host_days, "signatures": sigs, "fired": fired,
            "first": p.first, "last": p.last}


# ---------------------------------------------------------------------- top signatures
def top_signatures(arc: Archive, n: int) -> list[tuple[str, int, int, int]]:
    """Signatures that raised alerts first, then those with the most incidents: (sig, cases, hosts, alerts).

    An incident is a distinct job (a host where the crash names none): one
    job's ranks aborting together on 250 hosts is one incident, not 250,
    so background job bursts do not crowd out the signatures that matter.
    """
    rows = arc.query(
        "WITH a AS (SELECT signature, count(*) AS alerts FROM alert WHERE signature IS NOT NULL AND state = 'firing' "
        "GROUP BY 1), c AS (SELECT signature, count(*) AS cases, count(DISTINCT host) AS hosts, "
        "count(DISTINCT coalesce(job, 'host:' || host)) AS incidents FROM crash GROUP BY 1) "
        "SELECT c.signature, c.cases, c.hosts, coalesce(a.alerts, 0) FROM c LEFT JOIN a USING (signature) "
        f"ORDER BY coalesce(a.alerts, 0) > 0 DESC, coalesce(a.alerts, 0) DESC, c.incidents DESC, c.cases DESC "
        f"LIMIT {int(n)}")
    return [(s, c, h, a) for s, c, h, a in rows]


def epidemic_curve(arc: Archive, sig: str, by: str | None, p: Period, table: str = "crash",
                   where: str = "signature = ?", params: list[Any] | None = None, what: str = "crashes") -> str:
    if by not in arc.attribute_keys(table):
        by = None
    loc = f"coalesce({quote(attr_column(by))}, '(no {by})')" if by else "'all hosts'"
    rows = arc.query(f"SELECT date_trunc('{p.bin}', ts) AS b, {loc} AS loc, count(*) FROM {table} WHERE {where} "
                     "GROUP BY ALL", [sig] if params is None else params)
    totals: dict[str, int] = defaultdict(int)
    for _, loc_v, n in rows:
        totals[loc_v] += n
    keep = {v for v, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:_MAX_STACK]}
    grid: dict[str, dict[datetime, int]] = defaultdict(lambda: defaultdict(int))
    for b, loc_v, n in rows:
        grid[loc_v if loc_v in keep else "other"][b] += n
    bins = _bins(p)
    fig = go.Figure()
    for loc_v in sorted(grid, key=lambda v: (v == "other", -totals.get(v, 0), v)):
        fig.add_bar(x=bins, y=[grid[loc_v].get(b, 0) for b in bins], name=str(loc_v))
    fig.update_layout(barmode="stack", bargap=0.05, title=f"{what} per {p.bin}" + (f", stacked by {by}" if by else ""),
                      legend={"title": {"text": by or ""}})
    return figure_html(fig, 300)


_SHAPE_SQL = ("coalesce(signal, '?') || ' / ' || coalesce(fault_class, '?') || "
              "coalesce(' / ' || nullif(array_to_string(list_sort(shape_flags), ','), ''), '')")


def two_populations(arc: Archive, limit: int = 8) -> list[tuple[str, str, str, int, int, str, int, int]]:
    """Signatures that are two populations: one shape on a single host with bit flips, another on many hosts.

    The founding case: a libunwind race (one shape, many hosts) and a
    miscomputing CPU (odd, bit-flipped shapes, one host) under one signature.
    Rows: (signature, odd shape, its host, its crashes, its bit-flip crashes, main shape, its hosts, its crashes).
    """
    rows = arc.query(
        f"WITH s AS (SELECT signature, {_SHAPE_SQL} AS shape, host, count(*) AS n, "
        f"count(*) FILTER (WHERE bitflip_score >= {BITFLIP_MIN}) AS bf FROM crash GROUP BY ALL), "
        "sh AS (SELECT signature, shape, count(*) AS hosts, sum(n)::BIGINT AS n, sum(bf)::BIGINT AS bf, "
        "arg_max(host, n) AS top FROM s GROUP BY ALL) "
        "SELECT a.signature, a.shape, a.top, a.n, a.bf, b.shape, b.hosts, b.n FROM sh a JOIN sh b USING (signature) "
        "WHERE a.hosts = 1 AND a.bf > 0 AND b.hosts >= 5 AND a.shape <> b.shape "
        f"ORDER BY b.hosts DESC, a.n DESC LIMIT {int(limit)}")
    return [tuple(r) for r in rows]  # type: ignore[misc]


def two_populations_html(arc: Archive) -> str:
    rows = two_populations(arc)
    if not rows:
        return '<p class="empty">no signature has a bit-flipped shape on one host beside a shape on many</p>'
    table = table_html(["signature", "odd shape", "on host", "crashes", "bit-flip", "main shape", "on hosts", "crashes"],
                       [list(r) for r in rows], numeric_from=3, numeric_to=5)
    first = rows[0][0]
    return (f"<p>A crash signature names where a process died, not why. When one of its shapes lives on a single "
            f"host with bit-flipped pointers while another shape is spread over many hosts, the signature is two "
            f"problems: bad silicon on that host, and a software bug everywhere. Largest case: "
            f"<span class='sig'>{esc(first)}</span></p>" + shape_populations(arc, first) + table)


def shape_populations(arc: Archive, sig: str) -> str:
    """One bar per crash shape, split by host: a shape living on one host is one long single-colour bar."""
    rows = arc.query(
        f"SELECT {_SHAPE_SQL} AS shape, host, count(*) AS n, "
        f"count(*) FILTER (WHERE bitflip_score >= {BITFLIP_MIN}) FROM crash WHERE signature = ? GROUP BY ALL", [sig])
    per: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for shape, host, n, bf in rows:
        per[shape].append((host, n, bf))
    shapes = sorted(per, key=lambda s: -sum(n for _, n, _ in per[s]))[:8]
    fig = go.Figure()
    max_rank = 6
    palette = ["#1f4e79", "#2e75b6", "#5b9bd5", "#9dc3e6", "#bdd7ee", "#deebf7"]
    labels = []
    for shape in shapes:
        hosts = sorted(per[shape], key=lambda t: -t[1])
        total = sum(n for _, n, _ in hosts)
        bf = sum(b for _, _, b in hosts)
        labels.append(f"{shape}<br><sub>{total} crash{'es' if total != 1 else ''} on {len(hosts)} "
                      f"host{'s' if len(hosts) != 1 else ''}"
                      + (f", {bf} bit-flip" if bf else "") + "</sub>")
    for rank in range(max_rank + 1):
        xs, texts, names, where = [], [], [], []
        for shape in shapes:
            hosts = sorted(per[shape], key=lambda t: -t[1])
            if rank < max_rank:
                h = hosts[rank] if rank < len(hosts) else None
                xs.append(h[1] if h else 0)
                names.append(h[0] if h else "")
                alone = h is not None and len(hosts) == 1  # a shape on one host: name it beside the bar
                texts.append(h[0] if alone or (h and h[1] >= 0.15 * sum(n for _, n, _ in hosts)) else "")
                where.append("outside" if alone else "inside")
            else:
                rest = hosts[max_rank:]
                xs.append(sum(n for _, n, _ in rest))
                names.append(f"{len(rest)} other hosts" if rest else "")
                texts.append(f"+{len(rest)} hosts" if rest else "")
                where.append("inside")
        fig.add_bar(y=labels, x=xs, orientation="h", text=texts, textposition=where, customdata=names,
                    hovertemplate="%{customdata}: %{x} crashes<extra></extra>", showlegend=False,
                    marker={"color": palette[rank] if rank < max_rank else "#d9d9d9",
                            "line": {"color": "white", "width": 1}})
    fig.update_layout(barmode="stack", title="crash shapes, split by host (one colour block = one host)",
                      yaxis={"autorange": "reversed"}, xaxis={"title": "crashes"})
    return figure_html(fig, 90 + 55 * max(len(shapes), 1))


def cohort_table(rows: list[CohortRow], limit: int = 8) -> str:
    return table_html(
        ["cohort", "cases", "hosts hit", "hosts in cohort", "host-days", "per 1k host-days", "RR", "95 % CI"],
        [[f"{r.attribute}={r.value}", r.cases, r.hosts_affected, r.hosts, r.host_days,
          fmt_rate(r.rate_per_1000_host_days), f"{r.relative_risk:.1f}", _ci(r.ci_low, r.ci_high)] for r in rows[:limit]],
        cls="cohorts")


def signature_cohorts(arc: Archive, sig: str) -> list[CohortRow]:
    return cohort_rows(arc, "crash", "signature = ?", [sig])


def signature_alerts(arc: Archive, sig: str) -> str:
    rows = list(alert_rows(arc, "signature = ? AND state = 'firing'", [sig], limit=10))
    return table_html(["time", "kind", "entity", "score"],
                      [[fmt_ts(a.ts), a.kind, a.entity, f"{a.score:.1f}"] for a in rows], numeric_from=3)


# ---------------------------------------------------------------------- heat map
#: Telemetry kinds that are failures, not readings: what the hardware sections count.
HW_KINDS = ("xid", "ecc_uncorrected", "pcie", "nvlink", "power")
HW_WHERE = "kind IN (" + ", ".join(f"'{k}'" for k in HW_KINDS) + ")"
#: The hardware failures, kept in memory for the whole report (``prepare``): a year of telemetry is
#: tens of millions of readings, and a few hundred thousand failures among them.
HW = "hw"


def prepare(arc: Archive) -> None:
    """Load what every section reads into memory once: the crashes (without frames) and the hardware failures."""
    arc.pin("crash", exclude=("frames", "modules", "notes"))
    arc.materialize(HW, f"SELECT * FROM telemetry WHERE {HW_WHERE}")


def heat_map(arc: Archive, rows_attr: str | None, cols_attr: str | None, nested: bool, cases: str = "crash") -> str:
    """Cases per 1,000 host-days at risk per location cell; ``cases`` is ``crash`` or ``hardware``.

    Host-days come from the inventory (every day a host is in the fleet),
    so a cell of silent hosts is a cell of zero incidence, not a hole.
    """
    if cols_attr is None:
        return '<p class="empty">no location attributes found in the inventory (use --heat ROWS:COLS)</p>'
    r = attr_expr(rows_attr) if rows_attr else "'fleet'"
    c = attr_expr(cols_attr)
    table = "crash" if cases == "crash" else HW
    needed = {k for spec in (rows_attr, cols_attr) if spec for k in spec.split("+")}
    if not needed <= set(arc.attribute_keys(table)):
        return f'<p class="empty">the {table} rows carry no {esc(rows_attr)}/{esc(cols_attr)} attributes</p>'
    src, what = ("crash", "crashes") if cases == "crash" else (HW, "hardware failures")
    counts = {(rv, cv): n for rv, cv, n in arc.query(f"SELECT {r}, {c}, count(*) FROM {src} GROUP BY ALL")}
    exp = exposure_sql(arc)
    if exp is not None and needed <= set(arc.attribute_keys("host")):
        expo = arc.query(f"SELECT {r}, {c}, sum(days), count(DISTINCT host) FROM {exp} GROUP BY ALL")
    else:
        expo = arc.query(f"SELECT {r}, {c}, count(DISTINCT (host, day)), count(DISTINCT host) FROM hostday GROUP BY ALL")
    cells = {(rv, cv): (counts.get((rv, cv), 0), float(hd or 0), h) for rv, cv, hd, h in expo if cv is not None}
    if not cells:
        return '<p class="empty">no hosts with these attributes</p>'
    row_vals = sorted({rv for rv, _ in cells}, key=_natural)
    labels: list[list[str]] = []
    if nested:  # cols nest in rows: lay each row's own columns out by position
        per_row = {rv: sorted({cv for r2, cv in cells if r2 == rv}, key=_natural) for rv in row_vals}
        width = max((len(v) for v in per_row.values()), default=0)
        x: list[Any] = list(range(1, width + 1))
        z, text = [], []
        for rv in row_vals:
            cols = per_row[rv]
            z.append([_rate(cells[(rv, cols[i])]) if i < len(cols) else None for i in range(width)])
            text.append([_cell_text(cols[i], cells[(rv, cols[i])], what) if i < len(cols) else ""
                         for i in range(width)])
            labels.append([str(cols[i]) if i < len(cols) else "" for i in range(width)])
        xtitle = f"{cols_attr} (by position within {rows_attr})"
    else:
        col_vals = sorted({cv for _, cv in cells}, key=_natural)
        x = [str(v) for v in col_vals]
        z = [[_rate(cells[(rv, cv)]) if (rv, cv) in cells else None for cv in col_vals] for rv in row_vals]
        text = [[_cell_text(cv, cells[(rv, cv)], what) if (rv, cv) in cells else "" for cv in col_vals]
                for rv in row_vals]
        labels = [["" for _ in col_vals] for _ in row_vals]
        xtitle = cols_attr
    finite = sorted(v for row in z for v in row if v is not None)
    zmax = finite[int(0.98 * (len(finite) - 1))] if finite else None  # a few outlier cells must not wash out the rest
    fig = go.Figure(go.Heatmap(z=z, x=x, y=[str(v) for v in row_vals], customdata=text, text=labels,
                               texttemplate="%{text}", colorscale="YlOrRd", zmin=0, zmax=zmax or None,
                               hovertemplate="%{customdata}<br>%{z:.2f} per 1k host-days<extra></extra>",
                               colorbar={"title": {"text": "per 1k<br>host-days"}}, xgap=1, ygap=1))
    fig.update_layout(title=f"{what} per 1,000 host-days at risk, by {rows_attr or 'fleet'} × {cols_attr}",
                      xaxis={"title": xtitle, "type": "category" if not nested else "linear"},
                      yaxis={"title": rows_attr or "", "type": "category"})
    return figure_html(fig, 140 + 26 * max(len(row_vals), 3))


def attr_expr(spec: str) -> str:
    """SQL of one attribute, or of several joined by ``+`` (``row+cage``: one row per cage of each cabinet row)."""
    keys = spec.split("+")
    if len(keys) == 1:
        return quote(attr_column(keys[0]))
    return "concat_ws('/', " + ", ".join(quote(attr_column(k)) for k in keys) + ")"


def _rate(cell: tuple[int, float, int]) -> float | None:
    n, hd, _ = cell
    return 1000.0 * n / hd if hd > 0 else None


def _cell_text(name: str, cell: tuple[int, float, int], what: str = "crashes") -> str:
    n, hd, h = cell
    return f"{esc(name)}: {n} {what}, {h} hosts, {hd:,.0f} host-days"


def _natural(v: Any) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(v)))


# ---------------------------------------------------------------------- hardware failures
def top_hardware(arc: Archive, n: int = 3) -> list[tuple[str, int | None, int, int]]:
    """The most frequent hardware failure types: (kind, code, events, hosts)."""
    return [(k, c, e, h) for k, c, e, h in arc.query(
        f"SELECT kind, code, count(*), count(DISTINCT host) FROM {HW} GROUP BY 1, 2 "
        f"ORDER BY 3 DESC LIMIT {int(n)}")]


def hardware_cohorts(arc: Archive, by: str | None, p: Period, n: int = 3) -> str:
    """Per frequent hardware failure (Xid 79, uncorrected ECC, ...): its curve by place and its cohort table."""
    parts = []
    for kind, code, events, hosts in top_hardware(arc, n):
        where, params = "kind = ? AND code IS NOT DISTINCT FROM ?", [kind, code]
        name = kind + (f" {code}" if code is not None else "")
        rows = cohort_rows(arc, HW, where, params)
        parts.append(f"<h3>{esc(name)}: {events:,} events on {hosts:,} hosts</h3>"
                     + epidemic_curve(arc, "", by, p, HW, where, params, what=f"{name} events")
                     + cohort_table(rows))
    return "".join(parts) or '<p class="empty">no Xid, ECC, PCIe, NVLink or power failures in this period</p>'


# ---------------------------------------------------------------------- bad silicon
def bad_silicon(arc: Archive, places: list[str]) -> str:
    """Hosts whose crashes look like corruption: bit flips, many shapes, many unrelated signatures."""
    places = [a for a in places if a in arc.attribute_keys("crash")]
    loc = ", ".join(f"any_value({quote(attr_column(a))})" for a in places) if places else "NULL"
    rows = arc.query(
        f"SELECT host, count(*) AS n, count(*) FILTER (WHERE bitflip_score >= {BITFLIP_MIN}) AS bf, "
        "count(*) FILTER (WHERE list_contains(shape_flags, 'sp_misaligned') OR list_contains(shape_flags, 'misaligned_sp')) AS sp, "
        "count(DISTINCT signature), count(DISTINCT (signal, fault_class)), min(ts), max(ts), "
        f"{loc} FROM crash GROUP BY host HAVING bf >= 2 OR sp >= 2 ORDER BY bf DESC, sp DESC, n DESC LIMIT 15")
    alerts = {h for (h,) in arc.query("SELECT DISTINCT host FROM alert WHERE kind = 'host_spike' AND host IS NOT NULL")}
    out = []
    for host, n, bf, sp, sigs, shapes, first, last, *where in rows:
        out.append([host, n, bf, sp, sigs, shapes, " ".join(f"{a}={v}" for a, v in zip(places, where) if v is not None),
                    fmt_ts(first), fmt_ts(last), "yes" if host in alerts else ""])
    return table_html(["host", "crashes", "bit-flip", "misaligned SP", "signatures", "shapes", "where", "first", "last",
                       "host alert"], out, numeric_to=6)


# ---------------------------------------------------------------------- hardware telemetry
def hardware_by_place(arc: Archive, place: str | None, p: Period) -> str:
    """Xid, uncorrected ECC and power events per place and day (a heat map per kind present)."""
    kinds = [k for (k,) in arc.query(f"SELECT DISTINCT kind FROM {HW} WHERE kind IN ('xid', 'ecc_uncorrected', "
                                     "'power', 'pcie', 'nvlink') ORDER BY 1")]
    if not kinds:
        return '<p class="empty">no Xid, ECC or power events in this period</p>'
    if place not in arc.attribute_keys(HW):
        place = None
    loc = f"coalesce({quote(attr_column(place))}, '?')" if place else "'fleet'"
    bin_ = "day" if p.bin == "hour" else p.bin
    parts = []
    for kind in kinds:
        rows = arc.query(f"SELECT date_trunc('{bin_}', ts) AS b, {loc} AS loc, sum(coalesce(count, 1))::BIGINT "
                         f"FROM {HW} WHERE kind = ? GROUP BY ALL", [kind])
        if not rows:
            continue
        locs = sorted({r[1] for r in rows}, key=_natural)
        bins = sorted({r[0] for r in rows})
        if p.first is not None and p.last is not None:
            bins = list(_bins(Period(p.first, p.last, bin_)))
        idx = {b: i for i, b in enumerate(bins)}
        z = [[0] * len(bins) for _ in locs]
        li = {v: i for i, v in enumerate(locs)}
        for b, v, n in rows:
            if b in idx:
                z[li[v]][idx[b]] += n
        fig = go.Figure(go.Heatmap(z=[[v or None for v in row] for row in z], x=bins, y=[str(v) for v in locs],
                                   colorscale="Reds", hovertemplate="%{y} %{x}: %{z}<extra></extra>",
                                   colorbar={"title": {"text": "events"}}))
        fig.update_layout(title=f"{kind}: events per {bin_} by {place or 'fleet'}", yaxis={"type": "category"})
        parts.append(figure_html(fig, 120 + min(18 * len(locs), 600)))
    return "".join(parts)


# ---------------------------------------------------------------------- what changed
def what_changed(arc: Archive, history: Archive | None, p: Period) -> tuple[str, str]:
    """New signatures (first seen in the period) and cohorts whose crash rate rose (second half vs first)."""
    if history is not None and arc.since is not None:
        firsts = history.query("SELECT signature, min(ts) FROM crash GROUP BY 1")
        new = {s for s, t in firsts if t >= arc.since}
    else:  # no earlier history asked for: "new" = absent from the first half of the period
        new = set()
        if p.first is not None and p.last is not None:
            mid = p.first + (p.last - p.first) / 2
            new = {s for (s,) in arc.query("SELECT signature FROM crash GROUP BY 1 HAVING min(ts) >= ?", [mid])}
    rows = arc.query("SELECT signature, count(*), count(DISTINCT host), min(ts), max(ts) FROM crash GROUP BY 1 "
                     "ORDER BY 3 DESC, 2 DESC") if new else []
    new_rows = [[s, n, h, fmt_ts(a), fmt_ts(b)] for s, n, h, a, b in rows if s in new][:15]
    new_html = table_html(["signature", "crashes", "hosts", "first seen", "last seen"], new_rows)
    rose_html = '<p class="empty">period too short to compare halves</p>'
    if p.first is not None and p.last is not None and p.last - p.first >= timedelta(days=2):
        mid = p.first + (p.last - p.first) / 2
        mid_day = mid.date()
        cols = [attr_column(k) for k in arc.attribute_keys("hostday")]
        out = []
        if cols:
            sel = ", ".join(quote(c) for c in cols)
            q = arc.query(
                f"SELECT attr, val, sum(crashes) FILTER (WHERE day < ?), count(*) FILTER (WHERE day < ?), "
                f"sum(crashes) FILTER (WHERE day >= ?), count(*) FILTER (WHERE day >= ?) FROM (UNPIVOT "
                f"(SELECT host, day, {sel}, sum(crashes) AS crashes FROM hostday GROUP BY ALL) "
                f"ON COLUMNS('^attr\\.') INTO NAME attr VALUE val) GROUP BY attr, val", [mid_day] * 4)
            for attr, v, c1, d1, c2, d2 in q:
                k = attr[len("attr."):]
                if v is None or not d1 or not d2 or (c2 or 0) < 10:
                    continue
                r1, r2 = rate_per_1000(c1 or 0, d1), rate_per_1000(c2 or 0, d2)
                rr = rate_ratio(c2 or 0, d2, c1 or 0, d1)
                if rr.lower > 1.0:
                    out.append((rr.rr, [f"{k}={v}", c1 or 0, f"{r1:.1f}", c2 or 0, f"{r2:.1f}", f"{rr.rr:.1f}",
                                        _ci(rr.lower, rr.upper)]))
        out.sort(key=lambda t: -t[0])
        rose_html = table_html(["cohort", "crashes (1st half)", "per 1k host-days", "crashes (2nd half)",
                                "per 1k host-days", "ratio", "95 % CI"], [r for _, r in out[:12]])
    return new_html, rose_html


def alerts_table(arc: Archive, limit: int = 40) -> str:
    rows = alert_rows(arc, "state = 'firing'", [], limit=limit)
    return table_html(["time", "kind", "entity", "severity", "score", "summary"],
                      [[fmt_ts(a.ts), a.kind, a.entity, a.severity or "page", f"{a.score:.1f}", a.summary or ""]
                       for a in rows], numeric_from=4, numeric_to=5)


__all__ = [
    "Period",
    "alerts_table",
    "bad_silicon",
    "cohort_table",
    "epidemic_curve",
    "hardware_by_place",
    "hardware_cohorts",
    "attr_expr",
    "fmt_rate",
    "heat_map",
    "period",
    "prepare",
    "shape_populations",
    "signature_alerts",
    "signature_cohorts",
    "summary",
    "top_hardware",
    "top_signatures",
    "two_populations",
    "two_populations_html",
    "what_changed",
]
