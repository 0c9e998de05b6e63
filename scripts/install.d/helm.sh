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
mkdir -p "$BIN"
# helm $HELM_VERSION needs Go >= 1.26. A Go >= 1.21 fetches that toolchain by
# itself (GOTOOLCHAIN=auto, checked against sum.golang.org); without any Go, the
# same toolchain module is fetched from the module proxy into the cache.
GO_TOOLCHAIN="${GO_TOOLCHAIN:-go1.26.8}"
GO=go
if ! command -v go >/dev/null; then
  gohome="$CACHE/toolchain/$GO_TOOLCHAIN"
  if [ ! -x "$gohome/bin/go" ]; then
    arch="$(uname -m)"; case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
    proxy="${GOPROXY:-https://proxy.golang.org}"; proxy="${proxy%%,*}"
    zip="$CACHE/toolchain/$GO_TOOLCHAIN.zip"
    mkdir -p "$CACHE/toolchain"
    echo "install.d/helm: no Go here; fetching $GO_TOOLCHAIN from $proxy (golang.org/toolchain module)"
    curl -fsSL -o "$zip" "$proxy/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.linux-$arch.zip"
    rm -rf "$CACHE/toolchain/unpack" && mkdir -p "$CACHE/toolchain/unpack"
    python3 -m zipfile -e "$zip" "$CACHE/toolchain/unpack"
    rm -rf "$gohome" && mv "$CACHE/toolchain/unpack/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$arch" "$gohome"
    chmod -R u+x "$gohome/bin" "$gohome/pkg/tool" && rm -rf "$CACHE/toolchain/unpack" "$zip"
  fi
  GO="$gohome/bin/go"
fi
echo "install.d/helm: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION -> $HELM"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$K8S_MINOR"
done
GOBIN="$BIN" CGO_ENABLED=0 "$GO" install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
echo "$WANT" > "$STAMP"
"$HELM" version --short
