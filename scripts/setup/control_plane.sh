#!/usr/bin/env bash
# Build the real control plane the tests run against (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
# and kwok (simulated kubelets) from the Go module proxy, once, into a cache outside the work tree.
# The wrapper module tools/control-plane/go.mod pins every version, its go.sum every byte: the five commands are one
# `go build` on one version of each module, so the packages they share (most of them) compile once.
# Skipped when the binaries for these pins, flags and Go version are present. Prints the bin directory on stdout.
# The build runs at nice 10 (TRITONFT_BUILD_NICE; the test command sets 5: its control-plane lanes wait for it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if ! command -v go >/dev/null 2>&1; then
  echo "control_plane: Go (>= 1.24) is required to build the test control plane; install Go and rerun" >&2
  exit 1
fi
# The test fixture signs service-account tokens with a key pair it makes with openssl (Debian, only when missing).
if ! command -v openssl >/dev/null 2>&1; then
  echo "control_plane: installing Debian package openssl" >&2
  # shellcheck source=scripts/setup/apt.sh
  source scripts/setup/apt.sh
  apt_install openssl >&2
fi
# Every input of the build keys the cache: the pins, the build flags and the Go toolchain.
export GOTOOLCHAIN=local CGO_ENABLED=0
goflags="-trimpath -mod=readonly"
# No debug information: the linker drops it (-s -w), so the compiler need not make it (-dwarf=false): the same
# machine code, 17% less build CPU (569 -> 472 CPU-s, benchmarks/BENCHMARKS.md).
gcflags="all=-dwarf=false"
ldflags="-s -w"
pins=$({
  cat tools/control-plane/go.mod tools/control-plane/go.sum
  echo "GOFLAGS=$goflags gcflags=$gcflags ldflags=$ldflags CGO_ENABLED=$CGO_ENABLED $(go env GOVERSION GOOS GOARCH GOAMD64)"
} | sha256sum | cut -c1-16)
cache="${TRITONFT_CACHE:-$HOME/.cache/tritonft}"
bin="$cache/control-plane/$pins/bin"
wanted=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
present() {
  local b
  for b in "${wanted[@]}"; do [ -x "$bin/$b" ] || return 1; done
}
if present; then
  echo "$bin"
  exit 0
fi
# One build at a time: the test command starts this script in the background while the tests that need no control
# plane run, and the control-plane tests call it again; the second caller waits here for the first build's binaries.
mkdir -p "$cache/control-plane"
exec 9>"$cache/control-plane/.build.lock"
if ! flock -n 9; then
  echo "control_plane: another build of these binaries is running; waiting for it" >&2
  flock 9
fi
if present; then
  echo "$bin"
  exit 0
fi

export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS="$goflags"
tmp="$bin.partial.$$"
rm -rf "$tmp" && mkdir -p "$tmp"
start=$(date +%s)
echo "control_plane: building etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok into $bin" >&2
(cd tools/control-plane && nice -n "${TRITONFT_BUILD_NICE:-10}" go build -gcflags="$gcflags" -ldflags="$ldflags" -o "$tmp/" go.etcd.io/etcd/server/v3 \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
  sigs.k8s.io/kwok/cmd/kwok)
mv "$tmp/server" "$tmp/etcd" # go names a command after its import path (v3 dropped): server
mkdir -p "$(dirname "$bin")"
rm -rf "$bin" && mv "$tmp" "$bin"
# CPU of the build (the go commands this shell waited for): on a fresh machine it competes with the tests for the cores.
# shellcheck source=scripts/setup/cpu.sh
source scripts/setup/cpu.sh
times >"$bin.times"
read -r user sys < <(cpu_seconds "$bin.times")
rm -f "$bin.times"
echo "control_plane: built in $(($(date +%s) - start)) s (CPU $user s user + $sys s sys, downloads included)" >&2
# The Go caches (~4.5 GB) only serve a rebuild, which happens when the pins change; binaries of other pins are stale.
# A failed clean-up only leaves disk used: it never fails the set-up.
if [ -z "${TRITONFT_KEEP_GO_CACHE:-}" ]; then
  if go clean -cache -modcache && rm -rf "$cache/go"; then
    echo "control_plane: removed the Go build and module caches (TRITONFT_KEEP_GO_CACHE=1 keeps them)" >&2
  else
    echo "control_plane: warning: could not remove the Go caches under $cache/go" >&2
  fi
  for old in "$cache/control-plane"/*/; do
    old=${old%/}
    [ "$old" = "$(dirname "$bin")" ] || rm -rf "$old" || echo "control_plane: warning: could not remove $old" >&2
  done
fi
echo "$bin"
