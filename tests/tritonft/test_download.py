"""``tritonft download`` against a Hugging Face cache built here, with ``HF_HUB_OFFLINE=1`` (no network)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.tritonft.convert.conftest import subprocess_cli
from tests.tritonft.convert.models import t5_model
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


LFS_SUFFIXES = (".safetensors", ".bin", ".model", ".msgpack")


def blob_name(name: str, data: bytes) -> str:
    """How huggingface_hub names a blob: the LFS object id (sha256) for LFS files, the git blob id otherwise."""
    if name.endswith(LFS_SUFFIXES):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob object id


def repo_store(cache: Path, repo: str) -> Path:
    return cache / f"models--{repo.replace('/', '--')}"


def build_cache(root: Path, repo: str = "acme/tiny-t5", files: dict[str, bytes] | None = None) -> Path:
    """The cache layout huggingface_hub writes: blobs by etag, snapshot symlinks, a ref for 'main'."""
    store = repo_store(root, repo)
    (store / "blobs").mkdir(parents=True)
    (store / "refs").mkdir()
    (store / "refs" / "main").write_text(COMMIT)
    snapshot = store / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, data in (REPO_FILES if files is None else files).items():
        blob = store / "blobs" / blob_name(name, data)
        blob.write_bytes(data)
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).symlink_to(Path("../" * (name.count("/") + 2)) / "blobs" / blob.name)
    return root


def cached_blob(cache: Path, name: str, repo: str = "acme/tiny-t5") -> Path:
    return (repo_store(cache, repo) / "snapshots" / COMMIT / name).resolve()


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


def test_the_chat_templates_are_fetched_where_transformers_keeps_them(tmp_path):
    files = REPO_FILES | {
        "chat_template.jinja": b"{{ messages[0]['content'] }}",
        "additional_chat_templates/tool_use.jinja": b"{{ tools }}",
        "additional_chat_templates/README.md": b"not a template",
    }
    build_cache(tmp_path / "hub", files=files)
    dest = tmp_path / "model"
    code, _, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 0, err
    assert (dest / "chat_template.jinja").read_bytes() == files["chat_template.jinja"]
    assert (dest / "additional_chat_templates" / "tool_use.jinja").read_bytes() == b"{{ tools }}"
    assert not (dest / "additional_chat_templates" / "README.md").exists()


def test_the_record_holds_every_files_sha256_and_marks_those_checked_against_the_hub(tmp_path):
    dest = tmp_path / "model"
    code, _, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 0, err
    files = json.loads((dest / "download.json").read_text())["files"]
    for name, entry in files.items():
        assert entry["sha256"] == hashlib.sha256(REPO_FILES[name]).hexdigest()
        assert (entry["size"], entry["mtime_ns"]) == ((dest / name).stat().st_size, (dest / name).stat().st_mtime_ns)
    assert {n for n, e in files.items() if e["hub_sha256"]} == {"model.safetensors", "spiece.model"}
    assert "verified 2 LFS file(s)" in err


def test_a_corrupt_cached_blob_is_named_and_nothing_reaches_dest(tmp_path):
    cache = build_cache(tmp_path / "hub")
    blob = cached_blob(cache, "model.safetensors")
    blob.write_bytes(b"X" * blob.stat().st_size)  # same size: huggingface_hub's own check would pass
    dest = tmp_path / "model"
    code, _, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 1
    assert f"model.safetensors: sha256 {hashlib.sha256(blob.read_bytes()).hexdigest()} differs" in err
    assert f"cached blob {blob} is corrupt or truncated; delete that blob" in err
    assert not dest.exists()
    assert not list(tmp_path.glob(".model.partial-*"))


def test_a_file_changed_in_dest_after_download_is_restored_on_rerun(tmp_path):
    dest = tmp_path / "model"
    assert download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)[0] == 0
    (dest / "config.json").unlink()
    (dest / "config.json").write_text('{"model_type": "edited"}')
    code, out, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 0, err
    assert "up to date" not in out
    assert (dest / "config.json").read_bytes() == REPO_FILES["config.json"]


def test_a_record_in_the_older_format_is_replaced_not_refused(tmp_path):
    dest = tmp_path / "model"
    dest.mkdir()
    (dest / "download.json").write_text(json.dumps({"repo": "acme/tiny-t5", "commit": COMMIT, "files": {}}))
    code, _, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 0, err
    assert json.loads((dest / "download.json").read_text())["schema"] == "tritonft.download/1"


def test_a_dest_not_written_by_download_is_refused(tmp_path):
    dest = tmp_path / "model"
    dest.mkdir()
    (dest / "precious.txt").write_text("keep me")
    code, _, err = download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)
    assert code == 1
    assert f"--dest {dest} exists and was not written by `tritonft download`" in err
    assert (dest / "precious.txt").read_text() == "keep me"


def test_converting_a_download_reuses_its_verified_hashes(tmp_path):
    hf = t5_model().save(tmp_path / "saved")
    files = {p.name: p.read_bytes() for p in hf.iterdir()}
    build_cache(tmp_path / "hub", files=files)
    dest = tmp_path / "model"
    assert download(tmp_path, "--repo", "acme/tiny-t5", "--revision", COMMIT, "--dest", dest)[0] == 0
    proc = subprocess_cli("convert", "--input", dest, "--output", tmp_path / "ft", "--tp", "1")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    source = json.loads((tmp_path / "ft" / "1-gpu" / "manifest.json").read_text())["source"]["files"]
    weights = source["model.safetensors"]
    assert weights["sha256"] == hashlib.sha256(files["model.safetensors"]).hexdigest()
    assert weights["sha256_from"] == "download.json"
