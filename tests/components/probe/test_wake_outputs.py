"""The wake from zero in the probe's outputs and the stack's: the provider exports each woken model's timing, and a
stack that scales to zero asks its probes to time the wake and exports ``wakeFromZero`` per model (``staging``
synthesized under the mock engine, turned to KEDA with ``replicasMin: 0``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.probe import IntegrationProbeProvider, outputs_of
from components.probe import __name__ as probe_module_name
from tests.system.realtriton.repos import ROOT
from tests.system.realtriton.signal_plan import STACK, derived_project
from tritonft.probe.report import CheckOutcome, ModelReport, ModelStatus, ProbeReport
from tritonft.probe.wake import TryOutcome, WakeTry, wake_timing
from tritonft.synth.result import SynthResult
from tritonft.synth.run import synthesize

WAKE = wake_timing(
    [
        WakeTry(0.0, 0.1, TryOutcome.ASLEEP),
        WakeTry(20.0, 20.4, TryOutcome.ASLEEP),
        WakeTry(25.0, 26.5, TryOutcome.ANSWERED),
    ],
    judged_ok=True,
)


def report_with_wake() -> ProbeReport:
    return ProbeReport(
        endpoint="http://127.0.0.1:8000",
        protocol="http",
        ok=True,
        elapsed_s=30.0,
        checks=(CheckOutcome("wake", True, WAKE.describe(), 26.5, model="t5"),),
        models=(ModelReport("t5", "t5", ModelStatus.OK, wake=WAKE), ModelReport("gpt2", "gpt2", ModelStatus.OK)),
    )


def test_the_provider_exports_the_wake_of_each_model_it_woke_and_only_those() -> None:
    outputs = outputs_of(report_with_wake())

    assert outputs["wake"] == {"t5": WAKE.to_output()}
    assert outputs["wake"]["t5"]["wake_s"] == 26.5 and outputs["wake"]["t5"]["asleep_until_s"] == 20.4


def test_the_wake_reaches_the_resources_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{probe_module_name}._probe", lambda _props: report_with_wake())
    props = {"endpoint": "http://127.0.0.1:8000", "models": [{"name": "t5", "family": "t5"}]}

    created = IntegrationProbeProvider().create(props)

    assert created.outs is not None
    assert created.outs["wake"]["t5"]["asleep"] is True and created.outs["wake"]["t5"]["judged_ok"] is True


def synthesized(out: Path, extra: dict[str, Any]) -> SynthResult:
    return synthesize(STACK, out=out / "synth", project_dir=derived_project(out, extra), extras=())


def probe_targets(result: SynthResult) -> dict[str, dict[str, Any]]:
    """Each model's probe (not a judge) as the plan declares it: model name -> its target's inputs."""
    found = {}
    for res in result.resources:
        if res.typ.endswith("IntegrationProbe") and res.name.endswith("-probe"):
            (target,) = res.inputs["models"]
            found[target["name"]] = target
    return found


@pytest.fixture(scope="module")
def scaled_to_zero(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    addons = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]["triton-ft:addons"]
    extra = {"scaleToZero": True, "replicasMin": 0, "addons": [*addons, "keda"]}
    return synthesized(tmp_path_factory.mktemp("zero"), extra)


def test_a_stack_that_scales_to_zero_asks_every_models_probe_to_time_the_wake(scaled_to_zero: SynthResult) -> None:
    targets = probe_targets(scaled_to_zero)

    assert targets and all(t.get("scales_to_zero") is True for t in targets.values())


def test_a_stack_that_scales_to_zero_exports_the_wake_of_each_model(scaled_to_zero: SynthResult) -> None:
    wakes = scaled_to_zero.outputs["wakeFromZero"]

    assert set(wakes) == set(probe_targets(scaled_to_zero))
    assert all(w == {"timed": False} for w in wakes.values())  # the mock engine runs no probe


def test_a_stack_that_does_not_scale_to_zero_times_no_wake(tmp_path: Path) -> None:
    result = synthesized(tmp_path, {})

    assert not any("scales_to_zero" in t for t in probe_targets(result).values())
    assert result.outputs["wakeFromZero"] == {}
