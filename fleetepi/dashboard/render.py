"""A PNG of the dashboard's main panels, drawn with matplotlib from the same queries.

Grafana cannot run here (nor in CI), yet the README should show what an
on-call engineer sees. So the PNG is drawn from :data:`queries.MAIN_PANELS`,
with each panel's own PromQL sent to a real Prometheus HTTP API: if a query
is wrong, the picture is empty, not pretty.

How each Grafana panel type is drawn:

* ``timeseries`` -- lines over the range (``query_range``).
* ``bargauge`` -- horizontal bars of the instant values at the range's end.
* ``table`` -- the incidents (firing alerts grouped by incident, pages first)
  with their alert and host counts and top score, merged on their labels like
  Grafana's *merge* transformation.
* ``heatmap`` -- the Xid heatmap as a rack x code matrix of the events over
  the whole range (Grafana shows the same series against time; a matrix
  reads better in a still picture).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from fleetepi.dashboard.prom import PrometheusAPI, Series
from fleetepi.dashboard.queries import MAIN_PANELS, PanelSpec, Query, panel, resolve

#: Points per time series: enough for a smooth line, few enough for a quick query.
POINTS = 240


@dataclass(frozen=True)
class Window:
    """The time range of a rendering.

    :param start_s: range start, unix seconds.
    :param end_s: range end, unix seconds (instant panels are evaluated here).
    :param rate_interval: what ``$__rate_interval`` stands for (>= 4 scrape intervals).
    """

    start_s: float
    end_s: float
    rate_interval: str = "5m"

    @property
    def step_s(self) -> float:
        return max((self.end_s - self.start_s) / POINTS, 1.0)

    @property
    def range_(self) -> str:
        return f"{max(int(self.end_s - self.start_s), 1)}s"

    def resolve(self, expr: str) -> str:
        return resolve(expr, rate_interval=self.rate_interval, range_=self.range_, interval=f"{int(self.step_s)}s")


def run_query(api: PrometheusAPI, q: Query, window: Window, instant: bool = False) -> list[Series]:
    """Run one panel query the way Grafana would: instant at the end, or over the range."""
    expr = window.resolve(q.expr)
    if q.instant or instant:
        return api.instant(expr, at_s=window.end_s)
    return api.range(expr, window.start_s, window.end_s, window.step_s)


def _times(s: Series) -> list[datetime]:
    return [datetime.fromtimestamp(t, tz=UTC) for t in s.times]


def _empty(ax: Axes, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.5", fontsize=12)
    ax.set_xticks([])
    ax.set_yticks([])


def _short(text: str, n: int = 42) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def draw_timeseries(ax: Axes, spec: PanelSpec, results: Sequence[tuple[Query, list[Series]]]) -> None:
    lines = 0
    for q, series in results:
        for s in sorted(series, key=lambda s: -float(np.nansum(s.values))):
            values = np.where(s.values > 0, s.values, np.nan) if spec.log_scale else s.values
            ax.plot(_times(s), values, lw=1.6, label=_short(s.legend(q.legend), 28))
            lines += 1
    if not lines:
        _empty(ax)
        return
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=UTC))
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    ax.set_ylabel({"cps": "events / s", "s": "seconds"}.get(spec.unit, ""))
    if spec.log_scale:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5), framealpha=0.8)


def draw_bars(ax: Axes, spec: PanelSpec, results: Sequence[tuple[Query, list[Series]]]) -> None:
    rows: list[tuple[str, float]] = []
    for q, series in results:
        rows.extend((_short(s.legend(q.legend), 46), float(s.values[-1])) for s in series if len(s.values))
    rows = sorted((r for r in rows if not math.isnan(r[1])), key=lambda r: -r[1])[:10]
    if not rows:
        _empty(ax, "nothing firing" if spec.key == "cohort_risk" else "no data")
        return
    names = [r[0] for r in rows][::-1]
    vals = np.array([r[1] for r in rows][::-1])
    colors = plt.get_cmap("YlOrRd")(0.35 + 0.65 * vals / max(vals.max(), 1e-9))
    ax.barh(range(len(rows)), vals, color=colors, edgecolor="0.3", lw=0.5)
    ax.set_yticks(range(len(rows)), names, fontsize=8)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=8)
    ax.set_xlim(0, vals.max() * 1.15 if vals.max() > 0 else 1)
    ax.grid(axis="x", alpha=0.3)
    if spec.key == "cohort_risk":
        ax.set_xlabel("relative risk (x the rest of the fleet)")
        ax.axvline(1.0, color="0.4", ls="--", lw=1)
    else:
        ax.set_xlabel("crashes")


def draw_table(ax: Axes, spec: PanelSpec, results: Sequence[tuple[Query, list[Series]]]) -> None:
    """Merge the panel's queries on its ``table_labels``, like Grafana's *merge*: one row per label set.

    Pages come first, then the rows with the most alerts.
    """
    keys = list(spec.table_labels)
    columns = dict(spec.table_columns)
    merged: dict[tuple[str, ...], dict[str, float]] = {}
    for q, series in results:
        for s in series:
            row = merged.setdefault(tuple(s.labels.get(k, "") for k in keys), {})
            row[q.ref] = float(s.values[-1])
    ax.axis("off")
    if not merged:
        _empty(ax, "nothing firing")
        return

    def fmt(v: float | None) -> str:
        if v is None or math.isnan(v):
            return "–"
        return f"{v:.3g}"

    refs = list(columns)
    first = refs[0] if refs else ""
    ordered = sorted(merged.items(), key=lambda kv: (kv[0][keys.index("severity")] != "page" if "severity" in keys
                                                     else False, -kv[1].get(first, 0.0), kv[0]))
    shown = ordered[:12]
    cells = [[_short(v or "(none)", 60) for v in k] + [fmt(r.get(ref)) for ref in refs] for k, r in shown]
    label_w = 0.75 / max(len(keys), 1) if keys else 0.0
    table = ax.table(
        cellText=cells,
        colLabels=[*keys, *(columns[r] for r in refs)],
        colWidths=[0.5 if k == "incident" else max(label_w - 0.25, 0.1) for k in keys]
        + [0.25 / max(len(refs), 1)] * len(refs),
        loc="upper center",
        cellLoc="left",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.25)
    sev_col = keys.index("severity") if "severity" in keys else None
    for (r, c), cell in table.get_celld().items():
        cell.set_edgecolor("0.8")
        if r == 0:
            cell.set_facecolor("#f2d0c4")
            cell.set_text_props(weight="bold")
        elif sev_col is not None and c == sev_col:
            page = shown[r - 1][0][sev_col] == "page"
            cell.set_facecolor("#f7b2a8" if page else "#d9e6f2")
    if len(ordered) > len(shown):
        ax.text(1.0, 0.0, f"+{len(ordered) - len(shown)} more", ha="right", transform=ax.transAxes, fontsize=8)


def draw_heatmap(ax: Axes, spec: PanelSpec, results: Sequence[tuple[Query, list[Series]]]) -> None:
    """Sum each (cohort, code) series over the range: a rack x Xid-code matrix."""
    totals: dict[tuple[str, str], float] = {}
    for _q, series in results:
        for s in series:
            key = (s.labels.get("cohort", "") or "(unknown)", s.labels.get("code", "") or "?")
            totals[key] = totals.get(key, 0.0) + float(np.nansum(s.values))
    totals = {k: v for k, v in totals.items() if v > 0}
    if not totals:
        _empty(ax)
        return
    racks = sorted({k[0] for k in totals}, key=lambda r: -sum(v for k, v in totals.items() if k[0] == r))[:16]
    codes = sorted({k[1] for k in totals}, key=lambda c: (len(c), c))
    grid = np.array([[totals.get((r, c), 0.0) for c in codes] for r in racks])
    im = ax.imshow(grid, aspect="auto", cmap="Oranges", norm=matplotlib.colors.PowerNorm(0.5, vmin=0))
    ax.set_xticks(range(len(codes)), [f"Xid {c}" for c in codes], fontsize=8, rotation=30)
    ax.set_yticks(range(len(racks)), racks, fontsize=8)
    ax.set_ylabel("rack")
    for i in range(len(racks)):
        for j in range(len(codes)):
            if grid[i, j] > 0:
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] > 0.5 * grid.max() else "black")
    plt.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label="events in range")


DRAW = {"timeseries": draw_timeseries, "bargauge": draw_bars, "table": draw_table, "heatmap": draw_heatmap}


def _layout(specs: Sequence[PanelSpec]) -> list[tuple[int, int, int]]:
    """(row, first column, columns) per panel on a 2-column grid: Grafana's full-width panels span both."""
    cells: list[tuple[int, int, int]] = []
    row, col = 0, 0
    for spec in specs:
        wide = spec.grid[2] > 12
        if wide and col:
            row, col = row + 1, 0
        cells.append((row, col, 2 if wide else 1))
        col += 2 if wide else 1
        if col >= 2:
            row, col = row + 1, 0
    return cells


def render(
    api: PrometheusAPI,
    out: Path,
    window: Window,
    panels: Sequence[str] = MAIN_PANELS,
    title: str = "fleetepi: crash epidemiology",
) -> dict[str, int]:
    """Draw ``panels`` into ``out``, laid out like the dashboard (wide panels span the figure).

    Returns the number of series each panel's queries returned, so callers
    (the CLI, the tests) can tell an empty picture from a full one.
    """
    specs = [panel(k) for k in panels]
    cells = _layout(specs)
    nrows = max(r for r, _c, _n in cells) + 1
    # A table row needs less height than a plot row.
    row_kind = {r: specs[i].kind for i, (r, _c, _n) in enumerate(cells)}
    heights = [0.6 if row_kind[r] == "table" else 1.0 for r in range(nrows)]
    fig = plt.figure(figsize=(16, 4.6 * sum(heights) + 0.6), layout="constrained")
    grid = fig.add_gridspec(nrows, 2, height_ratios=heights)
    counts: dict[str, int] = {}
    for spec, (r, c, n) in zip(specs, cells):
        ax = fig.add_subplot(grid[r, c : c + n])
        # The heatmap's increase() over $__rate_interval, taken over the whole
        # range at its end, is the matrix's exact total per (rack, code).
        w = Window(window.start_s, window.end_s, window.range_) if spec.kind == "heatmap" else window
        results = [(q, run_query(api, q, w, instant=spec.kind == "heatmap")) for q in spec.queries]
        counts[spec.key] = sum(len(s) for _q, s in results)
        DRAW[spec.kind](ax, spec, results)
        ax.set_title(spec.title, fontsize=11, loc="left", weight="bold")
    start = datetime.fromtimestamp(window.start_s, tz=UTC).strftime("%Y-%m-%d %H:%M")
    end = datetime.fromtimestamp(window.end_s, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    fig.suptitle(f"{title}   ({start} – {end})", fontsize=14, weight="bold", x=0.01, ha="left")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return counts


__all__ = ["DRAW", "POINTS", "Window", "render", "run_query"]
