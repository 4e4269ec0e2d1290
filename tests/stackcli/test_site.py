"""The documentation site builds strictly (MkDocs Material: a broken link, a missing anchor or a page left out of
the navigation fails), and the strict settings really fail a broken link."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.stackcli.doc_commands import page_commands

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = [sys.executable, "-m", "mkdocs"]
QUIET = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"}


def mkdocs(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``.venv/bin/mkdocs ARGS`` in the repository."""
    return subprocess.run(
        [*MKDOCS, *args], cwd=ROOT, capture_output=True, text=True, env=QUIET, check=False, timeout=240
    )


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """The contributors' page's command, ``.venv/bin/mkdocs build --strict``, run in the repository, writing into a
    scratch directory (tests never write into the tree)."""
    (command,) = page_commands("docs/contributing/testing.md", __file__)
    assert command[0] == ".venv/bin/mkdocs", command
    done = mkdocs([*command[1:], "--site-dir", str(tmp_path / "site")])
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").is_file()


def test_every_page_is_in_the_navigation() -> None:
    def pages(entries: list[object]) -> set[str]:
        found: set[str] = set()
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found |= pages(value) if isinstance(value, list) else {str(value)}
        return found

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages(config["nav"]) == on_disk


def test_the_strict_settings_fail_a_broken_link(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    config.update(docs_dir=str(tmp_path / "docs"), nav=[{"Home": "index.md"}], theme={"name": "mkdocs"})
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = mkdocs(
        ["build", "--strict", "--config-file", str(tmp_path / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")]
    )
    assert done.returncode != 0
    assert "missing.md" in done.stderr
