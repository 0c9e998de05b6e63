#!/usr/bin/env bash
# Installs the Kafka broker jars (Maven Central -> $FLEETEPI_CACHE or ~/.cache/fleetepi/kafka)
# that the stream tests and `fleetepi dev kafka start` run. Idempotent: a cached install is a no-op.
# Needs Java 17 and Maven; apt-installs them on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn  >/dev/null || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install.d/kafka: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
"$PY" -c 'from stream.devbroker import install; print("install.d/kafka: jars in", install())'
