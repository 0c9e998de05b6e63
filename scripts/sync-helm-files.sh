#!/usr/bin/env bash
# Copies the files the Helm chart ships but does not own into
# helm/fleetepi/files/: the alert rules (deploy/prometheus/rules.yml), the
# Alertmanager routes and inhibit rules (deploy/alertmanager/alertmanager.yml)
# and the generated Grafana dashboard (deploy/grafana/fleetepi-dashboard.json).
# Helm can only read files inside the chart, so they are copies; the tests in
# tests/ops/test_helm_chart.py fail when a copy differs from its source.
# Run after editing either source:  bash scripts/sync-helm-files.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=helm/fleetepi/files
mkdir -p "$dest"
cp deploy/prometheus/rules.yml "$dest/rules.yml"
cp deploy/alertmanager/alertmanager.yml "$dest/alertmanager.yml"
cp deploy/grafana/fleetepi-dashboard.json "$dest/fleetepi-dashboard.json"
echo "sync-helm-files: $dest up to date"
