#!/usr/bin/env bash
# Run the agent's NVML sources once against a real GPU and print what they see:
# the inventory host message (GPU model, driver, VBIOS), ECC / retired pages /
# row remapping (two polls 2 s apart: deltas need a baseline), GPU and HBM
# temperature, clock-event (throttle) reasons and their duration counters,
# channel/TPC repair pending, then the cost of one NVML poll (median of 200). Needs Python >= 3.11 with this repo's runtime deps (msgspec, pyyaml)
# and nvidia-ml-py (pip install nvidia-ml-py); no Kafka, no root.
#   bash scripts/gpu-check.sh            # uses .venv/bin/python if present
#   PYTHON=python3 bash scripts/gpu-check.sh
#   CAPTURE=gpu.json bash scripts/gpu-check.sh   # also save what NVML answered, for
#       FakeNvml.from_capture (tests/agents/data/nvml/; UUID and serial zeroed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,temperature.gpu --format=csv || true
CAPTURE="${CAPTURE:-}" "$PY" - <<'PYEOF'
import json, os, statistics, sys, time
sys.path.insert(0, ".")
try:
    from importlib.metadata import version
    import msgspec  # noqa: F401  (the contract's structs)
except ImportError as exc:
    print(f"gpu-check: missing runtime dependency: {exc} (pip install msgspec pyyaml nvidia-ml-py)", file=sys.stderr)
    sys.exit(2)
from fleetepi.contract import encode
from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.inventory import InventorySource
from fleetepi.agents.telemetry.nvml import NvmlSource, start

try:
    nvml = start(None)
except SourceUnavailable as exc:
    print(f"gpu-check: NVML unavailable: {exc}", file=sys.stderr)
    sys.exit(2)
try:
    print(f"gpu-check: nvidia-ml-py {version('nvidia-ml-py')}", file=sys.stderr)
except Exception:  # noqa: BLE001  (an injected or vendored pynvml has no metadata)
    pass
if os.environ.get("CAPTURE"):
    from fleetepi.agents.telemetry.fakenvml import capture
    with open(os.environ["CAPTURE"], "w") as f:
        json.dump(capture(nvml), f, indent=1)
    print(f"gpu-check: NVML answers saved to {os.environ['CAPTURE']}", file=sys.stderr)
host = "gpu-check"
inv = InventorySource(host, nvml=nvml)
for ev in inv.poll(int(time.time() * 1000)):
    print(encode(ev).decode())
src = NvmlSource(host, nvml=nvml, sample_interval_s=1)
print(f"gpu-check: {len(src.gpus)} GPU(s): " + ", ".join(f"{g.device} thresholds={g.thresholds}" for g in src.gpus), file=sys.stderr)
for i in range(2):
    for ev in src.poll(int(time.time() * 1000)):
        print(encode(ev).decode())
    if i == 0:
        time.sleep(2)
from fleetepi.agents.telemetry.nvml import FALLBACK_COUNTERS, FI_MEMORY_TEMP, THROTTLE_COUNTERS, field_values
counters = {**THROTTLE_COUNTERS, **FALLBACK_COUNTERS, "sw_power_cap": 74, "sync_boost": 76}
for g in src.gpus:
    print(f"gpu-check: {g.device}: unsupported features: {sorted(g.unsupported) or 'none'}, fields: "
          f"{sorted(g.unsupported_fields) or 'none'}; throttle mask 0x{g.throttle:x}", file=sys.stderr)
    try:
        f = field_values(nvml.nvmlDeviceGetFieldValues(g.handle, [FI_MEMORY_TEMP, *counters.values()]))
        print(f"gpu-check: {g.device}: HBM {f.get(FI_MEMORY_TEMP)} C, thresholds {g.mem_thresholds}; throttle ns since "
              "driver load: " + ", ".join(f"{k}={f.get(v)}" for k, v in counters.items()), file=sys.stderr)
    except nvml.NVMLError as exc:
        print(f"gpu-check: {g.device}: nvmlDeviceGetFieldValues: {exc}", file=sys.stderr)
    print(f"gpu-check: {g.device}: repair pending: channel={g.channel_repair_pending} tpc={g.tpc_repair_pending}"
          + (" (nvmlDeviceGetRepairStatus unsupported)" if "repair" in g.unsupported else ""), file=sys.stderr)
if src._fns:
    print(f"gpu-check: fell back to older NVML functions: {src._fns}", file=sys.stderr)
costs = []
for _ in range(200):
    t = time.perf_counter()
    src.poll(int(time.time() * 1000))
    costs.append((time.perf_counter() - t) * 1e3)
costs.sort()
print(f"gpu-check: one poll of {len(src.gpus)} GPU(s): median {statistics.median(costs):.3f} ms, p99 {costs[197]:.3f} ms", file=sys.stderr)
src.close()
print("gpu-check: ok", file=sys.stderr)
PYEOF
