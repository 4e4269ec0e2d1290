"""Tokenizer logic round-trips text through tokenizers trained inside the tests (no downloads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tritonft.repo.tokenization import (
    TextTokenizer,
    TokenizerSettings,
    load_tokenizer,
    parse_phrases,
    postprocess,
    postprocess_outputs,
    postprocess_requests,
    preprocess,
    preprocess_requests,
    to_word_list,
    token_texts,
)

from .conftest import CORPUS

GPT = TokenizerSettings(pad_id=0, end_id=0, max_input_len=64, default_output_len=16)
T5 = TokenizerSettings(pad_id=0, end_id=1, max_input_len=64, default_output_len=16, append_id=1)
PROMPTS = [CORPUS[0], "Hello world", "The quick brown fox jumps over the lazy dog."]


def as_bytes_column(texts: list[str]) -> np.ndarray:
    return np.array([[t.encode("utf-8")] for t in texts], dtype=object)


def fake_generation(
    input_ids: np.ndarray, lengths: np.ndarray, completion: list[list[int]], end_id: int, include_prompt: bool
) -> tuple[np.ndarray, np.ndarray]:
    """FT-shaped outputs ``[B, 1, T]``: (prompt +) completion + end id padding, and ``sequence_length [B, 1]``."""
    rows = []
    for b, tokens in enumerate(completion):
        prompt = list(input_ids[b, : lengths[b, 0]]) if include_prompt else []
        rows.append(prompt + tokens)
    width = max(len(r) for r in rows) + 3
    ids = np.full((len(rows), 1, width), end_id, dtype=np.uint32)
    for b, row in enumerate(rows):
        ids[b, 0, : len(row)] = row
    return ids, np.array([[len(r)] for r in rows], dtype=np.int32)


def test_gpt_batch_round_trips_prompts_and_pads_with_end_id(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    out = preprocess(tokenizer, GPT, {"text_input": as_bytes_column(PROMPTS)})
    ids, lengths = out["input_ids"], out["input_lengths"]
    assert ids.dtype == np.uint32 and ids.shape == (3, int(lengths.max()))
    assert lengths.shape == (3, 1)
    for b, prompt in enumerate(PROMPTS):
        n = int(lengths[b, 0])
        assert tokenizer.decode(ids[b, :n].tolist()) == prompt
        assert (ids[b, n:] == GPT.end_id).all()
    assert (out["request_output_len"] == 16).all() and out["request_output_len"].shape == (3, 1)


def generated_two_completions(
    tokenizer_dir: Path,
) -> tuple[TextTokenizer, dict[str, np.ndarray], list[list[int]], np.ndarray, np.ndarray]:
    """The first two prompts preprocessed for GPT, and FT's outputs for two completions (the second ended by
    ``end_id``): the tokenizer, the preprocessing outputs, the completions' ids, ``output_ids`` and
    ``sequence_length``."""
    tokenizer = load_tokenizer(tokenizer_dir)
    out = preprocess(tokenizer, GPT, {"text_input": as_bytes_column(PROMPTS[:2])})
    completions = [
        tokenizer.encode(" once upon a time", add_special_tokens=False),
        [*tokenizer.encode(" lamb.", add_special_tokens=False), GPT.end_id],
    ]
    ids, seq = fake_generation(out["input_ids"], out["input_lengths"], completions, GPT.end_id, include_prompt=True)
    return tokenizer, out, completions, ids, seq


def test_gpt_postprocess_strips_the_prompt_and_stops_at_end_id(gpt_tokenizer_dir: Path) -> None:
    tokenizer, out, _completions, ids, seq = generated_two_completions(gpt_tokenizer_dir)
    texts = postprocess(tokenizer, GPT, ids, seq, out["input_lengths"])
    assert texts.shape == (2, 1)
    assert [t.decode() for t in texts[:, 0]] == [" once upon a time", " lamb."]


def test_t5_batch_round_trips_with_sentencepiece_and_appends_eos(t5_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(t5_tokenizer_dir)
    out = preprocess(tokenizer, T5, {"text_input": as_bytes_column(PROMPTS)})
    ids, lengths = out["input_ids"], out["input_lengths"]
    for b, prompt in enumerate(PROMPTS):
        n = int(lengths[b, 0])
        assert ids[b, n - 1] == T5.end_id
        assert (ids[b, n:] == T5.pad_id).all()
        assert tokenizer.decode(ids[b, : n - 1].tolist()) == prompt


def test_t5_postprocess_decodes_generated_tokens_until_eos(t5_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(t5_tokenizer_dir)
    target = tokenizer.encode(CORPUS[1], add_special_tokens=False)
    output_ids = np.array([[[*target, 1, 0, 0]]], dtype=np.int32)
    texts = postprocess(tokenizer, T5, output_ids, np.array([[len(target) + 1]], dtype=np.int32))
    assert texts[0, 0].decode() == CORPUS[1]


def test_word_lists_use_the_two_row_layout(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    words = to_word_list(tokenizer, [[" lazy dog"], [], [" fox", " the"]])
    lazy = tokenizer.encode(" lazy dog", add_special_tokens=False)
    fox = tokenizer.encode(" fox", add_special_tokens=False)
    the = tokenizer.encode(" the", add_special_tokens=False)
    width = len(fox) + len(the)
    assert words.dtype == np.int32 and words.shape == (3, 2, max(len(lazy), width))
    assert list(words[0, 0, : len(lazy)]) == lazy and words[0, 1, 0] == len(lazy) and words[0, 1, 1] == -1
    assert list(words[1, 0]) == [0] * words.shape[2] and list(words[1, 1]) == [-1] * words.shape[2]
    assert list(words[2, 0, :width]) == fox + the
    assert list(words[2, 1, :2]) == [len(fox), width] and (words[2, 1, 2:] == -1).all()


def test_a_gpt_phrase_is_also_matched_as_the_word_after_a_space(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    words = to_word_list(tokenizer, [["brown fox"]])
    bare = tokenizer.encode("brown fox", add_special_tokens=False)
    spaced = tokenizer.encode(" brown fox", add_special_tokens=False)
    assert bare != spaced, "byte-level BPE folds the leading space into the first token"
    assert list(words[0, 0]) == bare + spaced
    assert list(words[0, 1, :2]) == [len(bare), len(bare) + len(spaced)] and (words[0, 1, 2:] == -1).all()


def test_a_t5_phrase_is_sent_once_because_sentencepiece_encodes_both_forms_alike(t5_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(t5_tokenizer_dir)
    words = to_word_list(tokenizer, [["quick fox"]])
    ids = tokenizer.encode("quick fox", add_special_tokens=False)
    assert tokenizer.encode(" quick fox", add_special_tokens=False) == ids
    assert list(words[0, 0]) == ids
    assert words[0, 1, 0] == len(ids) and (words[0, 1, 1:] == -1).all()


def test_empty_word_lists_are_one_wide_no_words(gpt_tokenizer_dir: Path) -> None:
    inputs = {"text_input": as_bytes_column(["a", "b"]), "bad_words": as_bytes_column(["", ""])}
    out = preprocess(load_tokenizer(gpt_tokenizer_dir), GPT, inputs)
    assert out["bad_words_list"].tolist() == [[[0], [-1]], [[0], [-1]]]


def test_absent_word_inputs_still_give_fts_empty_word_lists(gpt_tokenizer_dir: Path) -> None:
    """Triton 2.33.0 (the FT image's) deadlocks an ensemble whose step output is not produced: always produce both."""
    out = preprocess(load_tokenizer(gpt_tokenizer_dir), GPT, {"text_input": as_bytes_column(["a", "b"])})
    assert sorted(out) == [
        "bad_words_list",
        "input_ids",
        "input_lengths",
        "is_return_log_probs",
        "request_output_len",
        "stop_words_list",
    ]
    assert out["bad_words_list"].tolist() == out["stop_words_list"].tolist() == [[[0], [-1]], [[0], [-1]]]


def test_stop_words_arrive_as_one_csv_string_per_row(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    inputs = {"text_input": as_bytes_column(["a"]), "stop_words": as_bytes_column(['stop, "here, now"'])}
    out = preprocess(tokenizer, GPT, inputs)
    expected = to_word_list(tokenizer, [["stop", "here, now"]])
    assert np.array_equal(out["stop_words_list"], expected)


def test_parse_phrases_handles_quotes_and_blanks() -> None:
    assert parse_phrases('a, "b, c",, d') == ["a", "b, c", "d"]
    assert parse_phrases("  ") == []


@pytest.mark.parametrize(
    ("text", "phrases"),
    [
        ("\n", ["\n"]),
        ("\n,User:", ["\n", "User:"]),
        ('"a\nb", c', ["a\nb", "c"]),
        ("a\r\nb, c", ["a\r\nb", "c"]),
        ("\n\nUser:", ["\n\nUser:"]),
    ],
)
def test_a_line_break_is_part_of_a_phrase_quoted_or_not(text: str, phrases: list[str]) -> None:
    assert parse_phrases(text) == phrases


def test_a_newline_stop_phrase_reaches_the_word_list(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    inputs = {"text_input": as_bytes_column(["a"]), "stop_words": as_bytes_column(["\n,User:"])}
    out = preprocess(tokenizer, GPT, inputs)
    assert np.array_equal(out["stop_words_list"], to_word_list(tokenizer, [["\n", "User:"]]))


def test_requested_output_length_overrides_default(gpt_tokenizer_dir: Path) -> None:
    inputs = {"text_input": as_bytes_column(["a", "b"]), "max_output_len": np.array([[5], [9]], dtype=np.uint32)}
    out = preprocess(load_tokenizer(gpt_tokenizer_dir), GPT, inputs)
    assert out["request_output_len"].tolist() == [[5], [9]]


def test_too_long_prompt_is_rejected_naming_the_row_and_limit(gpt_tokenizer_dir: Path) -> None:
    short = TokenizerSettings(pad_id=0, end_id=0, max_input_len=4, default_output_len=8)
    with pytest.raises(ValueError, match=r"row 1 is \d+ tokens long; this model accepts at most 4"):
        preprocess(load_tokenizer(gpt_tokenizer_dir), short, {"text_input": as_bytes_column(["a", CORPUS[0]])})


def test_invalid_utf8_is_rejected_naming_the_row(gpt_tokenizer_dir: Path) -> None:
    bad = np.array([[b"ok"], [b"\xff\xfe"]], dtype=object)
    with pytest.raises(ValueError, match="text_input: row 1 is not valid UTF-8"):
        preprocess(load_tokenizer(gpt_tokenizer_dir), GPT, {"text_input": bad})


def test_settings_read_triton_parameter_json() -> None:
    params = {
        k: {"string_value": v}
        for k, v in {"pad_id": "0", "end_id": "1", "max_input_len": "8", "default_output_len": "4"}.items()
    }
    assert TokenizerSettings.from_parameters(params) == TokenizerSettings(0, 1, 8, 4, -1)
    with pytest.raises(ValueError, match="'end_id' is missing"):
        TokenizerSettings.from_parameters({"pad_id": "0"})


def test_missing_tokenizer_names_the_expected_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"expected tokenizer.json or spiece.model or vocab.json \+ merges.txt"):
        load_tokenizer(tmp_path)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("family", ["gpt", "t5"])
def test_requests_tokenized_together_get_what_each_would_get_alone(
    family: str, gpt_tokenizer_dir: Path, t5_tokenizer_dir: Path
) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir if family == "gpt" else t5_tokenizer_dir)
    settings = GPT if family == "gpt" else T5
    requests = [
        {"text_input": as_bytes_column([PROMPTS[0], "Hello"]), "bad_words": as_bytes_column(['"a, b", lamb', ""])},
        {"text_input": as_bytes_column(["Hello world"]), "bad_words": as_bytes_column(["fox"])},
        {"text_input": as_bytes_column(["The quick brown fox"])},
    ]
    together = preprocess_requests(tokenizer, settings, requests)
    assert len(together) == 3
    for request, outputs in zip(requests, together, strict=True):
        assert isinstance(outputs, dict) and _same(outputs, preprocess(tokenizer, settings, request))


def test_a_bad_request_among_merged_ones_gets_its_own_error_and_the_others_are_served(
    gpt_tokenizer_dir: Path,
) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    requests = [{"text_input": as_bytes_column(p)} for p in (["Hello world"], [" ".join(["hello"] * 100)], ["fox"])]
    first, second, third = preprocess_requests(tokenizer, GPT, requests)
    assert isinstance(second, ValueError) and "at most 64" in str(second)
    assert isinstance(first, dict) and _same(first, preprocess(tokenizer, GPT, requests[0]))
    assert isinstance(third, dict) and _same(third, preprocess(tokenizer, GPT, requests[2]))


def test_outputs_decoded_together_match_each_decoded_alone(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    requests = []
    for prompts, completion in (([PROMPTS[0], "Hello"], [" lamb.", " fox"]), (["Hello world"], [" once upon a time"])):
        out = preprocess(tokenizer, GPT, {"text_input": as_bytes_column(prompts)})
        tokens = [tokenizer.encode(c, add_special_tokens=False) for c in completion]
        ids, seq = fake_generation(out["input_ids"], out["input_lengths"], tokens, GPT.end_id, include_prompt=True)
        requests.append({"output_ids": ids, "sequence_length": seq, "input_lengths": out["input_lengths"]})
    together = postprocess_requests(tokenizer, GPT, requests)
    assert [t["text_output"].tolist() for t in together if not isinstance(t, ValueError)] == [
        [[b" lamb."], [b" fox"]],
        [[b" once upon a time"]],
    ]


def test_ft_is_always_asked_for_log_probabilities(gpt_tokenizer_dir: Path) -> None:
    out = preprocess(load_tokenizer(gpt_tokenizer_dir), GPT, {"text_input": as_bytes_column(["a", "b"])})
    assert out["is_return_log_probs"].dtype == np.bool_ and out["is_return_log_probs"].tolist() == [[True], [True]]


def test_postprocess_counts_the_completion_tokens_of_each_beam(gpt_tokenizer_dir: Path) -> None:
    tokenizer, out, completions, ids, seq = generated_two_completions(gpt_tokenizer_dir)
    outputs = postprocess_outputs(tokenizer, GPT, ids, seq, out["input_lengths"])
    assert outputs["output_lengths"].dtype == np.int32
    assert outputs["output_lengths"].tolist() == [[len(completions[0])], [len(completions[1]) - 1]]
    assert outputs["output_tokens"].shape == (2, 1, 0)


def test_each_token_text_is_returned_when_asked_and_they_make_the_text(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    out = preprocess(tokenizer, GPT, {"text_input": as_bytes_column(PROMPTS[:1])})
    completion = tokenizer.encode(" once upon a time", add_special_tokens=False)
    ids, seq = fake_generation(out["input_ids"], out["input_lengths"], [completion], GPT.end_id, include_prompt=True)
    outputs = postprocess_outputs(tokenizer, GPT, ids, seq, out["input_lengths"], return_tokens=True)
    pieces = [p.decode() for p in outputs["output_tokens"][0, 0]]
    assert pieces == [tokenizer.decode([t]) for t in completion]
    assert "".join(pieces) == outputs["text_output"][0, 0].decode()


@pytest.mark.parametrize("family", ["gpt", "t5"])
def test_token_texts_concatenate_to_the_decoded_text_even_across_a_split_character(
    family: str, gpt_tokenizer_dir: Path, t5_tokenizer_dir: Path
) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir if family == "gpt" else t5_tokenizer_dir)
    tokens = tokenizer.encode("the lamb 🐑 was white as snow", add_special_tokens=False)
    pieces = token_texts(tokenizer, tokens)
    assert len(pieces) == len(tokens)
    assert "".join(pieces) == tokenizer.decode(tokens)
    assert not any("\ufffd" in piece for piece in pieces)


def test_merged_requests_asking_for_token_texts_get_their_own_widths(gpt_tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(gpt_tokenizer_dir)
    requests = []
    for completion in (" once upon a time", " lamb."):
        out = preprocess(tokenizer, GPT, {"text_input": as_bytes_column(["Hello"])})
        tokens = tokenizer.encode(completion, add_special_tokens=False)
        ids, seq = fake_generation(out["input_ids"], out["input_lengths"], [tokens], GPT.end_id, include_prompt=True)
        flag = np.array([[True]], dtype=np.bool_)
        requests.append(
            {"output_ids": ids, "sequence_length": seq, "input_lengths": out["input_lengths"], "return_tokens": flag}
        )
    together = postprocess_requests(tokenizer, GPT, requests)
    for request, outputs in zip(requests, together, strict=True):
        assert isinstance(outputs, dict)
        alone = postprocess_outputs(
            tokenizer,
            GPT,
            request["output_ids"],
            request["sequence_length"],
            request["input_lengths"],
            return_tokens=True,
        )
        assert outputs["output_tokens"].tolist() == alone["output_tokens"].tolist()
        assert outputs["output_lengths"].tolist() == alone["output_lengths"].tolist()
