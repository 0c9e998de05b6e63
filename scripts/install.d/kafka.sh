#!/usr/bin/env bash
# Installs the Kafka broker jars (Maven Central -> $FLEETEPI_CACHE or ~/.cache/fleetepi/kafka)
# that the stream tests and `fleetepi dev kafka start` run. Idempotent: a cached install is a no-op.
# Needs Java 17 and Maven; apt-installs them on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/apt-install.sh
need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn  >/dev/null || need_apt+=(maven)
apt_install install.d/kafka "${need_apt[@]}"
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
"$PY" -c 'import sys; sys.path.insert(0, "tools"); from devbroker import install; print("install.d/kafka: jars in", install())'
