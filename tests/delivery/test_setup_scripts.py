"""``scripts/setup/apt_no_service.sh``: the Debian install the nginx and Prometheus setup scripts share, run with
stand-ins for ``apt-get``, ``service`` and ``sudo`` that record what they were asked (nothing is installed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.delivery.conftest import REPO

LIBRARY = REPO / "scripts/setup/apt_no_service.sh"
APT = REPO / "scripts/setup/apt.sh"


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A bin directory whose ``apt-get`` logs its arguments and what policy-rc.d said while it ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    stub(
        bin_dir,
        "apt-get",
        f'echo "apt-get $* policy=$(cat "$POLICY_RC_D" 2>/dev/null | tail -1)" >> {log}\n'
        f'[ "$1" != install ] || [ -z "${{APT_FAILS:-}}" ] || exit 100',
    )
    stub(bin_dir, "service", f'echo "service $*" >> {log}')
    stub(bin_dir, "sudo", '"$@"')
    stub(bin_dir, "systemctl", f'echo "systemctl $*" >> {log}')
    return tmp_path


def install(sandbox: Path, *, fails: bool = False) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{sandbox / 'bin'}:{os.environ['PATH']}",
        "POLICY_RC_D": str(sandbox / "policy-rc.d"),
        "TRITONFT_APT_LOCK": str(sandbox / "apt.lock"),
        **({"APT_FAILS": "1"} if fails else {}),
    }
    script = f'set -euo pipefail; source "{LIBRARY}"; apt_install_no_service nginx-light nginx "the stand-in"'
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)


def test_the_package_is_installed_while_policy_rc_d_denies_every_service_start(sandbox: Path) -> None:
    done = install(sandbox)
    assert done.returncode == 0, done.stderr
    lines = (sandbox / "log").read_text().splitlines()
    assert "apt-get install -y -qq --no-install-recommends nginx-light policy=exit 101" in lines


def test_the_policy_file_it_wrote_is_removed_afterwards(sandbox: Path) -> None:
    install(sandbox)
    assert not (sandbox / "policy-rc.d").exists()


def test_a_policy_file_that_was_there_is_kept_as_it_was(sandbox: Path) -> None:
    (sandbox / "policy-rc.d").write_text("#!/bin/sh\nexit 0\n")
    install(sandbox)
    assert (sandbox / "policy-rc.d").read_text() == "#!/bin/sh\nexit 0\n"


def test_a_service_started_anyway_is_stopped(sandbox: Path) -> None:
    install(sandbox)
    assert (sandbox / "log").read_text().splitlines()[-1] == "service nginx stop"


def test_a_failed_install_fails_the_setup_and_still_removes_the_policy_file(sandbox: Path) -> None:
    done = install(sandbox, fails=True)
    assert done.returncode != 0
    assert not (sandbox / "policy-rc.d").exists()


@pytest.mark.parametrize(("script", "package"), [("nginx.sh", "nginx-light"), ("prometheus.sh", "prometheus")])
def test_both_setup_scripts_install_through_the_shared_function(script: str, package: str) -> None:
    text = (REPO / "scripts/setup" / script).read_text()
    assert f"apt_install_no_service {package} " in text
    assert "policy-rc.d" not in text.replace("apt_no_service.sh", "")


def test_two_setup_scripts_installing_at_once_run_apt_get_one_after_the_other(tmp_path: Path) -> None:
    """The test command installs in the background (control plane, vLLM) while others install: dpkg's lock would
    fail the second apt-get, so ``apt_install`` takes a lock of its own around update + install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    stub(bin_dir, "apt-get", f'echo "start $* $RUN" >> {log}; sleep 0.3; echo "end $* $RUN" >> {log}')
    stub(bin_dir, "sudo", '"$@"')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TRITONFT_APT_LOCK": str(tmp_path / "apt.lock")}
    runs = [
        subprocess.Popen(
            ["bash", "-c", f'set -euo pipefail; source "{APT}"; apt_install pkg-{i}'], env={**env, "RUN": str(i)}
        )
        for i in range(2)
    ]
    assert [run.wait() for run in runs] == [0, 0]
    lines = log.read_text().splitlines()
    assert len(lines) == 8, lines
    for first in range(0, 8, 4):  # each script's update and install, start to end, before the other's begin
        runs_seen = {line.rsplit(" ", 1)[1] for line in lines[first : first + 4]}
        assert len(runs_seen) == 1, f"two apt-get runs overlapped: {lines}"


@pytest.mark.parametrize("script", ["triton.sh", "control_plane.sh", "vllm.sh", "apt_no_service.sh"])
def test_every_setup_script_installs_debian_packages_through_the_shared_lock(script: str) -> None:
    text = (REPO / "scripts/setup" / script).read_text()
    assert "apt_install " in text
    assert "apt-get update" not in text
