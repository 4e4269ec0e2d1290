#!/usr/bin/env bash
# nginx (Debian's `nginx-light`) as the edge's data-plane stand-in: the credentials tests put it in front of a
# backend, configured from the API keys as Envoy Gateway reads them (tests/system/controlplane/edge_standin.py).
# Only when nginx is missing. The package's own service must not run (it would listen on 0.0.0.0:80): apt_no_service.sh.
set -euo pipefail

command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] && exit 0

# shellcheck source=scripts/setup/apt_no_service.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt_no_service.sh"
apt_install_no_service nginx-light nginx "the edge's data-plane stand-in"
[ -x /usr/sbin/nginx ] || { echo "bootstrap: nginx missing after installing nginx-light" >&2; exit 1; }
