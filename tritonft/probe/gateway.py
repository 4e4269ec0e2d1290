"""The probe's requests through the OpenAI-compatible gateway: ``POST <base>/completions`` for a generator,
``POST <base>/embeddings`` for an embedding model (stdlib HTTP).

``base_url`` is what an OpenAI client takes (``https://<host>/v1``). Failures become
:class:`~tritonft.probe.retry.TransientError` (the gateway or its Triton is not there yet: connection refused, 502,
503, 504, 429, a timeout) or :class:`~tritonft.probe.retry.PermanentError` (any other answer), with the gateway's
OpenAI error message when it sent one.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tritonft.probe.retry import PermanentError, TransientError

_TRANSIENT_STATUS = {408, 429, 502, 503, 504}
MODEL_STARTING = "model_starting"
"""The gateway's error code for a model scaled to zero that has no running replica yet (503 with ``Retry-After``)."""


class ModelStartingError(TransientError):
    """The gateway answered 503 ``model_starting``: the model has no replica; the request is what wakes it."""


def completions_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/completions"


def _error_body(exc: urllib.error.HTTPError) -> dict[str, Any]:
    """The ``error`` object of an OpenAI JSON error body; empty when the body is not one (an ingress's HTML)."""
    try:
        body: Any = json.loads(exc.read() or b"null")
    except (ValueError, OSError):
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _error_text(exc: urllib.error.HTTPError, error: dict[str, Any]) -> str:
    """The OpenAI error message of a JSON error body, else the HTTP reason (an ingress answers in HTML)."""
    if error.get("message"):
        return str(error["message"])
    if exc.code in (401, 403):
        return f"{exc.reason}: the ingress refused the credentials (the Authorization header)"
    return str(exc.reason)


def _post(url: str, action: str, body: dict[str, Any], headers: Mapping[str, str], timeout_s: float) -> Any:
    """POST ``body`` as JSON; the decoded JSON answer, or the error as Transient/PermanentError naming ``action``."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        error = _error_body(exc)
        text = f"{action}: HTTP {exc.code}: {_error_text(exc, error)}"
        if exc.code == 503 and error.get("code") == MODEL_STARTING:
            raise ModelStartingError(text) from exc
        raise (TransientError if exc.code in _TRANSIENT_STATUS else PermanentError)(text) from exc
    except TimeoutError as exc:
        raise TransientError(f"{action}: no answer within {timeout_s:.1f} s") from exc
    except urllib.error.URLError as exc:
        raise TransientError(f"{action}: {exc.reason}") from exc
    except (OSError, ValueError) as exc:
        raise TransientError(f"{action}: {type(exc).__name__}: {exc}") from exc


def embeddings_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/embeddings"


def gateway_embeddings(
    base_url: str, model: str, texts: Sequence[str], *, headers: Mapping[str, str], timeout_s: float
) -> npt.NDArray[np.float64]:
    """The embeddings of ``texts`` by ``model`` through the gateway (float encoding), one row per text in order."""
    url = embeddings_url(base_url)
    action = f"POST {url} (model {model!r})"
    payload = _post(url, action, {"model": model, "input": list(texts), "encoding_format": "float"}, headers, timeout_s)
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != len(texts):
        got = len(data) if isinstance(data, list) else "no"
        raise PermanentError(f"{action}: sent {len(texts)} text(s), got {got} embedding(s)")
    try:
        ordered = sorted(data, key=lambda item: int(item["index"]))
        return np.array([[float(x) for x in item["embedding"]] for item in ordered], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise PermanentError(f"{action}: the answer is not a list of float embeddings ({exc})") from exc


def gateway_completions(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    *,
    max_tokens: int | None,
    headers: Mapping[str, str],
    timeout_s: float,
) -> list[str]:
    """Greedy completions of ``prompts`` by ``model`` through the gateway, in prompt order."""
    url = completions_url(base_url)
    action = f"POST {url} (model {model!r})"
    body: dict[str, Any] = {"model": model, "prompt": list(prompts), "temperature": 0}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    payload = _post(url, action, body, headers, timeout_s)
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list) or len(choices) != len(prompts):
        got = len(choices) if isinstance(choices, list) else "no"
        raise PermanentError(f"{action}: sent {len(prompts)} prompt(s), got {got} choice(s)")
    ordered = sorted(choices, key=lambda c: int(c.get("index", 0)) if isinstance(c, dict) else 0)
    return [str(c.get("text", "")) if isinstance(c, dict) else "" for c in ordered]
