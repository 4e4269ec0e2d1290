"""``scripts/test.sh``, the project's test command, run in a copy of the repository's layout whose installs and tools
are stand-ins: each records that it ran (and what had run before it) and passes or fails as the test asks."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LANES, SYSTEM_TESTS
from tests.delivery.conftest import REPO

SCRIPT = REPO / "scripts/test.sh"


def stand_in(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with ``scripts/test.sh`` and stand-ins for what it runs; ``$TRACE`` collects what ran.

    The stand-in of an install or tool named in ``$FAIL`` exits 1. Two handshakes show what runs at the same time:
    the vLLM install waits (at most 60 s) until the stand-in pytest has started and records whether it was still
    running (an install run before the tests, or one the tests waited for, records ``tests-not-running``); the
    bootstrap waits the same way for the control plane's and amtool's builds to have started
    (``control_plane-not-started``, ``amtool-not-started`` when one did not start before it) and records
    ``bootstrap-builds-them-too`` unless told to leave both to the background; mypy records ``lint-during-tests``
    when the stand-in pytest has started."""
    root = tmp_path / "repo"
    (root / "scripts/setup").mkdir(parents=True)
    (root / "scripts/test.sh").write_text(SCRIPT.read_text())
    (root / "scripts/setup/cpu.sh").write_text((REPO / "scripts/setup/cpu.sh").read_text())
    record = 'echo "$NAME" >> "$TRACE"; case " $FAIL " in *" $NAME "*) exit 1 ;; esac'
    ids = 'ps -o pid=,pgid=,sid= -p $$ >> "$TRACE.ids-$NAME"'  # process, its group and session
    stand_in(
        root / "scripts/bootstrap.sh",
        "for build in control_plane amtool; do\n"
        '  for _ in $(seq 600); do grep -q "$build" "$TRACE" 2>/dev/null && break; sleep 0.1; done\n'
        '  grep -q "$build" "$TRACE" 2>/dev/null || echo "$build-not-started" >> "$TRACE"\n'
        "done\n"
        '[ -n "${TRITONFT_SKIP_CONTROL_PLANE:-}" ] && [ -n "${TRITONFT_SKIP_AMTOOL:-}" ] '
        '|| echo bootstrap-builds-them-too >> "$TRACE"\n'
        f"NAME=bootstrap; {ids}; {record}",
    )
    stand_in(
        root / "scripts/setup/control_plane.sh",
        f'NAME=control_plane; if [ -n "${{TRITONFT_BUILD_NICE:-}}" ]; then NAME=build; {ids}; NAME=control_plane; fi\n'
        f"{record}",
    )
    stand_in(root / "scripts/setup/amtool.sh", f"NAME=amtool; {ids}; {record}")
    stand_in(
        root / "scripts/setup/vllm.sh",
        'for _ in $(seq 600); do [ -e "$TRACE.pytest" ] && break; sleep 0.1; done\n'
        'if [ -e "$TRACE.pytest" ] && [ ! -e "$TRACE.pytest-done" ]; then echo vllm-during-tests >> "$TRACE"; '
        'else echo tests-not-running >> "$TRACE"; fi\n'
        f"NAME=vllm; {ids}; {record}",
    )
    stand_in(root / ".venv/bin/ruff", f"NAME=ruff; {record}")
    stand_in(
        root / ".venv/bin/mypy",
        'for _ in $(seq 600); do [ -e "$TRACE.pytest" ] && break; sleep 0.1; done\n'
        '[ -e "$TRACE.pytest" ] && echo lint-during-tests >> "$TRACE"\n'
        f"NAME=mypy; {record}",
    )
    stand_in(
        root / ".venv/bin/pytest",
        'echo "$*" >> "$TRACE.args"; '
        f'touch "$TRACE.pytest"; for _ in $(seq 600); do grep -q vllm-during-tests "$TRACE" 2>/dev/null && break; '
        f'sleep 0.1; done; touch "$TRACE.pytest-done"; '
        'if [ -n "${PYTEST_FAILS:-}" ]; then echo "FAILED $PYTEST_FAILS" >> "$TRITONFT_FAILURE_RECORD"; fi; '
        'if [ -n "${PYTEST_SLEEP:-}" ]; then trap "exit 2" INT; sleep "$PYTEST_SLEEP" & wait; fi; '
        'if [ -n "${PYTEST_BURN:-}" ]; then python3 -c "$BURN" "$PYTEST_BURN"; fi; '
        f"NAME=pytest; {record}",
    )
    (root / ".gitignore").write_text(".venv/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


# A child process that spends the given CPU seconds (process time, whatever the machine's load).
BURN = "import sys, time\nwhile time.process_time() < float(sys.argv[1]):\n    pass\n"


def run(
    repo: Path, *failing: str, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    trace = repo.parent / "trace"
    env = {**os.environ, **(env or {}), "TRACE": str(trace), "FAIL": " ".join(failing), "BURN": BURN}
    done = subprocess.run(
        ["bash", str(repo / "scripts/test.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    return done, trace.read_text().split() if trace.exists() else []


def test_it_passes_when_every_step_passes(repo: Path) -> None:
    done, ran = run(repo)
    assert done.returncode == 0, done.stderr
    assert sorted(ran) == sorted(
        [
            "bootstrap",
            *["control_plane"] * 3,  # the build, then each control-plane lane waiting for it
            "amtool",
            "vllm-during-tests",
            "vllm",
            "ruff",
            "ruff",
            "lint-during-tests",
            "mypy",
            *["pytest"] * len(LANES),
        ]
    )


def test_the_lint_job_runs_beside_the_tests_and_its_failure_fails_the_run(repo: Path) -> None:
    done, ran = run(repo, "mypy")
    assert done.returncode != 0
    assert "lint-during-tests" in ran
    assert ran.count("pytest") == len(LANES), "every lane ran"
    assert "--- lint: exit 1 after" in done.stderr


@pytest.mark.parametrize("step", ["pytest", "ruff", "mypy", "bootstrap"])
def test_it_fails_when_a_step_fails(repo: Path, step: str) -> None:
    done, ran = run(repo, step)
    assert done.returncode != 0
    assert step in ran


@pytest.mark.parametrize(
    ("install", "named"),
    [
        ("vllm", "scripts/setup/vllm.sh"),
        ("control_plane", "scripts/setup/control_plane.sh"),
        ("amtool", "scripts/setup/amtool.sh"),
    ],
)
def test_it_fails_naming_the_install_when_a_background_install_fails(repo: Path, install: str, named: str) -> None:
    done, ran = run(repo, install)
    assert done.returncode != 0
    assert "pytest" in ran
    assert "failed to install" in done.stderr and named in done.stderr


def test_the_vllm_environment_installs_after_bootstrap_while_the_tests_run(repo: Path) -> None:
    done, ran = run(repo)
    assert done.returncode == 0, done.stderr
    assert ran.index("bootstrap") < ran.index("vllm-during-tests")
    assert "tests-not-running" not in ran


def test_the_go_builds_run_while_bootstrap_runs(repo: Path) -> None:
    done, ran = run(repo)
    assert done.returncode == 0, done.stderr
    for build in ("control_plane", "amtool"):
        assert ran.index(build) < ran.index("bootstrap"), build
        assert f"{build}-not-started" not in ran
    assert "bootstrap-builds-them-too" not in ran, "bootstrap is told to leave both builds to the background"


def test_the_background_installs_run_in_a_process_group_of_their_own_within_the_tests_session(repo: Path) -> None:
    """Own group: stopped as one (``kill -- -PID``). Same session: Linux shares the CPU equally between sessions
    (autogroup) whatever the nice values inside them, so only in the tests' session does the build's nice order it
    after the timed lanes and before the untimed ones."""
    done, _ = run(repo)
    assert done.returncode == 0, done.stderr

    def ids(name: str) -> list[int]:
        (line,) = (repo.parent / f"trace.ids-{name}").read_text().splitlines()
        return [int(n) for n in line.split()]

    session = ids("bootstrap")[2]
    for install in ("build", "amtool", "vllm"):
        pid, group, sid = ids(install)
        assert (group, sid) == (pid, session), install


def test_the_failures_recorded_while_the_tests_ran_are_printed_after_them(repo: Path) -> None:
    done, _ = run(repo, "pytest", env={"PYTEST_FAILS": "tests/test_x.py::test_y (call): AssertionError"})
    assert done.returncode != 0
    assert "failures, in the order they happened" in done.stderr
    assert "FAILED tests/test_x.py::test_y (call): AssertionError" in done.stderr
    assert "the machine when pytest ended:" in done.stderr


def test_tests_past_their_time_limit_are_stopped_and_the_run_fails_saying_so(repo: Path) -> None:
    done, ran = run(repo, env={"PYTEST_SLEEP": "60", "TRITONFT_TEST_SECONDS": "2", "PYTEST_FAILS": "slow::test"})
    assert done.returncode != 0
    assert "pytest was stopped after its limit of 2 s" in done.stderr
    assert "FAILED slow::test" in done.stderr
    assert "pytest" not in ran  # each lane interrupted before it finished


def test_a_passing_run_prints_no_failures_or_machine_state(repo: Path) -> None:
    done, _ = run(repo)
    assert done.returncode == 0, done.stderr
    assert "failures, in the order" not in done.stderr and "the machine when" not in done.stderr


def lane_arguments(repo: Path) -> list[str]:
    return sorted((repo.parent / "trace.args").read_text().splitlines())


def test_without_arguments_every_lane_runs_side_by_side_each_its_own_pytest(repo: Path) -> None:
    done, ran = run(repo)
    assert done.returncode == 0, done.stderr
    assert ran.count("pytest") == len(LANES)
    system = SYSTEM_TESTS.rstrip("/")  # the units lane collects all but this folder, the others only it
    assert lane_arguments(repo) == sorted(
        f"-q -p no:cacheprovider --durations=10 --lane {lane} {'--ignore=' if lane == 'units' else ''}{system}"
        for lane in LANES
    )
    for lane in LANES:
        assert f"--- lane {lane}: exit 0 after" in done.stderr
    assert "no such job" not in done.stderr, "each lane was waited for once"


def test_each_lane_reports_the_cpu_of_its_pytest_and_the_processes_it_waited_for(repo: Path) -> None:
    done, _ = run(repo, env={"PYTEST_BURN": "1.5"})
    assert done.returncode == 0, done.stderr
    reported = re.findall(
        r"--- lane (\w+): exit 0 after \d+ s \(at \d+ s; CPU (\d+) s user \+ (\d+) s sys\)", done.stderr
    )
    assert sorted(lane for lane, _, _ in reported) == sorted(LANES)
    assert all(int(user) + int(sys) >= 1 for _, user, sys in reported), reported


def test_a_failing_lane_fails_the_run_and_is_named(repo: Path) -> None:
    done, _ = run(repo, "pytest")
    assert done.returncode != 0
    assert all(f"--- lane {lane}: exit 1" in done.stderr for lane in LANES)


def test_with_arguments_one_pytest_takes_them(repo: Path) -> None:
    done, ran = run(repo, args=("tests/tritonft", "-x"))
    assert done.returncode == 0, done.stderr
    assert ran.count("pytest") == 1
    assert lane_arguments(repo) == ["-q -p no:cacheprovider --durations=10 tests/tritonft -x"]


def test_the_control_plane_lanes_wait_for_its_build_and_fail_without_it(repo: Path) -> None:
    done, ran = run(repo, "control_plane")
    assert done.returncode != 0
    assert ran.count("pytest") == len(LANES) - 2, "every lane but the two on the control plane ran its pytest"
    assert "--- lane cluster: exit 1" in done.stderr and "--- lane rollouts: exit 1" in done.stderr
