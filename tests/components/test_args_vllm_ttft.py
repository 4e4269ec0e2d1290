"""``autoscaleTargetTtftSeconds``: a vLLM model's time-to-first-token p95 objective, from the stack file into its
``VllmTimeToFirstTokenHigh`` alert threshold and its dashboard's target line; ``autoscaleTargetWaitingRequests``: its
HPA (or KEDA) target, requests waiting inside vLLM per pod; asserted on the captured inputs of the service the
composition builds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import args
from components.models.conversion import ModelConversion
from components.models.store import ModelStore, ModelStoreArgs
from components.serving.autoscaling import DEFAULT_TTFT_P95_TARGET_S, DEFAULT_WAITING_TARGET
from components.serving.service import TritonService
from components.settings import load_settings
from components.settings.schema import STACK_KNOBS
from tests.components.fixtures import TOOLS_IMAGE, make_target
from tests.components.settings.test_validation import QWEN7B, kubernetes_stack, problems_of
from tritonft.synth.engine import RecordingMocks, Registered, run_program

HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
ALERT = "VllmTimeToFirstTokenHigh"
ADDONS = ["kube-prometheus-stack", "prometheus-adapter", "keda"]


def _serve(mocks: RecordingMocks, **stack: Any) -> RecordingMocks:
    values = kubernetes_stack(models=[dict(QWEN7B)], existingAddons=ADDONS, replicasMax=4, **stack)
    settings = load_settings(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}, project="triton-ft", stack="t"
    )

    def build() -> None:
        target = make_target()
        store = ModelStore("s", ModelStoreArgs(target=target, models=settings.models))
        (model,) = settings.models
        conversion = ModelConversion(model.name, args.model_conversion_args(target, store, model, TOOLS_IMAGE, None))
        service_args = args.triton_service_args(
            settings, target=target, store=store, conversion=conversion, server_image="i", htpasswd=None
        )
        TritonService(model.name, service_args)

    run_program(build)
    return mocks


def _alert(mocks: RecordingMocks) -> dict[str, Any]:
    rules = [r for res in mocks.of_type(RULE) for g in res.inputs["spec"]["groups"] for r in g["rules"]]
    (alert,) = [r for r in rules if r.get("alert") == ALERT]
    return dict(alert)


def _hpa_target(mocks: RecordingMocks) -> dict[str, Any]:
    (hpa,) = mocks.of_type(HPA)
    (metric,) = hpa.inputs["spec"]["metrics"]
    return dict(metric["pods"]["target"])


def _dashboards(mocks: RecordingMocks) -> list[Registered]:
    return [c for c in mocks.of_type(CONFIG_MAP) if c.name.endswith("-dashboard")]


def test_the_stacks_waiting_target_is_the_vllm_models_hpa_target(mocks: RecordingMocks) -> None:
    assert _hpa_target(_serve(mocks, autoscaleTargetWaitingRequests="4", autoscaleTargetTtftSeconds="750m")) == {
        "type": "AverageValue",
        "averageValue": "4000m",
    }


def test_the_stacks_ttft_target_is_the_alerts_threshold(mocks: RecordingMocks) -> None:
    alert = _alert(_serve(mocks, autoscaleTargetTtftSeconds="2.5"))
    assert alert["expr"].endswith("> 2.5")
    assert "target 2.5 s" in alert["annotations"]["summary"]


def test_the_stacks_ttft_target_is_the_dashboards_target_line(mocks: RecordingMocks) -> None:
    (dashboard,) = _dashboards(_serve(mocks, autoscaleTargetTtftSeconds="2.5"))
    (text,) = dashboard.inputs["data"].values()
    assert '"vector(2.5)"' in text


def test_with_scale_to_zero_keda_reads_the_same_target(mocks: RecordingMocks) -> None:
    _serve(mocks, autoscaleTargetWaitingRequests="3", scaleToZero=True, replicasMin=0)
    (scaled,) = mocks.of_type(SCALED_OBJECT)
    (queue,) = [t for t in scaled.inputs["spec"]["triggers"] if "vllm_requests_waiting" in t["metadata"]["query"]]
    assert queue["metadata"]["threshold"] == "3"


def test_unset_the_target_is_the_default_of_one_second(mocks: RecordingMocks) -> None:
    (knob,) = [k for k in STACK_KNOBS if k.key == "autoscaleTargetTtftSeconds"]
    assert float(knob.default) == DEFAULT_TTFT_P95_TARGET_S == 1.0
    (waiting,) = [k for k in STACK_KNOBS if k.key == "autoscaleTargetWaitingRequests"]
    assert float(waiting.default) == DEFAULT_WAITING_TARGET == 2.0
    assert _hpa_target(_serve(mocks))["averageValue"] == "2000m"
    assert _alert(mocks)["expr"].endswith("> 1")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "autoscaleTargetTtftSeconds: '0' must be more than 0 seconds: write the seconds as a number"),
        ("-1", "autoscaleTargetTtftSeconds: '-1' must be more than 0 seconds"),
        ("1s", "autoscaleTargetTtftSeconds: '1s' is not a number of seconds: write the seconds as a number, e.g. "
         "'1', '1.5' or '750m' (0.75 s)"),
    ],
)  # fmt: skip
def test_a_target_that_is_not_a_positive_number_of_seconds_is_refused_naming_the_key_and_the_fix(
    value: str, message: str
) -> None:
    assert any(p.startswith(message) for p in problems_of(kubernetes_stack(autoscaleTargetTtftSeconds=value)))
