#!/usr/bin/env bash
# A real Prometheus (with promtool) for the rule and autoscaling-signal tests: Debian's `prometheus` package, only
# when promtool is missing. The package's own service must not run (it would listen on 0.0.0.0:9090): starts are
# denied through policy-rc.d while installing, and a service that was started anyway is stopped and disabled.
# The tests start their own Prometheus on 127.0.0.1 (tests/system/realtriton/prometheus.py).
set -euo pipefail

command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "bootstrap: installing Debian package prometheus (promtool)" >&2
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  made_policy=1
fi
cleanup() { [ "$made_policy" = 0 ] || $sudo rm -f "$policy"; }
trap cleanup EXIT
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
$sudo service prometheus stop >/dev/null 2>&1 || true
command -v promtool >/dev/null 2>&1 || { echo "bootstrap: promtool missing after installing prometheus" >&2; exit 1; }
