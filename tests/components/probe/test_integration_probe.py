"""The IntegrationProbe dynamic provider (called directly), its pickling and its registration under mocks."""

from __future__ import annotations

import base64
import pickletools
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import dill  # type: ignore[import-untyped]
import pulumi
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime.rpc import _special_secret_sig, _special_sig_key

import components.probe as probe_module
from components.probe import (
    IntegrationProbe,
    IntegrationProbeArgs,
    IntegrationProbeProvider,
    ProbeFailedError,
    probe_trigger,
)
from tritonft.probe import CheckOutcome, LatencySummary, ModelReport, ModelStatus, ModelTarget, ProbeReport
from tritonft.spec import Architecture, Family, ModelSpec
from tritonft.synth.engine import RecordingMocks, run_program

REPO = Path(__file__).resolve().parents[3]
TYPE_TOKEN = "pulumi-python:dynamic/tritonft:IntegrationProbe"


def props(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "endpoint": "http://127.0.0.1:8000",
        "models": [ModelTarget("t5", Family.T5).to_dict()],
        "trigger": probe_trigger("sha256:aaa", {"t5": "rev1"}, "cfg1"),
        "deadline_s": 60.0,
        "call_timeout_s": 5.0,
        "latency_requests": 20.0,  # the engine passes numbers as floats
        "bleu_threshold": 15.0,
    }
    return base | overrides


def passing_report(endpoint: str = "http://127.0.0.1:8000") -> ProbeReport:
    latency = LatencySummary(count=20, p50_ms=12.5, p95_ms=20.0, mean_ms=13.0, max_ms=21.0)
    return ProbeReport(
        endpoint=endpoint,
        protocol="http",
        ok=True,
        elapsed_s=0.4,
        checks=(CheckOutcome("server_live", True, "ok", 0.01),),
        models=(ModelReport("t5", "t5", ModelStatus.OK, "translate ...", "Das ist gut.", 100.0, latency),),
    )


def failing_report() -> ProbeReport:
    return ProbeReport(
        endpoint="http://127.0.0.1:8000",
        protocol="http",
        ok=False,
        elapsed_s=60.0,
        checks=(CheckOutcome("model_ready", False, "not ready within 45.0 s: still loading", 45.0, model="t5"),),
        models=(ModelReport("t5", "t5", ModelStatus.NOT_READY),),
    )


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the network step with a passing report; record what it was asked to probe."""
    seen: list[dict[str, Any]] = []

    def fake(p: dict[str, Any]) -> ProbeReport:
        seen.append(dict(p))
        return passing_report(p["endpoint"])

    monkeypatch.setattr(probe_module, "_probe", fake)
    return seen


# --- check ---------------------------------------------------------------------------------------------------
def test_check_accepts_valid_inputs() -> None:
    result = IntegrationProbeProvider().check({}, props())
    assert result.failures == []
    assert result.inputs == props()


def test_check_names_every_bad_input() -> None:
    result = IntegrationProbeProvider().check({}, props(endpoint="ftp://x", models=[], deadline_s=0.0))
    reasons = {f.property: f.reason for f in result.failures}
    assert set(reasons) == {"endpoint", "models", "deadline_s"}
    assert "scheme 'ftp'" in reasons["endpoint"]


def test_check_refuses_a_gateway_url_that_is_not_http() -> None:
    result = IntegrationProbeProvider().check({}, props(gateway_url="triton.example.com/v1"))
    assert [(f.property, f.reason) for f in result.failures] == [
        ("gateway_url", "must be an http(s) URL such as https://host/v1, got 'triton.example.com/v1'")
    ]


def test_check_defers_validation_of_values_unknown_during_preview() -> None:
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    assert IntegrationProbeProvider().check({}, props(endpoint=unknown)).failures == []


# --- diff ----------------------------------------------------------------------------------------------------
def test_diff_is_empty_when_nothing_changed() -> None:
    assert IntegrationProbeProvider().diff("id", props(ok=True), props()).changes is False


@pytest.mark.parametrize(
    "change",
    [
        {"trigger": probe_trigger("sha256:bbb", {"t5": "rev1"}, "cfg1")},  # new image
        {"trigger": probe_trigger("sha256:aaa", {"t5": "rev2"}, "cfg1")},  # new model revision
        {"trigger": probe_trigger("sha256:aaa", {"t5": "rev1"}, "cfg2")},  # new serving config
        {"endpoint": "http://10.0.0.1:8000"},
        {"models": [ModelTarget("gpt", Family.GPT2).to_dict()]},
        {"gateway_url": "https://triton.example.com/v1"},  # the gateway was turned on
    ],
)
def test_diff_reruns_the_probe_when_a_release_input_changes(change: dict[str, Any]) -> None:
    result = IntegrationProbeProvider().diff("id", props(), props(**change))
    assert result.changes is True
    assert result.replaces == []  # re-probing is an update, never a replacement


def test_diff_ignores_rotated_auth_headers() -> None:
    old, new = props(), props(headers={"Authorization": "Bearer new"})
    assert IntegrationProbeProvider().diff("id", old, new).changes is False


def test_trigger_is_stable_and_order_independent() -> None:
    a = probe_trigger("sha256:x", {"t5": "r1", "gpt": "r2"}, "c")
    assert a == probe_trigger("sha256:x", {"gpt": "r2", "t5": "r1"}, "c")
    assert a.startswith("sha256:") and len(a) == len("sha256:") + 64


# --- create / update / delete ----------------------------------------------------------------------------------
def test_create_probes_and_exports_the_results(probed: list[dict[str, Any]]) -> None:
    result = IntegrationProbeProvider().create(props())

    assert probed == [props()]
    assert result.id.startswith("probe-")
    outs = result.outs
    assert outs is not None
    assert outs["ok"] is True
    assert outs["model_status"] == {"t5": "ok"}
    assert outs["sample_answers"] == {"t5": "Das ist gut."}
    assert outs["latency_ms"] == {"t5": {"p50": 12.5, "p95": 20.0}}
    assert ProbeReport.from_dict(outs["report"]) == passing_report()
    assert outs["trigger"] == props()["trigger"]


def test_create_never_exports_auth_headers(probed: list[dict[str, Any]]) -> None:
    result = IntegrationProbeProvider().create(props(headers={"Authorization": "Bearer s3cret"}))

    assert probed[0]["headers"] == {"Authorization": "Bearer s3cret"}  # used for the requests...
    assert "s3cret" not in repr(result.outs)  # ...but not kept in state


def test_create_fails_with_the_failed_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "_probe", lambda _p: failing_report())
    with pytest.raises(ProbeFailedError, match=r"model_ready\[t5\]: not ready within 45.0 s: still loading"):
        IntegrationProbeProvider().create(props())


def test_update_probes_the_new_inputs(probed: list[dict[str, Any]]) -> None:
    new = props(endpoint="http://10.0.0.2:8000")
    result = IntegrationProbeProvider().update("probe-1", props(), new)

    assert probed == [new]
    assert result.outs is not None and result.outs["report"]["endpoint"] == "http://10.0.0.2:8000"


def test_update_failure_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "_probe", lambda _p: failing_report())
    with pytest.raises(ProbeFailedError):
        IntegrationProbeProvider().update("probe-1", props(), props(trigger="sha256:new"))


def test_delete_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_p: dict[str, Any]) -> ProbeReport:
        raise AssertionError("delete must not probe")

    monkeypatch.setattr(probe_module, "_probe", boom)
    IntegrationProbeProvider().delete("probe-1", props())  # returns without touching the network


# --- serialisation -----------------------------------------------------------------------------------------------
def test_provider_is_pickled_by_reference() -> None:
    blob = base64.b64decode(serialize_provider(IntegrationProbeProvider()))
    listing = StringIO()
    pickletools.dis(blob, out=listing)

    assert "'components.probe'" in listing.getvalue() and "'IntegrationProbeProvider'" in listing.getvalue()
    assert b"co_code" not in blob and len(blob) < 200  # a reference, not pickled bytecode
    assert type(dill.loads(blob)) is IntegrationProbeProvider


def test_provider_object_is_not_secret_by_default() -> None:
    assert IntegrationProbeProvider.serialize_as_secret_always is False


def test_module_import_creates_no_resources() -> None:
    code = "import components.probe, pulumi.runtime.settings as s; assert s.SETTINGS.monitor is None; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# --- registration under mocks (check/create never run there: assert the registered inputs) -----------------------
def t5_spec() -> ModelSpec:
    arch = Architecture(d_model=512, num_heads=8, num_layers=6, d_ff=2048, vocab_size=32128, d_kv=64)
    return ModelSpec(name="t5-small", family=Family.T5, hf_repo="t5-small", revision="df1b051", architecture=arch)


def test_registers_with_release_trigger_and_model_targets(mocks: RecordingMocks) -> None:
    def build() -> None:
        args = IntegrationProbeArgs.from_specs(
            pulumi.Output.from_input("http://triton.example.internal:8000"),
            [t5_spec()],
            image_digest="sha256:abc",
            serving_config="repo-hash-1",
            deadline_s=600.0,
        )
        IntegrationProbe("smoke", args)

    run_program(build)

    (probe,) = mocks.of_type(TYPE_TOKEN)
    assert probe.name == "smoke"
    assert probe.inputs["endpoint"] == "http://triton.example.internal:8000"
    from tritonft.probe.rendered import contract_for_spec

    rendered = contract_for_spec(t5_spec())
    max_tokens = t5_spec().max_output_len
    assert probe.inputs["models"] == [ModelTarget("t5-small", Family.T5, rendered, max_tokens).to_dict()]
    assert "max_output_len" in [t["name"] for t in probe.inputs["models"][0]["contract"]["inputs"]]
    assert probe.inputs["trigger"] == probe_trigger("sha256:abc", {"t5-small": "df1b051"}, "repo-hash-1")
    assert probe.inputs["deadline_s"] == 600.0
    assert "headers" not in probe.inputs
    assert probe.inputs["__provider"]  # the pickled provider travels with the resource


def test_auth_headers_are_registered_as_secret(mocks: RecordingMocks) -> None:
    def build() -> None:
        args = IntegrationProbeArgs(
            endpoint="https://triton.example.com",
            models=[ModelTarget("gpt", Family.GPT2)],
            headers={"Authorization": "Bearer s3cret"},
        )
        IntegrationProbe("smoke", args)

    run_program(build)

    (probe,) = mocks.of_type(TYPE_TOKEN)
    # the wire form of a secret value: {sig: secret-sig, "value": ...}
    assert probe.inputs["headers"] == {
        _special_sig_key: _special_secret_sig,
        "value": {"Authorization": "Bearer s3cret"},
    }
    assert probe.inputs["trigger"] == probe_trigger(None, {}, None)


def test_header_values_come_from_the_environment_of_pulumi_up(
    probed: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONFT_PROBE_AUTHORIZATION", "Basic dXNlcjpwYXNz")
    result = IntegrationProbeProvider().create(props(header_env={"Authorization": "TRITONFT_PROBE_AUTHORIZATION"}))

    assert probed[0]["headers"] == {"Authorization": "Basic dXNlcjpwYXNz"}
    assert "dXNlcjpwYXNz" not in repr(result.outs), "the credential never enters the state"
    assert result.outs is not None and result.outs["header_env"] == {"Authorization": "TRITONFT_PROBE_AUTHORIZATION"}


def test_a_missing_header_variable_fails_the_up_naming_it(
    probed: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITONFT_PROBE_AUTHORIZATION", raising=False)
    with pytest.raises(ProbeFailedError, match="TRITONFT_PROBE_AUTHORIZATION in the environment of `pulumi up`"):
        IntegrationProbeProvider().create(props(header_env={"Authorization": "TRITONFT_PROBE_AUTHORIZATION"}))
    assert probed == [], "nothing is sent without the credential"


# --- encoders ------------------------------------------------------------------------------------------------------
def test_an_encoder_is_registered_with_its_facts_and_the_stacks_expected_answers(mocks: RecordingMocks) -> None:
    from components.settings.model import EncoderProbe
    from tests.tritonft.probe.encoders import MINILM, SENTIMENT, TRIPLES

    labels = (("A man is eating food.", "positive"),)
    probes = {"minilm": EncoderProbe(triples=TRIPLES), "sentiment": EncoderProbe(labels=labels)}

    def build() -> None:
        args = IntegrationProbeArgs.from_specs(
            "http://triton.example.internal:8000", [MINILM, SENTIMENT], encoder_probes=probes
        )
        IntegrationProbe("smoke", args)

    run_program(build)

    (probe,) = mocks.of_type(TYPE_TOKEN)
    embed, classify = probe.inputs["models"]
    assert embed["encoder"] == {
        "task": "embed",
        "width": 384,
        "normalize": True,
        "max_batch_size": 16,
        "triples": [{"anchor": a, "closer": c, "farther": f} for a, c, f in TRIPLES],
    }
    assert classify["encoder"]["labels"] == ["negative", "neutral", "positive"]
    assert classify["encoder"]["expected_labels"] == [{"text": "A man is eating food.", "label": "positive"}]
    assert "max_tokens" not in embed, "an encoder generates no tokens"


def test_the_provider_probes_the_encoder_target_its_props_describe(probed: list[dict[str, Any]]) -> None:
    from components.probe import _config_from_props
    from tests.tritonft.probe.encoders import MINILM, TRIPLES
    from tritonft.probe.rendered import target_for_spec

    target = target_for_spec(MINILM, TRIPLES)
    news = props(models=[target.to_dict()])
    assert IntegrationProbeProvider().check({}, news).failures == []
    IntegrationProbeProvider().create(news)
    assert _config_from_props(probed[0]).models == (target,)


def test_check_refuses_an_expected_label_the_classifier_does_not_have() -> None:
    from tests.tritonft.probe.encoders import SENTIMENT
    from tritonft.probe.rendered import target_for_spec

    target = target_for_spec(SENTIMENT, expected_labels=(("x", "spam"),))
    (failure,) = IntegrationProbeProvider().check({}, props(models=[target.to_dict()])).failures
    assert failure.property == "models" and "expected labels ['spam'] are not among the model's" in failure.reason


def test_the_stacks_probe_of_an_encoder_carries_its_expected_answers_from_the_settings(mocks: RecordingMocks) -> None:
    import dataclasses
    from types import SimpleNamespace
    from typing import cast

    from components import args
    from components.settings.model import EncoderProbe
    from tests.components.settings.test_validation import kubernetes_stack
    from tests.components.test_args import load
    from tests.tritonft.probe.encoders import MINILM

    triples = (("A man is eating pasta.", "A man is eating food.", "A man is riding a horse."),)
    settings = load(kubernetes_stack())
    settings = dataclasses.replace(
        settings, probe=dataclasses.replace(settings.probe, encoders={"minilm": EncoderProbe(triples=triples)})
    )
    made: list[IntegrationProbeArgs] = []

    def build() -> None:
        url = pulumi.Output.from_input("http://minilm.example.com")
        service = SimpleNamespace(endpoint=url, grpc_endpoint=url)
        made.append(args.integration_probe_args(settings, cast(Any, service), MINILM, "sha256:abc"))

    run_program(build)
    (target,) = made[0].models
    assert target.encoder is not None and target.encoder.triples == triples
    assert target.encoder.width == 384 and target.contract.text_output == "embedding"
