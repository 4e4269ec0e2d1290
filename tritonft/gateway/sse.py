"""Server-sent-event framing of OpenAI stream chunks (``data: <json>\\n\\n`` ... ``data: [DONE]\\n\\n``)."""

from __future__ import annotations

import json
from typing import Any

DONE = b"data: [DONE]\n\n"


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
