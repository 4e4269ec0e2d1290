"""Judged promotion: each serving version has its own Deployment and candidate Service, is judged, and only then do
the user-facing Services select it; a model without room for a candidate rolls in place and is judged right after its
roll (asserted on the captured resource inputs and options)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pulumi
import pytest

from components.common.edge import EdgeArgs, GatewayRef
from components.common.layout import DNS_LABEL_MAX
from components.serving.promotion import (
    VERSION_LABEL,
    Candidate,
    judged_after_its_roll,
    room_for_a_candidate,
    serving_version,
    versioned_name,
)
from components.serving.service import TritonService
from components.settings.capacity import Rollout, fixed_rollout
from tests.components.fixtures import DEPLOYMENT, GPTJ_6B, NAMESPACE, T5_SMALL, secure_ingress, serve
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, run_program

SERVICE = "kubernetes:core/v1:Service"
HTTPROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
JUDGE = "tests:judge:Judge"
EDGE = EdgeArgs(gateway=GatewayRef("edge"), host="m.example.com", listener="https-m-m")


def _judge(seen: list[Candidate], made: list[pulumi.Resource] | None = None) -> Any:
    def judge(candidate: Candidate, opts: pulumi.ResourceOptions) -> pulumi.Resource:
        seen.append(candidate)
        inputs = {"service": candidate.service, "version": candidate.version, "url": candidate.internal_url}
        resource = pulumi.CustomResource(JUDGE, f"judge-{candidate.version}", inputs, opts)
        if made is not None:
            made.append(resource)
        return resource

    return judge


def _serve(mocks: RecordingMocks, model: ModelSpec = T5_SMALL, **kwargs: Any) -> list[Candidate]:
    seen: list[Candidate] = []
    run_program(lambda: serve("m", model, judge=_judge(seen), **kwargs))
    return seen


def _deployment(mocks: RecordingMocks) -> Registered:
    (deployment,) = mocks.of_type(DEPLOYMENT)
    return deployment


def _services(mocks: RecordingMocks) -> dict[str, Registered]:
    return {s.inputs["metadata"]["name"]: s for s in mocks.of_type(SERVICE)}


def _urn(mocks: RecordingMocks, typ: str) -> str:
    (res,) = mocks.of_type(typ)
    return res.urn


def test_the_version_changes_with_the_repository_the_image_pins_and_the_triton_release():
    first = serving_version("/models/repositories/m/aaaa", "pins-1", "24.05")
    assert serving_version("/models/repositories/m/bbbb", "pins-1", "24.05") != first
    assert serving_version("/models/repositories/m/aaaa", "pins-2", "24.05") != first
    assert serving_version("/models/repositories/m/aaaa", "pins-1", "24.08") != first
    assert serving_version("/models/repositories/m/aaaa", "pins-1", "24.05") == first


def test_a_versioned_name_keeps_the_whole_version_within_a_dns_label():
    name = versioned_name("x" * 80, "0123abcd")
    assert len(name) <= DNS_LABEL_MAX and name.endswith("-0123abcd")


def test_the_deployment_is_named_and_labelled_by_the_serving_version(mocks):
    (candidate,) = _serve(mocks)
    deployment = _deployment(mocks)
    assert deployment.name == f"m-deployment-{candidate.version}"
    assert deployment.inputs["metadata"]["name"] == f"m-{candidate.version}"
    assert deployment.inputs["spec"]["selector"]["matchLabels"][VERSION_LABEL] == candidate.version
    assert deployment.inputs["spec"]["template"]["metadata"]["labels"][VERSION_LABEL] == candidate.version


def test_a_new_revision_is_a_new_deployment_beside_the_old_one_not_a_replacement(mocks):
    _serve(mocks)
    old = _deployment(mocks)
    mocks.resources.clear()
    _serve(mocks, replace(T5_SMALL, revision="f" * 40))
    new = _deployment(mocks)
    assert new.urn != old.urn  # another resource: Pulumi creates it and deletes the old one only at the end of `up`
    assert new.inputs["metadata"]["name"] != old.inputs["metadata"]["name"]


def test_what_does_not_change_the_served_model_keeps_the_version(mocks):
    _serve(mocks, autoscaler="none", min_replicas=1)
    first = _deployment(mocks).urn
    mocks.resources.clear()
    _serve(mocks, autoscaler="none", min_replicas=2)
    assert _deployment(mocks).urn == first


def test_a_new_server_image_is_a_new_version(mocks):
    (first,) = _serve(mocks, image_pins="triton 24.05")
    mocks.resources.clear()
    (second,) = _serve(mocks, image_pins="triton 24.08")
    assert first.version != second.version


def test_the_candidate_service_selects_only_the_new_versions_pods(mocks):
    (candidate,) = _serve(mocks)
    service = _services(mocks)[candidate.service]
    pod_labels = _deployment(mocks).inputs["spec"]["template"]["metadata"]["labels"]
    selector = service.inputs["spec"]["selector"]
    assert selector[VERSION_LABEL] == candidate.version
    assert all(pod_labels[k] == v for k, v in selector.items())


def test_the_user_facing_services_select_the_judged_version_and_wait_for_its_judge(mocks):
    (candidate,) = _serve(mocks)
    judge = _urn(mocks, JUDGE)
    services = _services(mocks)
    for name in ("m", "m-pods"):
        assert services[name].inputs["spec"]["selector"][VERSION_LABEL] == candidate.version, name
        assert judge in services[name].depends_on, name


def test_the_judge_waits_for_the_rollout_and_the_candidate_service(mocks):
    (candidate,) = _serve(mocks)
    (judge,) = mocks.of_type(JUDGE)
    candidate_service = _services(mocks)[candidate.service]
    assert _urn(mocks, "pulumi-python:dynamic/tritonft:RolloutWatch") in judge.depends_on
    assert candidate_service.urn in judge.depends_on


def test_without_a_judge_the_model_rolls_in_place_under_its_old_names(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    deployment = _deployment(mocks)
    assert (deployment.name, deployment.inputs["metadata"]["name"]) == ("m-deployment", "m")
    assert VERSION_LABEL not in _services(mocks)["m"].inputs["spec"]["selector"]


NO_ROOM = Rollout(0, 1, "no free node for a surge pod at replicasMax: replace one pod at a time")


def test_without_room_for_a_candidate_the_model_rolls_in_place_under_its_old_names(mocks):
    (judged,) = _serve(mocks, rollout=NO_ROOM)
    deployment = _deployment(mocks)
    assert (deployment.name, deployment.inputs["metadata"]["name"]) == ("m-deployment", "m")
    assert deployment.inputs["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    assert VERSION_LABEL not in _services(mocks)["m"].inputs["spec"]["selector"]
    assert judged.in_place and set(_services(mocks)) == {"m", "m-pods"}, "no candidate Service"


def test_a_version_that_rolled_in_place_is_judged_after_its_rollout_watch_at_the_user_facing_service(mocks):
    (judged,) = _serve(mocks, rollout=NO_ROOM)
    (judge,) = mocks.of_type(JUDGE)
    assert judge.inputs["service"] == judged.service == "m"
    assert judge.inputs["url"] == f"http://m.{NAMESPACE}.svc:8000"
    assert _urn(mocks, "pulumi-python:dynamic/tritonft:RolloutWatch") in judge.depends_on
    assert _services(mocks)["m"].urn in judge.depends_on
    policies = {p.inputs["metadata"]["name"]: p.urn for p in mocks.of_type(NETPOL)}
    assert {policies["m-judge"], policies["m"]} <= set(judge.depends_on), "both policies exist before its Job runs"


def test_a_version_judged_in_place_is_the_serving_version_of_what_the_deployment_serves(mocks):
    (first,) = _serve(mocks, rollout=NO_ROOM, image_pins="triton 24.05")
    deployment = _deployment(mocks).urn
    mocks.resources.clear()
    (second,) = _serve(mocks, replace(T5_SMALL, revision="f" * 40), rollout=NO_ROOM, image_pins="triton 24.05")
    mocks.resources.clear()
    (third,) = _serve(mocks, rollout=NO_ROOM, image_pins="triton 24.08")
    assert len({first.version, second.version, third.version}) == 3, "a new revision or image is judged again"
    assert _deployment(mocks).urn == deployment, "the same Deployment rolls in place"
    assert first.judge_pods.items() >= {**JUDGE_PODS, VERSION_LABEL: first.version}.items()


def test_the_gateways_configuration_waits_for_the_judge_of_a_version_that_rolled_in_place(mocks):
    seen: list[Candidate] = []
    made: list[pulumi.Resource] = []
    services: list[TritonService] = []
    run_program(lambda: services.append(serve("m", T5_SMALL, judge=_judge(seen, made), rollout=NO_ROOM)))
    (service,), (judge,) = services, made
    assert judge in service.switched
    assert service.judged_in_place is not None and service.candidate is None


def test_a_version_judged_in_place_follows_its_rollout_watch_so_a_revert_to_it_is_judged_again(mocks):
    seen: list[Candidate] = []
    services: list[TritonService] = []
    run_program(lambda: services.append(serve("m", T5_SMALL, judge=_judge(seen), rollout=NO_ROOM)))
    (service,), (judged,) = services, seen
    assert judged.rolled is service.rollout_watch.generation


def test_a_model_without_a_judge_is_not_judged_in_place(mocks):
    run_program(lambda: serve("m", T5_SMALL, rollout=NO_ROOM))
    assert mocks.of_type(JUDGE) == []


def test_only_a_model_without_room_that_keeps_a_pod_is_judged_right_after_its_roll():
    assert judged_after_its_roll(NO_ROOM, min_replicas=1)
    assert not judged_after_its_roll(NO_ROOM, min_replicas=0), "asleep at zero: the probe wakes and judges it"
    assert not judged_after_its_roll(Rollout(1, 0, "a surge pod fits"), min_replicas=1), "judged as a candidate"
    assert not judged_after_its_roll(fixed_rollout(), min_replicas=1), "an unknown cluster: judged as a candidate"


def test_a_surge_pod_with_room_or_an_unknown_cluster_leaves_room_for_a_candidate():
    assert room_for_a_candidate(Rollout(1, 0, "a surge pod fits"))
    assert room_for_a_candidate(fixed_rollout())
    assert not room_for_a_candidate(Rollout(0, 1, "no free node for a surge pod at replicasMax"))


def test_the_autoscaler_moves_to_the_new_version_with_the_traffic(mocks):
    (candidate,) = _serve(mocks, GPTJ_6B)
    (hpa,) = mocks.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    assert hpa.inputs["spec"]["scaleTargetRef"]["name"] == f"m-{candidate.version}"
    assert _services(mocks)["m"].urn in hpa.depends_on


def test_the_user_facing_route_keeps_the_user_facing_service(mocks):
    _serve(mocks, edge=EDGE)
    routes = {r.inputs["metadata"]["name"]: r for r in mocks.of_type(HTTPROUTE)}
    backends = routes["m-http"].inputs["spec"]["rules"][0]["backendRefs"]
    assert [b["name"] for b in backends] == ["m"]


def test_no_edge_route_or_ingress_leads_to_a_candidate_on_either_edge(mocks):
    """Issue 51: the judge asks the candidate from inside the cluster; nothing at the edge routes to it."""
    (candidate,) = _serve(mocks, edge=EDGE)
    (on_ingress,) = _serve(mocks, ingress=secure_ingress("m.example.com"))
    routes = [*mocks.of_type(HTTPROUTE), *mocks.of_type("kubernetes:gateway.networking.k8s.io/v1:GRPCRoute")]
    backends = {b["name"] for r in routes for rule in r.inputs["spec"]["rules"] for b in rule["backendRefs"]}
    ingresses = mocks.of_type("kubernetes:networking.k8s.io/v1:Ingress")
    ingress_backends = {
        p["backend"]["service"]["name"]
        for i in ingresses
        for rule in i.inputs["spec"]["rules"]
        for p in rule["http"]["paths"]
    }
    assert backends == ingress_backends == {"m"}
    assert candidate.service not in backends and on_ingress.service not in ingress_backends


JUDGE_PODS = {"app.kubernetes.io/component": "judge", "app.kubernetes.io/instance": "m"}
TRITON_PODS = {"app.kubernetes.io/component": "triton", "app.kubernetes.io/instance": "m"}


def test_the_judge_asks_the_candidates_own_service_from_pods_labelled_as_its_judge(mocks):
    (candidate,) = _serve(mocks, edge=EDGE)
    assert _services(mocks)[candidate.service].inputs["spec"]["selector"] == {
        **TRITON_PODS,
        VERSION_LABEL: candidate.version,
    }
    assert candidate.judge_pods.items() >= {**JUDGE_PODS, VERSION_LABEL: candidate.version}.items()


JUDGED = pytest.mark.parametrize(
    "rollout", [None, NO_ROOM], ids=["candidate beside the serving version", "rolled in place"]
)


@JUDGED
def test_the_judges_pods_reach_their_models_triton_on_http_and_dns_only_and_nothing_reaches_them(mocks, rollout):
    _serve(mocks, **({"rollout": rollout} if rollout else {}))
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in mocks.of_type(NETPOL)}
    judge = policies["m-judge"]
    assert judge["podSelector"] == {"matchLabels": JUDGE_PODS}
    assert judge["ingress"] == []
    dns, triton = judge["egress"]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert triton == {
        "to": [{"podSelector": {"matchLabels": TRITON_PODS}}],
        "ports": [{"port": 8000, "protocol": "TCP"}],
    }
    pod_labels = _deployment(mocks).inputs["spec"]["template"]["metadata"]["labels"]
    assert pod_labels.items() >= TRITON_PODS.items(), "the judged pods are the ones it reaches"


@JUDGED
def test_the_models_triton_admits_its_judges_pods_by_label_on_http_only(mocks, rollout):
    _serve(mocks, **({"rollout": rollout} if rollout else {}))
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in mocks.of_type(NETPOL)}
    judged = [r for r in policies["m"]["ingress"] if {"podSelector": {"matchLabels": JUDGE_PODS}} in r["from"]]
    assert judged == [
        {"from": [{"podSelector": {"matchLabels": JUDGE_PODS}}], "ports": [{"port": 8000, "protocol": "TCP"}]}
    ]


def test_a_model_without_a_judge_admits_none(mocks):
    run_program(lambda: serve("m", T5_SMALL))
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in mocks.of_type(NETPOL)}
    assert "m-judge" not in policies
    assert all({"podSelector": {"matchLabels": JUDGE_PODS}} not in r["from"] for r in policies["m"]["ingress"])
