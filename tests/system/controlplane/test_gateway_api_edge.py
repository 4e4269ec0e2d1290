"""The edge of every stack that builds its cluster, on a real kube-apiserver with the real Gateway API CRDs
(``sigs.k8s.io/gateway-api``) and Envoy Gateway's, at the versions the stack installs: every Gateway, route and
policy the plan holds is accepted with its OpenAPI schema and CEL validations, and an object that breaks one is
refused (so the validations are live)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.common.edge import AUTH_LABEL, AUTH_PUBLIC, GatewayRef, exposes_triton, rate_limit_policy_spec
from components.settings.stack_file import settings_from_stack_file
from tests.plans import StackPlans, deploy_secrets
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import REAL_CRD_GROUPS, install_crds, load_plan, retarget
from tests.system.controlplane.server import REPO
from tritonft.kube import ApiError
from tritonft.synth.result import SynthResult

EDGE_KINDS = (
    "GatewayClass",
    "Gateway",
    "HTTPRoute",
    "GRPCRoute",
    "SecurityPolicy",
    "BackendTrafficPolicy",
    "ClientTrafficPolicy",
    "EnvoyProxy",
)


def edge_objects(plan: SynthResult, namespace: str) -> list[dict[str, Any]]:
    plan_namespace = settings_from_stack_file(REPO, plan.stack.stack, deploy_secrets(plan.stack.stack)).namespace
    objs = retarget(load_plan(plan.out / "manifests"), plan_namespace, namespace)
    return [o for o in objs if o["apiVersion"].split("/")[0] in REAL_CRD_GROUPS]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_gateway_api_object_of_the_plan_is_accepted_by_the_real_api_server(
    cluster: Cluster, stack: str, stack_plan: StackPlans
) -> None:
    objs = edge_objects(stack_plan(stack), cluster.namespace)
    settings = settings_from_stack_file(REPO, stack, deploy_secrets(stack))
    # Only an encoder's Triton has routes, a GRPCRoute among them (issue 51: no FT or vLLM model's, docs/security/).
    exposed = any(exposes_triton(m) for m in settings.models)
    assert {o["kind"] for o in objs} == set(EDGE_KINDS) - (set() if exposed else {"GRPCRoute"})
    assert exposed == (stack != "dev"), "dev serves FasterTransformer models only"
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    for obj in objs:
        try:
            stored = cluster.kube.apply(obj)
        except ApiError as exc:
            raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']} refused: {exc.message}") from None
        assert stored["metadata"]["uid"], f"{obj['kind']}/{obj['metadata']['name']} stored"


def test_the_api_server_enforces_the_route_crds_validations(cluster: Cluster, stack_plan: StackPlans) -> None:
    objs = edge_objects(stack_plan("prod"), cluster.namespace)  # prod's encoder has a GRPCRoute
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    grpc = copy.deepcopy(next(o for o in objs if o["kind"] == "GRPCRoute"))
    grpc["spec"]["rules"][0]["matches"] = [{"method": {"type": "Exact"}}]  # neither service nor method
    with pytest.raises(ApiError, match=r"service.*method|method.*service"):
        cluster.kube.apply(grpc, dry_run=True)
    http = copy.deepcopy(next(o for o in objs if o["kind"] == "HTTPRoute" and o["spec"].get("hostnames")))
    http["spec"]["rules"][0]["timeouts"] = {"request": "10s", "backendRequest": "20s"}
    with pytest.raises(ApiError, match="backendRequest"):
        cluster.kube.apply(http, dry_run=True)


def test_the_proxies_disruption_budget_and_spread_are_fields_envoy_gateway_knows(
    cluster: Cluster, stack_plan: StackPlans
) -> None:
    """The real EnvoyProxy CRD keeps them (a field it did not know would be pruned from the stored object)."""
    objs = edge_objects(stack_plan("prod"), cluster.namespace)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    (proxy,) = [o for o in objs if o["kind"] == "EnvoyProxy"]
    stored = cluster.kube.apply(proxy)["spec"]["provider"]["kubernetes"]
    assert stored["envoyPDB"] == {"minAvailable": 1}
    spread = stored["envoyDeployment"]["pod"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}


def test_the_shared_global_rate_limit_is_a_policy_envoy_gateway_accepts(
    cluster: Cluster, stack_plan: StackPlans
) -> None:
    """``rateLimitRedis``'s variant (no stack file sets it): prod's traffic policy with the global, shared rule."""
    objs = edge_objects(stack_plan("prod"), cluster.namespace)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    (policy,) = [copy.deepcopy(o) for o in objs if o["kind"] == "BackendTrafficPolicy" and "rateLimit" in o["spec"]]
    gateway = GatewayRef(policy["spec"]["targetRefs"][0]["name"])
    policy["spec"]["rateLimit"] = rate_limit_policy_spec(600, 256, gateway, shared=True)["rateLimit"]
    stored = cluster.kube.apply(policy, dry_run=True)
    (rule,) = stored["spec"]["rateLimit"]["global"]["rules"]
    assert rule["shared"] is True and rule["clientSelectors"][0]["headers"][0]["type"] == "Distinct"


def test_the_edges_memory_bounds_are_fields_envoy_gateway_keeps(cluster: Cluster, stack_plan: StackPlans) -> None:
    """Review S3: the public routes' 1 KiB buffer, the listeners' connection limit and the proxy container's memory
    survive the real CRDs (a field they did not know would be pruned from the stored object)."""
    objs = edge_objects(stack_plan("prod"), cluster.namespace)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    (public,) = [o for o in objs if o["kind"] == "BackendTrafficPolicy" and "rateLimit" not in o["spec"]]
    stored = cluster.kube.apply(public, dry_run=True)["spec"]
    assert stored["requestBuffer"] == {"limit": "1024"} and "mergeType" not in stored
    assert stored["targetSelectors"][0]["matchLabels"] == {AUTH_LABEL: AUTH_PUBLIC}
    (connections,) = [o for o in objs if o["kind"] == "ClientTrafficPolicy"]
    stored = cluster.kube.apply(connections, dry_run=True)["spec"]
    assert stored["connection"]["connectionLimit"] == {"value": 1024}
    (proxy,) = [o for o in objs if o["kind"] == "EnvoyProxy"]
    container = cluster.kube.apply(proxy, dry_run=True)["spec"]["provider"]["kubernetes"]["envoyDeployment"][
        "container"
    ]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
