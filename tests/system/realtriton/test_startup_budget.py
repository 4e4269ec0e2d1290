"""The Triton part of the start-up budget on a real ``tritonserver`` (2.51, CPU) serving ``local``'s models (t5-small
with its FT step stood in for, the real all-MiniLM-L6-v2 through ONNX Runtime): each model's load time from
Triton's own log, READY, first answer. The figures themselves go to ``benchmarks/BENCHMARKS.md``
(``benchmarks/startup_budget.py``); here only what must hold whatever the machine's speed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.system.realtriton.client import ask
from tests.system.realtriton.repos import serve_ready_repository, stack_specs
from tests.system.realtriton.test_encoders import infer
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.rollout.local_start import LocalStart, measure_start
from tritonft.spec import Family

pytestmark = pytest.mark.slow


def local_repository(
    out: Path,
    tokenizers: dict[Family, Path],
    encoder_converted: Callable[..., Path],
    encoder_checkpoint: Callable[[str], Path],
) -> Path:
    """``local``'s FT and encoder models in one repository, as their Triton pods load them (FT stood in for); its
    vLLM model runs its own image's server (the vLLM engine's time to READY: benchmarks/vllm_paths.py)."""
    specs = [s for s in stack_specs("local") if not s.family.is_vllm]
    serve_ready_repository([s for s in specs if s.family.is_fastertransformer], out, tokenizers)
    for spec in specs:
        if spec.encoder is not None:
            serving = EncoderServing(spec.name, max_batch_size=spec.batching.max_batch_size, engine=OnnxEngine.PYTHON)
            name = "all-minilm-l6-v2"
            write_encoder_repository(serving, encoder_converted(name), encoder_checkpoint(name), out)
    return out


def first_answers(server: LocalTriton) -> dict[str, object]:
    """One request to each of ``local``'s models."""
    return {
        "t5-small": ask(server, "t5-small", ["translate English to German: The house is wonderful."]),
        "minilm": infer(server, "minilm", ["A man is eating food."]).as_numpy("embedding").shape,
    }


@pytest.fixture(scope="module")
def started(
    newest_runtime: TritonRuntime,
    tmp_path_factory: pytest.TempPathFactory,
    tokenizers: dict[Family, Path],
    encoder_converted: Callable[..., Path],
    encoder_checkpoint: Callable[[str], Path],
) -> Iterator[tuple[Path, LocalStart]]:
    repo = local_repository(tmp_path_factory.mktemp("local-repo"), tokenizers, encoder_converted, encoder_checkpoint)
    log = tmp_path_factory.mktemp("startup-log") / "tritonserver.log"
    server, start = measure_start(newest_runtime, repo, log, first_answers)  # the encoder needs onnxruntime
    try:
        yield repo, start
    finally:
        server.stop()


def test_tritons_log_gives_a_load_time_for_every_model_of_the_repository(started: tuple[Path, LocalStart]) -> None:
    repo, start = started
    served = {p.name for p in repo.iterdir() if (p / "config.pbtxt").is_file()}
    assert set(start.load.models) == served
    assert {"t5-small", "minilm"} <= served


def test_every_model_loads_before_the_server_listens_and_it_listens_before_it_is_ready(
    started: tuple[Path, LocalStart],
) -> None:
    _, start = started
    up = start.load.server_up_s
    assert up is not None
    assert max(start.load.models.values()) <= up <= start.ready_s


def test_the_first_answer_comes_after_ready_and_answers_each_model(started: tuple[Path, LocalStart]) -> None:
    _, start = started
    assert start.ready_s <= start.first_answer_s
    answers = start.answer
    assert isinstance(answers, dict)
    assert answers["t5-small"] and answers["t5-small"][0][0].strip()
    assert answers["minilm"] == (1, 384)


def test_the_figures_are_plain_json_for_a_stack_output(started: tuple[Path, LocalStart]) -> None:
    _, start = started
    out = start.as_output()
    assert set(out) == {"ready", "first_answer", "server_up", "models"}
    assert out["models"] == dict(start.load.models)
