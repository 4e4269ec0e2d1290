"""``scripts/bootstrap.sh --deploy`` on a deployer's machine: uv installed where the system Python refuses pip, and
only what ``pulumi up`` runs synced. Stand-ins for ``python3``, ``curl`` and uv's installer record what they were
asked; nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.delivery.conftest import REPO

UV_VERSION = "0.13.9"


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


def deploy_bootstrap(tmp_path: Path, python3: str, curl: str | None) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run a copy of bootstrap.sh with ``--deploy`` on a PATH holding only the stand-ins and the shell's tools; the
    stand-ins log to ``tmp_path / "log"``."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts/bootstrap.sh", project / "scripts/bootstrap.sh")
    bin_dir, home, log = tmp_path / "bin", tmp_path / "home", tmp_path / "log"
    bin_dir.mkdir(exist_ok=True)
    home.mkdir()
    log.touch()
    stub(bin_dir, "python3", python3)
    if curl is not None:
        stub(bin_dir, "curl", curl)
    for tool in ("bash", "awk", "env", "sh", "cat", "dirname", "mkdir", "chmod"):
        found = shutil.which(tool)
        if found is not None:
            os.symlink(found, bin_dir / tool)
    env = {"PATH": str(bin_dir), "HOME": str(home)}
    ran = subprocess.run(
        ["/bin/bash", "scripts/bootstrap.sh", "--deploy"],
        check=False,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    return ran, log.read_text()


def externally_managed(log: Path) -> str:
    """A system Python whose pip refuses to install (PEP 668)."""
    return f'echo "error: externally-managed-environment" >&2; echo "python3 $*" >> {log}; exit 1'


def writes_fake_uv(log: Path, folder: str) -> str:
    """Shell lines that write, into ``folder``, a ``uv`` reporting the pinned version and logging other calls."""
    return (
        f'mkdir -p "{folder}"\n'
        f"cat > \"{folder}/uv\" <<'UV'\n#!/usr/bin/env bash\n"
        f'[ "$1" = --version ] && {{ echo "uv {UV_VERSION}"; exit 0; }}\necho "uv $*" >> {log}\nUV\n'
        f'chmod +x "{folder}/uv"'
    )


def test_an_externally_managed_python_gets_the_pinned_uv_from_uvs_own_installer(tmp_path: Path) -> None:
    log = tmp_path / "log"
    installer_script = writes_fake_uv(log, "$UV_INSTALL_DIR")
    (tmp_path / "install.sh").write_text(installer_script)
    curl = f'echo "curl $*" >> {log}; cat {tmp_path / "install.sh"}'
    ran, logged = deploy_bootstrap(tmp_path, externally_managed(log), curl)
    assert ran.returncode == 0, ran.stderr
    assert f"curl -LsSf https://astral.sh/uv/{UV_VERSION}/install.sh" in logged
    assert (tmp_path / "home/.local/bin/uv").is_file()
    assert "uv sync --frozen --quiet --compile-bytecode --no-dev" in logged
    assert "using uv's own installer" in ran.stderr


def test_without_pip_or_curl_it_stops_naming_both_fixes(tmp_path: Path) -> None:
    ran, logged = deploy_bootstrap(tmp_path, externally_managed(tmp_path / "log"), None)
    assert ran.returncode == 1
    assert "curl is missing" in ran.stderr and "https://docs.astral.sh/uv/getting-started/installation/" in ran.stderr
    assert "uv sync" not in logged


def test_a_deployers_sync_leaves_out_the_test_tools(tmp_path: Path) -> None:
    log = tmp_path / "log"
    pip_installs_uv = f'echo "python3 $*" >> {log}\n' + writes_fake_uv(log, str(tmp_path / "bin"))
    ran, logged = deploy_bootstrap(tmp_path, pip_installs_uv, None)
    assert ran.returncode == 0, ran.stderr
    assert f"python3 -m pip install --quiet --disable-pip-version-check uv=={UV_VERSION}" in logged
    assert "uv sync --frozen --quiet --compile-bytecode --no-dev" in logged
