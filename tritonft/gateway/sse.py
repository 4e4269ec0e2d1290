"""Server-sent-event framing of OpenAI stream chunks (``data: <json>\\n\\n`` ... ``data: [DONE]\\n\\n``)."""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"
