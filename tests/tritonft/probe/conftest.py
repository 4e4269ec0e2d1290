"""A real MLServer (KServe-V2 over HTTP and gRPC) started as a subprocess on 127.0.0.1 for the probe tests.

mlserver is never imported here: it and tritonclient register the same protobuf symbols
(``inference.ServerLiveRequest``) and cannot live in one process. The server runs ``.venv/bin/mlserver start``
on a temporary directory holding ``settings.json``, one folder per model and the runtimes of ``text_runtimes.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[2]
DATASET = REPO / "tritonft" / "probe" / "data" / "translation_en_de.json"
STARTUP_DEADLINE_S = 45.0


@dataclass(frozen=True)
class Server:
    http_port: int
    grpc_port: int
    log: Path

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tensor(name: str) -> dict[str, Any]:
    return {"name": name, "datatype": "BYTES", "shape": [-1, 1]}


def model_settings(name: str, runtime: str, output_name: str = "text_output", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "implementation": f"text_runtimes.{runtime}",
        "inputs": [_tensor("text_input")],
        "outputs": [_tensor(output_name)],
        "parameters": {"extra": {"output_name": output_name, **extra}},
    }


def _executable() -> str:
    candidate = Path(sys.executable).with_name("mlserver")
    if not candidate.exists():
        raise RuntimeError(f"mlserver is not installed next to {sys.executable}; run `uv sync`")
    return str(candidate)


def _wait_ready(proc: subprocess.Popen[bytes], server: Server) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlserver exited with {proc.returncode}:\n{server.log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{server.http_url}/v2/health/live", timeout=1) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"mlserver not live within {STARTUP_DEADLINE_S} s:\n{server.log.read_text()[-4000:]}")


def _wait_models_loaded(server: Server, names: list[str]) -> None:
    """Live is not enough: wait until every model is registered (ready or not)."""
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            try:
                with urllib.request.urlopen(f"{server.http_url}/v2/models/{name}", timeout=1) as resp:
                    if resp.status == 200:
                        pending.discard(name)
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.2)
    if pending:
        raise RuntimeError(f"models {sorted(pending)} never registered:\n{server.log.read_text()[-4000:]}")


def start_mlserver(root: Path, models: list[dict[str, Any]]) -> tuple[subprocess.Popen[bytes], Server]:
    root.mkdir(parents=True)
    shutil.copy(HERE / "text_runtimes.py", root / "text_runtimes.py")
    server = Server(http_port=free_port(), grpc_port=free_port(), log=root / "mlserver.log")
    settings = {
        "host": "127.0.0.1",
        "http_port": server.http_port,
        "grpc_port": server.grpc_port,
        "metrics_port": free_port(),
        "parallel_workers": 0,  # the default worker pool crashes with uvloop 0.23 (offline-tooling.md §4)
        "load_models_at_startup": True,
    }
    (root / "settings.json").write_text(json.dumps(settings))
    for model in models:
        folder = root / model["name"]
        folder.mkdir()
        (folder / "model-settings.json").write_text(json.dumps(model))
    env = {**os.environ, "PYTHONPATH": str(root)}
    with server.log.open("wb") as log:
        proc = subprocess.Popen(
            [_executable(), "start", str(root)], cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env
        )
    try:
        _wait_ready(proc, server)
        _wait_models_loaded(server, [m["name"] for m in models])
    except BaseException:
        stop(proc)
        raise
    return proc, server


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


SLOW_DELAY_S = 5.0

SHARED_MODELS = [
    model_settings("t5", "Translator", dataset=str(DATASET)),
    model_settings("gpt", "Continuer"),
    model_settings("t5-babbler", "Babbler"),
    model_settings("slow", "Sleeper", delay_s=SLOW_DELAY_S),
    model_settings("renamed", "Continuer", output_name="answer"),
]


@pytest.fixture(scope="session")
def mlserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One MLServer for the session, every model ready: t5 (perfect translator), gpt (continues the prompt),
    t5-babbler (wrong answers), slow (answers after SLOW_DELAY_S), renamed (output tensor ``answer``)."""
    proc, server = start_mlserver(tmp_path_factory.mktemp("mlserver") / "srv", SHARED_MODELS)
    try:
        yield server
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def mlserver_with_unready_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A second MLServer holding ``t5`` and ``never-ready`` (registered, never ready). MLServer is ready only when
    all its models are, so this model cannot share the first server."""
    models = [model_settings("t5", "Translator", dataset=str(DATASET)), model_settings("never-ready", "NeverReady")]
    proc, server = start_mlserver(tmp_path_factory.mktemp("mlserver-unready") / "srv", models)
    try:
        yield server
    finally:
        stop(proc)
