#!/usr/bin/env bash
# Installs the real services the test suite runs against, on a fresh Debian
# machine: Prometheus, Alertmanager (+ promtool, amtool), R's surveillance
# package (detection baselines), gcc/gdb (real core dumps), chromium (the
# report's headless render test), the Kafka broker jars (Maven Central,
# cached) and helm (go install, cached).
# Idempotent: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt-install.sh

need_apt=()
command -v prometheus   >/dev/null || need_apt+=(prometheus)
command -v promtool     >/dev/null || need_apt+=(prometheus)
{ command -v alertmanager || command -v prometheus-alertmanager; } >/dev/null || need_apt+=(prometheus-alertmanager)
command -v amtool       >/dev/null || need_apt+=(prometheus-alertmanager)
command -v Rscript      >/dev/null || need_apt+=(r-cran-surveillance)
Rscript -e 'library(surveillance)' >/dev/null 2>&1 || need_apt+=(r-cran-surveillance)
command -v gcc >/dev/null || need_apt+=(gcc)
command -v gdb >/dev/null || need_apt+=(gdb)
command -v chromium >/dev/null || need_apt+=(chromium)
apt_install install-services "${need_apt[@]}"
# Debian starts the packaged daemons; the tests run their own on free ports.
for svc in prometheus prometheus-alertmanager prometheus-node-exporter; do
  (systemctl stop "$svc" 2>/dev/null || service "$svc" stop 2>/dev/null || true) >/dev/null 2>&1
done

for step in scripts/install.d/*.sh; do
  [ -e "$step" ] || continue
  bash "$step"
done
echo "install-services: ready"
