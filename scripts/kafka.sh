#!/usr/bin/env bash
# Local single-node Kafka broker for development: scripts/kafka.sh start|stop|status [options]
# A thin wrapper over `fleetepi dev kafka ...` (see docs/stream.md).
set -euo pipefail
cd "$(dirname "$0")/.."
FLEETEPI=.venv/bin/fleetepi
[ -x "$FLEETEPI" ] || FLEETEPI=fleetepi
exec "$FLEETEPI" dev kafka "$@"
