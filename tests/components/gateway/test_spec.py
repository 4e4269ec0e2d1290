"""The Gateway component: the OpenAI API for every model, run as the shell runs it, hardened and exposed like the
models (same TLS and auth), allowed to reach Triton's gRPC port only."""

from __future__ import annotations

import dataclasses
import re
from datetime import date
from typing import Any

import pytest

from components.common.ingress import IngressArgs
from components.common.podsec import RUN_AS_USER
from components.common.triton import GRPC_PORT, HTTP_PORT
from components.gateway import Gateway, GatewayArgs, GatewayBackend
from components.gateway.spec import (
    GATEWAY_PORT,
    SPEC_MOUNT,
    SPECS_ANNOTATION,
    gateway_selector,
    in_flight_per_client,
    specs_digest,
)
from tests.components.fixtures import (
    CPU_POOL,
    GPTJ_6B,
    NAMESPACE,
    T5_SMALL,
    TOOLS_IMAGE,
    make_target,
    secure_ingress,
    serve,
)
from tritonft.errors import UserError
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, run_program

GATEWAY = "gw"
NGINX = "nginx.ingress.kubernetes.io"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"


def _stack(**overrides: Any) -> None:
    """Two models (T5 TP1, GPT-J TP4), each behind its own secure ingress, and the gateway in front of both."""
    target = make_target()
    pods = gateway_selector(GATEWAY)
    t5 = serve("t5", T5_SMALL, target=target, ingress=secure_ingress("t5.example.com"), gateway_pods=pods)
    gptj = serve("gptj", GPTJ_6B, target=target, ingress=secure_ingress("gptj.example.com"), gateway_pods=pods)
    args = GatewayArgs(
        target=target,
        image=TOOLS_IMAGE,
        backends=(GatewayBackend(T5_SMALL, t5), GatewayBackend(GPTJ_6B, gptj)),
        ingress=secure_ingress("example.com"),
        monitoring=True,
    )
    Gateway(GATEWAY, dataclasses.replace(args, **overrides))


def _run(mocks: RecordingMocks, **overrides: Any) -> RecordingMocks:
    run_program(lambda: _stack(**overrides))
    return mocks


def _named(mocks: RecordingMocks, typ: str, name: str) -> Registered:
    (match,) = [r for r in mocks.of_type(typ) if r.inputs["metadata"]["name"] == name]
    return match


def _container(mocks: RecordingMocks) -> dict[str, Any]:
    (container,) = _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _flag_values(command: list[str], flag: str) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == flag]


def test_the_container_runs_the_shell_command_with_a_route_and_a_spec_per_model(mocks):
    command = _container(_run(mocks))["command"]
    assert command[:4] == ["python", "-m", "tritonft", "gateway"]
    assert _flag_values(command, "--triton-url") == [
        f"t5-small=t5-pods.{NAMESPACE}.svc:{GRPC_PORT}",
        f"gpt-j-6b=gptj-pods.{NAMESPACE}.svc:{GRPC_PORT}",
    ]
    assert _flag_values(command, "--spec") == [f"{SPEC_MOUNT}/t5-small.json", f"{SPEC_MOUNT}/gpt-j-6b.json"]
    assert _flag_values(command, "--port") == [str(GATEWAY_PORT)]


def test_a_model_that_scales_to_zero_is_named_so_the_gateway_stays_ready_without_it(mocks):
    def stack() -> None:
        target = make_target()
        pods = gateway_selector(GATEWAY)
        t5 = serve("t5", T5_SMALL, target=target, ingress=secure_ingress("t5.example.com"), gateway_pods=pods)
        sleepy = serve(
            "gptj", GPTJ_6B, target=target, autoscaler="keda", min_replicas=0, gateway_pods=pods, gateway_job=GATEWAY
        )
        backends = (GatewayBackend(T5_SMALL, t5), GatewayBackend(GPTJ_6B, sleepy))
        Gateway(GATEWAY, GatewayArgs(target=target, image=TOOLS_IMAGE, backends=backends, monitoring=True))

    run_program(stack)
    assert _flag_values(_container(mocks)["command"], "--scales-to-zero") == ["gpt-j-6b"]


def test_the_container_coalesces_requests_by_default(mocks):
    assert "--coalesce" in _container(_run(mocks))["command"]


def test_the_coalesce_knob_off_runs_the_gateway_with_no_coalesce(mocks):
    command = _container(_run(mocks, coalesce=False))["command"]
    assert "--no-coalesce" in command and "--coalesce" not in command


def test_the_per_client_cap_reaches_the_container_as_its_flag(mocks):
    command = _container(_run(mocks, max_in_flight_per_client=32))["command"]
    assert _flag_values(command, "--max-in-flight-per-client") == ["32"]


def test_each_keys_expiry_day_reaches_the_container_as_a_flag(mocks):
    command = _container(_run(mocks, key_expiries=(("webapp", date(2026, 12, 31)),)))["command"]
    assert _flag_values(command, "--api-key-expires") == ["webapp=2026-12-31"]


def test_without_a_per_client_cap_the_container_gets_no_flag(mocks):
    assert "--max-in-flight-per-client" not in _container(_run(mocks))["command"]


def test_the_per_client_cap_derived_leaves_half_a_proxys_slots_at_the_most_replicas():
    assert in_flight_per_client(None, 256, 4) == 32
    assert in_flight_per_client(None, 256, 4) * 4 <= 256 // 2


def test_a_stated_per_client_cap_is_kept_and_a_derived_one_is_at_least_one():
    assert in_flight_per_client(5, 256, 4) == 5
    assert in_flight_per_client(None, 3, 100) == 1


def test_the_mounted_specs_are_the_served_models_specs(mocks):
    _run(mocks)
    config_map = _named(mocks, "kubernetes:core/v1:ConfigMap", f"{GATEWAY}-specs")
    specs = {key: ModelSpec.from_json(text) for key, text in config_map.inputs["data"].items()}
    assert specs == {"t5-small.json": T5_SMALL, "gpt-j-6b.json": GPTJ_6B}
    pod = _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]["template"]["spec"]
    assert {"name": "specs", "configMap": {"name": f"{GATEWAY}-specs"}} in pod["volumes"]


def test_the_pod_template_carries_the_specs_digest_so_a_changed_spec_rolls_the_pods(mocks):
    _run(mocks)
    annotations = _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]["template"]["metadata"]["annotations"]
    assert annotations[SPECS_ANNOTATION] == specs_digest([T5_SMALL, GPTJ_6B])
    longer = dataclasses.replace(T5_SMALL, max_output_len=64)
    assert specs_digest([longer, GPTJ_6B]) != specs_digest([T5_SMALL, GPTJ_6B])


def test_the_pod_is_hardened_probed_and_on_cpu_nodes(mocks):
    _run(mocks)
    pod = _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == RUN_AS_USER
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": "http"}
    assert pod["nodeSelector"] == CPU_POOL
    assert "tolerations" not in pod
    assert container["image"] == TOOLS_IMAGE


def test_resources_are_the_requested_cpu_and_memory_as_request_and_limit(mocks):
    resources = _container(_run(mocks, cpu="1500m", memory="1Gi"))["resources"]
    assert resources == {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": "1500m", "memory": "1Gi"}}


def test_an_hpa_on_cpu_owns_the_replicas_between_min_and_max(mocks):
    _run(mocks, min_replicas=2, max_replicas=5)
    spec = _named(mocks, HPA, GATEWAY).inputs["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 5)
    assert spec["metrics"][0]["resource"]["name"] == "cpu"
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] > 0
    assert "replicas" not in _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]


def test_equal_min_and_max_is_a_fixed_count_without_an_hpa(mocks):
    _run(mocks, min_replicas=3, max_replicas=3)
    assert [r for r in mocks.of_type(HPA) if r.inputs["metadata"]["name"] == GATEWAY] == []
    assert _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]["replicas"] == 3


def test_the_api_is_served_under_v1_on_the_base_host_with_the_models_tls_and_auth(mocks):
    _run(mocks)
    gateway = _named(mocks, INGRESS, GATEWAY).inputs
    model = _named(mocks, INGRESS, "t5-http").inputs
    (rule,) = gateway["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert rule["host"] == "example.com"
    assert (path["path"], path["backend"]["service"]) == ("/v1", {"name": GATEWAY, "port": {"name": "http"}})
    assert gateway["spec"]["tls"] == [{"hosts": ["example.com"], "secretName": f"{GATEWAY}-tls"}]
    auth = {k: v for k, v in model["metadata"]["annotations"].items() if "/auth-" in k and k != f"{NGINX}/auth-secret"}
    assert auth and {k: gateway["metadata"]["annotations"][k] for k in auth} == auth
    assert gateway["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] == "letsencrypt"
    assert gateway["metadata"]["annotations"][f"{NGINX}/force-ssl-redirect"] == "true"


def test_streams_are_not_buffered_by_the_ingress(mocks):
    _run(mocks)
    assert _named(mocks, INGRESS, GATEWAY).inputs["metadata"]["annotations"][f"{NGINX}/proxy-buffering"] == "off"


def test_the_gateway_may_reach_only_dns_and_the_triton_pods_grpc_port(mocks):
    _run(mocks)
    spec = _named(mocks, NETPOL, GATEWAY).inputs["spec"]
    dns, triton = spec["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert triton["ports"] == [{"port": GRPC_PORT, "protocol": "TCP"}]
    selectors = [peer["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] for peer in triton["to"]]
    assert selectors == ["t5", "gptj"]
    (ingress,) = spec["ingress"]
    assert ingress["ports"] == [{"port": GATEWAY_PORT, "protocol": "TCP"}]
    namespaces = [p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in ingress["from"]]
    assert namespaces == ["ingress-nginx", "monitoring"]


def test_triton_accepts_the_gateway_pods_on_grpc_only(mocks):
    _run(mocks)
    rules = _named(mocks, NETPOL, "t5").inputs["spec"]["ingress"]
    from_gateway = [
        r for r in rules if any(p.get("podSelector") == {"matchLabels": gateway_selector(GATEWAY)} for p in r["from"])
    ]
    assert [r["ports"] for r in from_gateway] == [[{"port": GRPC_PORT, "protocol": "TCP"}]]
    assert all({"port": HTTP_PORT, "protocol": "TCP"} not in r["ports"] for r in from_gateway)


def test_without_a_gateway_triton_admits_no_pod_of_its_namespace(mocks):
    run_program(lambda: serve("t5", T5_SMALL, ingress=secure_ingress("t5.example.com")))
    rules = _named(mocks, NETPOL, "t5").inputs["spec"]["ingress"]
    assert [p for r in rules for p in r["from"] if "namespaceSelector" not in p] == []


def test_a_disruption_budget_and_a_service_monitor_come_with_it(mocks):
    _run(mocks)
    pdb = _named(mocks, "kubernetes:policy/v1:PodDisruptionBudget", GATEWAY).inputs["spec"]
    assert pdb["selector"]["matchLabels"] == gateway_selector(GATEWAY)
    monitor = _named(mocks, "kubernetes:monitoring.coreos.com/v1:ServiceMonitor", GATEWAY).inputs["spec"]
    assert monitor["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
    assert monitor["selector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_replicas": 3, "max_replicas": 2}, "max_replicas (2) must be >= min_replicas (3)"),
        ({"deadline_seconds": 400}, "longer than the ingress timeout (300 s)"),
        ({"backends": ()}, "at least one served model"),
        ({"ingress": IngressArgs(host="example.com")}, "no TLS source"),
    ],
)
def test_bad_arguments_are_refused_before_anything_registers(mocks, overrides, message):
    def build() -> None:
        target = make_target()
        backend = GatewayBackend(T5_SMALL, serve("t5", T5_SMALL, target=target))
        args = GatewayArgs(target=target, image=TOOLS_IMAGE, backends=(backend,), ingress=secure_ingress("example.com"))
        Gateway(GATEWAY, dataclasses.replace(args, **overrides))

    with pytest.raises(UserError, match=re.escape(message)):
        run_program(build)
    assert [r for r in mocks.resources if r.typ == "triton-ft:serving:Gateway"] == []
