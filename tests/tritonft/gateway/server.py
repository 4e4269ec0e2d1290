"""Run ``tritonft gateway`` as the container does (a subprocess on a free loopback port), stopped by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tritonft.gateway.app import build_app
from tritonft.gateway.config import GatewayConfig
from tritonft.local_triton import free_port
from tritonft.spec import ModelSpec


class GatewayProcess:
    def __init__(self, triton_grpc: str, specs: Sequence[ModelSpec], workdir: Path, extra: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.log_path = workdir / "gateway.log"
        paths = []
        for spec in specs:
            path = workdir / f"{spec.name}.json"
            path.write_text(spec.to_json())
            paths.append(path)
        self.command = [sys.executable, "-m", "tritonft", "gateway", "--triton-url", triton_grpc]
        self.command += ["--host", "127.0.0.1", "--port", str(self.port), *extra]
        for path in paths:
            self.command += ["--spec", str(path)]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def access_entries(
        self, until: Callable[[dict[str, Any]], bool] = lambda _: True, timeout_s: float = 5.0
    ) -> list[dict[str, Any]]:
        """The access log's entries once one satisfies ``until`` (or whatever is there after ``timeout_s``): the
        gateway writes a line after the answer is sent, so a client can hold the answer before the line exists."""
        deadline = time.monotonic() + timeout_s
        while True:
            entries = [json.loads(line) for line in self.log_text().splitlines() if line.startswith("{")]
            if any(until(e) for e in entries) or time.monotonic() > deadline:
                return entries
            time.sleep(0.05)

    def start(self, timeout_s: float = 30.0) -> GatewayProcess:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the gateway exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health/live", timeout=1) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the gateway did not come up within {timeout_s} s:\n{self.log_text()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


GATEWAYS = pytest.StashKey[list[GatewayProcess]]()
"""The gateways a test started (on its item), whose logs :func:`log_sections` puts into a failed test's report."""
LOG_TAIL_CHARS = 20000


@contextmanager
def started(gateway: GatewayProcess, request: pytest.FixtureRequest) -> Iterator[GatewayProcess]:
    """``gateway`` running for the ``with`` block, stopped by PID after; its log goes into the test's report if the
    test fails (never into its captured output, which tests read)."""
    request.node.stash.setdefault(GATEWAYS, []).append(gateway)
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.stop()


def log_sections(item: pytest.Item) -> list[tuple[str, str]]:
    """A report section per gateway started for ``item``, by the test or by a fixture of a wider scope (whose
    request's node is the module or session): the tail of its log."""
    gateways = [g for node in item.listchain() for g in node.stash.get(GATEWAYS, [])]
    return [(f"gateway log ({g.log_path})", g.log_text()[-LOG_TAIL_CHARS:]) for g in gateways]


@contextmanager
def serving_app(config: GatewayConfig) -> Iterator[tuple[str, uvicorn.Server, threading.Thread]]:
    """The gateway app of ``config`` in this process, on a free loopback port, as ``tritonft gateway`` runs it
    (uvicorn); yields its base URL, the server and the thread it runs in, and stops it on leaving."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(config), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = time.monotonic()
    while not server.started:
        assert time.monotonic() - started < 30, "the gateway did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", server, thread
    finally:
        server.should_exit = True
        thread.join(30)
