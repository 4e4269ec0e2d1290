#!/usr/bin/env bash
# The project's test command: install (idempotent), then lint, format check, type check and the whole test suite.
# Exits non-zero when any of them fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Two installs take long on a fresh machine and only some tests need them; each starts in the background, in its own
# process group (an interrupted run stops it with the rest) and at a lower priority, while every test that needs
# neither runs:
#   - the test control plane (a Go build, cached by version after): it starts first; the control-plane tests run last
#     and wait for its binaries (scripts/setup/control_plane.sh holds a lock);
#   - the vLLM engine's environment (~5.9 GB of wheels, cached by its pins after): it starts once bootstrap has made
#     .venv and uv; the tests that serve a vLLM model run just before the control-plane ones and wait for it
#     (tritonft/vllm_env.py builds under a lock and a second caller waits for the first build).
logs=$(mktemp -d -t tritonft-test.XXXXXX)
control_plane_pid="" vllm_pid=""
cleanup() {
  local pid
  for pid in $control_plane_pid $vllm_pid; do kill -- "-$pid" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT
setsid nice -n 10 bash scripts/setup/control_plane.sh >"$logs/control_plane.log" 2>&1 &
control_plane_pid=$!
TRITONFT_SKIP_CONTROL_PLANE=1 bash scripts/bootstrap.sh
setsid nice -n 10 bash scripts/setup/vllm.sh >"$logs/vllm.log" 2>&1 &
vllm_pid=$!

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
# Each failure is written down as it happens (tests/failure_record.py) and printed after pytest: a run stopped by the
# time limit (SIGINT: pytest still prints its summary) or killed from outside keeps what failed and why.
export TRITONFT_FAILURE_RECORD="$logs/failures.txt"
pytest_status=0
echo "+ pytest (limit ${TRITONFT_TEST_SECONDS:=4500} s)" >&2
timeout -s INT -k 120 "$TRITONFT_TEST_SECONDS" .venv/bin/pytest -q -p no:cacheprovider --durations=10 "$@" ||
  pytest_status=$?
if [ "$pytest_status" -ne 0 ]; then
  status=1
  [ "$pytest_status" -eq 124 ] && echo "pytest was stopped after its limit of $TRITONFT_TEST_SECONDS s" >&2
  if [ -s "$TRITONFT_FAILURE_RECORD" ]; then
    echo "failures, in the order they happened (the last 400 lines):" >&2
    tail -n 400 "$TRITONFT_FAILURE_RECORD" >&2
  fi
  echo "the machine when pytest ended:" >&2
  { uptime; free -m; df -h /dev/shm /tmp; ps -eo pid,etimes,pcpu,rss,args --sort=-rss | head -n 8 | cut -c1-160; } >&2 || true
fi
left=$(comm -13 <(echo "$before") <(untracked))
if [ -n "$left" ]; then
  echo "the test suite left untracked files in the work tree (tests must write under tmp_path):" >&2
  echo "$left" | sed 's/^/  /' >&2
  status=1
fi
# An install that failed in the background fails the run (its tests may have built it again, or failed on it).
finished() { # name pid what
  if wait "$2"; then
    grep -h "built in" "$logs/$1.log" >&2 || true
  else
    echo "the $3 failed to install:" >&2
    tail -n 30 "$logs/$1.log" >&2
    status=1
  fi
}
finished vllm "$vllm_pid" "vLLM engine's environment (scripts/setup/vllm.sh)"
finished control_plane "$control_plane_pid" "test control plane (scripts/setup/control_plane.sh)"
exit $status
