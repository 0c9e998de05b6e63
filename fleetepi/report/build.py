"""Assemble the report: run the sections, inline Plotly's JavaScript once, write one HTML file.

One file that opens offline, mailed or attached to a ticket: plotly.js is
inlined in the ``<head>`` (about 4.6 MB, no CDN), every figure is a
``<div>`` plus a call into it, the CSS is a few lines in the page. The
file is written to a temporary name and renamed, so a report being
rewritten is never seen half-written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from fleetepi.archive.reader import Archive
from fleetepi.archive.schema import attr_column
from fleetepi.report import sections as S
from fleetepi.report.locate import find_places, nests_in

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2733}
header{background:#1f2d3d;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c5d0dc;font-size:13px}
main{padding:12px 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #dde2e8;border-radius:6px;padding:14px 18px;margin:14px 0}
h2{font-size:18px;margin:4px 0 10px}h3{font-size:14px;margin:12px 0 6px;color:#33475b}
.sig{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;word-break:break-all;color:#5a2d82}
.kpis{display:flex;flex-wrap:wrap;gap:10px}.kpi{background:#eef2f6;border-radius:5px;padding:8px 14px}
.kpi b{display:block;font-size:20px}.kpi span{font-size:12px;color:#52606d}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0 8px;width:100%}
th,td{border-bottom:1px solid #e4e8ee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f7;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.grid{display:grid;grid-template-columns:minmax(0,1.2fr) minmax(0,1fr);gap:14px}
.empty{color:#7b8794;font-style:italic}.warn{color:#9a3412}
nav a{color:#9ec5fe;margin-right:14px;font-size:13px}
"""


@dataclass
class ReportOptions:
    since: datetime | None = None
    until: datetime | None = None
    by: str | None = None  # stack epidemic curves by this attribute (default: coarsest location)
    heat: tuple[str | None, str] | None = None  # (rows, cols) attributes of the heat map
    top: int = 6
    title: str = "fleetepi report"


@dataclass
class ReportResult:
    path: Path
    signatures: list[str] = field(default_factory=list)
    by: str | None = None
    heat: tuple[str | None, str | None] = (None, None)
    skipped: int = 0
    bytes: int = 0


def _latest_attrs(arc: Archive) -> list[dict[str, str]]:
    """Each host's latest announced attributes (the inventory's, not the events': a few thousand rows)."""
    keys = arc.attribute_keys("host")
    if not keys:
        return []
    sel = ", ".join(f"arg_max({S.quote(attr_column(k))}, ts)" for k in keys)
    return [{k: v for k, v in zip(keys, row[1:]) if v is not None}
            for row in arc.query(f"SELECT host, {sel} FROM host_all GROUP BY host")]


def build_report(root: str | Path, out: str | Path, opts: ReportOptions,
                 step: Callable[[str], None] | None = None) -> ReportResult:
    """Write the report of the archive at ``root`` to ``out``; ``step(name)`` is called before each section."""
    import plotly.offline

    def tick(name: str) -> None:
        if step is not None:
            step(name)

    tick("opening the archive")
    arc = Archive(root, since=opts.since, until=opts.until)
    history = Archive(root, until=opts.until) if opts.since is not None else None
    try:
        tick("loading crashes and hardware failures")
        S.prepare(arc)
        tick("period and inventory")
        p = S.period(arc)
        hosts = _latest_attrs(arc)
        places = find_places(hosts)
        by = opts.by or places.coarse
        if opts.heat is not None:
            heat_rows, heat_cols = opts.heat
        else:
            heat_rows, heat_cols = places.coarse, places.fine
        nested = bool(heat_rows and heat_cols and "+" not in heat_rows + heat_cols
                      and nests_in(hosts, heat_cols, heat_rows))
        fine = heat_cols if heat_cols and "+" not in heat_cols else by
        if fine and len({h.get(fine) for h in hosts}) > 60:  # a heat map row per cabinet of 200: use the coarser
            fine = by
        summ = S.summary(arc, p)
        body: list[str] = []
        tick("what changed")
        new_html, rose_html = S.what_changed(arc, history, p)
        body.append(_section("what-changed", "What changed in the period",
                             f"<div class='grid'><div><h3>New signatures</h3>{new_html}</div>"
                             f"<div><h3>Cohorts whose crash rate rose (2nd half vs 1st half)</h3>{rose_html}</div></div>"))
        tick("two populations")
        body.append(_section("founding", "One signature, two populations", S.two_populations_html(arc)))
        tick("alerts")
        body.append(_section("alerts", "Alerts that fired", S.alerts_table(arc)))
        tops = S.top_signatures(arc, opts.top)
        for i, (sig, cases, nhosts, nalerts) in enumerate(tops, 1):
            tick(f"signature {i}/{len(tops)}")
            cohorts = S.signature_cohorts(arc, sig)
            head = (f"<p class='sig'>{S.esc(sig)}</p><p>{cases} crashes on {nhosts} hosts"
                    + (f", {nalerts} alert(s)" if nalerts else "") + "</p>")
            inner = (head + S.epidemic_curve(arc, sig, by, p)
                     + "<div class='grid'><div>" + S.shape_populations(arc, sig) + "</div><div><h3>Cohorts it "
                     "over-represents</h3>" + S.cohort_table(cohorts) + "<h3>Its alerts</h3>"
                     + S.signature_alerts(arc, sig) + "</div></div>")
            body.append(_section(f"sig{i}", f"Signature #{i}", inner))
        tick("hardware failures")
        body.append(_section("hw-cohorts", "Hardware failures and the cohorts they over-represent",
                             S.hardware_cohorts(arc, by, p)))
        tick("heat map")
        heat = []
        if summ["counts"]["crash"]:
            heat.append(S.heat_map(arc, heat_rows, heat_cols, nested, "crash"))
        if S.top_hardware(arc, 1):
            heat.append(S.heat_map(arc, heat_rows, heat_cols, nested, "hardware"))
        body.append(_section("heat", "Where it happens", "".join(heat) or "<p class='empty'>no events</p>"))
        tick("bad silicon")
        place_cols = [a for a in (heat_rows, heat_cols) if a]
        body.append(_section("silicon", "Suspected bad silicon (bit flips and misaligned stacks on one host)",
                             S.bad_silicon(arc, place_cols)))
        tick("hardware telemetry")
        body.append(_section("hardware", f"Xid, ECC and power events by {fine or 'fleet'} over time",
                             S.hardware_by_place(arc, fine, p)))
        tick("writing")
        skipped = list(arc.skipped) + (list(history.skipped) if history else [])
        page = _page(opts, summ, body, skipped, by, (heat_rows, heat_cols), plotly.offline.get_plotlyjs())
        out = Path(out)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, out)
        return ReportResult(out, [t[0] for t in tops], by, (heat_rows, heat_cols), len(skipped), out.stat().st_size)
    finally:
        arc.close()
        if history is not None:
            history.close()


def _section(anchor: str, title: str, inner: str) -> str:
    return f"<section id='{anchor}'><h2>{S.esc(title)}</h2>{inner}</section>"


def _page(opts: ReportOptions, summ: dict, body: list[str], skipped: list, by: str | None,
          heat: tuple[str | None, str | None], plotly_js: str) -> str:
    c = summ["counts"]
    kpis = [("crashes", c["crash"]), ("signatures", summ["signatures"]), ("hosts", summ["hosts"]),
            ("host-days", summ["host_days"]), ("telemetry events", c["telemetry"]), ("alerts fired", summ["fired"])]
    kpi_html = "".join(f"<div class='kpi'><b>{v:,}</b><span>{S.esc(k)}</span></div>" for k, v in kpis)
    warn = ""
    if skipped:
        warn = ("<p class='warn'>" + f"{len(skipped)} damaged archive file(s) skipped: "
                + "; ".join(S.esc(f"{s.path}: {s.reason}") for s in skipped[:5]) + "</p>")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    span = f"{S.fmt_ts(summ['first'])} → {S.fmt_ts(summ['last'])}"
    places = f"curves stacked by {S.esc(by or '-')}; heat map {S.esc(heat[0] or '-')} × {S.esc(heat[1] or '-')}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{S.esc(opts.title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_CSS}</style>
<script type="text/javascript">{plotly_js}</script>
</head><body>
<header><h1>{S.esc(opts.title)}</h1><p>events {span} · generated {generated} · {places}</p>
<nav><a href="#what-changed">what changed</a><a href="#founding">two populations</a><a href="#alerts">alerts</a><a href="#sig1">signatures</a>
<a href="#hw-cohorts">hardware cohorts</a><a href="#heat">heat map</a><a href="#silicon">bad silicon</a><a href="#hardware">hardware</a></nav></header>
<main><section id="summary"><div class="kpis">{kpi_html}</div>{warn}</section>
{"".join(body)}
</main></body></html>
"""


__all__ = ["ReportOptions", "ReportResult", "build_report"]
