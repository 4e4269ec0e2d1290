"""A model scaled to zero is woken by requests through the OpenAI gateway, not only through its ingress.

The staging stack turned to KEDA with ``replicasMin: 0`` is synthesized; its gateway runs with the flags its Deployment
renders, its Triton routes to a port where nothing listens (the model has no replica), and a real Prometheus scrapes
the gateway with the labels its rendered ServiceMonitor gives. The ScaledObject's request-rate trigger is then
evaluated as KEDA evaluates it: above its ``activationThreshold`` once a client asked for the sleeping model.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import yaml

from tests.system.realtriton.prometheus import LocalPrometheus, service_monitor_target_labels
from tests.system.realtriton.repos import ROOT, stack_specs
from tests.system.realtriton.signal_plan import GATEWAY, MODEL, STACK, Plan, synthesized_plan
from tests.system.realtriton.test_prometheus_signal import wait_for
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as running
from tritonft.local_triton import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    addons = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]["triton-ft:addons"]
    return synthesized_plan(
        tmp_path_factory.mktemp("synth"), {"scaleToZero": True, "replicasMin": 0, "addons": [*addons, "keda"]}
    )


def rendered_flags(plan: Plan, flag: str) -> list[str]:
    (container,) = plan.gateway["Deployment"]["spec"]["template"]["spec"]["containers"]
    command: list[str] = container["command"]
    return [command[i + 1] for i, arg in enumerate(command) if arg == flag]


@pytest.fixture(scope="module")
def gateway(plan: Plan, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The gateway as rendered, every model's Triton gone (scaled to zero): nothing listens on their port."""
    extra = [arg for name in rendered_flags(plan, "--scales-to-zero") for arg in ("--scales-to-zero", name)]
    process = GatewayProcess(f"127.0.0.1:{free_port()}", stack_specs(STACK), tmp_path_factory.mktemp("gateway"), extra)
    with running(process, request) as started:
        yield started


@pytest.fixture(scope="module")
def prometheus(plan: Plan, gateway: GatewayProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    monitor, service, deployment = (plan.gateway[k] for k in ("ServiceMonitor", "Service", "Deployment"))
    labels = service_monitor_target_labels(monitor, service, deployment, f"{GATEWAY}-0")
    (endpoint,) = monitor["spec"]["endpoints"]
    server = LocalPrometheus(
        tmp_path_factory.mktemp("prometheus"), [], [(f"127.0.0.1:{gateway.port}", endpoint["path"], labels)]
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def wake_trigger(plan: Plan) -> dict[str, Any]:
    (trigger,) = [t for t in plan.autoscaler["spec"]["triggers"] if "activationThreshold" in t["metadata"]]
    return dict(trigger)


def wake_value(prometheus: LocalPrometheus, plan: Plan) -> float | None:
    """The trigger's value as KEDA reads it: the first sample of its query (None when the answer is empty)."""
    samples = prometheus.query(wake_trigger(plan)["metadata"]["query"])
    return float(samples[0]["value"][1]) if samples else None


def scraped(prometheus: LocalPrometheus) -> bool:
    return any(s["value"][1] == "1" for s in prometheus.query(f'up{{job="{GATEWAY}"}}'))


def test_the_gateway_is_told_which_model_scales_to_zero(plan: Plan) -> None:
    assert plan.autoscaler["kind"] == "ScaledObject" and plan.autoscaler["spec"]["minReplicaCount"] == 0
    assert MODEL in rendered_flags(plan, "--scales-to-zero")


def test_with_every_model_asleep_the_gateway_stays_ready(gateway: GatewayProcess) -> None:
    asleep = ", ".join(s.name for s in stack_specs(STACK))
    with urllib.request.urlopen(f"{gateway.url}/health/ready", timeout=10) as answer:
        assert (answer.status, answer.read().decode()) == (200, f"asleep: {asleep}")


def test_idle_the_wake_trigger_reads_zero_so_keda_does_not_wake(prometheus: LocalPrometheus, plan: Plan) -> None:
    wait_for("the gateway scraped", lambda: scraped(prometheus), 30)
    assert wake_value(prometheus, plan) == 0.0
    assert float(wake_trigger(plan)["metadata"]["activationThreshold"]) == 0.0


def test_a_request_for_the_sleeping_model_gets_a_503_with_retry_after(gateway: GatewayProcess) -> None:
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=30)
    with pytest.raises(openai.APIStatusError) as caught:
        client.completions.create(model=MODEL, prompt="translate English to German: hello", max_tokens=4)
    assert caught.value.status_code == 503
    assert caught.value.code == "model_starting"
    assert caught.value.response.headers["retry-after"] == "60"
    assert f"model '{MODEL}' has no running replica" in caught.value.message


def test_that_request_raises_the_wake_trigger_above_its_activation_threshold(
    prometheus: LocalPrometheus, plan: Plan
) -> None:
    threshold = float(wake_trigger(plan)["metadata"]["activationThreshold"])
    value = wait_for(
        "the wake trigger above its activation threshold",
        lambda: (v := wake_value(prometheus, plan)) is not None and v > threshold and v,
        timeout=30,
        context=lambda: f"query {wake_trigger(plan)['metadata']['query']} -> {wake_value(prometheus, plan)}",
    )
    assert value > threshold
