"""Issue 42's findings on prod's plan as ``tritonft synth`` writes it: who may reach the Triton pods (the plan's
NetworkPolicies evaluated on the plan's own pod templates, ``tests/system/netpol.py``), the Triton flags that
restrict its APIs, Pod Security Admission labels, Grafana's generated login, the GEMM tuning's writable path, and
the build's credentials and cache. The same plan on the real API server: ``tests/system/controlplane/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.common.triton import GRPC_PORT, HTTP_PORT, METRICS_PORT
from tests.plans import StackPlans
from tests.system.netpol import Pod, connects
from tritonft.synth.manifests import SECRET_PLACEHOLDER, plain
from tritonft.synth.plandiff import load_plan

REPO = Path(__file__).resolve().parents[3]
PLAN_NAMESPACE = "triton"


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> Path:
    return stack_plan("prod").out


def _objects(plan: Path) -> list[dict[str, Any]]:
    return [d for p in sorted((plan / "manifests").rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def _of(plan: Path, kind: str) -> list[dict[str, Any]]:
    return [o for o in _objects(plan) if o["kind"] == kind]


def _deployments(plan: Path, component: str) -> list[dict[str, Any]]:
    return [
        d
        for d in _of(plan, "Deployment")
        if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]


def _namespace_labels(plan: Path) -> dict[str, dict[str, str]]:
    """Each namespace's labels as the API server will hold them (it adds ``kubernetes.io/metadata.name``)."""
    out = {
        ns["metadata"]["name"]: {
            **ns["metadata"].get("labels", {}),
            "kubernetes.io/metadata.name": ns["metadata"]["name"],
        }
        for ns in _of(plan, "Namespace")
    }
    out.setdefault("default", {"kubernetes.io/metadata.name": "default"})
    return out


def _template_pod(deployment: dict[str, Any]) -> Pod:
    meta = deployment["metadata"]
    return Pod.from_template(meta["name"], meta["namespace"], deployment["spec"]["template"])


def test_in_prods_plan_only_the_gateways_pods_reach_triton_and_only_on_grpc(prod: Path) -> None:
    policies = _of(prod, "NetworkPolicy")
    namespaces = _namespace_labels(prod)
    triton = [_template_pod(d) for d in _deployments(prod, "triton")]
    (gateway,) = [_template_pod(d) for d in _deployments(prod, "gateway")]
    intruder = Pod("intruder", PLAN_NAMESPACE, {"app": "intruder"})
    assert len(triton) == 4
    for pod in triton:
        assert connects(policies, gateway, pod, GRPC_PORT, namespaces)
        assert not connects(policies, gateway, pod, HTTP_PORT, namespaces)
        for port in (HTTP_PORT, GRPC_PORT, METRICS_PORT):
            assert not connects(policies, intruder, pod, port, namespaces)
            assert not connects(policies, Pod("x", "default", {}), pod, port, namespaces)
            assert all(not connects(policies, other, pod, port, namespaces) for other in triton)


def _served_family(plan: Path) -> dict[str, str]:
    """Each Triton Service's model family (the conversion Jobs' specs say it), by the Service's name."""
    families: dict[str, str] = {}
    for cm in _of(plan, "ConfigMap"):
        for text in (cm.get("data") or {}).values():
            if '"family"' in text and '"name"' in text:
                try:
                    spec = json.loads(text)
                except ValueError:
                    continue
                if isinstance(spec, dict) and "family" in spec and "name" in spec:
                    families[spec["name"]] = spec["family"]
    return families


FASTERTRANSFORMER = {"t5", "gpt2", "gptj"}


def test_prods_plan_holds_no_edge_route_of_any_kind_to_a_fastertransformer_models_triton(prod: Path) -> None:
    """Issue 51: Triton 23.04 is reached by the gateway only: no HTTPRoute, GRPCRoute, judge route or Ingress has a
    backend that is an FT model's Service (stable or candidate), and no listener serves an FT model's host."""
    families = _served_family(prod)
    ft_models = {name for name, family in families.items() if family in FASTERTRANSFORMER}
    assert ft_models == {"t5-3b", "gpt-j-6b"}
    services = {s["metadata"]["name"] for s in _of(prod, "Service")}
    ft_services = {s for s in services if any(m in s for m in ft_models)}
    assert ft_services, "the FT models' Services are in the plan"
    routed = {
        ref["name"]
        for route in _of(prod, "HTTPRoute") + _of(prod, "GRPCRoute")
        for rule in route["spec"].get("rules", [])
        for ref in rule.get("backendRefs", [])
    }
    assert routed and not routed & ft_services, f"edge routes to FT's Triton: {sorted(routed & ft_services)}"
    assert _of(prod, "Ingress") == []
    hosts = {lst.get("hostname") for gw in _of(prod, "Gateway") for lst in gw["spec"]["listeners"]}
    assert not any(h and h.split(".")[0] in ft_models for h in hosts)


def test_in_prods_plan_no_pod_of_the_edge_or_of_monitoring_but_prometheus_reaches_an_ft_models_triton(
    prod: Path,
) -> None:
    policies = _of(prod, "NetworkPolicy")
    namespaces = _namespace_labels(prod)
    ft = [
        _template_pod(d)
        for d in _deployments(prod, "triton")
        if "/server-" not in d["spec"]["template"]["spec"]["containers"][0]["image"]
    ]
    assert len(ft) == 2
    envoy = Pod("envoy", "envoy-gateway-system", {"app.kubernetes.io/component": "proxy"})
    envoy_managed = Pod(
        "envoy", "envoy-gateway-system", {**envoy.labels, "app.kubernetes.io/managed-by": "envoy-gateway"}
    )
    grafana = Pod("grafana", "monitoring", {"app.kubernetes.io/name": "grafana"})
    prometheus = Pod("prometheus", "monitoring", {"app.kubernetes.io/name": "prometheus"})
    for pod in ft:
        for source in (envoy, envoy_managed, grafana):
            assert [
                p for p in (HTTP_PORT, GRPC_PORT, METRICS_PORT) if connects(policies, source, pod, p, namespaces)
            ] == []
        assert connects(policies, prometheus, pod, METRICS_PORT, namespaces)
        assert not connects(policies, prometheus, pod, GRPC_PORT, namespaces)


def _judge_jobs(plan: Path) -> list[dict[str, Any]]:
    """The judge Jobs the plan's in-cluster judges create (their manifests are the judges' inputs)."""
    return [r["inputs"]["job"] for r in load_plan(plan) if r["type"] == "pulumi-python:dynamic/tritonft:InClusterJudge"]


def test_in_prods_plan_each_judges_pod_reaches_its_own_models_triton_on_http_and_nothing_else(prod: Path) -> None:
    """Issue 51: a candidate is judged from inside the cluster; the judge's pods (an FT model's included) reach that
    model's Triton on 8000 only: not another model's, not gRPC, not metrics."""
    policies = _of(prod, "NetworkPolicy")
    namespaces = _namespace_labels(prod)
    triton = {
        d["metadata"]["labels"]["app.kubernetes.io/instance"]: _template_pod(d) for d in _deployments(prod, "triton")
    }
    jobs = _judge_jobs(prod)
    assert len(jobs) == len(triton) == 4
    for job in jobs:
        meta = job["metadata"]
        judge = Pod.from_template(meta["name"], meta["namespace"], job["spec"]["template"])
        own = meta["labels"]["app.kubernetes.io/instance"]
        for instance, pod in triton.items():
            reached = [p for p in (HTTP_PORT, GRPC_PORT, METRICS_PORT) if connects(policies, judge, pod, p, namespaces)]
            assert reached == ([HTTP_PORT] if instance == own else []), (meta["name"], instance, reached)
        spec = job["spec"]["template"]["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert [c["command"] for c in spec["containers"]] == [["tritonft", "judge"]]
        assert not any("secret" in str(c.get("env")).lower() for c in spec["containers"])


@pytest.fixture(scope="module")
def dev(stack_plan: StackPlans) -> Path:
    return stack_plan("dev").out


def _dev_gpt2_judge(dev: Path) -> dict[str, Any]:
    (judge,) = [
        r
        for r in load_plan(dev)
        if r["type"] == "pulumi-python:dynamic/tritonft:InClusterJudge" and r["name"].startswith("dev-gpt2-judge-")
    ]
    return judge


def test_in_devs_plan_the_gpt2_without_room_rolls_in_place_and_is_judged_against_its_reference_after_its_watch(
    dev: Path,
) -> None:
    """Issue 49: dev's gpt2 has no room for a candidate (the settings warn); its version rolls in place and the same
    judge Job a candidate gets asks its user-facing Service, with the reference, once its rollout watch passed."""
    resources = load_plan(dev)
    by_urn = {r["urn"]: r for r in resources}
    judge = _dev_gpt2_judge(dev)
    (deployment,) = [d for d in _deployments(dev, "triton") if d["metadata"]["name"] == "dev-gpt2"]
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    assert judge["inputs"]["candidate_service"] == judge["inputs"]["candidate_deployment"] == "dev-gpt2"
    job = judge["inputs"]["job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    settings = json.loads(next(e["value"] for e in container["env"] if e["name"] == "TRITONFT_JUDGE_CONFIG"))
    assert settings["endpoint"] == f"http://dev-gpt2.{PLAN_NAMESPACE}.svc:8000"
    (target,) = settings["models"]
    assert (target["name"], target["reference"]) == ("gpt2", True)
    assert "rolled in place" in judge["inputs"]["failure_hint"]
    waits_for = {(by_urn[u]["type"].rsplit(":", 1)[-1], by_urn[u]["name"]) for u in judge["options"]["dependsOn"]}
    assert ("RolloutWatch", "dev-gpt2-rollout") in waits_for
    assert ("Service", "dev-gpt2-service") in waits_for
    (specs,) = [
        r for r in resources if r["type"] == "kubernetes:core/v1:ConfigMap" and r["name"] == "dev-gateway-specs"
    ]
    assert judge["urn"] in specs["options"]["dependsOn"], "the gateway's configuration waits for the in-place judge"


def test_in_devs_plan_the_in_place_judges_pod_reaches_its_models_serving_pods_on_http_only(dev: Path) -> None:
    policies = _of(dev, "NetworkPolicy")
    namespaces = _namespace_labels(dev)
    job = _dev_gpt2_judge(dev)["inputs"]["job"]
    meta = job["metadata"]
    judge = Pod.from_template(meta["name"], meta["namespace"], job["spec"]["template"])
    for deployment in _deployments(dev, "triton"):
        pod = _template_pod(deployment)
        reached = [p for p in (HTTP_PORT, GRPC_PORT, METRICS_PORT) if connects(policies, judge, pod, p, namespaces)]
        own = deployment["metadata"]["name"] == "dev-gpt2"
        assert reached == ([HTTP_PORT] if own else []), (deployment["metadata"]["name"], reached)


def test_prods_triton_pods_run_without_model_control_and_with_the_unneeded_grpc_apis_restricted(prod: Path) -> None:
    for deployment in _deployments(prod, "triton"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        command = container["command"]
        assert "--model-control-mode=none" in command
        (grpc,) = [f for f in command if f.startswith("--grpc-restricted-protocol=")]
        assert grpc.startswith("--grpc-restricted-protocol=shared-memory,model-repository,")
        http = [f for f in command if f.startswith("--http-restricted-api")]
        if "/server-onnxruntime@" in container["image"] or "/server-vllm@" in container["image"]:
            # the encoders' and the vLLM models' 25.12 servers restrict HTTP too
            assert http and http[0].startswith("--http-restricted-api=shared-memory,model-repository,")
        else:
            assert not http, "23.04 has no such flag"
        key = {e["name"]: e for e in container["env"]}["TRITON_POD_UID"]
        assert key["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}


def test_prods_namespaces_carry_pod_security_levels_restricted_for_the_workloads(prod: Path) -> None:
    enforce = {
        ns["metadata"]["name"]: ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        for ns in _of(prod, "Namespace")
    }
    assert enforce[PLAN_NAMESPACE] == "restricted"
    # The host's view each needs: node-exporter, the device plugin's socket, dcgm-exporter's pod-resources socket,
    # Fluent Bit's kubelet log files.
    assert {n for n, level in enforce.items() if level == "privileged"} == {
        "monitoring",
        "nvidia-device-plugin",
        "dcgm-exporter",
        "logging",
    }
    assert set(enforce.values()) == {"restricted", "baseline", "privileged"}


def test_prods_grafana_login_is_a_generated_secret_masked_in_the_plan(prod: Path) -> None:
    (secret,) = [s for s in _of(prod, "Secret") if s["metadata"]["name"] == "grafana-admin"]
    assert secret["stringData"] == {"admin-password": SECRET_PLACEHOLDER, "admin-user": SECRET_PLACEHOLDER}
    text = (prod / "resources.json").read_text()
    assert "prom-operator" not in text and '"existingSecret": "grafana-admin"' in text


def test_prods_gemm_tuning_writes_only_its_models_gemm_cache_directory(prod: Path) -> None:
    tuned = [d for d in _deployments(prod, "triton") if d["spec"]["template"]["spec"].get("initContainers")]
    assert len(tuned) == 2, "t5-3b and gpt-j-6b tune, the encoder does not"
    caches = set()
    for deployment in tuned:
        (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
        cache = {e["name"]: e.get("value") for e in init["env"]}["CACHE_DIR"]
        store = [m for m in init["volumeMounts"] if m["mountPath"].startswith("/models")]
        writable = [m for m in store if not m.get("readOnly")]
        assert writable == [{"mountPath": cache, "name": "store-cache", "subPath": cache.removeprefix("/models/")}]
        assert cache.startswith("/models/gemm/") and cache.count("/") == 4  # gemm/<shape>/<key>, not the tree
        caches.add(cache)
    assert len(caches) == 2


def test_prods_builds_log_in_with_a_masked_password_and_use_no_build_cache(prod: Path) -> None:
    import json

    resources = json.loads((prod / "resources.json").read_text())
    images = [r for r in resources if r["type"] == "docker-build:index:Image"]
    assert images
    for image in images:
        assert image["inputs"]["registries"] == SECRET_PLACEHOLDER
        assert not image["inputs"].get("cacheFrom") and not image["inputs"].get("cacheTo")
    assert "mock-ecr-password" not in (prod / "resources.json").read_text()


def test_a_secret_map_keeps_its_key_names_and_masks_every_value() -> None:
    signed = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": {"b": "x", "a": "y"}}
    assert plain(signed) == {"a": SECRET_PLACEHOLDER, "b": SECRET_PLACEHOLDER}
    assert plain({**signed, "value": "text"}) == SECRET_PLACEHOLDER
