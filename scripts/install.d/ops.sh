#!/usr/bin/env bash
# Operations tests (tests/ops: rules, Alertmanager, quarantine hook, e2e) need
# prometheus, promtool, amtool and Alertmanager. Debian names the server
# `prometheus-alertmanager` (upstream: `alertmanager`); either is fine.
# install-services.sh normally installs them already; this makes sure.
set -euo pipefail
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v promtool   >/dev/null || missing+=(prometheus)
command -v amtool     >/dev/null || missing+=(prometheus-alertmanager)
command -v alertmanager >/dev/null || command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install.d/ops: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for svc in prometheus prometheus-alertmanager; do
    (systemctl stop "$svc" 2>/dev/null || service "$svc" stop 2>/dev/null || true) >/dev/null 2>&1
  done
fi
