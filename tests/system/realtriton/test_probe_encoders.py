"""The integration probe on encoders served by a real Triton: the real all-MiniLM-L6-v2 passes (directly over HTTP
and gRPC, and through ``/v1/embeddings`` of the gateway in front of it, run with the flags the Gateway component
renders); a random-weight BERT and wrong expected
similarity triples fail naming the similarity order; the seeded classifier passes with its expected labels and
fails with a wrong one."""

from __future__ import annotations

import dataclasses
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest

from components.gateway.component import GatewayBackend, served_backends
from components.gateway.spec import SPEC_MOUNT, Backend, gateway_command, specs_data
from tests.system.realtriton.conftest import CLASSIFIER, EMBEDDER, RANDOM_EMBEDDER
from tests.tritonft.encoder.checkpoints import BERT_TEST_DIMS, MAX_SEQ_LENGTH
from tests.tritonft.gateway.server import GatewayProcess
from tests.tritonft.gateway.server import started as running
from tests.tritonft.probe.encoders import EATING, MINILM, SENTIMENT
from tritonft.cli import main
from tritonft.local_triton import LocalTriton
from tritonft.probe import ModelStatus, ModelTarget, ProbeConfig, ProbeReport, run_probe
from tritonft.probe.rendered import target_for_spec
from tritonft.spec import Architecture, EncoderSpec, EncoderTask, ModelSpec

pytestmark = pytest.mark.slow

RANDOM_BERT = dataclasses.replace(
    MINILM,
    name=RANDOM_EMBEDDER,
    architecture=Architecture(
        d_model=BERT_TEST_DIMS["hidden"],
        num_heads=BERT_TEST_DIMS["heads"],
        num_layers=BERT_TEST_DIMS["layers"],
        d_ff=BERT_TEST_DIMS["ff"],
        vocab_size=30522,
        max_positions=BERT_TEST_DIMS["positions"],
    ),
    encoder=EncoderSpec(task=EncoderTask.EMBED, max_seq_length=MAX_SEQ_LENGTH),
)
REQUESTS = 5


def served(spec: ModelSpec) -> ModelSpec:
    assert spec.name in (EMBEDDER, CLASSIFIER, RANDOM_EMBEDDER), "served by the encoder_triton fixture"
    return spec


def probe(url: str, *targets: ModelTarget, gateway_url: str | None = None) -> ProbeReport:
    config = ProbeConfig(
        url, targets, deadline_s=120, call_timeout_s=30, latency_requests=REQUESTS, gateway_url=gateway_url
    )
    return run_probe(config)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_real_minilm_passes_the_probe_with_the_default_triples(encoder_triton: LocalTriton, protocol: str) -> None:
    address = encoder_triton.http_url if protocol == "http" else encoder_triton.grpc_url
    report = probe(f"{protocol}://{address}", target_for_spec(served(MINILM)))

    assert report.ok, report.failure_message()
    model = report.model(EMBEDDER)
    assert [c.check for c in report.checks if c.model == EMBEDDER] == [
        "model_ready",
        "metadata",
        "model_config",
        "inference",
        "latency",
    ]
    assert model.latency is not None and model.latency.count == REQUESTS
    assert model.sample_answer is not None
    assert model.sample_answer.startswith("cos('A man is eating pasta.', 'A man is eating food.') = 0.")


def component_gateway(triton: LocalTriton, workdir: Path, *specs: ModelSpec) -> GatewayProcess:
    """``tritonft gateway`` run with the flags the Gateway component renders for ``specs`` (each routed to
    ``triton``; the generators' specs written where the ConfigMap is mounted), on a free local port."""
    served = served_backends([GatewayBackend(spec, cast(Any, None)) for spec in specs])
    command = gateway_command([Backend(b.model, triton.grpc_url, {}) for b in served], deadline_seconds=60)
    for name, text in specs_data(specs).items():
        (workdir / name).write_text(text)
    gateway = GatewayProcess(triton.grpc_url, [], workdir)
    port = command.index("--port")
    command[port + 1] = str(gateway.port)
    gateway.command = [sys.executable, *command[1:], "--host", "127.0.0.1"]
    gateway.command = [arg.replace(SPEC_MOUNT, str(workdir)) for arg in gateway.command]
    return gateway


def test_the_gateway_the_component_renders_lists_the_embedding_model_and_not_the_classifier(
    encoder_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    gateway = component_gateway(encoder_triton, tmp_path, MINILM, SENTIMENT)
    with running(gateway, request), urllib.request.urlopen(f"{gateway.url}/v1/models", timeout=30) as answer:
        listed = json.loads(answer.read())

    assert [m["id"] for m in listed["data"]] == [EMBEDDER]


def test_the_probe_asks_the_gateway_on_v1_embeddings_and_passes(
    encoder_triton: LocalTriton, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with running(component_gateway(encoder_triton, tmp_path, MINILM), request) as gateway:
        url = f"http://{encoder_triton.http_url}"
        report = probe(url, target_for_spec(MINILM), gateway_url=f"{gateway.url}/v1")
        access = gateway.access_entries(until=lambda e: (e["path"], e["status"]) == ("/v1/embeddings", 200))

    assert report.ok, report.failure_message()
    (check,) = [c for c in report.checks if c.check == "gateway"]
    assert check.model == EMBEDDER
    assert check.detail == "POST /v1/embeddings: 6 embeddings of width 384, similarity order right"
    assert ("/v1/embeddings", 200, EMBEDDER) in [(e["path"], e["status"], e["model"]) for e in access]


def test_a_random_weight_bert_fails_the_probe_naming_the_similarity_order(encoder_triton: LocalTriton) -> None:
    report = probe(f"http://{encoder_triton.http_url}", target_for_spec(served(RANDOM_BERT)))

    assert not report.ok
    assert report.model(RANDOM_EMBEDDER).status is ModelStatus.WRONG_ANSWER
    assert report.failure_message().startswith(
        f"inference[{RANDOM_EMBEDDER}]: similarity order wrong: 'A man is eating pasta.' is "
    )


def test_expected_triples_the_model_does_not_order_so_fail_naming_the_sentences(encoder_triton: LocalTriton) -> None:
    backwards = ((EATING[0], EATING[2], EATING[1]),)
    report = probe(f"http://{encoder_triton.http_url}", target_for_spec(MINILM, backwards))

    assert report.model(EMBEDDER).status is ModelStatus.WRONG_ANSWER
    message = report.failure_message()
    assert message.startswith(f"inference[{EMBEDDER}]: similarity order wrong: 'A man is eating pasta.' is 0.")
    assert "to 'A man is riding a horse.' but 0." in message and "to 'A man is eating food.'" in message


def test_the_classifier_passes_with_its_expected_labels(encoder_triton: LocalTriton) -> None:
    labels = (("A man is eating food.", "positive"), ("x", "negative"))
    report = probe(f"grpc://{encoder_triton.grpc_url}", target_for_spec(served(SENTIMENT), expected_labels=labels))

    assert report.ok, report.failure_message()
    (inference,) = [c for c in report.checks if c.check == "inference"]
    assert inference.detail == "2 labels as expected"
    answer = report.model(CLASSIFIER).sample_answer
    assert answer is not None and answer.startswith("'A man is eating food.' -> positive (")


def test_the_classifier_fails_with_a_wrong_expected_label(encoder_triton: LocalTriton) -> None:
    labels = (("A man is eating food.", "positive"), ("x", "positive"))
    report = probe(f"http://{encoder_triton.http_url}", target_for_spec(SENTIMENT, expected_labels=labels))

    assert report.model(CLASSIFIER).status is ModelStatus.WRONG_ANSWER
    assert report.failure_message() == (
        f"inference[{CLASSIFIER}]: text 1 labelled 'negative', expected 'positive' (1 wrong of 2)"
    )


def test_a_classifier_without_expected_labels_is_judged_on_its_labels_and_scores(encoder_triton: LocalTriton) -> None:
    report = probe(f"http://{encoder_triton.http_url}", target_for_spec(SENTIMENT))

    assert report.ok, report.failure_message()
    (inference,) = [c for c in report.checks if c.check == "inference"]
    assert inference.detail == "2 labels among the model's"


def test_tritonft_probe_checks_an_encoder_from_its_spec_file(
    encoder_triton: LocalTriton, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = tmp_path / "minilm.json"
    spec_path.write_text(MINILM.to_json())
    code = main(["probe", "--url", f"http://{encoder_triton.http_url}", "--spec", str(spec_path), "--json"])

    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert [m["status"] for m in report["models"]] == ["ok"]
