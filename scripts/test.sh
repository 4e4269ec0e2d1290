#!/usr/bin/env bash
# The project's test command: install (idempotent), then lint, format check, type check and the whole test suite.
# Exits non-zero when any of them fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The test control plane is the one long install (a Go build on a fresh machine, cached by version after): it starts
# first, in the background and at a lower priority, while the rest installs and every test that needs no control
# plane runs; the control-plane tests run last and wait for its binaries (scripts/setup/control_plane.sh holds a lock).
cp_log=$(mktemp -t tritonft-control-plane.XXXXXX)
setsid nice -n 10 bash scripts/setup/control_plane.sh >"$cp_log" 2>&1 &
cp_pid=$! # its own process group: an interrupted run stops the whole build with it
cleanup() {
  kill -- "-$cp_pid" 2>/dev/null || true
  rm -f "$cp_log"
}
trap cleanup EXIT
TRITONFT_SKIP_CONTROL_PLANE=1 bash scripts/bootstrap.sh

status=0
run() {
  echo "+ $*" >&2
  "$@" || status=1
}
run .venv/bin/ruff check .
run .venv/bin/ruff format --check .
run .venv/bin/mypy
# Tests never write into the work tree: files the suite leaves behind (untracked, not ignored) fail the run.
untracked() { git ls-files --others --exclude-standard 2>/dev/null | sort; }
before=$(untracked)
run timeout 3000 .venv/bin/pytest -q -p no:cacheprovider --durations=10 "$@"
left=$(comm -13 <(echo "$before") <(untracked))
if [ -n "$left" ]; then
  echo "the test suite left untracked files in the work tree (tests must write under tmp_path):" >&2
  echo "$left" | sed 's/^/  /' >&2
  status=1
fi
if wait "$cp_pid"; then
  grep -h "control_plane: built in" "$cp_log" >&2 || true
else
  echo "the test control plane's build failed:" >&2
  tail -n 30 "$cp_log" >&2
  status=1
fi
exit $status
