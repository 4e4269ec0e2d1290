"""The Gateway follows the version the user-facing Services select: its specs ConfigMap (limits, the chat models)
and its Deployment (the mounted checkpoint, hence the chat template) wait for each model's Services, which wait for
a new version's judge and promotion gate. So a new version's spec or template reaches no user before its judge and
gate passed, and after a failed judgement `up` stops before the gateway changes; a version that rolled in place (no
room for a candidate) reaches the gateway only after its judge (asserted on the captured options; on the real control
plane: ``tests/system/controlplane/test_judged_promotion.py``, ``test_judged_in_place.py``)."""

from __future__ import annotations

from typing import Any

import pulumi

from components.gateway import Gateway, GatewayArgs, GatewayBackend
from components.gateway.spec import gateway_selector
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.store import ModelStore, ModelStoreArgs
from components.serving.promotion import Candidate
from components.settings.capacity import Rollout
from tests.components.fixtures import CONVERTER, T5_SMALL, TOOLS_IMAGE, make_target, serve
from tests.components.serving.test_service_vllm import LLAMA
from tritonft.engines.vllm.versions import TRITON_VERSION as VLLM_RELEASE
from tritonft.synth.engine import RecordingMocks, Registered, run_program

GATEWAY = "gw"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SERVICE = "kubernetes:core/v1:Service"
JUDGE = "tests:judge:Judge"
GATE = "pulumi-python:dynamic/tritonft:PromotionGate"


def _judge(candidate: Candidate, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    return pulumi.CustomResource(JUDGE, f"judge-{candidate.model}-{candidate.version}", {}, opts)


def _stack() -> None:
    """A judged vLLM Llama (chat through its own template) and a judged T5 behind one gateway."""
    target = make_target()
    pods = gateway_selector(GATEWAY)
    store = ModelStore("store", ModelStoreArgs(target=target, models=(LLAMA, T5_SMALL)))
    download = ModelConversion(
        "llama-download",
        ModelConversionArgs(
            target=target, store=store, model=LLAMA, tools_image=TOOLS_IMAGE, converter_version=CONVERTER
        ),
    )
    llama = serve("llama", LLAMA, target=target, gateway_pods=pods, triton_release=VLLM_RELEASE, judge=_judge)
    t5 = serve("t5", T5_SMALL, target=target, gateway_pods=pods, judge=_judge)
    backends = (GatewayBackend(LLAMA, llama, download), GatewayBackend(T5_SMALL, t5))
    Gateway(GATEWAY, GatewayArgs(target=target, image=TOOLS_IMAGE, backends=backends, store=store))


def _named(mocks: RecordingMocks, typ: str, name: str) -> Registered:
    (match,) = [r for r in mocks.of_type(typ) if r.inputs["metadata"]["name"] == name]
    return match


def _user_facing_services(mocks: RecordingMocks) -> list[Registered]:
    return [_named(mocks, SERVICE, name) for model in ("llama", "t5") for name in (model, f"{model}-pods")]


def _waits_for(res: Registered, mocks: RecordingMocks, typ: str) -> set[str]:
    return {r.urn for r in mocks.of_type(typ)} & set(res.depends_on)


def _gateway_objects(mocks: RecordingMocks) -> dict[str, Any]:
    return {
        "specs ConfigMap": _named(mocks, CONFIG_MAP, f"{GATEWAY}-specs"),
        "Deployment": _named(mocks, DEPLOYMENT, GATEWAY),
    }


def test_the_gateways_specs_and_pods_wait_for_every_models_user_facing_services(mocks):
    run_program(_stack)
    services = {s.urn for s in _user_facing_services(mocks)}
    for what, res in _gateway_objects(mocks).items():
        assert services <= set(res.depends_on), what


def test_the_services_the_gateway_waits_for_wait_for_each_new_versions_judge_and_gate(mocks):
    run_program(_stack)
    judges, gates = {r.urn for r in mocks.of_type(JUDGE)}, {r.urn for r in mocks.of_type(GATE)}
    assert len(judges) == len(gates) == 2
    for service in _user_facing_services(mocks):
        model = service.inputs["metadata"]["name"].removesuffix("-pods")
        assert len(_waits_for(service, mocks, JUDGE)) == 1, model
        assert len(_waits_for(service, mocks, GATE)) == 1, model


def _in_place_stack() -> None:
    """A judged T5 without room for a candidate (it rolls in place) behind the gateway."""
    target = make_target()
    no_room = Rollout(0, 1, "no free node for a surge pod at replicasMax: replace one pod at a time")
    t5 = serve("t5", T5_SMALL, target=target, gateway_pods=gateway_selector(GATEWAY), judge=_judge, rollout=no_room)
    Gateway(GATEWAY, GatewayArgs(target=target, image=TOOLS_IMAGE, backends=(GatewayBackend(T5_SMALL, t5),)))


def test_the_gateways_specs_and_pods_wait_for_the_judge_of_a_version_that_rolled_in_place(mocks):
    """Issue 49: a failed in-place judgement stops `up` before the gateway is given the new version's spec."""
    run_program(_in_place_stack)
    (judge,) = mocks.of_type(JUDGE)
    assert _waits_for(_named(mocks, SERVICE, "t5"), mocks, JUDGE) == set(), "in place: the Services do not wait"
    for what, res in _gateway_objects(mocks).items():
        assert judge.urn in res.depends_on, what
