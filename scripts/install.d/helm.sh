#!/usr/bin/env bash
# Installs helm (chart lint/template tests) with `go install`, pinned, into a
# cache directory. Idempotent: skipped when the cached binary was built with
# the same pins (stamp file). Only the Go module proxy is needed.
#
#   FLEETEPI_CACHE  cache root (default ~/.cache/fleetepi); helm lands in $FLEETEPI_CACHE/bin/helm
#   HELM_VERSION    pinned release (default below); bump it here and nowhere else
#
# The -X flags are those of helm's own Makefile: without them `helm version`
# says v3 without a patch level and `helm template` assumes Kubernetes 1.20
# (chartutil's fallback), which fails charts with a kubeVersion constraint.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
# Kubernetes minor of the k8s.io modules helm $HELM_VERSION is built with (k8s.io/client-go v0.36.x).
K8S_MINOR="${K8S_MINOR:-36}"
CACHE="${FLEETEPI_CACHE:-$HOME/.cache/fleetepi}"
BIN="$CACHE/bin"
HELM="$BIN/helm"
STAMP="$BIN/helm.stamp"
WANT="$HELM_VERSION k8s=1.$K8S_MINOR"

if [ -x "$HELM" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "install.d/helm: Go is needed to build helm (apt-get install golang-go, or https://go.dev/dl)" >&2
  exit 1
fi
mkdir -p "$BIN"
echo "install.d/helm: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION -> $HELM"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$K8S_MINOR"
done
GOBIN="$BIN" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
echo "$WANT" > "$STAMP"
"$HELM" version --short
