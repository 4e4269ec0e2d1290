"""A real Prometheus (Debian's ``prometheus``) on a free loopback port, in its own process group, stopped by PID,
scraping a :class:`LocalTriton` with the labels the rendered ServiceMonitor would give the pod's series."""

from __future__ import annotations

import contextlib
import json
import os
import re
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
    (``(host:port, metrics path, labels)``) and evaluating every ``interval`` (default :data:`INTERVAL`)."""

    def __init__(
        self,
        workdir: Path,
        rule_files: list[Path],
        targets: list[tuple[str, str, dict[str, str]]],
        interval: str = INTERVAL,
    ) -> None:
        self.workdir = workdir
        self.log_path = workdir / "prometheus.log"
        self.config_path = workdir / "prometheus.yml"
        scrape_configs = [
            {
                "job_name": f"target-{i}",
                "scrape_interval": interval,
                "metrics_path": path,
                "static_configs": [{"targets": [address], "labels": labels}],
            }
            for i, (address, path, labels) in enumerate(targets)
        ]
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
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

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query (at the Unix time ``at``, default now): the vector's samples (``metric``, ``value``)."""
        data = self.api("query", query=expr, **({"time": f"{at:.3f}"} if at is not None else {}))
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def series(self, match: str) -> list[dict[str, str]]:
        """``/api/v1/series``: the label sets of the series ``match`` selects (over the server's whole history)."""
        return list(self.api("series", **{"match[]": match}))


def quantity(value: str) -> float:
    """A Kubernetes quantity as the HPA/KEDA targets write it (``500m``, ``1.5``) as a number."""
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


class AdapterRule:
    """One prometheus-adapter ``rules`` entry, doing what the adapter does with it for a Pods metric.

    Discovery: the series ``seriesQuery`` selects, renamed by ``name.matches``/``name.as`` (Go's ``${1}``) into the
    metric names the custom-metrics API serves. Query (``pkg/naming/metrics_query.go`` ``Build``): the
    ``metricsQuery`` template with ``<<.Series>>`` the series name, ``<<.LabelMatchers>>`` the namespace matcher
    then the pod matcher (``pod="a"``, or ``pod=~"a|b"`` for several), ``<<.GroupBy>>`` the pod label; both labels
    are the ones ``resources.overrides`` maps to ``namespace`` and ``pod``.
    """

    def __init__(self, rule: dict[str, Any]) -> None:
        self.rule = rule
        overrides = rule["resources"]["overrides"]
        by_resource = {v["resource"]: label for label, v in overrides.items()}
        self.namespace_label, self.pod_label = by_resource["namespace"], by_resource["pod"]
        fields = set(re.findall(r"<<\s*\.(\w+)\s*>>", rule["metricsQuery"]))
        if not fields <= {"Series", "LabelMatchers", "GroupBy"}:
            raise AssertionError(f"metricsQuery uses template fields AdapterRule does not fill: {sorted(fields)}")

    def discover(self, prometheus: LocalPrometheus) -> dict[str, str]:
        """Served metric name -> the series name it reads, for the series Prometheus holds now."""
        names = {s["__name__"] for s in prometheus.series(self.rule["seriesQuery"])}
        pattern = re.compile(self.rule["name"]["matches"])
        template = re.sub(r"\$\{(\d+)\}", r"\\g<\1>", self.rule["name"]["as"])
        return {pattern.sub(template, name): name for name in sorted(names) if pattern.search(name)}

    def pods_query(self, series: str, namespace: str, pods: list[str]) -> str:
        pod_matcher = f'{self.pod_label}="{pods[0]}"' if len(pods) == 1 else f'{self.pod_label}=~"{"|".join(pods)}"'
        matchers = f'{self.namespace_label}="{namespace}",{pod_matcher}'
        values = {"Series": series, "LabelMatchers": matchers, "GroupBy": self.pod_label}
        return re.sub(r"<<\s*\.(\w+)\s*>>", lambda m: values[m.group(1)], str(self.rule["metricsQuery"]))
