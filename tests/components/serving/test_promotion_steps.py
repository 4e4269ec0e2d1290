"""The promotion's two dynamic providers, the gate and the handover: one provider parameterised by the inputs that
re-run it and the step it runs (their runtime on a real API server: ``tests/system/controlplane/``)."""

from __future__ import annotations

from typing import Any

import pytest

import components.serving.promotion_gate as gate_module
from components.serving.promotion_gate import GateConfig, PromotionGateProvider, PromotionHandoverProvider

PROPS: dict[str, Any] = {
    "namespace": "triton",
    "model": "t5-3b",
    "version": "abcd1234",
    "stable_service": "prod-t5-3b",
    "candidate_service": "prod-t5-3b-abcd1234",
    "candidate_deployment": "prod-t5-3b-abcd1234",
    "routes": [],
    "min_replicas": 2.0,
    "max_replicas": 5.0,
    "replicas_deadline_s": 1800.0,
    "canary": None,
    "kubeconfig": "apiVersion: v1\nkind: Config\n",
    "context": None,
}


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What each step was given: its runtime replaced by a recorder (no cluster here)."""
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr("components.rollout_watch._kube", lambda kubeconfig, context: ("kube", kubeconfig, context))

    def gate(kube: Any, config: GateConfig) -> dict[str, Any]:
        calls.append(("gate", (kube, config)))
        return {"stable_version": "aaaa1111", "replicas": None, "phase": None}

    def handover(kube: Any, config: GateConfig, *, step_deadline_s: float) -> dict[str, Any]:
        calls.append(("handover", (kube, config, step_deadline_s)))
        return {"handover": None}

    monkeypatch.setattr(gate_module, "run_gate", gate)
    monkeypatch.setattr(gate_module, "run_handover", handover)
    return calls


def test_each_step_reruns_only_when_one_of_its_own_inputs_changed() -> None:
    gate, handover = PromotionGateProvider(), PromotionHandoverProvider()
    new_credentials = {**PROPS, "kubeconfig": "other"}
    more_replicas = {**PROPS, "max_replicas": 6.0}
    assert not gate.diff("id", PROPS, new_credentials).changes
    assert not handover.diff("id", PROPS, new_credentials).changes
    assert gate.diff("id", PROPS, more_replicas).changes
    assert not handover.diff("id", PROPS, more_replicas).changes
    assert handover.diff("id", PROPS, {**PROPS, "version": "ef567890"}).changes


def test_the_gate_runs_the_gate_with_its_inputs_and_keeps_the_kubeconfig_out_of_its_outputs(
    ran: list[tuple[str, Any]],
) -> None:
    done = PromotionGateProvider().create(dict(PROPS))

    ((step, (kube, config)),) = ran
    assert step == "gate" and kube == ("kube", PROPS["kubeconfig"], None)
    assert config == GateConfig.of(PROPS)
    assert done.id == "triton/prod-t5-3b-abcd1234"
    assert done.outs is not None and "kubeconfig" not in done.outs
    assert done.outs["stable_version"] == "aaaa1111" and done.outs["model"] == "t5-3b"


def test_the_handover_runs_the_handover_with_each_step_bounded_by_the_deadline(ran: list[tuple[str, Any]]) -> None:
    done = PromotionHandoverProvider().update("triton/prod-t5-3b-abcd1234", dict(PROPS), dict(PROPS))

    ((step, (_kube, config, deadline)),) = ran
    assert step == "handover" and deadline == 1800.0
    assert config.routes == () and config.canary is None and config.max_replicas == 5
    assert done.outs is not None and done.outs["handover"] is None and "kubeconfig" not in done.outs
