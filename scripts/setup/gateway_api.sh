#!/usr/bin/env bash
# Fetch the Gateway API CRDs (sigs.k8s.io/gateway-api) and Envoy Gateway's CRDs (github.com/envoyproxy/gateway) the
# control-plane tests load, as the Go modules that ship them (their module zips hold the CRD YAMLs), once, into a
# cache outside the work tree. The versions are the ones the stack installs (Envoy Gateway's chart pin in
# components/platform/aws/charts.py, and the Gateway API release that Envoy Gateway release is built against); each
# zip's hash is pinned below. Nothing is built. Prints the module cache directory on stdout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# module@version  h1 hash of its zip (go.sum's)
pins=(
  "sigs.k8s.io/gateway-api@v1.6.1 h1:mock6phZbI6rvZerwrVNk7hVNymQgHo+6sJ81Ia7ftY="
  "github.com/envoyproxy/gateway@v1.9.1 h1:vAVp6/AlBXJ1aOhp1mxL7fNEzVEfjADUguUhm2wzxQY="
)
if ! command -v go >/dev/null 2>&1; then
  echo "gateway_api: Go is required to fetch the Gateway API modules; install Go and rerun" >&2
  exit 1
fi
cache="${TRITONFT_CACHE:-$HOME/.cache/tritonft}/gateway-api"
export GOMODCACHE="$cache/mod" GOFLAGS="-modcacherw" GOTOOLCHAIN=local
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for pin in "${pins[@]}"; do
  module=${pin%% *}
  want=${pin##* }
  dir="$GOMODCACHE/${module%@*}@${module#*@}"
  if [ -d "$dir" ] && [ -f "$cache/${module//\//_}.ok" ]; then
    continue
  fi
  got=$(cd "$work" && go mod download -json "$module" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p')
  if [ "$got" != "$want" ]; then
    echo "gateway_api: $module has hash ${got:-none}, the pin says $want" >&2
    exit 1
  fi
  touch "$cache/${module//\//_}.ok"
done
echo "$GOMODCACHE"
