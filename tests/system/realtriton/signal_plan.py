"""The staging stack as the program renders it for one served model, optionally changed in its stack file:
the objects the real-Prometheus tests and ``benchmarks/ratio_bench.py`` load (rules, ServiceMonitor, autoscaler,
dashboard, prometheus-adapter rules)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.serving.promotion import VERSION_LABEL
from tests.system.realtriton.repos import ROOT
from tritonft.synth.run import synthesize

STACK, MODEL = "staging", "t5-3b"
GATEWAY = f"{STACK}-gateway"
POD = f"{STACK}-{MODEL}-0"
"""The pod name the scrape target gets (what the Deployment's first pod would be called)."""


def derived_project(out: Path, extra: dict[str, Any]) -> Path:
    """A copy of this project (every entry linked) whose :data:`STACK` file also sets ``extra`` (keys without
    the ``triton-ft:`` prefix): the stack the program renders, changed only there."""
    root = out / "project"
    root.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in ("stacks", "build", ".git"):
            (root / entry.name).symlink_to(entry)
    (root / "stacks").mkdir()
    stack_file = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    stack_file["config"].update({f"triton-ft:{k}": v for k, v in extra.items()})
    (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(stack_file, sort_keys=False))
    return root


@dataclass
class Plan:
    """The synthesized stack's objects for the service serving :data:`MODEL`."""

    monitor: dict[str, Any]
    service: dict[str, Any]
    deployment: dict[str, Any]
    rule: dict[str, Any]
    dashboard: dict[str, Any]
    autoscaler: dict[str, Any]
    """The HorizontalPodAutoscaler, or the KEDA ScaledObject."""
    adapter_rules: list[dict[str, Any]]
    """``rules.custom`` of the prometheus-adapter chart the stack installs (empty when it installs none)."""
    gateway: dict[str, dict[str, Any]]
    """The OpenAI gateway's objects by kind (``Deployment``, ``Service``, ``ServiceMonitor`` ...); empty without."""

    @property
    def namespace(self) -> str:
        return str(self.service["metadata"]["namespace"])

    @property
    def job(self) -> str:
        return str(self.service["metadata"]["name"])


def synthesized_plan(out: Path, extra: dict[str, Any]) -> Plan:
    result = synthesize(STACK, out=out / "synth", project_dir=derived_project(out, extra), extras=())
    mine = [m.body for m in result.manifests if m.body["metadata"].get("labels", {}).get("triton-ft/model") == MODEL]

    def one(kind: str) -> dict[str, Any]:
        skipped = ("-dashboard", "-pods")  # the dashboard's ConfigMap; the headless Service the gateway resolves
        (doc,) = [
            d
            for d in mine
            if d["kind"] == kind
            and not d["metadata"]["name"].endswith(skipped)
            and not (kind == "Service" and VERSION_LABEL in d["metadata"]["labels"])  # a version's candidate Service
        ]
        return doc

    service = one("Service")
    (board,) = [d for d in mine if d["metadata"]["name"] == f"{service['metadata']['name']}-dashboard"]
    (board_json,) = board["data"].values()
    (autoscaler,) = [d for d in mine if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]
    adapters = [
        r.inputs
        for r in result.resources
        if r.typ == "kubernetes:helm.sh/v4:Chart" and r.inputs.get("chart") == "prometheus-adapter"
    ]
    return Plan(
        monitor=one("ServiceMonitor"),
        service=service,
        deployment=one("Deployment"),
        rule=one("PrometheusRule"),
        dashboard=json.loads(board_json),
        autoscaler=autoscaler,
        adapter_rules=[rule for a in adapters for rule in a["values"]["rules"]["custom"]],
        gateway={m.body["kind"]: m.body for m in result.manifests if m.body["metadata"]["name"] == GATEWAY},
    )
