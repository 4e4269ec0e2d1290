"""How the manifest identifies the source files, and when a rerun may skip the conversion (``--source-hash``)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.tritonft.convert.models import t5_model
from tritonft.convert.sources import SourceHash, sources_unchanged


def run(cli: Any, src: Path, out: Path, *extra: object) -> str:
    code, stdout, err = cli("convert", "--input", src, "--output", out, "--tp", 1, *extra)
    assert code == 0, err
    out_text: str = stdout
    return out_text


def source_entries(out: Path) -> dict[str, Any]:
    source: dict[str, Any] = json.loads((out / "1-gpu" / "manifest.json").read_text())["source"]
    return source


def header_sha256(path: Path) -> str:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return hashlib.sha256(data[: 8 + length]).hexdigest()


def test_default_records_full_and_header_hashes_of_the_weights(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft")
    source = source_entries(tmp_path / "ft")
    weights = source["files"]["model.safetensors"]
    assert source["hash"] == "sha256"
    assert weights["sha256"] == hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    assert weights["header_sha256"] == header_sha256(src / "model.safetensors")
    assert weights["size"] == (src / "model.safetensors").stat().st_size


def test_fingerprint_mode_records_no_weight_hash_but_still_hashes_config_json(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")
    source = source_entries(tmp_path / "ft")
    weights = source["files"]["model.safetensors"]
    assert source["hash"] == "fingerprint"
    assert "sha256" not in weights
    assert weights["header_sha256"] == header_sha256(src / "model.safetensors")
    assert weights["mtime_ns"] == (src / "model.safetensors").stat().st_mtime_ns
    assert source["files"]["config.json"]["sha256"] == hashlib.sha256((src / "config.json").read_bytes()).hexdigest()


def test_fingerprint_mode_rerun_with_untouched_sources_is_a_no_op(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")
    assert "up to date" in run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")


def test_fingerprint_mode_reconverts_when_the_weights_were_touched(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")
    os.utime(src / "model.safetensors", ns=(1, 1))
    assert "converted" in run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")
    assert source_entries(tmp_path / "ft")["files"]["model.safetensors"]["mtime_ns"] == 1


def test_new_weights_in_the_same_layout_are_converted_again(cli, tmp_path):
    src = t5_model(seed=0).save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft")
    old_header = header_sha256(src / "model.safetensors")
    t5_model(seed=1).save(src)  # same names, shapes and size; different values
    os.utime(src / "model.safetensors", ns=(2, 2))
    assert header_sha256(src / "model.safetensors") == old_header
    assert "converted" in run(cli, src, tmp_path / "ft")
    written = (tmp_path / "ft" / "1-gpu" / "encoder.final_layer_norm.weight.bin").read_bytes()
    assert written == t5_model(seed=1).tensors["encoder.final_layer_norm.weight"].astype("<f4").tobytes()


def test_asking_for_sha256_over_a_fingerprint_manifest_converts_again_and_records_it(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")
    assert "converted" in run(cli, src, tmp_path / "ft")
    assert "sha256" in source_entries(tmp_path / "ft")["files"]["model.safetensors"]


def test_fingerprint_request_over_a_sha256_manifest_is_a_no_op(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    run(cli, src, tmp_path / "ft")
    assert "up to date" in run(cli, src, tmp_path / "ft", "--source-hash", "fingerprint")


def _never(name: str) -> str:
    raise AssertionError(f"{name} should not have been hashed")


RECORDED: dict[str, dict[str, Any]] = {
    "config.json": {"size": 10, "mtime_ns": 5, "sha256": "c"},
    "model.safetensors": {"size": 100, "mtime_ns": 5, "sha256": "w"},
}


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        ({"config.json": {"size": 10, "mtime_ns": 5}, "model.safetensors": {"size": 100, "mtime_ns": 5}}, True),
        ({"config.json": {"size": 10, "mtime_ns": 5}, "model.safetensors": {"size": 101, "mtime_ns": 6}}, False),
        ({"config.json": {"size": 10, "mtime_ns": 5}}, False),
    ],
    ids=["same-stat", "size-changed", "file-gone"],
)
def test_stat_decides_without_hashing_when_it_can(current, expected):
    assert sources_unchanged(RECORDED, current, SourceHash.SHA256, _never) is expected


def test_only_files_whose_stat_changed_are_hashed():
    hashed: list[str] = []

    def sha256_of(name: str) -> str:
        hashed.append(name)
        digest: str = RECORDED[name]["sha256"]
        return digest

    current = {"config.json": {"size": 10, "mtime_ns": 5}, "model.safetensors": {"size": 100, "mtime_ns": 9}}
    assert sources_unchanged(RECORDED, current, SourceHash.SHA256, sha256_of)
    assert hashed == ["model.safetensors"]


def test_whole_file_hash_streams_in_chunks_and_can_be_abandoned(tmp_path: Path) -> None:
    from tritonft.digest import HashAbandonedError, sha256_file

    data = bytes(range(256)) * 1000
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path, chunk=1000) == hashlib.sha256(data).hexdigest()
    polls: list[int] = []

    def stop_after_three_chunks() -> bool:
        polls.append(1)
        return len(polls) > 3

    with pytest.raises(HashAbandonedError):
        sha256_file(path, stop=stop_after_three_chunks, chunk=1000)
    assert len(polls) == 4


def write_download_record(src: Path, sha256: dict[str, str]) -> None:
    """A ``download.json`` as ``tritonft download`` writes it, with the given hashes."""
    files = {}
    for name, digest in sha256.items():
        stat = (src / name).stat()
        files[name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest, "hub_sha256": True}
    record = {"schema": "tritonft.download/1", "repo": "acme/t5", "revision": "main", "commit": "0" * 40}
    (src / "download.json").write_text(json.dumps({**record, "files": files}))


def test_a_download_record_for_an_unchanged_file_supplies_its_sha256_without_reading_it(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    recorded = "ab" * 32  # not the file's hash: proves the converter took the record instead of hashing
    write_download_record(src, {"model.safetensors": recorded})
    run(cli, src, tmp_path / "ft")
    weights = source_entries(tmp_path / "ft")["files"]["model.safetensors"]
    assert (weights["sha256"], weights["sha256_from"]) == (recorded, "download.json")


def test_a_download_record_is_ignored_once_the_file_was_touched(cli, tmp_path):
    src = t5_model().save(tmp_path / "hf")
    write_download_record(src, {"model.safetensors": "ab" * 32})
    stat = (src / "model.safetensors").stat()
    os.utime(src / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    run(cli, src, tmp_path / "ft")
    weights = source_entries(tmp_path / "ft")["files"]["model.safetensors"]
    assert weights["sha256"] == hashlib.sha256((src / "model.safetensors").read_bytes()).hexdigest()
    assert "sha256_from" not in weights
