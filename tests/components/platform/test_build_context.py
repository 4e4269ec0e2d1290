"""What each image build sends, checked against what its Dockerfile copies and what decides its tag.

The contexts and Dockerfiles are the ones ``TritonImage`` passes to the docker-build provider; the Dockerfiles are
parsed with Docker's own parser (the ``dockerfile`` package wraps BuildKit's Go parser).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.platform import build_context
from components.platform.build_context import (
    build_view,
    context_tag,
    copy_sources,
    excluded,
    parse_ignore,
    unresolved_sources,
)
from components.platform.image import SERVER_CONTEXT, SERVER_DOCKERFILE, TOOLS_CONTEXT, TOOLS_DOCKERFILE
from tests.components.platform.aws.helpers import REPO_ROOT

IMAGES = {
    "server": (REPO_ROOT / SERVER_CONTEXT, REPO_ROOT / SERVER_DOCKERFILE),
    "tools": (REPO_ROOT / TOOLS_CONTEXT, REPO_ROOT / TOOLS_DOCKERFILE),
    # tritonft bench's in-cluster image, built by hand from the repository root (README: Measuring a stack)
    "bench": (REPO_ROOT, REPO_ROOT / "images" / "bench" / "Dockerfile"),
}


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_every_copy_source_resolves_in_the_context_the_program_passes(image: str) -> None:
    context, dockerfile = IMAGES[image]
    view = build_view(context, dockerfile)
    assert copy_sources(dockerfile), "the parser found no COPY from the context"
    assert unresolved_sources(view) == ()


def test_the_server_dockerfile_copying_a_root_relative_path_from_its_own_folder_is_caught(tmp_path: Path) -> None:
    """Finding 1 as it was: context ``images/triton-ft``, ``COPY images/triton-ft/requirements.txt``."""
    context = tmp_path / "images" / "triton-ft"
    context.mkdir(parents=True)
    (context / "requirements.txt").write_text("numpy==1.26.4\n")
    (context / "Dockerfile").write_text(
        "FROM python:3.11\nCOPY images/triton-ft/requirements.txt /opt/requirements.txt\n"
    )
    (unresolved,) = unresolved_sources(build_view(context, context / "Dockerfile"))
    wanted = (2, "COPY", "images/triton-ft/requirements.txt")
    assert (unresolved.line, unresolved.instruction, unresolved.source) == wanted


def test_a_source_the_ignore_file_leaves_out_does_not_resolve(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("# r\n")
    (tmp_path / ".dockerignore").write_text("*\n!pkg/\n")
    (tmp_path / "Dockerfile").write_text("FROM python:3.11\nCOPY pkg ./pkg\nCOPY README.md ./\n")
    assert [s.source for s in unresolved_sources(build_view(tmp_path, tmp_path / "Dockerfile"))] == ["README.md"]


def test_copy_from_another_stage_and_wildcards_are_read_as_docker_reads_them(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.yaml").write_text("a: 1\n")
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11 AS build\nFROM python:3.11\nCOPY --from=build /opt/venv /opt/venv\n"
        'COPY conf/*.yaml /etc/app/\nADD ["conf/a.yaml", "/etc/b.yaml"]\n'
    )
    view = build_view(tmp_path, tmp_path / "Dockerfile")
    assert [s.source for s in copy_sources(view.dockerfile)] == ["conf/*.yaml", "conf/a.yaml"]
    assert unresolved_sources(view) == ()


def test_the_dockerfiles_own_ignore_file_takes_precedence_over_the_contexts(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / ".dockerignore").write_text("*\n!a.txt\n")
    (tmp_path / "images" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "images" / "Dockerfile.dockerignore").write_text("*\n!b.txt\n")
    view = build_view(tmp_path, tmp_path / "images" / "Dockerfile")
    assert view.ignore == tmp_path / "images" / "Dockerfile.dockerignore"
    assert view.files == ("b.txt",)


@pytest.mark.parametrize(
    ("path", "is_excluded"),
    [
        ("README.md", True),
        ("tritonft/cli.py", False),
        ("tritonft/__pycache__/cli.cpython-311.pyc", True),
        ("tritonft/repo/x.pyc", True),
        ("components/args.py", True),
        ("model_repo/t5/ensemble/config.pbtxt", False),
    ],
)
def test_ignore_patterns_follow_the_last_match_including_parent_directories(path: str, is_excluded: bool) -> None:
    patterns = parse_ignore("# comment\n*\n!tritonft/\n!/model_repo\n**/__pycache__\n**/*.pyc\n")
    assert excluded(path, patterns) is is_excluded


def test_the_tools_image_sends_neither_the_readme_nor_the_pulumi_program() -> None:
    view = build_view(*IMAGES["tools"])
    assert "README.md" not in view.files
    assert not [f for f in view.files if f.startswith(("components/", "tests/", "docs/", ".github/"))]
    assert {"pyproject.toml", "uv.lock", "tritonft/cli.py", "model_repo/t5/ensemble/config.pbtxt"} <= set(view.files)


def test_the_server_image_sends_only_its_requirements() -> None:
    assert build_view(*IMAGES["server"]).files == ("requirements.txt",)


def _tiny_context(root: Path) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / "README.md").write_text("# readme\n")
    (root / ".dockerignore").write_text("*\n!pkg/\n")
    (root / "Dockerfile").write_text("FROM python:3.11\nCOPY pkg ./pkg\n")
    return root / "Dockerfile"


def test_the_tag_is_new_when_a_sent_file_the_dockerfile_or_a_build_input_changes(tmp_path: Path) -> None:
    dockerfile = _tiny_context(tmp_path)

    def tag(**inputs: str) -> str:
        return context_tag(build_view(tmp_path, dockerfile), inputs, prefix="t")

    first = tag(V="1")
    assert tag(V="1") == first
    assert tag(V="2") != first
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    second = tag(V="1")
    assert second != first
    dockerfile.write_text(dockerfile.read_text() + "USER 1000\n")
    assert tag(V="1") != second


def test_the_tag_is_new_when_a_sent_file_changes_mode_or_name_as_the_provider_hashes_them(tmp_path: Path) -> None:
    """The provider hashes each file's path and mode with its bytes: a chmod or a rename alone rebuilds."""
    dockerfile = _tiny_context(tmp_path)
    first = context_tag(build_view(tmp_path, dockerfile), {}, prefix="t")
    os.chmod(tmp_path / "pkg" / "a.py", 0o755)
    chmodded = context_tag(build_view(tmp_path, dockerfile), {}, prefix="t")
    assert chmodded != first
    (tmp_path / "pkg" / "a.py").rename(tmp_path / "pkg" / "b.py")
    assert context_tag(build_view(tmp_path, dockerfile), {}, prefix="t") not in (first, chmodded)


def test_the_tag_stays_when_only_what_the_context_does_not_send_changes(tmp_path: Path) -> None:
    dockerfile = _tiny_context(tmp_path)
    first = context_tag(build_view(tmp_path, dockerfile), {}, prefix="t")
    (tmp_path / "README.md").write_text("# a README edit\n")
    (tmp_path / "notes.txt").write_text("new unsent file\n")
    assert context_tag(build_view(tmp_path, dockerfile), {}, prefix="t") == first


def test_what_the_tools_image_gets_runs_every_job_command_without_the_pulumi_program(tmp_path: Path) -> None:
    """The runtime stage's layout (``/opt/tritonft/{tritonft,model_repo}`` on ``PYTHONPATH``), built from exactly
    the files the context sends, imports the CLI, finds the templates and answers each Job command's ``--help``
    with ``components`` unimportable."""
    view = build_view(*IMAGES["tools"])
    opt = tmp_path / "opt" / "tritonft"
    for rel in view.files:
        if rel.startswith(("tritonft/", "model_repo/")):
            (opt / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / rel, opt / rel)
    script = (
        "import sys; sys.modules['components'] = None\n"
        "import tritonft, tritonft.cli\n"
        "from tritonft.repo.templates import templates_dir\n"
        f"assert tritonft.__file__.startswith({str(opt)!r}), tritonft.__file__\n"
        f"assert str(templates_dir()).startswith({str(opt)!r}), templates_dir()\n"
        "for command in ('download', 'convert', 'verify', 'repo', 'probe', 'gateway'):\n"
        "    try:\n"
        "        tritonft.cli.main([command, '--help'])\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, (command, done.code)\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITONFT_MODEL_REPO_TEMPLATES"}
    env["PYTHONPATH"] = str(opt)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def tree(root: Path, *files: str) -> Path:
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    return root


def walked(context: Path, ignore: str, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, ...], set[str]]:
    """The files ``context_files`` sends and the directories it listed on the way."""
    listed: set[str] = set()
    scandir = os.scandir

    def recording(path: str | os.PathLike[str]) -> object:
        listed.add(Path(path).relative_to(context).as_posix())
        return scandir(path)

    monkeypatch.setattr(os, "scandir", recording)
    return build_context.context_files(context, parse_ignore(ignore)), listed


def test_a_directory_the_ignore_file_excludes_is_not_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = tree(tmp_path, "pkg/a.py", ".venv/lib/site.py", "docs/x.md")
    files, listed = walked(context, "*\n!pkg/\n", monkeypatch)
    assert files == ("pkg/a.py",)
    assert listed == {".", "pkg"}


def test_an_excluded_directory_an_exception_could_reach_into_is_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = tree(tmp_path, "tests/a/conftest.py", "tests/a/test_x.py", "deep/b/c/keep.txt", "other/keep.txt")
    files, listed = walked(context, "*\n!tests/*/conftest.py\n!**/keep.txt\nother\n", monkeypatch)
    assert files == ("deep/b/c/keep.txt", "tests/a/conftest.py")
    assert {"tests/a", "deep/b/c", "other"} <= listed


def test_the_files_are_in_path_order_as_the_tag_hashes_them(tmp_path: Path) -> None:
    context = tree(tmp_path, "a-c", "a/b", "a.txt")
    assert build_context.context_files(context, ()) == ("a/b", "a-c", "a.txt")
