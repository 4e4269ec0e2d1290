"""``/v1/embeddings`` request parsing and answer shaping (pure; the served path is in tests/system/realtriton)."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from tritonft.gateway.embeddings import MAX_INPUTS, EmbeddingsRequest, parse_request, response_body
from tritonft.gateway.errors import ApiError


def test_a_string_input_is_one_text():
    assert parse_request({"input": "hello"}).texts == ("hello",)


def test_float_is_the_default_encoding():
    assert parse_request({"input": ["a", "b"]}).base64 is False


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"input": []}, "input", "empty list"),
        ({"input": ["a", ""]}, "input", "input[1] is an empty string"),
        ({"input": 3}, "input", "a string or a list of strings"),
        ({"input": [[1, 2]]}, "input", "token-id input is not supported"),
        ({"input": ["a"] * (MAX_INPUTS + 1)}, "input", f"at most {MAX_INPUTS}"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format", "'float' or 'base64'"),
        ({"input": "a", "dimensions": 0}, "dimensions", "positive integer"),
    ],
)
def test_bad_requests_name_the_field_and_the_fix(body, param, message):
    with pytest.raises(ApiError) as caught:
        parse_request(body)
    assert (caught.value.status, caught.value.param) == (400, param)
    assert message in caught.value.message


def test_answer_has_openai_shape_with_usage():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    body = response_body("m", EmbeddingsRequest(("a", "b"), False, None), vectors, 7)
    assert body == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]},
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
        ],
        "model": "m",
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }


def test_base64_answer_is_little_endian_float32():
    vectors = np.array([[0.5, -2.0, 3.25]], dtype=np.float32)
    body = response_body("m", EmbeddingsRequest(("a",), True, None), vectors, 1)
    decoded = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
    assert decoded.tolist() == [0.5, -2.0, 3.25]


def test_dimensions_other_than_the_models_width_is_refused():
    with pytest.raises(ApiError, match="answers 3-dimensional embeddings"):
        response_body("m", EmbeddingsRequest(("a",), False, 2), np.zeros((1, 3), dtype=np.float32), 1)


def test_a_field_that_is_not_one_of_openais_embedding_request_is_refused_by_name():
    with pytest.raises(ApiError) as caught:
        parse_request({"input": "a", "truncate": True})
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "truncate", "unknown_parameter")


def test_the_user_field_must_be_a_string():
    assert parse_request({"input": "a", "user": "u-1"}).texts == ("a",)
    with pytest.raises(ApiError) as caught:
        parse_request({"input": "a", "user": 5})
    assert caught.value.param == "user"
