"""Titan's GPU failures through the archive and ``fleetepi report``: do the cohort tables find what the paper found?

Data: ``/work/shared/data/real/titan/`` (ORNL, 2012-2019; the public repository
``olcf/TitanGPULife`` of G. Ostrouchov et al., *GPU Lifetimes on Titan
Supercomputer: Survival Analysis and Reliability*, SC '20). The conversion
to contract events is ``bench/titan_data.py`` (hosts = node locations with
``cabinet/col/row/cage/slot/node/batch``, re-announced when a GPU of the
other batch is inserted; failures = ``ecc_uncorrected`` (DBE) and ``xid`` 79
(off the bus)). This script imports it when it is beside this file, or
reads the JSON lines it wrote (``--events``).

Checks, against the published analysis:

* the cohort tables rank ``batch=old`` first among batch values, with a rate
  ratio far above 1 (paper: ~25x per GPU-year);
* ``cage=2`` is the most over-represented cage (paper: ~3x cage 0 within the
  old batch);
* the heat map shows cabinet and cage positions: the machine room's floor, a column per cabinet column,
  a row per cage of each cabinet row (``--heat row+cage:col``).

    .venv/bin/python bench/report_titan.py                        # convert, archive, report, check
    .venv/bin/python bench/report_titan.py --events titan.jsonl.gz
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "bench"
sys.path.insert(0, str(ROOT / "bench"))


def events_file(path: str | None) -> Path:
    if path:
        return Path(path)
    try:
        import titan_data  # bench/titan_data.py (issue 9's converter)
    except ImportError:
        sys.exit("bench/titan_data.py is not here: convert with it elsewhere and pass --events FILE.jsonl[.gz]")
    out = CACHE / "titan-events.jsonl.gz"
    if not out.exists():
        conv = titan_data.convert()
        titan_data.write_jsonl(conv.events, out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", help="JSON lines written by bench/titan_data.py (default: convert now)")
    ap.add_argument("-o", "--output", default=str(CACHE / "titan-report.html"))
    ap.add_argument("--screenshot", help="also render the report with headless Chromium to this PNG")
    args = ap.parse_args()

    from fleetepi.archive import ArchiveWriter
    from fleetepi.archive.queries import cohort_rows
    from fleetepi.archive.reader import Archive
    from fleetepi.contract import decode_event
    from fleetepi.jsonl import open_input
    from fleetepi.report.build import ReportOptions, build_report

    src = events_file(args.events)
    root = CACHE / "titan-archive"
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    n = 0
    with ArchiveWriter(root) as w, open_input(src) as lines:
        for line in lines:  # every converted event is archived (no detectors: the archive is the subject here)
            w.add(decode_event(line), line)
            n += 1
    print(f"archived {n:,} events from {src.name} in {time.perf_counter() - t0:.1f} s")

    where = "kind = 'ecc_uncorrected' OR (kind = 'xid' AND code = 79)"
    with Archive(root) as arc:
        rows = cohort_rows(arc, "telemetry", where, [], over_only=False)
    print("cohort table, DBE + off-the-bus failures (rate ratio of failure host-days per node-day at risk):")
    for attr in ("batch", "cage"):
        ranked = [r for r in rows if r.attribute == attr]
        ranked.sort(key=lambda r: -r.relative_risk)
        for r in ranked:
            print(f"  {attr}={r.value:4}: {r.cases:5,} failures on {r.hosts_affected:5,} of {r.hosts:6,} nodes, "
                  f"{r.host_days:>12,} node-days, {r.rate_per_1000_host_days:.3f} per 1k node-days, "
                  f"RR {r.relative_risk:.2f} (95 % CI {r.ci_low:.2f}-{r.ci_high:.2f})")
    overall = sorted((r for r in rows if r.relative_risk > 1), key=lambda r: -r.ci_low)
    rank = {(r.attribute, r.value): i + 1 for i, r in enumerate(overall)}
    batch = sorted((r for r in rows if r.attribute == "batch"), key=lambda r: -r.relative_risk)
    cage = sorted((r for r in rows if r.attribute == "cage"), key=lambda r: -r.relative_risk)
    ok_batch = bool(batch) and batch[0].value == "old" and batch[0].ci_low > 1
    ok_cage = bool(cage) and cage[0].value == "2" and cage[0].ci_low > 1
    print(f"batch=old ranks first among batches: {'OK' if ok_batch else 'MISSED'} "
          f"(rank {rank.get(('batch', 'old'), '-')} of {len(overall)} over-represented cohorts overall)")
    print(f"cage=2 ranks first among cages: {'OK' if ok_cage else 'MISSED'} "
          f"(rank {rank.get(('cage', '2'), '-')} overall)")

    t0 = time.perf_counter()
    res = build_report(root, args.output, ReportOptions(heat=("row+cage", "col"), by="cage", title="Titan GPU failures "
                                                         "(ORNL 2012-2019, Ostrouchov et al. SC'20)"))
    print(f"report: {res.path} ({res.bytes / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s; heat map "
          f"{res.heat[0]} x {res.heat[1]}")
    if args.screenshot:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as prof:
            subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--no-first-run", f"--user-data-dir={prof}",
                            "--hide-scrollbars", "--window-size=1400,4200", "--virtual-time-budget=8000",
                            f"--screenshot={args.screenshot}", Path(res.path).resolve().as_uri()],
                           capture_output=True, check=True, timeout=300)
        print(f"screenshot: {args.screenshot}")


if __name__ == "__main__":
    main()
