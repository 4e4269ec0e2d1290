"""The harness itself: the dev stack's rendered repositories load READY in a real Triton and answer through their
ensembles over HTTP and gRPC (the FT step stood in for by an echo, so the answer is the prompt)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.system.realtriton.repos import stack_specs
from tritonft.local_triton import (
    FT_IMAGE_SERVER,
    REQUIREMENTS,
    START_AUTOGROUP_NICE,
    LocalTriton,
    TritonError,
    TritonRuntime,
    find_python,
    session_weight,
    set_session_weight,
)
from tritonft.repo.naming import RepoNames

pytestmark = pytest.mark.slow


def prompt_input(module, texts: list[str]):
    tensor = module.InferInput("text_input", [len(texts), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[t.encode()] for t in texts], dtype=object))
    return tensor


def test_every_model_of_the_dev_stack_is_ready(dev_triton: LocalTriton) -> None:
    client = httpclient.InferenceServerClient(dev_triton.http_url)
    index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
    expected = {name for spec in stack_specs("dev") for name in RepoNames.of(spec).by_role().values()}
    assert index == dict.fromkeys(expected, "READY")


def test_gpt2_ensemble_answers_over_http(dev_triton: LocalTriton) -> None:
    client = httpclient.InferenceServerClient(dev_triton.http_url)
    result = client.infer("gpt2", [prompt_input(httpclient, ["hello world"])])
    assert result.as_numpy("text_output").tolist() == [[b"hello world"]]


def test_gpt2_ensemble_answers_over_grpc(dev_triton: LocalTriton) -> None:
    client = grpcclient.InferenceServerClient(dev_triton.grpc_url)
    result = client.infer("gpt2", [prompt_input(grpcclient, ["the quick brown fox"])])
    assert result.as_numpy("text_output").tolist() == [[b"the quick brown fox"]]


def test_t5_ensemble_answers_over_grpc(dev_triton: LocalTriton) -> None:
    client = grpcclient.InferenceServerClient(dev_triton.grpc_url)
    result = client.infer("t5-small", [prompt_input(grpcclient, ["hello world"])])
    assert result.as_numpy("text_output").tolist() == [[b"hello world"]]


def test_metrics_endpoint_serves_triton_inference_counters(dev_triton: LocalTriton) -> None:
    with urllib.request.urlopen(dev_triton.metrics_url, timeout=5) as answer:
        text = answer.read().decode()
    assert 'nv_inference_request_success{model="gpt2"' in text


def _models_versions(runtime: TritonRuntime) -> tuple[str, str, str]:
    probe = (
        "import json, numpy, sentencepiece, tokenizers; "
        "print(json.dumps([m.__version__ for m in (numpy, sentencepiece, tokenizers)]))"
    )
    done = subprocess.run(
        [str(runtime.stub_env / "bin" / "python3"), "-c", probe], capture_output=True, text=True, check=True
    )
    numpy_version, sentencepiece_version, tokenizers_version = json.loads(done.stdout)
    return numpy_version, sentencepiece_version, tokenizers_version


def _pins(requirements: Path) -> dict[str, str]:
    return dict(re.findall(r"^([a-z0-9-]+)==(\S+)", requirements.read_text(), flags=re.M))


def test_the_models_run_with_the_server_images_pinned_requirements(newest_runtime: TritonRuntime) -> None:
    pins = _pins(REQUIREMENTS)
    numpy_version, sentencepiece_version, tokenizers_version = _models_versions(newest_runtime)
    assert numpy_version == pins["numpy"] and numpy_version.startswith("1.")
    assert (sentencepiece_version, tokenizers_version) == (pins["sentencepiece"], pins["tokenizers"])


def test_the_ft_servers_models_run_on_python_3_8_with_the_requirements_resolved_for_it(
    triton_runtime: TritonRuntime,
) -> None:
    assert triton_runtime.dist.release is FT_IMAGE_SERVER
    done = subprocess.run(
        [str(triton_runtime.stub_env / "bin" / "python3"), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "(3, 8)"
    pins = _pins(FT_IMAGE_SERVER.requirements)
    numpy_version, sentencepiece_version, tokenizers_version = _models_versions(triton_runtime)
    assert numpy_version == pins["numpy"] and numpy_version.startswith("1.")
    assert (sentencepiece_version, tokenizers_version) == (pins["sentencepiece"], pins["tokenizers"])


def test_the_ft_server_is_tritonserver_2_33_0(dev_triton: LocalTriton) -> None:
    with urllib.request.urlopen(f"http://{dev_triton.http_url}/v2", timeout=5) as answer:
        assert json.loads(answer.read())["version"] == "2.33.0"


class WatchedStart(LocalTriton):
    """A server whose session weight is read as its wait for readiness begins and once it is ready."""

    while_loading: int | None = None
    once_ready: int | None = None

    def _wait_ready(self) -> None:
        assert self.process is not None
        self.while_loading = session_weight(self.process.pid)
        super()._wait_ready()

    def start(self) -> None:
        super().start()
        self.once_ready = session_weight(self.pid)


@pytest.mark.parametrize("runtime", ["triton_runtime", "newest_runtime"])
def test_every_server_loads_and_warms_up_at_a_raised_session_weight_then_shares_the_cpu_equally(
    runtime: str, dev_repository: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    own = session_weight(os.getpid())
    if own is None or not set_session_weight(os.getpid(), own):
        pytest.skip("autogroup does not schedule this machine's sessions (a CPU cgroup does), or no CAP_SYS_NICE")
    server = WatchedStart(request.getfixturevalue(runtime), dev_repository, log_path=tmp_path / "tritonserver.log")
    with server:
        assert server.while_loading == START_AUTOGROUP_NICE
        assert server.once_ready == 0


class Interrupted(BaseException):
    """What pytest-timeout raises in a test whose time runs out (an ``OutcomeException``: not an ``Exception``)."""


class InterruptedStart(LocalTriton):
    """A server whose wait for readiness is interrupted once its process group runs."""

    group = 0

    def _wait_ready(self) -> None:
        assert self.process is not None
        self.group = self.process.pid
        raise Interrupted


def test_a_start_interrupted_while_the_server_loads_leaves_no_process_behind(
    triton_runtime: TritonRuntime, dev_repository: Path, tmp_path: Path
) -> None:
    server = InterruptedStart(triton_runtime, dev_repository, log_path=tmp_path / "tritonserver.log")
    with pytest.raises(Interrupted):
        server.start()
    with pytest.raises(ProcessLookupError):
        os.killpg(server.group, 0)


def group_members(group: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # state, ppid, pgrp
            members.append(int(stat.parent.name))
    return members


def test_stopping_a_server_ends_its_whole_process_group(
    serve_triton: Callable[..., LocalTriton], dev_repository: Path
) -> None:
    server = serve_triton(dev_repository, shared=False)
    group = server.pid
    assert len(group_members(group)) > 1, "the server and its Python-backend stubs share one process group"

    server.stop()

    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
    assert not list(Path("/dev/shm").glob(f"{server.shm_prefix}*")), "its Python-backend regions are gone too"


def test_terminate_asks_the_server_to_exit_without_waiting_and_stop_then_reaps_its_group(
    serve_triton: Callable[..., LocalTriton], dev_repository: Path
) -> None:
    server = serve_triton(dev_repository, shared=False)
    process, group = server.process, server.pid
    assert process is not None

    server.terminate()

    assert server.process is process, "terminate leaves the server to stop() (the session stops many side by side)"
    assert process.wait(timeout=60) is not None, "the server exits on the SIGTERM alone"
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)


def _fake_python(path: Path, version: str, *, works: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    major, minor = version.split(".")[:2]
    body = f'echo "{major} {minor} {path}"' if works else "echo 'pyenv: python3.10: command not found' >&2; exit 127"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_find_python_skips_a_shim_that_does_not_run_and_takes_the_newest_pyenv_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_python(tmp_path / "shims" / "python3.10", "3.10", works=False)
    _fake_python(tmp_path / "pyenv" / "versions" / "3.10.9" / "bin" / "python3.10", "3.10")
    newest = _fake_python(tmp_path / "pyenv" / "versions" / "3.10.13" / "bin" / "python3.10", "3.10")
    monkeypatch.setenv("PATH", str(tmp_path / "shims"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert find_python("3.10") == newest


def test_find_python_without_an_interpreter_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    with pytest.raises(TritonError, match=r"no Python 3\.10 interpreter.*`pyenv install 3\.10`"):
        find_python("3.10")
