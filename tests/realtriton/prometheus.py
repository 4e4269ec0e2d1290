"""A real Prometheus (Debian's ``prometheus``) on a free loopback port, in its own process group, stopped by PID,
scraping a :class:`LocalTriton` with the labels the rendered ServiceMonitor would give the pod's series."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tritonft.local_triton import HOST, free_port

RUNNING: list[LocalPrometheus] = []
"""Servers started and not yet stopped (their logs are attached to failing tests)."""
INTERVAL = "1s"
"""Scrape and evaluation interval of the test Prometheus (the ServiceMonitor's 15 s would make tests minutes long);
rule groups that name their own interval keep it."""


def service_monitor_target_labels(
    monitor: dict[str, Any], service: dict[str, Any], deployment: dict[str, Any], pod: str
) -> dict[str, str]:
    """The target labels the Prometheus operator attaches to a pod scraped through ``monitor``'s first endpoint.

    Its generated relabelings give ``namespace``, ``service``, ``pod``, ``container``, ``endpoint`` (the port
    name) and ``job`` (the Service name, or the value of the Service label named by ``jobLabel``); the endpoint's
    own ``relabelings`` come after (none supported here: a rendered one fails loudly rather than being ignored).
    """
    (endpoint,) = monitor["spec"]["endpoints"]
    if endpoint.get("relabelings") or endpoint.get("metricRelabelings"):
        raise AssertionError("the ServiceMonitor now relabels: teach service_monitor_target_labels its relabelings")
    selector = monitor["spec"]["selector"]["matchLabels"]
    labels = service["metadata"].get("labels", {})
    assert selector.items() <= labels.items(), "the ServiceMonitor does not select the Service"
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    port = endpoint["port"]
    assert port in {p.get("name") for p in service["spec"]["ports"]}, f"the Service has no port named {port}"
    (container,) = [
        c["name"]
        for c in deployment["spec"]["template"]["spec"]["containers"]
        if port in {p.get("name") for p in c.get("ports", [])}
    ]
    job_label = monitor["spec"].get("jobLabel")
    return {
        "namespace": service["metadata"]["namespace"],
        "service": service["metadata"]["name"],
        "pod": pod,
        "container": container,
        "endpoint": port,
        "job": labels[job_label] if job_label else service["metadata"]["name"],
    }


class LocalPrometheus:
    """``prometheus`` on ``127.0.0.1:free port`` with ``rule_files`` loaded as they are, scraping ``targets``
    (``(host:port, metrics path, labels)``) every :data:`INTERVAL`."""

    def __init__(self, workdir: Path, rule_files: list[Path], targets: list[tuple[str, str, dict[str, str]]]) -> None:
        self.workdir = workdir
        self.log_path = workdir / "prometheus.log"
        self.config_path = workdir / "prometheus.yml"
        scrape_configs = [
            {
                "job_name": f"target-{i}",
                "scrape_interval": INTERVAL,
                "metrics_path": path,
                "static_configs": [{"targets": [address], "labels": labels}],
            }
            for i, (address, path, labels) in enumerate(targets)
        ]
        config = {
            "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": scrape_configs,
        }
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout: float = 60.0) -> None:
        exe = shutil.which("prometheus")
        assert exe, "prometheus is missing: run `bash scripts/setup/prometheus.sh` (Debian package prometheus)"
        self.port = free_port()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    exe,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address={HOST}:{self.port}",
                    "--log.level=info",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        RUNNING.append(self)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.process.returncode}:\n{self.log_text()[-4000:]}")
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready within {timeout:.0f} s:\n{self.log_text()[-4000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        process, self.process = self.process, None
        if self in RUNNING:
            RUNNING.remove(self)
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``: the ``data`` of a successful answer (an error answer raises with its message)."""
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read())
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query: the vector's samples (``metric``, ``value``)."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])
