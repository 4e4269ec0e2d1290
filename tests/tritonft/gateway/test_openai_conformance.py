"""Every body the gateway's pure shapers make validates against OpenAI's published schema for it (the served bodies,
for a generated set of requests, are validated in tests/system/realtriton/test_openai_conformance.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tritonft.gateway.openai_schema import load, main_checkout, schemas_path, violations
from tritonft.gateway import errors
from tritonft.gateway.app import model_list
from tritonft.gateway.config import GatewayConfig, ServedModel
from tritonft.gateway.embeddings import EmbeddingModel, EmbeddingsRequest, response_body
from tritonft.gateway.mapping import Beam, Row, chat_body, completion_body, ensemble_request
from tritonft.gateway.streaming import Chunks
from tritonft.spec import Family

GPT = ServedModel("gpt", Family.GPT2, streaming=False, max_output_len=32, max_input_len=64, max_batch_size=8)
BEAM = Beam(" a b", 2, (" a", " b"), (-0.5, -1.0))
MESSAGES = [{"role": "user", "content": "x"}]


def conforms(name: str, body: Any, *, base64: bool = False) -> list[str]:
    return violations(load().validator(name, base64=base64), body)


def chunk_conforms(name: str, event: bytes) -> list[str]:
    return violations(load().chunk_validator(name), json.loads(event.removeprefix(b"data: ")))


def test_nullable_is_read_as_or_null() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [], "usage": None}
    assert conforms("CreateChatCompletionStreamResponse", chunk) == []
    assert conforms("CreateChatCompletionStreamResponse", chunk | {"usage": usage}) == []
    assert conforms("CreateChatCompletionStreamResponse", chunk | {"usage": 5}) != []


def test_a_missing_schema_file_is_an_error_naming_where_to_put_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"shared/reference/openai/schemas\.json.*beside the clone"):
        schemas_path(tmp_path / "clone")


def test_a_worktree_finds_the_schemas_beside_itsmain_checkout(tmp_path: Path) -> None:
    main, tree = tmp_path / "main", tmp_path / "trees" / "branch"
    (main / ".git" / "worktrees" / "branch").mkdir(parents=True)
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'branch'}\n")
    shared = tmp_path / "shared" / "reference" / "openai" / "schemas.json"
    shared.parent.mkdir(parents=True)
    shared.write_text("{}")
    assert main_checkout(tree) == main
    assert schemas_path(tree) == shared


@pytest.mark.parametrize("logprobs", [False, True], ids=["plain", "logprobs"])
def test_a_chat_completion_conforms(logprobs: bool) -> None:
    req = ensemble_request({"model": "gpt", "messages": MESSAGES, "logprobs": logprobs, "n": 2}, GPT, chat=True)
    body = chat_body("chatcmpl-1", 1, req, Row((BEAM, BEAM), 3))
    assert body["choices"][0]["message"]["refusal"] is None
    assert conforms("CreateChatCompletionResponse", body) == []


@pytest.mark.parametrize(
    "extra", [{}, {"logprobs": 0}, {"echo": True}, {"n": 2, "prompt": ["p", "q"]}], ids=["plain", "lp", "echo", "n"]
)
def test_a_completion_conforms(extra: dict[str, Any]) -> None:
    req = ensemble_request({"model": "gpt", "prompt": "p"} | extra, GPT)
    rows = [Row((BEAM,) * req.n, 1) for _ in req.prompts]
    assert conforms("CreateCompletionResponse", completion_body("cmpl-1", 1, req, rows)) == []


@pytest.mark.parametrize("include_usage", [False, True], ids=["no-usage", "usage"])
def test_every_chat_stream_chunk_conforms(include_usage: bool) -> None:
    chunks = Chunks("chatcmpl-1", 1, "gpt", chat=True, include_usage=include_usage)
    events = [*chunks.opening(), chunks.piece(0, "hi", None), chunks.piece(0, "", "stop")]
    events += [chunks.usage({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})] if include_usage else []
    assert [chunk_conforms("CreateChatCompletionStreamResponse", e) for e in events] == [[]] * len(events)


@pytest.mark.parametrize("include_usage", [False, True], ids=["no-usage", "usage"])
def test_every_completion_stream_chunk_conforms(include_usage: bool) -> None:
    chunks = Chunks("cmpl-1", 1, "gpt", chat=False, include_usage=include_usage)
    events = [*chunks.opening(), chunks.piece(0, "hi", None), chunks.piece(0, "", "length")]
    events += [chunks.usage({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})] if include_usage else []
    assert [chunk_conforms("CreateCompletionResponse", e) for e in events] == [[]] * len(events)


def test_a_completion_chunk_with_usage_null_would_not_conform() -> None:
    chunk = {"id": "c", "object": "text_completion", "created": 0, "model": "m", "choices": [], "usage": None}
    assert violations(load().chunk_validator("CreateCompletionResponse"), chunk) != []


@pytest.mark.parametrize("base64", [False, True], ids=["float", "base64"])
def test_an_embeddings_answer_conforms(base64: bool) -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    body = response_body("m", EmbeddingsRequest(("a", "b"), base64, None), vectors, 4)
    assert conforms("CreateEmbeddingResponse", body, base64=base64) == []


def test_the_model_list_conforms() -> None:
    config = GatewayConfig("127.0.0.1:1", (GPT,), embedders=(EmbeddingModel("minilm"),))
    body = model_list(config)
    assert [m["id"] for m in body["data"]] == ["gpt", "minilm"]
    assert conforms("ListModelsResponse", body) == []


@pytest.mark.parametrize(
    "error",
    [
        errors.bad_parameter("n", "n must be 1"),
        errors.unknown_model("gpt4", ["gpt"]),
        errors.model_starting("gpt"),
        errors.deadline_expired(60),
        errors.from_triton("UNAVAILABLE", "down", 60),
        errors.from_triton("INVALID_ARGUMENT", "too long: max_input_len 64", 60),
        errors.from_triton("INTERNAL", "boom", 60),
        errors.ApiError(500, "the gateway failed; see its log", "server_error"),
    ],
    ids=lambda e: f"{e.status}-{e.code}",
)
def test_every_error_body_conforms(error: errors.ApiError) -> None:
    assert conforms("ErrorResponse", error.body()) == []
