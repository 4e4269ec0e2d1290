#!/usr/bin/env bash
# A real Prometheus (with promtool) for the rule and autoscaling-signal tests: Debian's `prometheus` package, only
# when promtool is missing. The package's own service must not run (it would listen on 0.0.0.0:9090): apt_no_service.sh.
# The tests start their own Prometheus on 127.0.0.1 (tests/system/realtriton/prometheus.py).
set -euo pipefail

command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && exit 0

# shellcheck source=scripts/setup/apt_no_service.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt_no_service.sh"
apt_install_no_service prometheus prometheus "promtool"
command -v promtool >/dev/null 2>&1 || { echo "bootstrap: promtool missing after installing prometheus" >&2; exit 1; }
