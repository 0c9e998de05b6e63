#!/usr/bin/env bash
# What tests/agents_core needs beyond install-services.sh's gcc and gdb:
# g++ (a C++ program with an uncaught exception), binutils' strip (stripped
# test builds; normally pulled in by gcc) and
# py-spy (Python frames from cores; a pip package of the agent extra, so the
# venv already has it -- this only reports). Idempotent.
set -euo pipefail
. "$(dirname "$0")/../apt-install.sh"
need=()
command -v strip >/dev/null || need+=(binutils)
command -v g++ >/dev/null || need+=(g++)
apt_install install.d/agents-core "${need[@]}"
if [ ! -x .venv/bin/py-spy ] && ! command -v py-spy >/dev/null; then
  echo "install.d/agents-core: py-spy missing (pip install -e '.[agent]'); Python-frame tests will skip"
fi
