"""How soon could any detector tell a deploy regression from a signature's ordinary days?

The simulator's ``signature_spike/deploy_regression`` multiplies an
existing signature by x2-x5 fleet-wide from one instant to the end of the
run. Its background swings day to day: each signature's day is drawn from a
gamma of shape ``day_to_day_shape`` (3 on noisy and hot, 4 elsewhere), so
one day at x3 is ordinary. This prints, for every deploy regression of the
held-out seeds, the p-value of the best test with hindsight no detector
has: every whole day before the deploy as the baseline (no decay), the
exact shape, no Poisson noise, the regression's exact start, and the
observed ratio at its expectation (the median case). Under those gifts the
mean of D days over the mean of B days is an F(2DK, 2BK) ratio (K the
shape). If that p is above the detectors' alpha for a D-day window
(``sig_alpha`` per day looked at, 1e-7 x D), then in the median case no
test at that alpha finds the regression within the run, whatever its
design; a lucky draw of days (or a key whose learned swing is smaller
than the truth) can.

    .venv/bin/python bench/deploy_bound.py              # held-out seeds, the three reported presets
    .venv/bin/python bench/deploy_bound.py --preset deploy,hot
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scipy.stats import f as f_dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detection import HELD_OUT

from fleetepi.detectors import DetectorConfig
from fleetepi.simulate import preset, simulate

DAY_MS = 86_400_000
TEMPLATE = "signature_spike/deploy_regression"
#: the longest window the detectors test (``sig_days``), in days
MAX_DAYS = 7.0


def bound(ratio: float, days: float, baseline_days: float, shape: float) -> float:
    """P(mean of ``days`` gamma days / mean of ``baseline_days`` >= ``ratio``) when nothing changed."""
    return float(f_dist.sf(ratio, 2 * days * shape, 2 * baseline_days * shape))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="quiet,noisy,large", help="comma-separated presets")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: the held-out ones)")
    args = ap.parse_args(argv)
    alpha = DetectorConfig().sig_alpha
    print(f"deploy regressions against the best test with hindsight (alpha {alpha:g} per day looked at)")
    print(f"{'preset':8s} {'seed':>4s} {'x':>4s} {'start':>6s} {'days':>5s} {'base':>5s} "
          f"{'p at 1 d':>9s} {'p at 3 d':>9s} {'p at end':>9s} {'alpha':>8s}  reachable")
    reachable = total = 0
    for name in args.preset.split(","):
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else list(HELD_OUT[name])
        for seed in seeds:
            cfg = preset(name, seed)
            sim = simulate(cfg)
            for o in sim.truth:
                if o.template != TEMPLATE:
                    continue
                total += 1
                shape = cfg.day_to_day_shape
                after = min((sim.end_ms - o.start_ms) / DAY_MS, MAX_DAYS)
                before = (o.start_ms - sim.start_ms) / DAY_MS
                k = float(o.strength or 1.0)
                ps = [bound(k, min(d, after), before, shape) for d in (1.0, 3.0, after)]
                a = alpha * max(after, 1.0)
                ok = ps[-1] < a
                reachable += ok
                print(f"{name:8s} {seed:4d} {k:4.1f} {before:5.1f}d {after:4.1f}d {before:4.1f}d "
                      f"{ps[0]:9.1e} {ps[1]:9.1e} {ps[2]:9.1e} {a:8.1e}  {'yes' if ok else 'no'}")
    print(f"reachable within the run at the detectors' alpha, in the median case: {reachable} of {total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
