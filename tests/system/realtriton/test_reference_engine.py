"""The reference engine on a real Triton: T5, GPT-2 and GPT-J golden checkpoints (rebuilt from their seed, converted
with ``tritonft convert`` at TP 2, rendered with ``tritonft repo --engine reference``) answer with exactly what
Hugging Face transformers generated for them, over HTTP and gRPC, through the ensemble and from the model step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.system.realtriton.client import PROTOCOLS, ask, client
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.golden import SERVED, TP, GoldenCase, golden_cases, golden_spec, render_golden, words
from tests.tritonft.reference.checkpoints import MAX_NEW_TOKENS
from tritonft.cli import main
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.reference import GenerationRequest, build_model, generate, load_checkpoint
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def golden_repository(tmp_path_factory: pytest.TempPathFactory, converted: Callable[..., Path]) -> Path:
    out, scratch = tmp_path_factory.mktemp("golden-repo"), tmp_path_factory.mktemp("golden-scratch")
    for name in SERVED:
        render_golden(name, converted(name, TP), out, scratch)
    return out


@pytest.fixture(scope="session")
def golden_triton(serve_triton: ServeTriton, newest_runtime: TritonRuntime, golden_repository: Path) -> LocalTriton:
    """On tritonserver 2.51.0: the reference engine is numpy code written for the image's Python 3.10 (``zip(strict=)``
    ...), which 2.33.0's only stub (Python 3.8) cannot run; the ensemble around it is tested on 2.33.0 with the
    stand-in step."""
    return serve_triton(golden_repository, runtime=newest_runtime)


def greedy(name: str) -> list[GoldenCase]:
    return [case for case in golden_cases(name) if case.beam_width == 1]


def model_name(name: str) -> str:
    return golden_spec(name).name


def url(server: LocalTriton, protocol: str) -> str:
    return f"{protocol}://{server.http_url if protocol == 'http' else server.grpc_url}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", SERVED)
def test_a_batch_of_prompts_of_different_lengths_gets_the_golden_greedy_text(
    golden_triton: LocalTriton, name: str, protocol: str
) -> None:
    cases = greedy(name)
    assert len({len(case.prompt_ids) for case in cases}) > 1

    answers = ask(golden_triton, model_name(name), [case.prompt for case in cases], protocol)

    assert answers == [[case.answers[0]] for case in cases]


@pytest.mark.parametrize("name", SERVED)
def test_beam_search_through_the_ensemble_returns_every_golden_beam_best_first(
    golden_triton: LocalTriton, name: str
) -> None:
    case = next(case for case in golden_cases(name) if case.beam_width > 1)
    options: dict[str, tuple[str, list[Any]]] = {
        "beam_width": ("UINT32", [case.beam_width]),
        "len_penalty": ("FP32", [case.len_penalty]),
    }

    answers = ask(golden_triton, model_name(name), [case.prompt], "grpc", **options)

    assert answers == [list(case.answers)]


def _ft_inputs(protocol: str, family: Family, prompts: list[tuple[int, ...]]) -> list[Any]:
    """FT's required inputs for ``prompts`` (right-padded with 0: the lengths say where each prompt ends)."""
    module = httpclient if protocol == "http" else grpcclient
    ids = np.zeros((len(prompts), max(len(p) for p in prompts)), np.uint32)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = prompt
    lengths = np.array([[len(p)] for p in prompts], np.uint32)
    output_len = np.full((len(prompts), 1), MAX_NEW_TOKENS, np.uint32)
    names = ("sequence_length", "max_output_len") if family is Family.T5 else ("input_lengths", "request_output_len")
    inputs = []
    for name, array in (("input_ids", ids), (names[0], lengths), (names[1], output_len)):
        tensor = module.InferInput(name, list(array.shape), "UINT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", SERVED)
def test_the_model_step_returns_the_golden_token_ids_in_fts_layout(
    golden_triton: LocalTriton, name: str, protocol: str
) -> None:
    spec, cases = golden_spec(name), greedy(name)
    prompts = [case.prompt_ids for case in cases]
    result = client(golden_triton, protocol).infer(RepoNames.of(spec).ft, _ft_inputs(protocol, spec.family, prompts))
    output_ids, lengths = result.as_numpy("output_ids"), result.as_numpy("sequence_length")

    echo = spec.family is not Family.T5
    assert output_ids.shape == (len(cases), 1, (max(map(len, prompts)) if echo else 0) + MAX_NEW_TOKENS)
    for row, case in enumerate(cases):
        sequence = (list(case.prompt_ids) if echo else []) + list(case.outputs[0])
        assert lengths[row, 0] == len(sequence)
        assert output_ids[row, 0, : len(sequence)].tolist() == sequence


def test_sampling_through_the_ensemble_is_the_references_draw_for_the_same_seed(
    golden_triton: LocalTriton, converted: Callable[..., Path]
) -> None:
    case = greedy("gpt2")[0]
    options: dict[str, tuple[str, list[Any]]] = {
        "runtime_top_k": ("UINT32", [20]),
        "temperature": ("FP32", [2.0]),
        "random_seed": ("UINT64", [7]),
    }
    model = build_model(load_checkpoint(converted("gpt2", TP)))
    request = GenerationRequest(case.prompt_ids, MAX_NEW_TOKENS, top_k=20, temperature=2.0, random_seed=7)
    drawn = generate(model, [request]).generated[0][0]
    expected = words(drawn[: drawn.index(model.end_id)] if model.end_id in drawn else drawn)

    first = ask(golden_triton, model_name("gpt2"), [case.prompt], "http", **options)
    second = ask(golden_triton, model_name("gpt2"), [case.prompt], "grpc", **options)

    assert first == second == [[expected]]
    assert expected != case.answers[0], "sampling at temperature 2 drew the greedy continuation"


def test_a_stop_word_ends_the_golden_answer_after_the_phrase(golden_triton: LocalTriton) -> None:
    case = greedy("gptj")[0]
    third = case.answers[0].split()[2]
    assert third not in case.answers[0].split()[:2]

    answers = ask(golden_triton, model_name("gptj"), [case.prompt], "grpc", stop_words=("BYTES", [third]))

    assert answers == [[" ".join(case.answers[0].split()[:3])]]


def _expected_answers(tmp_path: Path, name: str, answer: Callable[[GoldenCase], str]) -> Path:
    path = tmp_path / "expected.json"
    cases = [{"prompt": case.prompt, "answer": answer(case)} for case in greedy(name)]
    path.write_text(json.dumps({model_name(name): cases}))
    return path


def _spec_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(golden_spec(name).to_json())
    return path


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_probe_with_the_spec_passes_on_the_exact_golden_answers(
    golden_triton: LocalTriton, tmp_path: Path, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _expected_answers(tmp_path, "t5", lambda case: case.answers[0])
    argv = ["probe", "--url", url(golden_triton, protocol), "--spec", str(_spec_file(tmp_path, "t5"))]

    code = main([*argv, "--expected-answers", str(expected), "--requests", "2", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["metadata"]["detail"] == "inputs/outputs match the rendered contract"
    assert checks["inference"]["detail"] == f"the expected answer, exactly, for {len(greedy('t5'))} prompt(s)"
    assert report["models"][0]["sample_answer"] == greedy("t5")[0].answers[0]


def test_probe_fails_naming_the_prompt_and_both_answers_when_an_answer_differs(
    golden_triton: LocalTriton, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = greedy("gpt2")[0]
    wrong = first.answers[0] + " w1"
    expected = _expected_answers(tmp_path, "gpt2", lambda case: wrong if case == first else case.answers[0])
    argv = ["probe", "--url", url(golden_triton, "grpc"), "--spec", str(_spec_file(tmp_path, "gpt2"))]

    code = main([*argv, "--expected-answers", str(expected), "--requests", "1"])

    captured = capsys.readouterr()
    assert code == 1
    assert f"the answer to {first.prompt!r} is not the expected one: expected {wrong!r}, got {first.answers[0]!r}" in (
        captured.err
    )


def test_the_golden_answers_come_from_the_images_python_3_10_and_numpy_1_too(
    serve_triton: ServeTriton, image_python_runtime: TritonRuntime, golden_repository: Path
) -> None:
    server = serve_triton(golden_repository, runtime=image_python_runtime)

    for name in SERVED:
        cases = greedy(name)
        assert ask(server, model_name(name), [case.prompt for case in cases], "grpc") == [
            [case.answers[0]] for case in cases
        ], name
