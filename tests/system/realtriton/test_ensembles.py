"""The rendered repositories on a real Triton: T5, GPT-2 and GPT-J at TP 1 and 2 (``tritonft repo``), served with the
image's Python requirements; the FT step is the stand-in (an echo of the prompt's tokens, see ``tritonft.standin``), so
every answer is checkable text that went through Triton's ensemble, both Python models and the batchers.

Served by tritonserver 2.33.0, the FT image's server (NGC Triton 23.04), except the streaming (decoupled) answers:
2.33.0 cannot tell a gRPC client that a stream has ended (the ``triton_final_response`` flag came after it; asking
for it is refused, see :func:`test_on_the_ft_images_server_a_stream_cannot_ask_for_its_final_flag`), so the
streaming variant's growing answers are checked on 2.51.0."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tokenizers import Tokenizer
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

from tests.system.realtriton.client import (
    PROTOCOLS,
    ask,
    client,
    ensemble_routes,
    execution_stats,
    optional_inputs,
    tensor,
)
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import MATRIX, matrix_spec, render_with_cli
from tritonft.local_triton import LocalTriton, TritonError, TritonRuntime
from tritonft.repo.naming import RepoNames
from tritonft.repo.render import render_repository_files
from tritonft.spec import Family
from tritonft.standin import received, set_behaviour, standin_all

pytestmark = pytest.mark.slow

UNARY = [spec.name for spec in MATRIX if not spec.decoupled]
ONE_PER_FAMILY = ["t5-tp1", "gpt2-tp1", "gptj-tp1"]
SAMPLE_VALUE = {"UINT32": 2, "UINT64": 7, "FP32": 0.5, "BYTES": "fox", "BOOL": True}


def _optional_cases() -> list[tuple[str, str, str]]:
    """(model, optional ensemble input, V2 datatype) for one model per family, from the rendered ensembles."""
    cases = []
    for name in ONE_PER_FAMILY:
        files = render_repository_files(matrix_spec(name))
        config = text_format.Parse(files[f"{name}/config.pbtxt"].decode(), model_config_pb2.ModelConfig())
        cases += [(name, input_name, datatype) for input_name, datatype in optional_inputs(config).items()]
    return cases


def ft_dir(repository: Path, model: str) -> Path:
    return repository / RepoNames.of(matrix_spec(model)).ft


@pytest.fixture
def recording(matrix_repository: Path) -> Iterator[None]:
    """Every stand-in of the matrix records what it receives during the test."""
    dirs = [ft_dir(matrix_repository, spec.name) for spec in MATRIX]
    for folder in dirs:
        (folder / "standin-received.jsonl").unlink(missing_ok=True)
        set_behaviour(folder, record=True)
    yield
    for folder in dirs:
        set_behaviour(folder)


def test_every_model_of_every_family_and_tp_is_ready(matrix_triton: LocalTriton) -> None:
    index = httpclient.InferenceServerClient(matrix_triton.http_url).get_model_repository_index()
    expected = {name for spec in MATRIX for name in RepoNames.of(spec).by_role().values()}
    assert {m["name"]: m.get("state") for m in index} == dict.fromkeys(expected, "READY")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", UNARY)
def test_the_ensemble_answers_the_prompt(matrix_triton: LocalTriton, model: str, protocol: str) -> None:
    assert ask(matrix_triton, model, ["hello world"], protocol) == [["hello world"]]


@pytest.mark.parametrize(("model", "name", "datatype"), _optional_cases())
def test_each_optional_ensemble_input_is_accepted_and_reaches_its_step(  # noqa: PLR0917
    matrix_triton: LocalTriton, matrix_repository: Path, recording: None, model: str, name: str, datatype: str
) -> None:
    value = SAMPLE_VALUE[datatype]
    answers = ask(matrix_triton, model, ["hello world"], "grpc", **{name: (datatype, [value])})
    assert answers[0] and all("hello world".startswith(beam) for beam in answers[0]), answers
    step, step_input = ensemble_routes(matrix_repository / model)[name]
    [request] = received(ft_dir(matrix_repository, model))
    if step == RepoNames.of(matrix_spec(model)).ft:
        _, _, values = request[step_input]
        assert np.asarray(values).reshape(-1).tolist() == pytest.approx([value])
    elif name == "return_tokens":  # the postprocessing step's: each token's text, which make the answer
        inputs = [tensor("grpc", "text_input", "BYTES", ["hello world"]), tensor("grpc", name, datatype, [value])]
        result = client(matrix_triton, "grpc").infer(model, inputs)
        pieces = [piece.decode() for piece in result.as_numpy("output_tokens")[0, 0]]
        assert len(pieces) == result.as_numpy("output_lengths")[0, 0] > 1
        assert "".join(pieces) == answers[0][0]
    elif name == "max_output_len":
        length_input = "request_output_len" if "request_output_len" in request else "max_output_len"
        assert np.asarray(request[length_input][2]).reshape(-1).tolist() == [value]
    else:
        # the phrase in each of its forms (GPT's byte-level BPE: as written and after a space; T5: once)
        forms = 1 if matrix_spec(model).family is Family.T5 else 2
        word_list = request[f"{name}_list"]
        _, offsets = np.asarray(word_list[2]).reshape(2, -1)
        assert (np.diff(offsets[:forms], prepend=0) > 0).all() and (offsets[forms:] == -1).all(), offsets


def test_a_batch_of_prompts_gets_one_answer_per_row_in_order(matrix_triton: LocalTriton) -> None:
    prompts = ["hello world", "the quick brown fox", "once upon a time"]
    for model in ("t5-tp2", "gpt2-tp2", "gptj-tp2"):
        assert ask(matrix_triton, model, prompts, "grpc") == [[p] for p in prompts]


def test_concurrent_requests_are_merged_by_the_dynamic_batcher(
    matrix_triton: LocalTriton, matrix_repository: Path
) -> None:
    model = "gptj-tp2"
    ft = RepoNames.of(matrix_spec(model)).ft
    set_behaviour(ft_dir(matrix_repository, model), sleep_s=0.3)
    try:
        before = execution_stats(matrix_triton, ft)
        prompts = [f"hello world {i}" for i in range(8)]
        answers: dict[str, list[list[str]]] = {}
        threads = [
            threading.Thread(target=lambda p=p: answers.__setitem__(p, ask(matrix_triton, model, [p], "grpc")))
            for p in prompts
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        set_behaviour(ft_dir(matrix_repository, model))
    after = execution_stats(matrix_triton, ft)
    inferences, executions = after[0] - before[0], after[1] - before[1]
    assert answers == {p: [[p]] for p in prompts}
    assert inferences == 8
    assert executions < inferences, f"{inferences} requests ran in {executions} executions: nothing was merged"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_non_ascii_prompts_round_trip(matrix_triton: LocalTriton, protocol: str) -> None:
    text = "Grüße aus Köln, 世界 🌍: naïve café"
    room = {"max_output_len": ("UINT32", [64])}  # a tiny byte-level vocabulary spends a token per byte
    assert ask(matrix_triton, "gpt2-tp1", [text], protocol, **room) == [[text]]
    assert ask(matrix_triton, "t5-tp1", ["Er schwenkte den Angelstab zurück"], protocol) == [
        ["Er schwenkte den Angelstab zurück"]
    ]


def test_an_empty_prompt_gets_an_empty_t5_answer_and_a_clear_gpt_error(matrix_triton: LocalTriton) -> None:
    assert ask(matrix_triton, "t5-tp1", [""]) == [[""]]
    with pytest.raises(InferenceServerException, match="row 0 encodes to no tokens; send a non-empty prompt"):
        ask(matrix_triton, "gpt2-tp1", [""])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_prompt_over_max_input_len_gets_a_clear_error_and_the_model_keeps_serving(
    matrix_triton: LocalTriton, protocol: str
) -> None:
    too_long = " ".join(["hello world"] * 80)
    with pytest.raises(InferenceServerException, match=r"at most 64 \(shorten the prompt or raise max_input_len"):
        ask(matrix_triton, "gpt2-tp1", [too_long], protocol)
    assert ask(matrix_triton, "gpt2-tp1", ["hello world"], protocol) == [["hello world"]]
    assert "not healthy" not in matrix_triton.log_text()


def _phrases(word_list: Any, tokenizer: Tokenizer) -> list[str]:
    ids, offsets = np.asarray(word_list).reshape(2, -1)
    out, start = [], 0
    for end in offsets:
        if end < 0:
            break
        out.append(tokenizer.decode([int(t) for t in ids[start:end]]))
        start = int(end)
    return out


def test_bad_words_with_csv_quoting_arrive_as_phrases_and_are_not_generated(
    matrix_triton: LocalTriton, matrix_repository: Path, tokenizers: dict[Family, Path], recording: None
) -> None:
    # FT bans token sequences; each phrase goes as written and as the word after a space (byte-level BPE)
    prompt = "hello, world and the quick brown fox;brown fox"
    bad = '"hello, world", brown fox'
    answers = ask(matrix_triton, "gpt2-tp1", [prompt], "http", bad_words=("BYTES", [bad]))
    [request] = received(ft_dir(matrix_repository, "gpt2-tp1"))
    tokenizer = Tokenizer.from_file(str(tokenizers[Family.GPT2] / "tokenizer.json"))
    assert _phrases(request["bad_words_list"][2][0], tokenizer) == [
        "hello, world",
        " hello, world",
        "brown fox",
        " brown fox",
    ]
    assert answers == [[" and the quick;"]]


def test_stop_words_with_csv_quoting_end_the_answer_after_the_phrase_mid_sentence(
    matrix_triton: LocalTriton, matrix_repository: Path, tokenizers: dict[Family, Path], recording: None
) -> None:
    prompt = "once upon a time, there was a little lamb"
    answers = ask(matrix_triton, "gpt2-tp1", [prompt], "grpc", stop_words=("BYTES", ['"time, there", lamb']))
    [request] = received(ft_dir(matrix_repository, "gpt2-tp1"))
    tokenizer = Tokenizer.from_file(str(tokenizers[Family.GPT2] / "tokenizer.json"))
    assert _phrases(request["stop_words_list"][2][0], tokenizer) == ["time, there", " time, there", "lamb", " lamb"]
    assert answers == [["once upon a time, there"]]


def test_a_request_without_bad_or_stop_words_sends_the_model_step_fts_empty_word_lists(
    matrix_triton: LocalTriton, matrix_repository: Path, recording: None
) -> None:
    # Triton 2.33.0 (the FT image's) cannot leave an ensemble's internal tensor unset: it deadlocks the request.
    # Always set, the FT step also sees one input set for every request, which its batcher needs to merge them.
    for protocol in PROTOCOLS:
        assert ask(matrix_triton, "gpt2-tp1", ["hello world"], protocol) == [["hello world"]]
    for request in received(ft_dir(matrix_repository, "gpt2-tp1")):
        assert sorted(request) == [
            "bad_words_list",
            "input_ids",
            "input_lengths",
            "is_return_log_probs",
            "request_output_len",
            "stop_words_list",
        ]
        assert request["bad_words_list"][1:] == request["stop_words_list"][1:] == ([1, 2, 1], [[[0], [-1]]])


def test_a_newline_stop_phrase_ends_the_answer(matrix_triton: LocalTriton) -> None:
    answers = ask(matrix_triton, "gpt2-tp1", ["first line\nsecond line"], "grpc", stop_words=("BYTES", ["\n"]))
    assert answers == [["first line\n"]]


def test_on_the_ft_images_server_a_stream_cannot_ask_for_its_final_flag(matrix_triton: LocalTriton) -> None:
    """tritonserver 2.33.0 refuses ``enable_empty_final_response``: the end of a decoupled stream is invisible."""
    responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = grpcclient.InferenceServerClient(matrix_triton.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        client.async_stream_infer(
            "gpt2-stream", [tensor("grpc", "text_input", "BYTES", ["hello world"])], enable_empty_final_response=True
        )
        result, error = responses.get(timeout=30)
    finally:
        client.stop_stream()
    assert result is None
    assert "parameter keys starting with 'triton_' are reserved" in error.message()


@pytest.fixture(scope="module")
def newest_matrix_triton(
    serve_triton: ServeTriton, newest_runtime: TritonRuntime, matrix_repository: Path
) -> LocalTriton:
    return serve_triton(matrix_repository, runtime=newest_runtime)


def test_the_streaming_variant_sends_one_growing_answer_per_generated_step(newest_matrix_triton: LocalTriton) -> None:
    responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = grpcclient.InferenceServerClient(newest_matrix_triton.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        client.async_stream_infer(
            "gpt2-stream", [tensor("grpc", "text_input", "BYTES", ["hello world"])], enable_empty_final_response=True
        )
        texts = []
        while True:
            result, error = responses.get(timeout=30)
            assert error is None, error
            response = result.get_response()
            if response.outputs:  # the ensemble may flag its last answer as the final response
                texts.append(result.as_numpy("text_output").reshape(-1)[0].decode())
            if response.parameters["triton_final_response"].bool_param:
                break
    finally:
        client.stop_stream()
    assert len(texts) > 1
    assert all(later.startswith(earlier) and later != earlier for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == "hello worldhello world", "streamed GPT text is prompt + generated tokens"


def test_a_repository_triton_refuses_fails_with_tritons_own_message(
    serve_triton: Any, tmp_path: Path, tokenizers: dict[Family, Path]
) -> None:
    repository = tmp_path / "repo"
    render_with_cli(matrix_spec("gpt2-tp1"), repository, tokenizers[Family.GPT2], tmp_path)
    standin_all(repository)
    config = repository / "gpt2-tp1-ft" / "config.pbtxt"
    text = config.read_text()
    broken = text.replace(
        'name: "input_lengths"\n  data_type: TYPE_UINT32', 'name: "input_lengths"\n  data_type: TYPE_INT64'
    )
    assert broken != text
    config.write_text(broken)
    with pytest.raises(TritonError) as failure:
        serve_triton(repository, shared=False)
    assert "gpt2-tp1" in str(failure.value)
    # The FT step's warmup sample meets the changed input first: "inference input data-type is 'UINT32', model
    # expects 'INT64'".
    assert any(word in str(failure.value).lower() for word in ("data type", "datatype", "data-type"))
