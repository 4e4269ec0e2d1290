"""The promotion gate in the plan: between a candidate's judgement and the switch, with the routes' weights the
phases give and the inputs it runs on (asserted on the captured resource inputs and options)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi

from components.common.edge import EdgeArgs, GatewayRef
from components.serving.canary import PATCH_FORCE
from components.serving.promotion import VERSION_LABEL, Candidate
from components.serving.promotion_gate import GateConfig
from components.serving.server_spec import LATENCY_SUMMARY_FLAG
from components.settings.model import CanarySettings
from tests.components.fixtures import T5_SMALL, serve, triton_container
from tritonft.synth.engine import RecordingMocks, Registered, run_program

GATE = "pulumi-python:dynamic/tritonft:PromotionGate"
HANDOVER = "pulumi-python:dynamic/tritonft:PromotionHandover"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
JUDGE = "tests:judge:Judge"
SERVICE = "kubernetes:core/v1:Service"
HTTPROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
GRPCROUTE = "kubernetes:gateway.networking.k8s.io/v1:GRPCRoute"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
EDGE = EdgeArgs(gateway=GatewayRef("edge"), host="m.example.com", listener="https-m-m")
CANARY = CanarySettings(enabled=True, weight_percent=20, duration_s=120, min_requests=10)


def _judge(seen: list[Candidate]) -> Any:
    def judge(candidate: Candidate, opts: pulumi.ResourceOptions) -> pulumi.Resource:
        seen.append(candidate)
        return pulumi.CustomResource(JUDGE, f"judge-{candidate.version}", {"version": candidate.version}, opts)

    return judge


def _serve(mocks: RecordingMocks, **kwargs: Any) -> Candidate:
    seen: list[Candidate] = []
    run_program(lambda: serve("m", T5_SMALL, judge=_judge(seen), **kwargs))
    (candidate,) = seen
    return candidate


def _one(mocks: RecordingMocks, typ: str) -> Registered:
    (res,) = mocks.of_type(typ)
    return res


def _routes(mocks: RecordingMocks) -> dict[str, Registered]:
    return {r.inputs["metadata"]["name"]: r for r in [*mocks.of_type(HTTPROUTE), *mocks.of_type(GRPCROUTE)]}


def test_the_gate_runs_after_the_judgement_and_the_rollout(mocks):
    candidate = _serve(mocks)
    gate = _one(mocks, GATE)
    assert gate.name == f"m-promotion-{candidate.version}"
    assert _one(mocks, JUDGE).urn in gate.depends_on
    assert _one(mocks, "pulumi-python:dynamic/tritonft:RolloutWatch").urn in gate.depends_on


def test_the_user_facing_services_switch_only_after_the_gate(mocks):
    _serve(mocks)
    gate = _one(mocks, GATE).urn
    services = {s.inputs["metadata"]["name"]: s for s in mocks.of_type(SERVICE)}
    for name in ("m", "m-pods"):
        assert gate in services[name].depends_on, name


def test_the_gate_scales_the_candidate_between_the_autoscalers_bounds(mocks):
    candidate = _serve(mocks, min_replicas=2)
    gate = _one(mocks, GATE).inputs
    assert (gate["candidate_deployment"], gate["stable_service"]) == (candidate.service, "m")
    assert (gate["min_replicas"], gate["max_replicas"]) == (2, 3)
    assert gate["replicas_deadline_s"] > 0


def test_without_canary_the_gate_has_no_phase_and_the_routes_no_gate_annotations(mocks):
    _serve(mocks, edge=EDGE)
    gate = _one(mocks, GATE).inputs
    assert gate.get("canary") is None and gate["routes"] == []
    assert "annotations" not in _routes(mocks)["m-http"].inputs["metadata"]
    assert LATENCY_SUMMARY_FLAG not in triton_container(_one(mocks, DEPLOYMENT))["command"]


def test_with_canary_the_gate_weights_both_model_routes_with_the_stacks_policy(mocks):
    candidate = _serve(mocks, edge=EDGE, canary=CANARY)
    gate = _one(mocks, GATE).inputs
    assert gate["routes"] == [["HTTPRoute", "m-http"], ["GRPCRoute", "m-grpc"]]
    assert gate["canary"]["weight_percent"] == 20 and gate["canary"]["duration_s"] == 120
    assert gate["candidate_service"] == candidate.service


def test_the_declared_routes_are_the_stable_phase_the_user_facing_service_alone(mocks):
    _serve(mocks, edge=EDGE, canary=CANARY)
    routes = _routes(mocks)
    for name in ("m-http", "m-grpc"):
        assert [(b["name"], b["weight"]) for b in routes[name].inputs["spec"]["rules"][0]["backendRefs"]] == [
            ("m", 1)
        ], name


def test_with_canary_a_new_version_reapplies_the_routes_over_what_the_gate_wrote(mocks):
    candidate = _serve(mocks, edge=EDGE, canary=CANARY)
    for name in ("m-http", "m-grpc"):
        annotations = _routes(mocks)[name].inputs["metadata"]["annotations"]
        assert annotations == {PATCH_FORCE: "true", VERSION_LABEL: candidate.version}, name


def test_with_canary_triton_exports_the_latency_summary_the_phase_compares(mocks):
    _serve(mocks, edge=EDGE, canary=CANARY)
    assert LATENCY_SUMMARY_FLAG in triton_container(_one(mocks, DEPLOYMENT))["command"]


def test_a_canary_without_the_gateway_api_edge_runs_no_phase(mocks):
    _serve(mocks, canary=CANARY)
    gate = _one(mocks, GATE).inputs
    assert gate.get("canary") is None and gate["routes"] == []


def test_the_gate_reads_its_inputs_back_as_the_provider_gets_them_numbers_as_floats():
    props = {
        "namespace": "triton",
        "model": "m",
        "version": "abcd1234",
        "stable_service": "m",
        "candidate_service": "m-abcd1234",
        "candidate_deployment": "m-abcd1234",
        "routes": [["HTTPRoute", "m-http"]],
        "min_replicas": 1.0,
        "max_replicas": 3.0,
        "replicas_deadline_s": 600.0,
        "canary": {**dataclasses.asdict(CANARY), "weight_percent": 20.0, "duration_s": 120.0, "min_requests": 10.0},
    }
    config = GateConfig.of(props)
    assert config.canary == CANARY
    assert isinstance(config.canary.weight_percent, int) and isinstance(config.max_replicas, int)
    assert config.routes == (("HTTPRoute", "m-http"),)


def test_the_handover_runs_after_the_switch_and_the_autoscalers_move_to_the_new_version(mocks):
    candidate = _serve(mocks)
    handover = _one(mocks, HANDOVER)
    assert handover.name == f"m-handover-{candidate.version}"
    services = {s.inputs["metadata"]["name"]: s for s in mocks.of_type(SERVICE)}
    assert {services["m"].urn, services["m-pods"].urn, _one(mocks, HPA).urn} <= set(handover.depends_on)
    assert handover.inputs["candidate_deployment"] == f"m-{candidate.version}"
    assert handover.inputs["stable_service"] == "m"


def test_a_model_that_rolls_in_place_has_no_handover(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    assert mocks.of_type(HANDOVER) == []


def test_a_new_versions_rollout_is_watched_at_one_pod_since_its_autoscaler_moves_to_it_only_with_the_switch(mocks):
    _serve(mocks, min_replicas=2)
    watch = _one(mocks, "pulumi-python:dynamic/tritonft:RolloutWatch")
    handover = _one(mocks, HANDOVER)
    assert watch.inputs["min_replicas"] == 1
    assert handover.inputs["min_replicas"] == 2, "the handover brings it to replicasMin after the switch"
