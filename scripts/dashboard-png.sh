#!/usr/bin/env bash
# Renders docs/images/dashboard.png from real data: a simulated fleet (with
# labelled outbreaks) through the real detector pipeline, its metrics recorded
# in event time (`fleetepi dashboard history`), loaded into a real Prometheus
# (promtool backfill) and drawn from the dashboard's own PromQL
# (`fleetepi dashboard render`). Needs prometheus and promtool (make services).
#
#   bash scripts/dashboard-png.sh [OUTPUT.png]
#   HOSTS=1000 DAYS=5 SEED=7 RANGE=72h bash scripts/dashboard-png.sh
#
# The picture ends at the moment of the run when the most alerts fire.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-docs/images/dashboard.png}"
HOSTS="${HOSTS:-1000}"; DAYS="${DAYS:-5}"; SEED="${SEED:-7}"; RANGE="${RANGE:-72h}"
FLEETEPI="${FLEETEPI:-.venv/bin/fleetepi}"; PY="${PY:-.venv/bin/python}"
work="$(mktemp -d)"
prom_pid=""
cleanup() { [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

"$FLEETEPI" simulate --hosts "$HOSTS" --days "$DAYS" --seed "$SEED" -o "$work/events.jsonl.gz"
"$FLEETEPI" dashboard history -i "$work/events.jsonl.gz" -o "$work/metrics.om" --step 4m
promtool tsdb create-blocks-from openmetrics -q "$work/metrics.om" "$work/data" >/dev/null
port="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
printf 'global: {scrape_interval: 1m}\n' > "$work/prometheus.yml"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --storage.tsdb.retention.time=3650d --web.listen-address="127.0.0.1:$port" --log.level=warn \
  >"$work/prometheus.log" 2>&1 &
prom_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 120); do curl -fs "$url/-/ready" >/dev/null 2>&1 && break; sleep 0.5; done
end="$("$PY" - "$url" <<'PY'
import sys, time
import numpy as np
from fleetepi.dashboard.prom import PrometheusAPI
with PrometheusAPI(sys.argv[1]) as api:
    now = time.time()
    # One point a day over two years finds the recording's span.
    (hosts,) = api.range("max(last_over_time(fleetepi_hosts[1d]))", now - 730 * 86400, now + 365 * 86400, 86400)
    t0, t1 = hosts.times.min() - 86400, hosts.times.max() + 86400
    busy_q = 'count(fleetepi_alert_active) + (count(fleetepi_alert_relative_risk{attribute!=""}) or vector(0))'
    (busy,) = api.range(busy_q, t0, t1, 300)
    print(int(busy.times[np.argmax(busy.values)]))
PY
)"
"$FLEETEPI" dashboard render --prometheus "$url" -o "$OUT" --end "$end" --range "$RANGE" --rate-interval 30m
