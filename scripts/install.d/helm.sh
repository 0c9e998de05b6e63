#!/usr/bin/env bash
# Installs helm (chart lint/template tests) with `go install`, pinned, into a
# cache directory. Idempotent: skipped when the cached binary already reports
# the pinned version. Only the Go module proxy is needed (no get.helm.sh).
#
#   FLEETEPI_CACHE  cache root (default ~/.cache/fleetepi); helm lands in $FLEETEPI_CACHE/bin/helm
#   HELM_VERSION    pinned release (default below); bump it here and nowhere else
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
CACHE="${FLEETEPI_CACHE:-$HOME/.cache/fleetepi}"
BIN="$CACHE/bin"
HELM="$BIN/helm"

if [ -x "$HELM" ] && "$HELM" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM_VERSION"; then
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "install.d/helm: Go is needed to build helm (apt-get install golang-go, or https://go.dev/dl)" >&2
  exit 1
fi
mkdir -p "$BIN"
echo "install.d/helm: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION -> $HELM"
# The version stamp goes in with -ldflags so `helm version` reports the pin
# (go install alone leaves it at the module default).
GOBIN="$BIN" GOFLAGS="${GOFLAGS:-} -mod=mod" go install \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
"$HELM" version --short
