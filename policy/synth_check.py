"""Run the guardrails of ``policy/checks.py`` over ``tritonft synth`` output, without Pulumi.

Both halves of a synth directory are checked: ``resources.json`` (every registered resource, with its ``protect``
option) and every ``manifests/**/*.yaml`` (the Kubernetes objects as they would be applied), so a manifest edited
or produced by another path than the resource inputs is still caught. A violation found in both is reported once.

Usage (from the repository root)::

    python -m policy.synth_check build/synth/local build/synth/dev ...

prints one line per violation and exits 1 when there is any (0 when clean, 2 on unreadable input).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from policy.checks import RULES, UNKNOWN_ENVIRONMENT, Resource, Rule, check, environment_of_stack, stack_of_urn


@dataclass(frozen=True, order=True)
class Finding:
    """One violation of one rule by one object of a synth output."""

    rule: str
    subject: str
    """``Kind namespace/name`` for Kubernetes objects, else ``type name``."""
    source: str
    """Where it was found, relative to the synth directory (``resources.json`` or ``manifests/<ns>/<file>``)."""
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.subject} ({self.source}): {self.message}"


def type_token_of_manifest(body: dict[str, Any]) -> str:
    """``{apiVersion: apps/v1, kind: Deployment}`` -> ``kubernetes:apps/v1:Deployment`` (``v1`` -> ``core/v1``)."""
    api_version, kind = str(body.get("apiVersion", "")), str(body.get("kind", ""))
    if not api_version or not kind:
        raise ValueError("manifest has no apiVersion/kind")
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def _kube_subject(kind: str, props: dict[str, Any], fallback: str) -> str:
    metadata = props.get("metadata") if isinstance(props.get("metadata"), dict) else {}
    name = metadata.get("name") or fallback
    namespace = metadata.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _subject(typ: str, name: str, props: dict[str, Any]) -> str:
    if typ.startswith("kubernetes:") and typ.count(":") == 2:
        return _kube_subject(typ.rsplit(":", 1)[1], props, name)
    return f"{typ} {name}"


def synth_environment(out_dir: Path, records: Sequence[dict[str, Any]]) -> str:
    """The stack's environment: the ``environment`` stack output when present, else implied by the stack name."""
    outputs_path = out_dir / "outputs.json"
    if outputs_path.is_file():
        outputs = json.loads(outputs_path.read_text())
        if isinstance(outputs, dict) and isinstance(outputs.get("environment"), str):
            return str(outputs["environment"])
    for record in records:
        if str(record.get("urn", "")).startswith("urn:pulumi:"):
            return environment_of_stack(stack_of_urn(str(record["urn"])))
    return UNKNOWN_ENVIRONMENT


def _findings(resource: Resource, source: str, rules: Sequence[Rule]) -> Iterable[Finding]:
    subject = _subject(resource.type, resource.name, dict(resource.props))
    for rule, message in check(resource, rules):
        yield Finding(rule, subject, source, message)


def check_synth_output(out_dir: Path, rules: Sequence[Rule] = RULES) -> list[Finding]:
    """Every violation of ``rules`` in one synth directory, sorted, each (rule, object, message) reported once."""
    resources_path = out_dir / "resources.json"
    if not resources_path.is_file():
        raise FileNotFoundError(f"{resources_path} not found; run `tritonft synth --stack <name> --out {out_dir}`")
    records = json.loads(resources_path.read_text())
    environment = synth_environment(out_dir, records)
    found: dict[tuple[str, str, str], Finding] = {}

    def add(finding: Finding) -> None:
        found.setdefault((finding.rule, finding.subject, finding.message), finding)

    for record in records:
        options = record.get("options") or {}
        resource = Resource(
            type=record["type"],
            name=record["name"],
            props=record.get("inputs") or {},
            protect=bool(options.get("protect", False)),
            environment=environment,
        )
        for finding in _findings(resource, "resources.json", rules):
            add(finding)
    for path in sorted((out_dir / "manifests").rglob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        if not isinstance(body, dict):
            raise ValueError(f"{path}: not a Kubernetes object")
        metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        resource = Resource(
            type=type_token_of_manifest(body),
            name=str(metadata.get("name", path.stem)),
            props=body,
            protect=None,  # a manifest carries no resource options; resources.json covers protection
            environment=environment,
        )
        for finding in _findings(resource, str(path.relative_to(out_dir)), rules):
            add(finding)
    return sorted(found.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policy.synth_check", description=__doc__.splitlines()[0])
    parser.add_argument("synth_dirs", nargs="+", type=Path, help="directories written by `tritonft synth --out`")
    args = parser.parse_args(argv)
    total = 0
    for out_dir in args.synth_dirs:
        try:
            findings = check_synth_output(out_dir)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for finding in findings:
            print(f"{out_dir}: {finding}")
        print(f"{out_dir}: {len(findings)} violation(s) of {len(RULES)} rules", file=sys.stderr)
        total += len(findings)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
