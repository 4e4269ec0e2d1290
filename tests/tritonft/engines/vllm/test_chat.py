"""The model's own chat template rendered as transformers renders it: checked against transformers' own rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tritonft.engines.vllm.checkpoints import CHAT_COUNT, VARIANTS, golden, write
from tritonft.engines.vllm.chat import ChatTemplateError, prompt_for_engine, render


@pytest.fixture(scope="module")
def tokenizer_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    directory = write(VARIANTS[0], tmp_path_factory.mktemp("ckpt") / VARIANTS[0].name)
    config: dict[str, object] = json.loads((directory / "tokenizer_config.json").read_text())
    return config


@pytest.mark.parametrize("index", range(CHAT_COUNT))
def test_a_conversation_renders_as_transformers_apply_chat_template(
    tokenizer_config: dict[str, object], index: int
) -> None:
    case = golden(VARIANTS[0].name)["chats"][index]
    assert render(tokenizer_config, case["messages"]) == case["text"]


def test_content_parts_are_joined_as_the_template_says(tokenizer_config: dict[str, object]) -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert render(tokenizer_config, parts) == "<s>user: ab\nassistant:"


def test_without_the_generation_prompt_the_assistant_turn_is_not_opened(tokenizer_config: dict[str, object]) -> None:
    assert render(tokenizer_config, [{"role": "user", "content": "hi"}], add_generation_prompt=False) == "<s>user: hi\n"


def test_the_leading_bos_is_left_to_a_tokenizer_that_adds_it(tokenizer_config: dict[str, object]) -> None:
    rendered = render(tokenizer_config, [{"role": "user", "content": "hi"}])
    assert prompt_for_engine(tokenizer_config, rendered, tokenizer_adds_bos=True) == "user: hi\nassistant:"
    assert prompt_for_engine(tokenizer_config, rendered, tokenizer_adds_bos=False) == rendered


def test_a_template_that_raises_is_refused_in_its_own_words() -> None:
    config = {"chat_template": "{{ raise_exception('Conversation roles must alternate user/assistant') }}"}
    with pytest.raises(ChatTemplateError, match="Conversation roles must alternate user/assistant"):
        render(config, [{"role": "user", "content": "hi"}])


def test_a_model_without_a_chat_template_points_to_completions() -> None:
    with pytest.raises(ChatTemplateError, match=r"has no chat template .*use /v1/completions"):
        render({}, [{"role": "user", "content": "hi"}])


def test_a_named_default_template_is_used(tmp_path: Path) -> None:
    config = {"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "d{{ 1 }}"}]}
    assert render(config, []) == "d1"
