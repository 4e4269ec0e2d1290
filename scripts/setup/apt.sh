#!/usr/bin/env bash
# Sourced by the setup scripts that install Debian packages. `apt_install PACKAGE...` runs `apt-get update` and
# `apt-get install` (through sudo when not root), one setup script at a time: the test command runs some of them in
# the background (the control plane's build, the vLLM environment) while others install, and two apt-get runs at
# once fail on dpkg's lock. TRITONFT_APT_LOCK overrides the lock file's path (tests).

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  (
    flock 9
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  ) 9>"${TRITONFT_APT_LOCK:-/tmp/tritonft-apt.lock}"
}
