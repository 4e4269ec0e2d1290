#!/usr/bin/env bash
# Sourced by the setup scripts that install a Debian package which ships a service of its own (nginx-light,
# prometheus) that must never run here: it would listen on 0.0.0.0. `apt_install_no_service PACKAGE SERVICE WHAT`
# installs PACKAGE with service starts denied through policy-rc.d (written only when none exists, and removed
# again), then stops and disables SERVICE in case it was started anyway. WHAT names the tool in the log line.
# POLICY_RC_D overrides the policy file's path (tests).

# shellcheck source=scripts/setup/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

apt_install_no_service() {
  local package="$1" service="$2" what="$3"
  local sudo="" policy="${POLICY_RC_D:-/usr/sbin/policy-rc.d}" made_policy=0
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing Debian package $package ($what)" >&2
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    made_policy=1
  fi
  # Runs in a subshell so the policy file is removed even when apt-get fails (set -e), and no EXIT trap of the
  # calling script is replaced.
  (
    trap '[ "$made_policy" = 0 ] || $sudo rm -f "$policy"' EXIT
    apt_install "$package"
  )
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $sudo systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
  $sudo service "$service" stop >/dev/null 2>&1 || true
}
