#!/usr/bin/env bash
# nginx (Debian's `nginx-light`) as the edge's data-plane stand-in: the credentials tests put it in front of a
# backend, configured from the API keys as Envoy Gateway reads them (tests/system/controlplane/edge_standin.py).
# Only when nginx is missing. The package's own service must not run (it would listen on 0.0.0.0:80): starts are
# denied through policy-rc.d while installing, and a service that was started anyway is stopped and disabled.
set -euo pipefail

command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "bootstrap: installing Debian package nginx-light (the edge's data-plane stand-in)" >&2
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
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
fi
$sudo service nginx stop >/dev/null 2>&1 || true
[ -x /usr/sbin/nginx ] || { echo "bootstrap: nginx missing after installing nginx-light" >&2; exit 1; }
