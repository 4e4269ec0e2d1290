"""The Gateway API edge: each model's and the OpenAI gateway's routes, and the stack-wide objects (API keys, the
credentials Secret, the API-key and rate-limit policies, the stack's Gateway, its ClusterIssuer)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pulumi
import pytest
from pulumi.runtime.rpc import _special_secret_sig, _special_sig_key

from components.common.edge import (
    AUTH_LABEL,
    AUTH_PUBLIC,
    CERT_MANAGER_USER,
    CLIENT_HEADER,
    CONNECTION_LIMIT,
    ENVOY_MEMORY_LIMIT,
    ENVOY_MEMORY_REQUEST,
    GRPC_METHODS,
    HSTS,
    PUBLIC_REQUEST_BUFFER_BYTES,
    PUBLIC_ROUTE_MESSAGE,
    AcmeIssuer,
    EdgeArgs,
    GatewayRef,
    WeightedBackend,
    acme_issuer_spec,
    api_http_route_spec,
    gateway_http01_solver,
    model_http_route_spec,
    rate_limit_policy_spec,
    triton_paths,
    validate_edge,
)
from components.common.exposure import PROBE_CLIENT, EdgeObjects, EdgeObjectsArgs
from components.common.workload import ENVOY_PROXY_PODS
from components.settings.api_keys import ApiKey
from tests.components.fixtures import NAMESPACE, T5_SMALL, make_target, serve
from tritonft.errors import UserError
from tritonft.gateway.config import GatewayConfig
from tritonft.gateway.limits import MAX_BODY_BYTES
from tritonft.synth.engine import RecordingMocks, Registered, run_program

GATEWAY = GatewayRef("test-edge")
EDGE = EdgeArgs(gateway=GATEWAY, host="m.example.com", listener="https-m-m")


def _of_kind(mocks: RecordingMocks, kind: str) -> dict[str, Registered]:
    return {r.inputs["metadata"]["name"]: r for r in mocks.resources if r.inputs.get("kind") == kind}


def _served(mocks: RecordingMocks, edge: EdgeArgs = EDGE, model: Any = T5_SMALL) -> dict[str, Registered]:
    run_program(lambda: serve("m", model, edge=edge))
    return {**_of_kind(mocks, "HTTPRoute"), **_of_kind(mocks, "GRPCRoute")}


def _edge_objects(mocks: RecordingMocks, **overrides: Any) -> dict[str, Any]:
    made: dict[str, Any] = {}

    def build() -> Any:
        args = EdgeObjectsArgs(
            target=make_target(), gateway=GATEWAY, base_host="triton.example.com", models=("t5", "gpt2"), api=True
        )
        edge = EdgeObjects("test-edge", replace(args, **overrides))
        return edge.api_keys.apply(lambda keys: made.update(keys=keys))

    run_program(build)
    return made


# -- a model's routes -----------------------------------------------------------------------------------------------


def test_a_model_gets_an_http_route_and_a_grpc_route_on_its_host_and_listener(mocks: RecordingMocks) -> None:
    routes = _served(mocks)
    assert set(routes) == {"m-http", "m-grpc"}
    for route in routes.values():
        assert route.inputs["spec"]["hostnames"] == ["m.example.com"]
        (parent,) = route.inputs["spec"]["parentRefs"]
        assert (parent["kind"], parent["name"], parent["sectionName"]) == ("Gateway", "test-edge", "https-m-m")


EXPLOIT_PATHS = (
    "/v2/repository/index",
    "/v2/repository/models/t5-small/load",
    "/v2/systemsharedmemory/region/r/register",
    "/v2/cudasharedmemory/status",
    "/v2/logging",
    "/v2/trace/setting",
    "/v2/models/t5-small/stats",
    "/v2/models/t5-small/trace/setting",
    "/v2/models/t5-small/generate",
    "/v2/models/t5-small/generate_stream",
    "/v2/models/other/infer",
    "/v2/models/t5-small/infer/x",
    "/v2/health",
    "/v2/",
)


def test_only_tritons_inference_paths_of_the_model_reach_the_edge(mocks: RecordingMocks) -> None:
    """One regular-expression match (Envoy matches it against the whole path, as Python's ``fullmatch``)."""
    (rule,) = _served(mocks)["m-http"].inputs["spec"]["rules"]
    ((match),) = rule["matches"]
    assert match["path"]["type"] == "RegularExpression"
    pattern = match["path"]["value"]
    assert all(re.fullmatch(pattern, p) for p in triton_paths(T5_SMALL.name))
    assert f"/v2/models/{T5_SMALL.name}/infer" in triton_paths(T5_SMALL.name)
    reached = [p for p in EXPLOIT_PATHS if re.fullmatch(pattern, p)]
    assert reached == [], "repository, shared memory, logging, trace, statistics, generate, other models: no route"


def test_only_the_inference_methods_of_the_grpc_service_reach_the_edge(mocks: RecordingMocks) -> None:
    """Envoy Gateway matches ``/<service>/<method>`` against the whole gRPC path."""
    (rule,) = _served(mocks)["m-grpc"].inputs["spec"]["rules"]
    ((match),) = rule["matches"]
    assert match["method"]["type"] == "RegularExpression"
    path = f"/{match['method']['service']}/{match['method']['method']}"
    routed = {m for m in GRPC_METHODS if re.fullmatch(path, f"/inference.GRPCInferenceService/{m}")}
    assert routed == set(GRPC_METHODS)
    for refused in (
        "RepositoryModelLoad",
        "SystemSharedMemoryRegister",
        "CudaSharedMemoryRegister",
        "LogSettings",
        "ModelStreamInfer",
        "ModelStatistics",
        "TraceSetting",
    ):
        assert not re.fullmatch(path, f"/inference.GRPCInferenceService/{refused}"), refused
    assert not re.fullmatch(path, "/inferenceXGRPCInferenceService/ModelInfer"), "the service's dot is literal"


def test_routes_go_to_the_models_service_ports(mocks: RecordingMocks) -> None:
    routes = _served(mocks)
    (http,) = routes["m-http"].inputs["spec"]["rules"][0]["backendRefs"]
    (grpc,) = routes["m-grpc"].inputs["spec"]["rules"][0]["backendRefs"]
    assert (http["name"], http["port"], grpc["name"], grpc["port"]) == ("m", 8000, "m", 8001)


def test_a_long_generation_is_not_cut_at_envoys_15_second_default(mocks: RecordingMocks) -> None:
    rule = _served(mocks, replace(EDGE, request_timeout_seconds=900))["m-http"].inputs["spec"]["rules"][0]
    assert rule["timeouts"] == {"request": "900s"}


def test_every_answer_of_a_tls_host_carries_hsts_and_a_plain_http_local_host_none() -> None:
    for spec in (
        model_http_route_spec(EDGE, "m", [WeightedBackend("m")]),
        api_http_route_spec(EDGE, "gw", 8080, "/v1"),
    ):
        (rule,) = spec["rules"]
        (hsts,) = rule["filters"]
        assert hsts["type"] == "ResponseHeaderModifier"
        assert hsts["responseHeaderModifier"]["set"] == [{"name": "Strict-Transport-Security", "value": HSTS}]
    plain = model_http_route_spec(replace(EDGE, tls=False), "m", [WeightedBackend("m")])
    assert "filters" not in plain["rules"][0]


def test_every_route_grpc_included_gets_the_request_timeout_from_the_traffic_policy() -> None:
    """GRPCRoute has no timeouts field: Envoy Gateway's BackendTrafficPolicy sets it (its grpc-timeouts task); on the
    stack's Gateway the policy covers every route of it, on a cluster's own every labelled route of both kinds."""
    policy = rate_limit_policy_spec(600, 256, GATEWAY, 900)
    assert policy["timeout"] == {"http": {"requestTimeout": "900s"}}
    assert policy["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "test-edge"}]
    on_theirs = rate_limit_policy_spec(600, 256, None, 900)
    assert {s["kind"] for s in on_theirs["targetSelectors"]} == {"HTTPRoute", "GRPCRoute"}


def test_every_request_body_is_held_to_the_gateways_own_cap_at_the_edge() -> None:
    """An encoder's own routes take text its tokenizer reads whole: the edge refuses (413) a body larger than the
    OpenAI gateway would read, on every route the policy covers."""
    assert GatewayConfig("", ()).max_body_bytes == MAX_BODY_BYTES
    for gateway in (GATEWAY, None):
        assert rate_limit_policy_spec(600, 256, gateway)["requestBuffer"] == {"limit": str(MAX_BODY_BYTES)}


def test_weighted_backends_split_the_traffic_for_a_canary() -> None:
    spec = model_http_route_spec(EDGE, "m", [WeightedBackend("m", 90), WeightedBackend("m-canary", 10)])
    refs = spec["rules"][0]["backendRefs"]
    assert [(r["name"], r["weight"]) for r in refs] == [("m", 90), ("m-canary", 10)]


def test_routes_are_labelled_for_the_api_key_policy_unless_auth_is_off(mocks: RecordingMocks) -> None:
    assert all(r.inputs["metadata"]["labels"][AUTH_LABEL] == "api-key" for r in _served(mocks).values())


def test_a_plain_http_local_edge_has_no_grpc_route_and_no_auth_label(mocks: RecordingMocks) -> None:
    plain = replace(EDGE, tls=False, api_key_auth=False, listener=None)
    routes = _served(mocks, plain)
    assert set(routes) == {"m-http"}
    assert AUTH_LABEL not in routes["m-http"].inputs["metadata"]["labels"]
    assert "sectionName" not in routes["m-http"].inputs["spec"]["parentRefs"][0]


def test_the_public_endpoints_are_the_edge_hosts(mocks: RecordingMocks) -> None:
    seen: list[tuple[str, str]] = []

    def build() -> Any:
        svc = serve("m", T5_SMALL, edge=EDGE)
        return pulumi.Output.all(svc.endpoint, svc.grpc_endpoint).apply(lambda v: seen.append((v[0], v[1])))

    run_program(build)
    assert seen == [("https://m.example.com", "m.example.com:443")]


def test_only_the_edge_proxies_pods_reach_tritons_ports(mocks: RecordingMocks) -> None:
    run_program(lambda: serve("m", T5_SMALL, edge=EDGE))
    (policy,) = [p for p in mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy") if p.name == "m-netpol"]
    (serving,) = [r for r in policy.inputs["spec"]["ingress"] if {"port": 8000, "protocol": "TCP"} in r["ports"]]
    (peer,) = serving["from"]
    assert peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == "envoy-gateway-system"
    assert peer["podSelector"]["matchLabels"] == ENVOY_PROXY_PODS


def test_no_ingress_is_made_on_the_gateway_edge(mocks: RecordingMocks) -> None:
    _served(mocks)
    assert mocks.of_type("kubernetes:networking.k8s.io/v1:Ingress") == []


def test_routes_wait_for_the_charts_that_install_their_crds(mocks: RecordingMocks) -> None:
    routes = _served(mocks)
    (chart,) = mocks.of_type("kubernetes:helm.sh/v4:Chart")
    assert all(chart.urn in r.depends_on for r in routes.values())


def test_a_host_that_is_no_dns_name_is_refused_naming_the_field(mocks: RecordingMocks) -> None:
    assert validate_edge(replace(EDGE, host="localhost")) == [
        "edge.host 'localhost' is not a DNS name: give the endpoint's public host name"
    ]
    with pytest.raises(UserError, match=r"edge\.host"):
        run_program(lambda: serve("m", T5_SMALL, edge=replace(EDGE, host="localhost")))


def test_the_exact_paths_are_the_models_own() -> None:
    assert all(
        p in ("/v2", "/v2/health/live", "/v2/health/ready") or p.startswith("/v2/models/t5/") or p == "/v2/models/t5"
        for p in triton_paths("t5")
    )


# -- the stack-wide objects ---------------------------------------------------------------------------------------


def test_every_client_gets_a_generated_key_the_probes_included(mocks: RecordingMocks) -> None:
    made = _edge_objects(mocks, keys=(ApiKey(PROBE_CLIENT), ApiKey("webapp")))
    assert set(made["keys"]) == {"probe", "webapp"}
    assert made["keys"]["probe"] != made["keys"]["webapp"]
    passwords = mocks.of_type("random:index/randomPassword:RandomPassword")
    assert {p.inputs["length"] for p in passwords} == {48}
    assert all(p.inputs["special"] is False for p in passwords)


def test_a_rotation_replaces_every_key_and_nothing_else_does(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, rotation=3)
    passwords = mocks.of_type("random:index/randomPassword:RandomPassword")
    assert [p.inputs["keepers"] for p in passwords] == [{"rotation": "3"}]


def test_the_keys_are_a_secret_output_and_the_credentials_secret_is_envoy_gateways_format(
    mocks: RecordingMocks,
) -> None:
    made = _edge_objects(mocks, keys=(ApiKey(PROBE_CLIENT), ApiKey("webapp")))
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    data = secret.inputs["stringData"]
    assert data[_special_sig_key] == _special_secret_sig, "the whole map travels as a Pulumi secret"
    assert data["value"] == made["keys"], "data key = client name, value = that client's key"
    assert all(key.startswith("sk-tft-") for key in made["keys"].values())
    assert secret.inputs["type"] == "Opaque"


def _api_key_policy(mocks: RecordingMocks) -> Registered:
    (policy,) = [p for p in _of_kind(mocks, "SecurityPolicy").values() if "apiKeyAuth" in p.inputs["spec"]]
    return policy


def test_the_security_policy_checks_the_bearer_key_and_forwards_the_key_id(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    auth = _api_key_policy(mocks).inputs["spec"]["apiKeyAuth"]
    assert auth["credentialRefs"] == [{"group": "", "kind": "Secret", "name": "test-edge-api-keys"}]
    assert auth["extractFrom"] == [{"headers": ["authorization"]}]
    assert (auth["forwardClientIDHeader"], auth["sanitize"]) == (CLIENT_HEADER, True)


def test_on_the_stacks_gateway_the_key_is_asked_of_every_route_a_new_one_included(mocks: RecordingMocks) -> None:
    """Closed by default (issue 51): the policy targets the Gateway, not routes by label."""
    _edge_objects(mocks)
    spec = _api_key_policy(mocks).inputs["spec"]
    assert spec["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "test-edge"}]
    assert "targetSelectors" not in spec
    traffic = _of_kind(mocks, "BackendTrafficPolicy")["test-edge-rate-limit"]
    assert traffic.inputs["spec"]["targetRefs"] == spec["targetRefs"]


def test_only_routes_labelled_public_are_exempted_by_a_policy_that_asks_nothing(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    (public,) = [p for p in _of_kind(mocks, "SecurityPolicy").values() if "apiKeyAuth" not in p.inputs["spec"]]
    assert public.inputs["spec"] == {
        "targetSelectors": [
            {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "matchLabels": {AUTH_LABEL: AUTH_PUBLIC}}
        ]
    }


def test_the_https_redirect_and_the_acme_challenges_are_the_public_routes(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    routes = _of_kind(mocks, "HTTPRoute")
    assert routes["test-edge-https-redirect"].inputs["metadata"]["labels"][AUTH_LABEL] == AUTH_PUBLIC
    assert not any("backendRefs" in r for r in routes["test-edge-https-redirect"].inputs["spec"]["rules"])
    redirects = [
        f["requestRedirect"] for r in routes["test-edge-https-redirect"].inputs["spec"]["rules"] for f in r["filters"]
    ]
    assert redirects == [{"scheme": "https", "statusCode": 301}], "the only redirect the admission policy admits"
    challenge = gateway_http01_solver(GATEWAY)["http01"]["gatewayHTTPRoute"]
    assert challenge["labels"] == {AUTH_LABEL: AUTH_PUBLIC}, "cert-manager labels each challenge route so"


def test_the_public_routes_buffer_1_kib_not_the_gateways_1_mib(mocks: RecordingMocks) -> None:
    """No key guards them, so no auth refuses a body before the buffer holds it (review S3): their own policy, on
    the exemption's label, replaces the Gateway's (no ``mergeType``: the most specific one alone applies)."""
    _edge_objects(mocks)
    policies = _of_kind(mocks, "BackendTrafficPolicy")
    public = policies["test-edge-public-routes"].inputs["spec"]
    assert public == {
        "targetSelectors": [
            {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "matchLabels": {AUTH_LABEL: AUTH_PUBLIC}}
        ],
        "requestBuffer": {"limit": "1024"},
    }
    assert "mergeType" not in public, "merged, the Gateway's 1 MiB would not be replaced for certain"
    gateway_wide = policies["test-edge-rate-limit"].inputs["spec"]["requestBuffer"]["limit"]
    assert PUBLIC_REQUEST_BUFFER_BYTES == 1024 < int(gateway_wide) == MAX_BODY_BYTES


def test_each_listener_of_the_stacks_gateway_holds_a_bounded_number_of_connections(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    (policy,) = _of_kind(mocks, "ClientTrafficPolicy").values()
    assert policy.inputs["spec"] == {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "test-edge"}],
        "connection": {"connectionLimit": {"value": CONNECTION_LIMIT}},
    }
    assert CONNECTION_LIMIT == 1024


def test_the_proxy_container_asks_memory_and_may_not_exceed_a_ceiling(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    (proxy,) = _of_kind(mocks, "EnvoyProxy").values()
    deployment = proxy.inputs["spec"]["provider"]["kubernetes"]["envoyDeployment"]
    assert deployment["container"]["resources"] == {
        "requests": {"cpu": "100m", "memory": "512Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert (ENVOY_MEMORY_REQUEST, ENVOY_MEMORY_LIMIT) == ("512Mi", "1Gi")
    assert deployment["replicas"] == 2 and deployment["pod"]["topologySpreadConstraints"], "the rest kept"


def test_no_traffic_limits_of_the_stacks_own_are_put_on_a_gateway_it_does_not_make(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, make_gateway=False)
    assert not _of_kind(mocks, "ClientTrafficPolicy")
    assert list(_of_kind(mocks, "BackendTrafficPolicy")) == ["test-edge-rate-limit"]


ADMISSION = "kubernetes:admissionregistration.k8s.io/v1:"


def test_the_cluster_refuses_public_routes_but_the_stacks_in_the_stacks_namespace(mocks: RecordingMocks) -> None:
    """The exemption is held by the API server too (its behaviour: tests/system/controlplane/
    test_public_route_admission.py), bound to the namespace whose routes the exemption selects."""
    _edge_objects(mocks)
    (policy,) = [r for r in mocks.resources if r.typ == f"{ADMISSION}ValidatingAdmissionPolicy"]
    (binding,) = [r for r in mocks.resources if r.typ == f"{ADMISSION}ValidatingAdmissionPolicyBinding"]
    assert policy.inputs["spec"]["validations"][0]["message"] == PUBLIC_ROUTE_MESSAGE
    assert binding.inputs["spec"] == {
        "policyName": policy.inputs["metadata"]["name"],
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}},
    }


def test_the_solver_routes_author_is_the_cert_manager_the_stack_installs() -> None:
    """The admission policy admits a solver route only from this account: the chart's release in its namespace."""
    from components.platform.aws.charts import CERT_MANAGER

    assert f"system:serviceaccount:{CERT_MANAGER.namespace}:{CERT_MANAGER.release}" == CERT_MANAGER_USER


def test_the_admission_policy_is_made_only_on_clusters_whose_api_server_serves_it() -> None:
    """``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy is GA from Kubernetes 1.30 (absent from 1.29).
    The stack makes it only with its own Gateway: on a cluster it builds, whose every accepted EKS minor is 1.30 or
    later (this test), never on an existing cluster, whose Gateway API edge must name the cluster's own Gateway
    (rule ``gateway-edge-on-existing-cluster``: tests/components/settings/test_rules.py) and so gets no policy
    (the next test)."""
    from components.settings.eks import EKS_VERSIONS

    assert min(tuple(int(n) for n in minor.split(".")) for minor in EKS_VERSIONS) >= (1, 30)


def test_no_admission_policy_is_made_for_a_gateway_the_stack_does_not_make(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, make_gateway=False)
    assert not [r for r in mocks.resources if r.typ.startswith(ADMISSION)]


def test_on_a_clusters_own_gateway_the_policies_select_the_stacks_labelled_routes(mocks: RecordingMocks) -> None:
    """The stack may not cover another's Gateway whole (other routes share it; it may be in another namespace)."""
    _edge_objects(mocks, make_gateway=False)
    spec = _api_key_policy(mocks).inputs["spec"]
    assert "targetRefs" not in spec
    assert {s["kind"] for s in spec["targetSelectors"]} == {"HTTPRoute", "GRPCRoute"}
    assert all(s["matchLabels"] == {AUTH_LABEL: "api-key"} for s in spec["targetSelectors"])
    assert len(_of_kind(mocks, "SecurityPolicy")) == 1, "no exemption policy on a Gateway the stack does not make"


def test_one_rate_limit_rule_gives_every_key_its_own_bucket(mocks: RecordingMocks) -> None:
    """One rule whatever the number of keys (Envoy Gateway allows 16 local rules), a key added later included."""
    _edge_objects(mocks, keys=(ApiKey(PROBE_CLIENT), ApiKey("webapp")), requests_per_minute=120)
    policy = _of_kind(mocks, "BackendTrafficPolicy")["test-edge-rate-limit"]
    (rule,) = policy.inputs["spec"]["rateLimit"]["local"]["rules"]
    assert rule["clientSelectors"] == [{"headers": [{"name": CLIENT_HEADER, "type": "Distinct"}]}]
    assert rule["limit"] == {"requests": 120, "unit": "Minute"}


def test_with_the_rate_limit_service_a_keys_bucket_is_shared_by_every_route_and_replica(mocks: RecordingMocks) -> None:
    """Envoy Gateway's global limit with ``shared: true`` on the Gateway-wide policy: one bucket per key per stack."""
    _edge_objects(mocks, global_rate_limit=True, requests_per_minute=120)
    policy = _of_kind(mocks, "BackendTrafficPolicy")["test-edge-rate-limit"]
    limits = policy.inputs["spec"]["rateLimit"]
    assert "local" not in limits
    (rule,) = limits["global"]["rules"]
    assert rule["shared"] is True
    assert rule["clientSelectors"] == [{"headers": [{"name": CLIENT_HEADER, "type": "Distinct"}]}]
    assert policy.inputs["spec"]["targetRefs"][0]["kind"] == "Gateway"


def test_concurrent_requests_to_a_backend_are_capped_over_http1_and_http2(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, max_concurrent_requests=64)
    policy = _of_kind(mocks, "BackendTrafficPolicy")["test-edge-rate-limit"]
    assert policy.inputs["spec"]["circuitBreaker"] == {
        "maxConnections": 64,
        "maxParallelRequests": 64,
        "maxPendingRequests": 64,
    }


def test_a_clients_second_key_has_its_own_id_and_its_default_key_keeps_its_resource(mocks: RecordingMocks) -> None:
    """Adding a key (the overlap of a rotation) replaces none: the default key's RandomPassword keeps its name."""
    made = _edge_objects(mocks, keys=(ApiKey(PROBE_CLIENT), ApiKey("webapp"), ApiKey("webapp", "k2")))
    assert set(made["keys"]) == {"probe", "webapp", "webapp.k2"}
    assert made["keys"]["webapp"] != made["keys"]["webapp.k2"]
    names = {p.name for p in mocks.of_type("random:index/randomPassword:RandomPassword")}
    assert names == {
        "test-edge-apikey-probe-random",
        "test-edge-apikey-webapp-random",
        "test-edge-apikey-webapp.k2-random",
    }


def test_the_stacks_gateway_has_one_https_listener_per_host_with_its_own_certificate(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, cluster_issuer="letsencrypt-prod")
    (gateway,) = _of_kind(mocks, "Gateway").values()
    listeners = gateway.inputs["spec"]["listeners"]
    https = {lst["hostname"]: lst for lst in listeners if lst["protocol"] == "HTTPS"}
    assert set(https) == {"triton.example.com", "t5.triton.example.com", "gpt2.triton.example.com"}
    secrets = [lst["tls"]["certificateRefs"][0]["name"] for lst in https.values()]
    assert len(set(secrets)) == 3
    assert [lst["port"] for lst in listeners if lst["protocol"] == "HTTP"] == [80]
    assert gateway.inputs["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] == "letsencrypt-prod"
    assert gateway.inputs["spec"]["gatewayClassName"] == "envoy-gateway"


def test_the_proxies_log_the_authenticated_client_never_the_key(mocks: RecordingMocks) -> None:
    _edge_objects(mocks)
    (proxy,) = _of_kind(mocks, "EnvoyProxy").values()
    (setting,) = proxy.inputs["spec"]["telemetry"]["accessLog"]["settings"]
    text = setting["format"]["text"]
    assert f"%REQ({CLIENT_HEADER.upper()})%" in text
    assert "AUTHORIZATION" not in text.upper()


def test_the_proxies_drain_as_long_as_the_longest_request_the_edge_allows(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, request_timeout_seconds=890)
    (proxy,) = _of_kind(mocks, "EnvoyProxy").values()
    assert proxy.inputs["spec"]["shutdown"] == {"drainTimeout": "890s"}


def test_on_the_users_own_gateway_nothing_but_keys_and_policies_is_made(mocks: RecordingMocks) -> None:
    _edge_objects(mocks, make_gateway=False)
    kinds = {r.inputs.get("kind") for r in mocks.resources if r.inputs.get("kind")}
    assert "Gateway" not in kinds and "EnvoyProxy" not in kinds
    assert {"SecurityPolicy", "BackendTrafficPolicy"} <= kinds


def test_the_stack_makes_its_acme_issuer_on_lets_encrypts_production_directory() -> None:
    solver = gateway_http01_solver(GATEWAY)
    spec = acme_issuer_spec(AcmeIssuer("letsencrypt-prod", "ops@example.com"), solver)
    assert spec["acme"]["server"] == "https://acme-v02.api.letsencrypt.org/directory"
    (answer,) = spec["acme"]["solvers"]
    (parent,) = answer["http01"]["gatewayHTTPRoute"]["parentRefs"]
    assert (parent["name"], parent["sectionName"]) == ("test-edge", "http")


def test_the_issuer_is_made_with_the_edge_objects(mocks: RecordingMocks) -> None:
    issuer = AcmeIssuer("letsencrypt-prod", "ops@example.com")
    _edge_objects(mocks, issuer=issuer, issuer_solver=gateway_http01_solver(GATEWAY))
    (made,) = _of_kind(mocks, "ClusterIssuer").values()
    assert made.inputs["spec"]["acme"]["email"] == "ops@example.com"
    assert "namespace" not in made.inputs["metadata"]
