"""The probe against a real Triton serving streaming (decoupled) GPT models: the ``dev`` stack's gpt2 with
``streaming: true``, rendered by ``tritonft repo``, FT stood in for. Triton refuses such a model on the unary calls
(HTTP 501, gRPC UNIMPLEMENTED), so the probe must stream: gRPC ``ModelStreamInfer``, HTTP ``generate_stream``.

Over gRPC on the FT image's server, tritonserver 2.33.0 (NGC 23.04); over HTTP on 2.51.0: 2.33.0 has no
``generate_stream`` route, and
:func:`test_on_the_ft_images_server_the_http_streaming_probe_says_plainly_why_it_cannot_stream` shows what the probe
says there.

Three copies of the model are served: one whose stand-in answers the prompt's tokens reversed (a right answer: a
continuation that is not an echo), one that only echoes the prompt (the GPT judgement refuses it), and one the tests
put to sleep or make fail."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.probe import IntegrationProbeArgs, IntegrationProbeProvider, ProbeFailedError, probe_trigger
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import render_with_cli, stack_specs
from tritonft.cli import main
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, Protocol, run_probe
from tritonft.probe.expectations import GPT_PROMPTS
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family, ModelSpec
from tritonft.standin import set_behaviour, standin_all

pytestmark = pytest.mark.slow

RIGHT, ECHO, FAULTY = "gpt2-stream", "gpt2-stream-echo", "gpt2-stream-faulty"
PROTOCOLS = [Protocol.HTTP, Protocol.GRPC]


def streaming_gpt2(name: str) -> ModelSpec:
    """The ``dev`` stack's gpt2 with ``streaming: true`` (as the settings would make it), named ``name``."""
    (gpt2,) = [spec for spec in stack_specs("dev") if spec.family is Family.GPT2]
    return replace(gpt2, name=name, decoupled=True, max_input_len=64, max_output_len=32)


@pytest.fixture(scope="module")
def repositories(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> dict[str, Path]:
    """One repository per model (the stand-in's generation is set per repository)."""
    out: dict[str, Path] = {}
    for name, generation in ((RIGHT, "reverse"), (ECHO, "echo"), (FAULTY, "reverse")):
        repository = tmp_path_factory.mktemp(f"repo-{name}")
        render_with_cli(streaming_gpt2(name), repository, tokenizers[Family.GPT2], tmp_path_factory.mktemp("scratch"))
        standin_all(repository, generation=generation)
        out[name] = repository
    return out


@pytest.fixture
def streaming_triton(
    request: pytest.FixtureRequest,
    serve_triton: ServeTriton,
    newest_runtime: TritonRuntime,
    repositories: dict[str, Path],
) -> LocalTriton:
    """The test's protocol's server: 2.33.0 (the FT image's) for gRPC, 2.51.0 for HTTP (generate_stream)."""
    callspec = getattr(request.node, "callspec", None)
    protocol = callspec.params.get("protocol") if callspec is not None else Protocol.GRPC
    runtime = newest_runtime if protocol is Protocol.HTTP else None
    return serve_triton([repositories[RIGHT], repositories[ECHO], repositories[FAULTY]], runtime=runtime)


def test_on_the_ft_images_server_the_http_streaming_probe_says_plainly_why_it_cannot_stream(
    serve_triton: ServeTriton, repositories: dict[str, Path]
) -> None:
    old = serve_triton([repositories[RIGHT]])
    report = probe(old, Protocol.HTTP, ModelTarget(RIGHT, Family.GPT2, streaming=True))
    assert not report.ok
    assert report.server["version"] == "2.33.0"
    (failure,) = report.failures
    assert failure.label == f"inference[{RIGHT}]"
    assert "no generate_stream route (an empty HTTP 400)" in failure.detail
    assert "Triton 23.04 (tritonserver 2.33.0)" in failure.detail


@pytest.fixture
def faulty(repositories: dict[str, Path]) -> Iterator[Path]:
    """The FT step of :data:`FAULTY`; its normal behaviour is restored after the test."""
    ft = repositories[FAULTY] / RepoNames.of(streaming_gpt2(FAULTY)).ft
    yield ft
    set_behaviour(ft)


def url(server: LocalTriton, protocol: Protocol) -> str:
    return f"http://{server.http_url}" if protocol is Protocol.HTTP else f"grpc://{server.grpc_url}"


def probe(server: LocalTriton, protocol: Protocol, target: ModelTarget, **kwargs: Any) -> Any:
    config = ProbeConfig(url(server, protocol), (target,), deadline_s=20, latency_requests=3, **kwargs)
    return run_probe(config)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_streaming_model_that_answers_right_passes_with_both_latencies(
    streaming_triton: LocalTriton, protocol: Protocol
) -> None:
    report = probe(streaming_triton, protocol, ModelTarget(RIGHT, Family.GPT2, streaming=True))

    assert report.ok, report.failure_message()
    model = report.model(RIGHT)
    assert model.streaming and model.status is ModelStatus.OK
    assert model.sample_prompt == GPT_PROMPTS[0]
    assert model.sample_answer and not model.sample_answer.startswith(GPT_PROMPTS[0]), "the echo is removed"
    assert model.latency is not None and model.first_response_latency is not None
    assert model.latency.count == model.first_response_latency.count == 3
    assert model.first_response_latency.p50_ms <= model.latency.p50_ms
    checks = {c.check: c.detail for c in report.checks}
    assert checks["model_config"].endswith("decoupled (streaming): asked over a stream")
    assert "to the last response (whole answer)" in checks["latency"]
    assert "to the first response (time to first token)" in checks["latency"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_model_served_decoupled_is_streamed_without_being_told(
    streaming_triton: LocalTriton, protocol: Protocol
) -> None:
    report = probe(streaming_triton, protocol, ModelTarget(RIGHT, Family.GPT2))

    assert report.ok, report.failure_message()
    assert report.model(RIGHT).streaming


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_streaming_model_that_only_echoes_fails_with_the_judged_reason(
    streaming_triton: LocalTriton, protocol: Protocol
) -> None:
    report = probe(streaming_triton, protocol, ModelTarget(ECHO, Family.GPT2, streaming=True))

    assert not report.ok
    (failure,) = report.failures
    assert failure.label == f"inference[{ECHO}]"
    assert failure.detail.startswith(f"empty continuation of the prompt for {GPT_PROMPTS[0]!r}")
    assert report.model(ECHO).status is ModelStatus.WRONG_ANSWER


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_streamed_answer_other_than_the_expected_one_fails_naming_it(
    streaming_triton: LocalTriton, protocol: Protocol, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps({RIGHT: [{"prompt": "hello world", "answer": "not what it says"}]}))
    argv = ["probe", "--url", url(streaming_triton, protocol), "--model", RIGHT, "--family", "gpt2"]

    code = main([*argv, "--expected-answers", str(expected), "--deadline", "20", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert code == 1
    (failure,) = [c for c in report["checks"] if not c["ok"]]
    assert failure["check"] == "inference"
    assert "the answer to 'hello world' is not the expected one: expected 'not what it says'" in failure["detail"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_sleeping_streaming_model_fails_within_the_deadline(
    streaming_triton: LocalTriton, protocol: Protocol, faulty: Path
) -> None:
    set_behaviour(faulty, sleep_s=6)

    report = probe(streaming_triton, protocol, ModelTarget(FAULTY, Family.GPT2), call_timeout_s=1.0)

    assert not report.ok
    (failure,) = report.failures
    assert failure.label == f"inference[{FAULTY}]"
    assert "within 1.0 s" in failure.detail and "deadline" in failure.detail
    assert report.model(FAULTY).status is ModelStatus.INFERENCE_FAILED


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_failing_streaming_model_fails_with_the_servers_words(
    streaming_triton: LocalTriton, protocol: Protocol, faulty: Path
) -> None:
    set_behaviour(faulty, fail="CUDA error: an illegal memory access was encountered")

    report = probe(streaming_triton, protocol, ModelTarget(FAULTY, Family.GPT2))

    assert not report.ok
    (failure,) = report.failures
    assert failure.label == f"inference[{FAULTY}]"
    assert "streamed inference" in failure.detail and "an illegal memory access" in failure.detail


def provider_props(server: LocalTriton, protocol: Protocol, spec: ModelSpec) -> dict[str, Any]:
    """The inputs ``IntegrationProbe`` gets for a stack serving ``spec`` (as ``__main__`` builds them)."""
    args = IntegrationProbeArgs.from_specs(url(server, protocol), [spec], deadline_s=20, latency_requests=2)
    assert [m.streaming for m in args.models] == [True], "the spec's streaming reaches the probe"
    return {
        "endpoint": args.endpoint,
        "protocol": str(protocol),
        "models": [m.to_dict() for m in args.models],
        "trigger": probe_trigger("sha256:image", {spec.name: spec.revision}, "cfg"),
        "deadline_s": args.deadline_s,
        "call_timeout_s": args.call_timeout_s,
        "latency_requests": float(args.latency_requests),
        "bleu_threshold": args.bleu_threshold,
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pulumi_up_of_a_stack_with_a_streaming_model_passes_when_it_answers_right(
    streaming_triton: LocalTriton, protocol: Protocol
) -> None:
    created = IntegrationProbeProvider().create(provider_props(streaming_triton, protocol, streaming_gpt2(RIGHT)))

    outs = created.outs or {}
    assert outs["ok"] is True
    assert outs["model_status"] == {RIGHT: "ok"}
    latency = outs["latency_ms"][RIGHT]
    assert set(latency) == {"p50", "p95", "first_p50", "first_p95"}
    assert latency["first_p50"] <= latency["p50"]
    assert outs["report"]["checks"][-1]["detail"].startswith("to the last response (whole answer)")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pulumi_up_of_a_stack_with_a_streaming_model_fails_when_it_answers_wrong(
    streaming_triton: LocalTriton, protocol: Protocol
) -> None:
    with pytest.raises(ProbeFailedError) as failed:
        IntegrationProbeProvider().create(provider_props(streaming_triton, protocol, streaming_gpt2(ECHO)))

    assert f"inference[{ECHO}]: empty continuation of the prompt" in str(failed.value)
