#!/usr/bin/env bash
# The test control plane's Go build, measured apart from its downloads: the five commands of
# tools/control-plane/go.mod with scripts/setup/control_plane.sh's flags, a fresh GOCACHE, the modules downloaded
# first (not counted). Prints /usr/bin/time's wall and CPU and the cache's size; extra arguments go to `go build`.
# Usage: bash benchmarks/control_plane_build.sh LABEL CACHE_ROOT [go build flags...]
#   e.g. bash benchmarks/control_plane_build.sh nodwarf /tmp/gox -gcflags=all=-dwarf=false
set -euo pipefail
label=$1 root=$2
shift 2
cd "$(dirname "${BASH_SOURCE[0]}")/../tools/control-plane"
export GOMODCACHE=$root/mod GOCACHE=$root/build-$label GOTOOLCHAIN=local GOFLAGS="-trimpath -mod=readonly" CGO_ENABLED=0
commands=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler sigs.k8s.io/kwok/cmd/kwok)
go list -deps "${commands[@]}" >/dev/null # downloads only
rm -rf "$GOCACHE"
out=$root/bin-$label
rm -rf "$out" && mkdir -p "$out"
/usr/bin/time -f "$label: %e s wall, %U s user + %S s sys, max RSS %M KB" \
  go build -ldflags="-s -w" "$@" -o "$out/" "${commands[@]}"
du -sh "$GOCACHE" | sed "s/^/$label GOCACHE /"
rm -rf "$GOCACHE"
