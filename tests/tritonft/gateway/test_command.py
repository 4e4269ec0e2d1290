"""``tritonft gateway --triton-url``: one Triton for every model, or one per model (a deployed stack's shape)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.tritonft.repo.conftest import make_spec
from tritonft.errors import UserError
from tritonft.gateway.command import add_arguments, load_config, triton_routes
from tritonft.gateway.config import GatewayConfig
from tritonft.spec import Family

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


def parsed(tmp_path: Path, *extra: str) -> argparse.Namespace:
    spec = tmp_path / "gpt2.json"
    spec.write_text(make_spec(Family.GPT2, name="gpt2").to_json())
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--triton-url", "triton:8001", "--port", "8080", "--spec", str(spec), *extra])


def test_coalescing_is_on_by_default_with_two_calls_in_flight(tmp_path: Path) -> None:
    config = load_config(parsed(tmp_path))
    assert (config.coalesce, config.calls_in_flight) == (True, 2)


def test_no_coalesce_switches_coalescing_off(tmp_path: Path) -> None:
    assert load_config(parsed(tmp_path, "--no-coalesce")).coalesce is False


def test_the_served_model_keeps_the_ensembles_max_batch_size(tmp_path: Path) -> None:
    [model] = load_config(parsed(tmp_path)).models
    assert model.max_batch_size == make_spec(Family.GPT2, name="gpt2").batching.max_batch_size


def test_calls_in_flight_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--calls-in-flight must be positive"):
        load_config(parsed(tmp_path, "--calls-in-flight", "0"))


def test_scales_to_zero_must_name_a_served_model(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--scales-to-zero t5: no --spec serves such a model \(gpt2\)"):
        load_config(parsed(tmp_path, "--scales-to-zero", "t5"))


def test_scales_to_zero_names_the_models_that_may_sleep(tmp_path: Path) -> None:
    assert load_config(parsed(tmp_path, "--scales-to-zero", "gpt2")).scales_to_zero == {"gpt2"}
