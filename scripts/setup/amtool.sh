#!/usr/bin/env bash
# Alertmanager's own `amtool` for the alert-routing tests (`amtool check-config`, `amtool config routes test` on the
# Alertmanager configuration the plan renders). Alertmanager's release tarball ships it, but nothing is downloaded
# here but Go modules: built from the Go module proxy, once, into a cache outside the work tree (keyed by the
# version and the Go toolchain). Prints the binary's path on stdout.
set -euo pipefail

# The Alertmanager kube-prometheus-stack 88.5.3 runs (its values.yaml; components/platform/aws/chart_facts.py).
version="${TRITONFT_ALERTMANAGER_VERSION:-v0.34.0}"
if ! command -v go >/dev/null 2>&1; then
  echo "amtool: Go is required to build amtool $version; install Go and rerun" >&2
  exit 1
fi
export GOTOOLCHAIN=local CGO_ENABLED=0
cache="${TRITONFT_CACHE:-$HOME/.cache/tritonft}"
key=$(echo "$version $(go env GOVERSION GOOS GOARCH)" | sha256sum | cut -c1-16)
bin="$cache/amtool/$key/amtool"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache/amtool"
exec 9>"$cache/amtool/.build.lock"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
tmp="$cache/amtool/$key.partial.$$"
rm -rf "$tmp" && mkdir -p "$tmp"
GOBIN="$tmp" nice -n "${TRITONFT_BUILD_NICE:-10}" go install -trimpath -ldflags="-s -w" \
  "github.com/prometheus/alertmanager/cmd/amtool@$version" >&2
mkdir -p "$(dirname "$bin")"
mv "$tmp/amtool" "$bin"
rm -rf "$tmp"
echo "$bin"
