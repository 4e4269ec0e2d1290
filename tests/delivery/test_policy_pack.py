"""The CrossGuard pack in its own runtime (.tools/policy): direct policy tests, and the pack really starts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from policy.checks import RULES
from tests.delivery.conftest import REPO


def test_policy_objects_pass_their_direct_tests_in_the_policy_runtime(policy_python: Path) -> None:
    proc = subprocess.run(
        [str(policy_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "policy/tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    passed = re.search(r"(\d+) passed", summary)
    assert passed is not None, summary
    assert int(passed.group(1)) >= 2 * len(RULES), "every policy needs a passing and a failing case"
    assert "failed" not in summary
    assert "error" not in summary


def test_pack_entry_point_starts_the_analyzer_and_announces_its_port(policy_python: Path) -> None:
    """What `pulumi preview --policy-pack policy` does first: run __main__.py and read the gRPC port."""
    proc = subprocess.Popen(
        [str(policy_python), "-u", str(REPO / "policy" / "__main__.py")],
        cwd=REPO / "policy",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first_line = proc.stdout.readline().strip()
        assert first_line.isdigit(), f"expected a port, got {first_line!r}; stderr: {proc.poll() and proc.stderr}"
        assert 0 < int(first_line) < 65536
        assert proc.poll() is None, "the analyzer must keep serving"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_pack_requirements_are_the_tool_venv_lock() -> None:
    requirements = (REPO / "policy" / "requirements.txt").read_text().splitlines()
    includes = [line.split(maxsplit=1)[1] for line in requirements if line.startswith("-r ")]
    assert includes == ["../tools/policy-requirements.txt"]
    lock = (REPO / "policy" / includes[0]).resolve().read_text()
    assert re.search(r"^pulumi-policy==\d+\.\d+\.\d+$", lock, re.MULTILINE)
