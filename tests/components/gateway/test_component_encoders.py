"""The Gateway component with encoders in the stack: an embedding model is served under ``/v1/embeddings``
(``--embedding-model NAME:MAX_BATCH``, routed to its own Triton service like a generator), never as a completion
model; a classifier is not served under ``/v1`` (it answers on its KServe V2 endpoint). Asserted on the captured
Deployment, ConfigMap and NetworkPolicy inputs, and on what ``tritonft gateway`` makes of the container's command."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from components.common.triton import GRPC_PORT
from components.gateway import Gateway, GatewayArgs, GatewayBackend
from components.gateway.spec import SPEC_MOUNT, gateway_selector
from tests.components.fixtures import NAMESPACE, T5_SMALL, TOOLS_IMAGE, make_target, secure_ingress, serve
from tests.tritonft.probe.encoders import MINILM, SENTIMENT
from tritonft.errors import UserError
from tritonft.gateway.command import add_arguments, load_config
from tritonft.gateway.embeddings import EmbeddingModel
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, run_program

GATEWAY = "gw"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _stack(*models: ModelSpec) -> None:
    target = make_target()
    pods = gateway_selector(GATEWAY)
    backends = [
        GatewayBackend(
            m, serve(m.name, m, target=target, ingress=secure_ingress(f"{m.name}.example.com"), gateway_pods=pods)
        )
        for m in models
    ]
    Gateway(GATEWAY, GatewayArgs(target=target, image=TOOLS_IMAGE, backends=backends, monitoring=True))


def _named(mocks: RecordingMocks, typ: str, name: str) -> Registered:
    (match,) = [r for r in mocks.of_type(typ) if r.inputs["metadata"]["name"] == name]
    return match


def _command(mocks: RecordingMocks) -> list[str]:
    (container,) = _named(mocks, DEPLOYMENT, GATEWAY).inputs["spec"]["template"]["spec"]["containers"]
    return list(container["command"])


def _flag_values(command: list[str], flag: str) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == flag]


def test_an_embedding_model_is_served_under_embeddings_with_its_batch_size_and_its_own_triton(mocks):
    run_program(lambda: _stack(T5_SMALL, MINILM))
    command = _command(mocks)
    assert _flag_values(command, "--embedding-model") == ["minilm:16"]
    assert _flag_values(command, "--triton-url") == [
        f"t5-small=t5-small-pods.{NAMESPACE}.svc:{GRPC_PORT}",
        f"minilm=minilm-pods.{NAMESPACE}.svc:{GRPC_PORT}",
    ]


def test_an_embedding_model_is_never_given_to_the_gateway_as_a_completion_model(mocks):
    run_program(lambda: _stack(T5_SMALL, MINILM))
    assert _flag_values(_command(mocks), "--spec") == [f"{SPEC_MOUNT}/t5-small.json"]
    config_map = _named(mocks, "kubernetes:core/v1:ConfigMap", f"{GATEWAY}-specs")
    assert set(config_map.inputs["data"]) == {"t5-small.json"}


def test_the_gateway_started_with_the_containers_command_lists_the_embedding_model_apart(mocks, tmp_path):
    """What ``tritonft gateway`` makes of the rendered command (the spec files written where the ConfigMap is
    mounted): the encoder is an embedding model routed to its own Triton, the generator a completion model."""
    run_program(lambda: _stack(T5_SMALL, MINILM))
    command = _command(mocks)[4:]
    config_map = _named(mocks, "kubernetes:core/v1:ConfigMap", f"{GATEWAY}-specs")
    for key, text in config_map.inputs["data"].items():
        (tmp_path / key).write_text(text)
    command = [arg.replace(SPEC_MOUNT, str(tmp_path)) for arg in command]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = load_config(parser.parse_args(command))
    assert [m.name for m in config.models] == ["t5-small"]
    assert config.embedders == (EmbeddingModel("minilm", 16),)
    assert config.names == ["t5-small", "minilm"]
    assert config.url_of("minilm") == f"minilm-pods.{NAMESPACE}.svc:{GRPC_PORT}"


def test_a_classifier_is_left_out_of_the_gateway_and_its_egress(mocks):
    run_program(lambda: _stack(T5_SMALL, MINILM, SENTIMENT))
    command = _command(mocks)
    assert "sentiment" not in " ".join(command)
    egress = _named(mocks, NETPOL, GATEWAY).inputs["spec"]["egress"][1]["to"]
    selected = [peer["podSelector"]["matchLabels"] for peer in egress]
    assert len(selected) == 2 and all("sentiment" not in str(labels) for labels in selected)


def test_the_gateway_reaches_the_embedding_models_triton_pods_on_grpc(mocks):
    run_program(lambda: _stack(MINILM))
    rule = _named(mocks, NETPOL, GATEWAY).inputs["spec"]["egress"][1]
    assert rule["ports"] == [{"port": GRPC_PORT, "protocol": "TCP"}]
    (peer,) = rule["to"]
    assert "minilm" in str(peer["podSelector"]["matchLabels"])


def test_a_gateway_with_only_classifiers_to_serve_is_refused_naming_them_and_the_fix():
    def only_classifier() -> Any:
        _stack(SENTIMENT)

    with pytest.raises(UserError, match=r"no model the gateway can serve: sentiment classify text.*gateway: false"):
        run_program(only_classifier)
