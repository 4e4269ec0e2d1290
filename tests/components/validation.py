"""Validate Kubernetes manifests the way CI does: OpenAPI schemas (kubernetes-validate, strict) and checkov.

Reusable for whole-stack synth output: ``problems = validate_directory(path)`` and ``run_checkov(path)``.

Custom resources of the prometheus-operator (ServiceMonitor, PodMonitor, PrometheusRule) and KEDA (ScaledObject) have no
schema bundled with kubernetes-validate; :func:`check_custom_resource` checks their structure against the fields
the CRDs require (and the ones our components rely on) instead, and says so in its messages.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from tritonft.synth.manifests import SECRET_PLACEHOLDER

REPO_ROOT = Path(__file__).resolve().parents[2]
CHECKOV = REPO_ROOT / ".tools" / "checkov" / "bin" / "checkov"
K8S_VERSIONS = ("1.29.0", "1.33.0")


def _for_schema(body: dict[str, Any]) -> dict[str, Any]:
    """A Secret whose whole ``stringData``/``data`` was masked by synth is given a masked map of the same shape."""
    if body.get("kind") != "Secret":
        return body
    out = dict(body)
    for key in ("data", "stringData"):
        if out.get(key) == SECRET_PLACEHOLDER:
            out[key] = {"masked": SECRET_PLACEHOLDER}
    return out


def _require(body: dict[str, Any], path: str, typ: type | tuple[type, ...]) -> str | None:
    node: Any = body
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return f"missing {path}"
        node = node[part]
    if not isinstance(node, typ):
        return f"{path} is {type(node).__name__}, expected {typ}"
    return None


CR_REQUIRED: dict[tuple[str, str], list[tuple[str, type | tuple[type, ...]]]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): [
        ("spec.selector.matchLabels", dict),
        ("spec.endpoints", list),
        ("spec.namespaceSelector.matchNames", list),
    ],
    ("monitoring.coreos.com/v1", "PodMonitor"): [
        ("spec.selector.matchLabels", dict),
        ("spec.podMetricsEndpoints", list),
        ("spec.namespaceSelector.matchNames", list),
    ],
    ("monitoring.coreos.com/v1", "PrometheusRule"): [("spec.groups", list)],
    ("keda.sh/v1alpha1", "ScaledObject"): [
        ("spec.scaleTargetRef.name", str),
        ("spec.triggers", list),
        ("spec.minReplicaCount", int),
        ("spec.maxReplicaCount", int),
    ],
    ("gateway.networking.k8s.io/v1", "Gateway"): [("spec.gatewayClassName", str), ("spec.listeners", list)],
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): [("spec.parentRefs", list), ("spec.rules", list)],
    ("gateway.networking.k8s.io/v1", "GRPCRoute"): [("spec.parentRefs", list), ("spec.rules", list)],
    ("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy"): [("spec", dict)],
    ("gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy"): [("spec", dict)],
    ("gateway.envoyproxy.io/v1alpha1", "ClientTrafficPolicy"): [("spec.targetRefs", list)],
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyProxy"): [("spec.provider.type", str)],
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyExtensionPolicy"): [("spec.lua", list)],
}
"""Fields each CRD's schema requires or our components depend on. The Gateway API and Envoy Gateway objects are
also applied, whole, to a real kube-apiserver with their real CRDs (``tests/system/controlplane``)."""
CLUSTER_SCOPED_CRS: dict[tuple[str, str], list[tuple[str, type | tuple[type, ...]]]] = {
    ("gateway.networking.k8s.io/v1", "GatewayClass"): [("spec.controllerName", str)],
    ("cert-manager.io/v1", "ClusterIssuer"): [("spec.acme.server", str), ("spec.acme.solvers", list)],
}
"""Cluster-scoped custom resources (no ``metadata.namespace``)."""


def check_custom_resource(body: dict[str, Any]) -> list[str]:
    """Structural check of a custom resource without a bundled schema (see module docstring)."""
    key = (str(body.get("apiVersion")), str(body.get("kind")))
    cluster_scoped = key in CLUSTER_SCOPED_CRS
    required = CLUSTER_SCOPED_CRS[key] if cluster_scoped else CR_REQUIRED.get(key)
    if required is None:
        return [f"{key[1]} ({key[0]}): no schema and no structural check known"]
    meta: list[tuple[str, type | tuple[type, ...]]] = [("metadata.name", str)]
    if not cluster_scoped:
        meta.append(("metadata.namespace", str))
    problems = [p for path, typ in [*meta, *required] if (p := _require(body, path, typ)) is not None]
    spec = body.get("spec", {})
    if key[1] == "PrometheusRule":
        for group in spec.get("groups", []):
            for rule in group.get("rules", []):
                if ("record" in rule) == ("alert" in rule) or not isinstance(rule.get("expr"), str):
                    problems.append(f"rule {rule} needs exactly one of record/alert and a string expr")
    if key[1] == "SecurityPolicy":
        # The CRD's own rule: something targeted; an API-key policy names the Secret of its keys.
        if not (spec.get("targetRefs") or spec.get("targetRef") or spec.get("targetSelectors")):
            problems.append("a SecurityPolicy needs targetRefs or targetSelectors")
        if "apiKeyAuth" in spec and (p := _require(body, "spec.apiKeyAuth.credentialRefs", list)) is not None:
            problems.append(p)
    if key[1] == "EnvoyExtensionPolicy":
        # The CRD's own rules: something targeted; each Lua extension inline or from a ConfigMap.
        if not (spec.get("targetRefs") or spec.get("targetRef") or spec.get("targetSelectors")):
            problems.append("an EnvoyExtensionPolicy needs targetRefs or targetSelectors")
        for lua in spec.get("lua", []):
            if not isinstance(lua.get("inline") or lua.get("valueRef"), str | dict):
                problems.append(f"lua {lua} needs inline or valueRef")
    if key[1] == "BackendTrafficPolicy":
        # The CRD's own rule: something targeted; a rate limit has its rules.
        if not (spec.get("targetRefs") or spec.get("targetRef") or spec.get("targetSelectors")):
            problems.append("a BackendTrafficPolicy needs targetRefs or targetSelectors")
        limits = spec.get("rateLimit", {})
        if "rateLimit" in spec and not any(
            isinstance(limits.get(scope, {}).get("rules"), list) for scope in ("local", "global")
        ):
            problems.append("rateLimit needs local.rules or global.rules")
    if key[1] == "ServiceMonitor":
        for endpoint in spec.get("endpoints", []):
            if not isinstance(endpoint.get("port"), str):
                problems.append(f"endpoint {endpoint} needs a named port")
    if key[1] == "PodMonitor":
        for endpoint in spec.get("podMetricsEndpoints", []):
            if not isinstance(endpoint.get("port"), str):
                problems.append(f"pod metrics endpoint {endpoint} needs a named port")
    if key[1] == "ScaledObject":
        for trigger in spec.get("triggers", []):
            if not isinstance(trigger.get("type"), str) or not isinstance(trigger.get("metadata"), dict):
                problems.append(f"trigger {trigger} needs a type and metadata")
            elif not all(isinstance(v, str) for v in trigger["metadata"].values()):
                problems.append(f"trigger {trigger['type']} metadata values must all be strings")
    return [f"{key[1]}/{body.get('metadata', {}).get('name')} (structural, no bundled schema): {p}" for p in problems]


def validate_manifest(body: dict[str, Any], versions: Iterable[str] = K8S_VERSIONS) -> list[str]:
    """Every schema problem of one manifest, for each Kubernetes version (strict: no unknown fields)."""
    problems: list[str] = []
    name = f"{body.get('kind')}/{body.get('metadata', {}).get('name')}"
    for version in versions:
        try:
            kubernetes_validate.validate(_for_schema(body), version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            return check_custom_resource(body)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            problems.append(f"{name} @ {version}: {where}: {exc.message}")
    return problems


def load_directory(directory: Path) -> list[dict[str, Any]]:
    """Every YAML document under ``directory`` (recursively, ``*.yaml``), in path order."""
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.rglob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    return docs


def validate_directory(directory: Path, versions: Iterable[str] = K8S_VERSIONS) -> list[str]:
    """Schema problems of every manifest under ``directory``."""
    return [p for doc in load_directory(directory) for p in validate_manifest(doc, tuple(versions))]


def write_manifests(bodies: Iterable[dict[str, Any]], directory: Path) -> list[Path]:
    """One YAML file per manifest (``<kind>-<name>.yaml``); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for body in bodies:
        path = directory / f"{body['kind'].lower()}-{body['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=True))
        paths.append(path)
    return paths


@dataclass(frozen=True)
class CheckovFailure:
    check_id: str
    check_name: str
    resource: str
    file: str

    def __str__(self) -> str:
        return f"{self.check_id} {self.resource} ({self.file}): {self.check_name}"


class CheckovMissingError(RuntimeError):
    """checkov is not installed where the tests and CI expect it."""


def checkov_checks(directory: Path, checkov: Path = CHECKOV) -> tuple[list[str], list[CheckovFailure]]:
    """Run checkov's kubernetes framework over ``directory``; returns (the file of each passed check, failures).

    Raises :class:`CheckovMissingError` with the install command when the isolated tool venv is absent.
    """
    if not checkov.exists():
        raise CheckovMissingError(
            f"checkov not found at {checkov}. Install it in its own venv (its pins conflict with the project):\n"
            "  bash scripts/bootstrap.sh   (installs tools/checkov-requirements.txt into .tools/checkov)"
        )
    proc = subprocess.run(
        [str(checkov), "-d", str(directory), "--framework", "kubernetes", "-o", "json", "--compact"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    failures: list[CheckovFailure] = []
    passed: list[str] = []
    for rep in reports:
        results = rep.get("results", {})
        passed += [str(check.get("file_path", "")) for check in results.get("passed_checks", [])]
        for fail in results.get("failed_checks", []):
            failures.append(
                CheckovFailure(
                    fail["check_id"], fail.get("check_name", ""), fail.get("resource", ""), fail.get("file_path", "")
                )
            )
    return passed, failures


def run_checkov(directory: Path, checkov: Path = CHECKOV) -> tuple[int, list[CheckovFailure]]:
    """Run checkov's kubernetes framework over ``directory``; returns (passed count, failures)."""
    passed, failures = checkov_checks(directory, checkov)
    return len(passed), failures


def run_checkov_per_folder(directory: Path, checkov: Path = CHECKOV) -> dict[str, tuple[int, list[CheckovFailure]]]:
    """One checkov run over ``directory`` (its start-up costs seconds), its results split by the top-level folder of
    each checked file: (passed count, failures) per folder."""
    passed, failures = checkov_checks(directory, checkov)

    def folder(file_path: str) -> str:
        return Path(file_path.lstrip("/")).parts[0]

    return {
        name: (sum(1 for f in passed if folder(f) == name), [f for f in failures if folder(f.file) == name])
        for name in sorted({folder(f) for f in passed} | {folder(f.file) for f in failures})
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.components.validation DIR``: schema-check and scan every manifest under DIR; exit 1 on
    problems."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--no-checkov", action="store_true", help="schema checks only")
    args = parser.parse_args(argv)
    problems = validate_directory(args.directory)
    if not args.no_checkov:
        passed, failures = run_checkov(args.directory)
        problems += [f"checkov: {f}" for f in failures]
        print(f"checkov: {passed} passed, {len(failures)} failed")
    for problem in problems:
        print(problem)
    print(f"{len(load_directory(args.directory))} manifests, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
