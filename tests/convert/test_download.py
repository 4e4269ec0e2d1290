"""``tritonft download`` against a Hugging Face cache built here, with ``HF_HUB_OFFLINE=1`` (no network)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.convert.conftest import subprocess_cli
from tritonft.download import select_files

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO_FILES = {
    "config.json": b'{"model_type": "t5"}',
    "model.safetensors": b"weights" * 100,
    "tokenizer.json": b"{}",
    "spiece.model": b"sentencepiece",
    "special_tokens_map.json": b"{}",
    "flax_model.msgpack": b"flax weights nobody needs",
    "pytorch_model.bin": b"legacy weights nobody needs",
    "README.md": b"# model card",
}
TOKEN = "hf_supersecret_token_value"


def build_cache(root: Path, repo: str = "acme/tiny-t5") -> Path:
    """The cache layout huggingface_hub writes: blobs by hash, snapshot symlinks, a ref for 'main'."""
    store = root / f"models--{repo.replace('/', '--')}"
    (store / "blobs").mkdir(parents=True)
    (store / "refs").mkdir()
    (store / "refs" / "main").write_text(COMMIT)
    snapshot = store / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, data in REPO_FILES.items():
        blob = store / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(Path("../../blobs") / blob.name)
    return root


def download(tmp_path: Path, *args: object, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    cache = build_cache(tmp_path / "hub") if not (tmp_path / "hub").exists() else tmp_path / "hub"
    proc = subprocess_cli(
        "download",
        *args,
        env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home"), **(env or {})},
    )
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_fetches_only_conversion_and_tokenizer_files_from_the_offline_cache(tmp_path):
    dest = tmp_path / "model"
    code, out, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 0, err
    names = sorted(p.name for p in dest.iterdir())
    assert names == [
        "config.json",
        "download.json",
        "model.safetensors",
        "special_tokens_map.json",
        "spiece.model",
        "tokenizer.json",
    ]
    for name in names:
        if name != "download.json":
            assert (dest / name).read_bytes() == REPO_FILES[name]
    record = json.loads((dest / "download.json").read_text())
    assert (record["repo"], record["commit"]) == ("acme/tiny-t5", COMMIT)
    assert f"downloaded acme/tiny-t5@{COMMIT}" in out


def test_a_branch_revision_resolves_through_refs_and_a_rerun_is_a_no_op(tmp_path):
    dest = tmp_path / "model"
    assert download(tmp_path, "--repo", "acme/tiny-t5", "--revision", "main", "--dest", dest)[0] == 0
    assert json.loads((dest / "download.json").read_text())["commit"] == COMMIT
    code, out, _ = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", "main", "--dest", dest)
    assert code == 0
    assert "up to date" in out


def test_token_from_file_or_env_never_appears_in_output_or_files(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    dest = tmp_path / "model"
    code, out, err = download(
        tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest, "--token-file", token_file
    )
    assert code == 0, err
    code2, out2, err2 = download(
        tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", tmp_path / "m2", env={"HF_TOKEN": TOKEN}
    )
    assert code2 == 0
    assert TOKEN not in out + err + out2 + err2
    assert all(TOKEN.encode() not in p.read_bytes() for p in dest.iterdir())


def test_revision_missing_from_the_offline_cache_is_a_clear_error(tmp_path):
    code, _, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", "v9", "--dest", tmp_path / "model")
    assert code == 1
    assert "acme/tiny-t5@v9 is not in the local cache and the Hub cannot be reached" in err
    assert "Traceback" not in err
    assert not (tmp_path / "model").exists()


def test_unreadable_token_file_is_named(tmp_path):
    code, _, err = download(
        tmp_path,
        "--repo",
        "acme/tiny-t5",
        "--revision",
        COMMIT,
        "--dest",
        tmp_path / "m",
        "--token-file",
        tmp_path / "nope",
    )
    assert code == 1
    assert f"--token-file {tmp_path / 'nope'} is not readable" in err


def test_safetensors_shards_are_preferred_over_pytorch_bin():
    files = [
        "config.json",
        "pytorch_model.bin",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tf_model.h5",
        "merges.txt",
        "vocab.json",
    ]
    assert select_files(files) == [
        "config.json",
        "merges.txt",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "vocab.json",
    ]


def test_pytorch_bin_is_fetched_when_there_is_no_safetensors():
    assert select_files(["config.json", "pytorch_model.bin", "flax_model.msgpack"]) == [
        "config.json",
        "pytorch_model.bin",
    ]
