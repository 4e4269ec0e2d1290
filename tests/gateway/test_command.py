"""``tritonft gateway --triton-url``: one Triton for every model, or one per model (a deployed stack's shape)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.k8s.fixtures import T5_SMALL
from tritonft.cli import main
from tritonft.errors import UserError
from tritonft.gateway.command import triton_routes
from tritonft.gateway.config import GatewayConfig

SERVED = ["t5", "gpt2"]


def test_one_endpoint_serves_every_model() -> None:
    assert triton_routes(["triton:8001"], SERVED) == ("triton:8001", {})


def test_each_model_can_have_its_own_triton() -> None:
    default, routes = triton_routes(["t5=t5.ns.svc:8001", "gpt2=gpt2.ns.svc:8001"], SERVED)
    config = GatewayConfig(default, (), routes=routes)
    assert [config.url_of(m) for m in SERVED] == ["t5.ns.svc:8001", "gpt2.ns.svc:8001"]


def test_a_route_overrides_the_default_for_its_model_only() -> None:
    default, routes = triton_routes(["triton:8001", "gpt2=other:8001"], SERVED)
    config = GatewayConfig(default, (), routes=routes)
    assert [config.url_of(m) for m in SERVED] == ["triton:8001", "other:8001"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["t5=t5:8001"], "no Triton endpoint for gpt2"),
        (["bert=b:8001", "triton:8001"], "no --spec serves a model named 'bert'"),
        (["a:8001", "b:8001"], "one endpoint for every model"),
        (["t5=", "gpt2=g:8001"], "give one HOST:PORT per model"),
        (["t5=a:1", "t5=b:1", "gpt2=g:1"], "give one HOST:PORT per model"),
    ],
)
def test_an_ambiguous_or_incomplete_routing_is_refused_with_the_fix(values: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        triton_routes(values, SERVED)


def test_scales_to_zero_must_name_a_served_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "t5.json"
    spec.write_text(T5_SMALL.to_json())
    argv = ["gateway", "--triton-url", "triton:8001", "--port", "1", "--spec", str(spec)]
    assert main([*argv, "--scales-to-zero", "gpt2"]) != 0
    assert f"--scales-to-zero gpt2: no --spec serves such a model ({T5_SMALL.name})" in capsys.readouterr().err
