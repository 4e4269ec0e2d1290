"""Tags and rebuild triggers agree: the tag changes exactly when the docker-build provider would rebuild.

The provider's rebuild decision (pulumi-docker-build ``hashBuildContext``) is computed here by
``contexthash/main.go`` with the same libraries the provider uses: moby's ``ignorefile`` reader (the Dockerfile's
own ``.dockerignore`` first, then the context's) and ``fsutil``'s filtered walk; the hash covers the Dockerfile's
bytes and each sent file's bytes, path and mode. The helper is built once into the tritonft cache with the Go
toolchain (its modules come from the Go module proxy).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from components.platform.build_context import build_view, context_tag
from components.platform.image import SERVER_CONTEXT, SERVER_DOCKERFILE, TOOLS_CONTEXT, TOOLS_DOCKERFILE
from tests.components.platform.aws.helpers import REPO_ROOT
from tritonft.errors import UserError

HELPER = Path(__file__).parent / "contexthash"
ProviderView = Callable[[Path, Path], tuple[str, list[str]]]
"""(context, Dockerfile) -> the provider's context hash and the files it sends."""


@pytest.fixture(scope="module")
def provider_view(tmp_path_factory: pytest.TempPathFactory) -> ProviderView:
    go = shutil.which("go")
    if go is None:
        pytest.fail("the Go toolchain is needed to build contexthash (the provider's context hash); install Go")
    sources = b"".join((HELPER / name).read_bytes() for name in ("main.go", "go.mod", "go.sum"))
    cache = Path(os.environ.get("TRITONFT_CACHE") or Path.home() / ".cache" / "tritonft")
    binary = cache / f"contexthash-{hashlib.sha256(sources).hexdigest()[:16]}" / "contexthash"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        build = tmp_path_factory.mktemp("contexthash")
        for name in ("main.go", "go.mod", "go.sum"):
            shutil.copy(HELPER / name, build / name)
        subprocess.run(
            [go, "build", "-mod=mod", "-gcflags=all=-dwarf=false", "-ldflags=-s -w", "-o", str(binary), "."],
            cwd=build,
            check=True,
            timeout=600,
            capture_output=True,
        )

    def view(context: Path, dockerfile: Path) -> tuple[str, list[str]]:
        out = subprocess.run(
            [str(binary), str(context), str(dockerfile)], check=True, timeout=60, capture_output=True, text=True
        )
        data = json.loads(out.stdout)
        return str(data["hash"]), [str(f) for f in data["files"]]

    return view


@pytest.mark.parametrize(
    ("context", "dockerfile"), [(SERVER_CONTEXT, SERVER_DOCKERFILE), (TOOLS_CONTEXT, TOOLS_DOCKERFILE)]
)
def test_the_files_the_provider_hashes_are_the_files_the_tag_hashes(
    provider_view: ProviderView, context: str, dockerfile: str
) -> None:
    ours = build_view(REPO_ROOT / context, REPO_ROOT / dockerfile).files
    assert ours
    assert sorted(ours) == sorted(provider_view(REPO_ROOT / context, REPO_ROOT / dockerfile)[1])


def _tools_copy(root: Path) -> Path:
    for name in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copy(REPO_ROOT / name, root / name)
    for folder in ("tritonft", "model_repo", "components", "images"):
        shutil.copytree(REPO_ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root / TOOLS_DOCKERFILE


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _bytecode(root: Path) -> None:
    (root / "tritonft" / "__pycache__").mkdir()
    (root / "tritonft" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")


EDITS: dict[str, tuple[Callable[[Path], object], bool]] = {
    "README edit": (lambda r: _append(r / "README.md", "edited\n"), False),
    "components edit": (lambda r: _append(r / "components" / "args.py", "# edited\n"), False),
    "new file outside the sent paths": (lambda r: (r / "notes.txt").write_text("x\n"), False),
    "bytecode cache": (_bytecode, False),
    "tritonft edit": (lambda r: _append(r / "tritonft" / "cli.py", "#\n"), True),
    "chmod of a sent file": (lambda r: os.chmod(r / "tritonft" / "cli.py", 0o755), True),
    "new sent file": (lambda r: (r / "model_repo" / "NOTE").write_text("x\n"), True),
    "lock change": (lambda r: _append(r / "uv.lock", "\n"), True),
    "Dockerfile edit": (lambda r: _append(r / TOOLS_DOCKERFILE, "# x\n"), True),
    "ignore file now sends README": (lambda r: _append(r / (TOOLS_DOCKERFILE + ".dockerignore"), "!README.md\n"), True),
    "symlink to a sent file": (lambda r: (r / "model_repo" / "alias").symlink_to("../uv.lock"), True),
}
"""Edits to the tools image's context, and whether the image must be rebuilt for them."""


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_the_tag_changes_exactly_when_the_provider_would_rebuild(
    provider_view: ProviderView, edit: str, tmp_path: Path
) -> None:
    dockerfile = _tools_copy(tmp_path)

    def both() -> tuple[str, str]:
        return provider_view(tmp_path, dockerfile)[0], context_tag(build_view(tmp_path, dockerfile), {}, "t")

    apply, rebuilds = EDITS[edit]
    provider_before, tag_before = both()
    apply(tmp_path)
    provider_after, tag_after = both()
    assert (provider_after != provider_before) is rebuilds, edit
    assert (tag_after != tag_before) is rebuilds, edit


def test_a_symlink_to_a_directory_fails_the_provider_and_is_refused_naming_it(
    provider_view: ProviderView, tmp_path: Path
) -> None:
    dockerfile = _tools_copy(tmp_path)
    (tmp_path / "model_repo" / "linked").symlink_to("../tritonft", target_is_directory=True)
    with pytest.raises(subprocess.CalledProcessError) as provider:
        provider_view(tmp_path, dockerfile)
    assert "is a directory" in provider.value.stderr
    with pytest.raises(UserError, match=r"'model_repo/linked' in the build context .* is a symlink to a directory"):
        build_view(tmp_path, dockerfile)


def test_a_dangling_symlink_hides_the_rest_of_its_folder_from_the_provider_and_is_refused_naming_it(
    provider_view: ProviderView, tmp_path: Path
) -> None:
    dockerfile = _tools_copy(tmp_path)
    sent = provider_view(tmp_path, dockerfile)[1]
    (tmp_path / "model_repo" / "gone").symlink_to("nowhere")
    assert "model_repo/gpt2/ensemble/config.pbtxt" not in provider_view(tmp_path, dockerfile)[1]
    assert "model_repo/gpt2/ensemble/config.pbtxt" in sent
    with pytest.raises(UserError, match=r"'model_repo/gone' in the build context .* is a symlink to nothing"):
        build_view(tmp_path, dockerfile)
