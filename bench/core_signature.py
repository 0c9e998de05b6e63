"""Benchmark: crash signature of a 1 GiB core vs a small one, time and extra RSS.

Targets (issue 4): a 1 GiB core's signature in < 1 s and < 100 MB extra
RSS, because the core is mmap'd and only the notes, the ELF heads of
modules and the crashing thread's stack pages are read.

Builds ``tests/agents_core/programs/crashy.c``, makes a small core and a
~1 GiB core (the program touches 1 GiB of heap, then segfaults), and runs
each measurement in a fresh subprocess so ``ru_maxrss`` is that of the
analysis alone. The big core is deleted afterwards.

    .venv/bin/python bench/core_signature.py [--mib 1024] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from fleetepi.agents.core.signature import CoreAnalyzer
core, warm_core, repeat, pyspy = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
an = CoreAnalyzer(use_pyspy=pyspy)
if warm_core != "-":
    an.analyze(warm_core, host="bench")          # fill the symbol cache with this build's tables
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range(repeat):
    t = time.perf_counter()
    crash = an.analyze(core, host="bench").crash
    times.append(time.perf_counter() - t)
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"first_s": times[0], "best_s": min(times), "extra_rss_mb": (rss1 - rss0) / 1024,
                  "signature": crash.signature, "partial": bool(crash.partial),
                  "symbol_loads": an.symbols.loads}))
"""


def _cores_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_cores", ROOT / "tests/agents_core/cores.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_cores"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def measure(core: Path, warm_with: Path | None, repeat: int, pyspy: bool = False) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ROOT), str(core), str(warm_with) if warm_with else "-", str(repeat),
         "1" if pyspy else "0"],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_cold(core: Path, runs: int, pyspy: bool = False) -> dict[str, object]:
    """Cold cases vary with the shared machine's load: the median of ``runs`` fresh processes."""
    results = sorted((measure(core, None, 1, pyspy) for _ in range(runs)), key=lambda r: r["first_s"])  # type: ignore[arg-type,return-value]
    mid = results[len(results) // 2]
    return {**mid, "best_s": results[0]["first_s"], "extra_rss_mb": max(r["extra_rss_mb"] for r in results)}  # type: ignore[type-var]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="heap the big core's process touches (MiB)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cores = _cores_module()
    work = Path(tempfile.mkdtemp(prefix="fleetepi-bench-core-"))
    try:
        exe = cores.compile_program(cores.VARIANTS["pie_fp_g"], work / "build")
        small = cores.make_core([str(exe), "segv"], work / "small")
        big = cores.make_core([str(exe), "big", str(args.mib)], work / "big")
        script = work / "py" / "crash_ctypes.py"
        script.parent.mkdir()
        script.write_text("import ctypes\ndef inner():\n    return ctypes.string_at(0)\ninner()\n")
        pycore = cores.make_core([sys.executable, str(script)], work / "py")
        rows = {
            "small core, cold symbol cache": measure_cold(small, args.repeat),
            "small core, warm symbol cache": measure(small, small, args.repeat),
            "big core, cold symbol cache": measure_cold(big, args.repeat),
            "big core, warm symbol cache": measure(big, small, args.repeat),
            "python core + py-spy, cold": measure_cold(pycore, args.repeat, pyspy=True),
            "python core + py-spy, warm": measure(pycore, pycore, args.repeat, pyspy=True),
        }
        sizes = {"small": small.stat().st_size, "big": big.stat().st_size, "py": pycore.stat().st_size}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor() or "?")
    print(f"machine: {platform.machine()} {cpu}, python {platform.python_version()}")
    print(f"small core {sizes['small'] / 2**20:.1f} MiB, big core {sizes['big'] / 2**30:.2f} GiB, "
          f"python core {sizes['py'] / 2**20:.1f} MiB")
    print("cold rows: median of --repeat fresh processes (first) and their best; warm rows: one process, "
          "first call and best of --repeat")
    print(f"{'case':34} {'first (ms)':>10} {'best (ms)':>10} {'extra RSS (MB)':>15}  signature")
    for name, r in rows.items():
        sig = str(r["signature"])
        sig = sig if len(sig) < 70 else sig[:67] + "..."
        print(f"{name:34} {r['first_s'] * 1e3:10.1f} {r['best_s'] * 1e3:10.1f} {r['extra_rss_mb']:15.1f}  {sig}")
    ratio = rows["big core, warm symbol cache"]["best_s"] / rows["small core, warm symbol cache"]["best_s"]  # type: ignore[operator]
    print(f"big/small time ratio (warm): {ratio:.2f}x for a {sizes['big'] / sizes['small']:.0f}x larger core")
    big_cold = rows["big core, cold symbol cache"]
    ok = big_cold["first_s"] < 1.0 and big_cold["extra_rss_mb"] < 100  # type: ignore[operator]
    print(f"target (< 1 s, < 100 MB extra RSS on the 1 GiB core, cold): {'MET' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
