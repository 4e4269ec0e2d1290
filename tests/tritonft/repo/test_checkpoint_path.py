"""Weights kept outside the repository (the cluster layout): ``model_checkpoint_path`` points at them."""

from __future__ import annotations

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]
from tritonclient.grpc import model_config_pb2 as mc

from components.settings.catalog import KNOWN_MODELS
from tritonft.errors import UserError
from tritonft.repo.render import render_repository_files
from tritonft.spec import ModelSpec

FAMILY, ARCH = KNOWN_MODELS["gpt2"]
SPEC = ModelSpec("gpt2", FAMILY, "gpt2", "607a30d783dfa663caf39e06633721c8d4cfcd7e", ARCH, tensor_parallel=2)


def ft_parameters(files: dict[str, bytes]) -> dict[str, str]:
    config = text_format.Parse(files["gpt2-ft/config.pbtxt"].decode(), mc.ModelConfig())
    return {k: v.string_value for k, v in config.parameters.items()}


def test_an_explicit_checkpoint_path_is_what_the_backend_loads() -> None:
    files = render_repository_files(
        SPEC, model_root="/models/repositories/gpt2/abc", checkpoint_path="/models/checkpoints/gpt2/key/2-gpu"
    )
    assert ft_parameters(files)["model_checkpoint_path"] == "/models/checkpoints/gpt2/key/2-gpu"


def test_without_it_the_weights_sit_in_the_ft_model_version_directory() -> None:
    files = render_repository_files(SPEC, model_root="/models")
    assert ft_parameters(files)["model_checkpoint_path"] == "/models/gpt2-ft/1/2-gpu"


@pytest.mark.parametrize("bad", ["relative/2-gpu", "/models/checkpoints/gpt2/key/1-gpu"])
def test_a_checkpoint_path_that_is_relative_or_of_another_tp_is_refused(bad: str) -> None:
    with pytest.raises(UserError) as info:
        render_repository_files(SPEC, checkpoint_path=bad)
    assert any("checkpoint_path" in p and "2-gpu" in p for p in info.value.problems)
