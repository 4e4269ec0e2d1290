"""MLServer runtimes for the probe tests: text-in/text-out models with known behaviour.

This file is loaded by the MLServer *subprocess* the tests start (``implementation: text_runtimes.<Class>``); it is
never imported by pytest itself (mlserver and tritonclient register the same protobuf symbols and cannot share a
process). Each model reads the tensor names from its ``model-settings.json`` parameters.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mlserver import MLModel
from mlserver.codecs import StringCodec
from mlserver.types import InferenceRequest, InferenceResponse


class TextModel(MLModel):  # type: ignore[misc]
    """Base: decode the ``BYTES`` input named in settings, map each string with :meth:`answer`, encode the output."""

    def _extra(self) -> dict[str, Any]:
        params = self.settings.parameters
        return dict(params.extra or {}) if params is not None else {}

    async def load(self) -> bool:
        self.output_name = str(self._extra().get("output_name", "text_output"))
        return True

    def answer(self, text: str) -> str:
        raise NotImplementedError

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        texts = StringCodec.decode_input(payload.inputs[0])
        answers = [self.answer(t) for t in texts]
        return InferenceResponse(
            model_name=self.name,
            outputs=[StringCodec.encode_output(self.output_name, answers)],
        )


class Translator(TextModel):
    """A perfect English->German translator for the bundled sentences (looks the prompt up in the dataset)."""

    async def load(self) -> bool:
        await super().load()
        with open(str(self._extra()["dataset"]), encoding="utf-8") as fh:
            raw = json.load(fh)
        template = raw["prompt_template"]
        self.table = {template.format(source=p["en"]): p["de"] for p in raw["pairs"]}
        return True

    def answer(self, text: str) -> str:
        return str(self.table.get(text, ""))


class Babbler(TextModel):
    """A broken translator: answers every prompt with the same unrelated sentence."""

    def answer(self, text: str) -> str:
        return "Lorem ipsum dolor sit amet."


class Continuer(TextModel):
    """A GPT-like model: echoes the prompt and continues it."""

    def answer(self, text: str) -> str:
        return f"{text} there lived an old fisherman."


class Sleeper(TextModel):
    """Answers after ``delay_s`` seconds (asyncio sleep: the server stays responsive to other requests)."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        await asyncio.sleep(float(self._extra().get("delay_s", 5.0)))
        return await super().predict(payload)

    def answer(self, text: str) -> str:
        return text


class NeverReady(TextModel):
    """Registers but reports not ready (``load`` returns False, as a model whose weights failed to load)."""

    async def load(self) -> bool:
        await super().load()
        return False

    def answer(self, text: str) -> str:
        return text
