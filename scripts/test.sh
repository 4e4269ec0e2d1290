#!/usr/bin/env bash
# The project's test command: install (idempotent), then lint, format check and type check beside the whole test
# suite. Exits non-zero when any of them fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Three installs take long on a fresh machine and only some tests need them; each starts in the background, in its
# own process group (an interrupted run stops it with the rest) and at a lower priority than the timed tests, while
# every test that needs none of them runs:
#   - the test control plane (a Go build, cached by version after): it starts first; the cluster lanes below wait for
#     its binaries (scripts/setup/control_plane.sh holds a lock);
#   - Alertmanager's amtool (a Go build, ~2 min fresh): beside it; the amtool tests wait for it before their time
#     limit starts (tests/conftest.py, the `built_tool` marker);
#   - the vLLM engine's environment (~5.9 GB of wheels, cached by its pins after): it starts once bootstrap has made
#     .venv and uv; in each lane the tests that serve a vLLM model run last and wait for it
#     (tritonft/vllm_env.py builds under a lock and a second caller waits for the first build).
logs=$(mktemp -d -t tritonft-test.XXXXXX)
# Each step's line says when it started, in seconds from here: where a slow run's minutes went.
begun=$(date +%s)
since() { echo "$(($(date +%s) - begun))"; }
control_plane_pid="" amtool_pid="" vllm_pid=""
cleanup() {
  local pid
  for pid in $control_plane_pid $amtool_pid $vllm_pid; do kill -- "-$pid" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT
# A background install runs in a process group of its own (stopped as one: kill -- -PID) but in this session. Linux
# schedules each session as one group (autogroup) and shares the CPU equally between groups whatever the nice values
# inside them: a build in a session of its own (setsid) took a whole core from the lanes at any nice, and the untimed
# lanes (nice 15, 19) kept theirs while the build the control-plane lanes wait for ran behind them.
in_own_group() { python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' "$@"; }
TRITONFT_BUILD_NICE=5 in_own_group bash scripts/setup/control_plane.sh >"$logs/control_plane.log" 2>&1 &
control_plane_pid=$!
in_own_group bash scripts/setup/amtool.sh >"$logs/amtool.log" 2>&1 &
amtool_pid=$!
# shellcheck source=scripts/setup/cpu.sh
source scripts/setup/cpu.sh
job_cpu() { # name -> "CPU U s user + S s sys"
  local user sys
  if read -r user sys < <(cpu_seconds "$logs/$1.cpu"); then
    echo "CPU $user s user + $sys s sys"
  else
    echo "CPU not measured"
  fi
}
echo "+ [$(since) s] scripts/bootstrap.sh" >&2
TRITONFT_SKIP_CONTROL_PLANE=1 TRITONFT_SKIP_AMTOOL=1 bash scripts/bootstrap.sh
times >"$logs/bootstrap.cpu" # the first process this shell waited for
echo "+ [$(since) s] bootstrap done ($(job_cpu bootstrap))" >&2
in_own_group nice -n 10 bash scripts/setup/vllm.sh >"$logs/vllm.log" 2>&1 &
vllm_pid=$!

status=0
# The lint job (ruff, its format check, mypy: ~3 CPU-minutes cold) runs beside the tests, not before them.
lint() {
  local code=0 step
  for step in "ruff check ." "ruff format --check ." "mypy"; do
    echo "+ [$(since) s] .venv/bin/$step"
    # shellcheck disable=SC2086 # each step is a command and its arguments
    nice -n 15 .venv/bin/$step || code=1
  done
  return $code
}
# Tests never write into the work tree: files the suite leaves behind (untracked, not ignored) fail the run.
untracked() { git ls-files --others --exclude-standard 2>/dev/null | sort; }
before=$(untracked)
# pytest runs under a time limit (SIGINT: pytest still prints its summary) and each failure is also written down as it
# happens (tests/failure_record.py) and printed after pytest, with the machine's state: a run stopped by the limit or
# from outside keeps what failed and why.
: "${TRITONFT_TEST_SECONDS:=4500}"
pytest_in() { # name niceness pytest-arguments...
  local name=$1 niceness=$2
  shift 2
  TRITONFT_FAILURE_RECORD="$logs/failures-$name.txt" timeout -s INT -k 120 "$TRITONFT_TEST_SECONDS" \
    nice -n "$niceness" .venv/bin/pytest -q -p no:cacheprovider --durations=10 "$@"
}
# With no arguments the suite runs as six lanes side by side, each its own pytest (`--lane`, tests/conftest.py's
# lane_of puts every test in exactly one). Most tests wait on servers, so the two cores carry six lanes; their
# priorities (nice) keep the tests that measure time (batching windows, deadlines, drains, latencies) first on a CPU,
# then the control plane's build (nice 5, started above): the two lanes on the control plane wait for it, and with it
# they are the run's longest path:
#   servers  0   tests/system/realtriton's tests of the server (batching, drains, warm-up, metrics, the bench tools)
#   clients  0   and of what talks to it (the gateway, the probe, the judge, the harness): real Tritons, gateways,
#                Prometheus, the vLLM engine's tests excepted;
#   engines  3   the other system tests: the vLLM engine's;
#   cluster  5   every test on the control plane (tests/system/controlplane, the canary under load)
#   rollouts 5   but the judged promotion's and the promotion under load's, which run here, on a control plane of
#                their own: both lanes' tests mostly wait on the real controllers. Each lane's pytest starts once
#                the build is done, so no test waits for it within pytest's per-test limit;
#   units    19  the rest (plans, rules, renderers, CLIs: CPU-bound, nothing timed).
# Each collects only its folder (tests/conftest.py's SYSTEM_TESTS, where the first five lanes' tests live): importing
# every test module is ~11 CPU-s per pytest.
# With arguments one pytest takes them (a file, -k, -x ...). The lint job (nice 15) runs beside either.
declare -A lane_nice=([servers]=0 [clients]=0 [engines]=3 [cluster]=5 [rollouts]=5 [units]=19)
declare -A lane_paths=([servers]=tests/system [clients]=tests/system [engines]=tests/system [cluster]=tests/system
  [rollouts]=tests/system [units]=--ignore=tests/system)
if [ $# -gt 0 ]; then
  lanes=(lint pytest)
else
  lanes=(lint servers clients engines cluster rollouts units)
fi
job() { # name [pytest-arguments...]
  local name=$1
  shift
  case $name in
    lint)
      lint
      return
      ;;
    pytest)
      pytest_in pytest 0 "$@"
      return
      ;;
    cluster | rollouts)
      echo "waiting for the control plane's build (scripts/setup/control_plane.sh)"
      bash scripts/setup/control_plane.sh >/dev/null || return 1
      echo "[$(since) s] the control plane is built; pytest starts"
      ;;
  esac
  pytest_in "$name" "${lane_nice[$name]}" --lane "$name" "${lane_paths[$name]}"
}
# Each job's output is printed when it ends, whole, after a line with its exit status, time and CPU.
declare -A lane_status lane_of_pid
started=$(date +%s)
for name in "${lanes[@]}"; do
  case $name in
    lint) echo "+ [$(since) s] lint: ruff check, ruff format --check, mypy" >&2 ;;
    pytest) echo "+ [$(since) s] pytest $* (limit $TRITONFT_TEST_SECONDS s)" >&2 ;;
    *) echo "+ [$(since) s] pytest --lane $name (limit $TRITONFT_TEST_SECONDS s)" >&2 ;;
  esac
  (
    code=0
    job "$name" "$@" || code=$?
    # The job's CPU: its own and every process it waited for (the servers a lane started and stopped).
    times >"$logs/$name.cpu" # its second line: the children's
    exit $code
  ) >"$logs/$name.log" 2>&1 &
  lane_of_pid[$!]=$name
done
for _ in "${lanes[@]}"; do
  code=0
  wait -n -p ended "${!lane_of_pid[@]}" || code=$?
  name=${lane_of_pid[$ended]}
  unset "lane_of_pid[$ended]" # the next wait lists only the jobs still running
  lane_status[$name]=$code
  echo "--- $([ "$name" = lint ] || echo "lane ")$name: exit $code after $(($(date +%s) - started)) s (at $(since) s; $(job_cpu "$name"))" >&2
  cat "$logs/$name.log"
done
for name in "${lanes[@]}"; do
  [ "${lane_status[$name]}" -eq 0 ] && continue
  status=1
  [ "$name" = lint ] && continue # its output, printed above, says what failed
  [ "${lane_status[$name]}" -eq 124 ] && echo "lane $name: pytest was stopped after its limit of $TRITONFT_TEST_SECONDS s" >&2
  if [ -s "$logs/failures-$name.txt" ]; then
    echo "lane $name: failures, in the order they happened (the last 400 lines):" >&2
    tail -n 400 "$logs/failures-$name.txt" >&2
  fi
  failed=1
done
if [ -n "${failed:-}" ]; then
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
finished amtool "$amtool_pid" "Alertmanager's amtool (scripts/setup/amtool.sh)"
exit $status
