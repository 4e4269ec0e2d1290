"""Python-backend stand-in for the FasterTransformer model step (copied as ``1/model.py`` by ``tritonft.standin``).

Runs inside Triton's Python-backend stub (numpy 1.x). It has exactly the FT config's inputs and outputs and
answers FT-shaped tensors: ``output_ids [B, beams, T]`` and ``sequence_length [B, beams]`` (plus the optional
outputs, zeros of their shapes). The "generation" is an echo so the ensemble's answer is checkable: the generated
tokens are the prompt's tokens (without the end token), with every ``bad_words_list`` phrase removed, cut after
the first ``stop_words_list`` phrase (as FT stops), then at ``request_output_len``/``max_output_len``, then
``end_id``. With the config parameter ``standin_generation: reverse`` the tokens come in reverse order (an answer
that differs from the prompt, for checks that refuse an echo). GPT models (``input_lengths`` input) return
prompt + generated tokens, as FT's GPT does; T5 returns the generated tokens only. In decoupled (streaming) mode
each generated token is sent as its own response.

Behaviour is injectable through ``standin.json`` in the model directory, read on change:
``{"fail": "message"}`` answers every request with that error; ``{"sleep_s": 0.2}`` sleeps before answering;
``{"record": true}`` appends each request's inputs (name -> dtype, shape, values) as a JSON line to
``standin-received.jsonl`` there; ``{"token_interval_s": 0.05}`` paces a decoupled model's responses (a pause
before each token, as a real generation takes its time).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

BEHAVIOUR_FILE = "standin.json"
RECORD_FILE = "standin-received.jsonl"


def phrases(words: Any) -> list[list[int]]:
    """FT's word list ``[2, L]`` (flat ids; cumulative end offsets padded with -1) -> token phrases."""
    ids, offsets = np.asarray(words).reshape(2, -1)
    out, start = [], 0
    for end in offsets:
        if end < 0:
            break
        out.append([int(t) for t in ids[start:end]])
        start = int(end)
    return [p for p in out if p]


def remove_phrases(tokens: list[int], banned: list[list[int]]) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(tokens):
        hit = next((p for p in banned if tokens[i : i + len(p)] == p), None)
        if hit is None:
            out.append(tokens[i])
            i += 1
        else:
            i += len(hit)
    return out


def cut_after_stop(tokens: list[int], stops: list[list[int]]) -> list[int]:
    for i in range(len(tokens)):
        for p in stops:
            if tokens[i : i + len(p)] == p:
                return tokens[: i + len(p)]
    return tokens


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.inputs = {i["name"] for i in config["input"]}
        self.outputs = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}
        self.gpt = "input_lengths" in self.inputs
        self.lengths_name = "input_lengths" if self.gpt else "sequence_length"
        self.output_len_name = "request_output_len" if self.gpt else "max_output_len"
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        self.end_id = int(parameters.get("standin_end_id", "1" if not self.gpt else "50256"))
        self.reverse = parameters.get("standin_generation", "echo") == "reverse"
        self.behaviour_path = Path(args["model_repository"]) / BEHAVIOUR_FILE
        self.record_path = Path(args["model_repository"]) / RECORD_FILE
        self.behaviour_stamp: int | None = None
        self.behaviour: dict[str, Any] = {}

    def _current_behaviour(self) -> dict[str, Any]:
        try:
            stamp = self.behaviour_path.stat().st_mtime_ns
        except FileNotFoundError:
            self.behaviour_stamp, self.behaviour = None, {}
            return self.behaviour
        if stamp != self.behaviour_stamp:
            self.behaviour_stamp, self.behaviour = stamp, json.loads(self.behaviour_path.read_text())
        return self.behaviour

    def _input(self, request: Any, name: str) -> Any:
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        return None if tensor is None else tensor.as_numpy()

    def _generate(self, request: Any) -> tuple[list[list[int]], list[list[int]], int]:
        """Per row: (prompt tokens, generated tokens); and the beam width."""
        ids = np.asarray(self._input(request, "input_ids"))
        lengths = np.asarray(self._input(request, self.lengths_name)).reshape(ids.shape[0], -1)[:, 0]
        limit = np.asarray(self._input(request, self.output_len_name)).reshape(ids.shape[0], -1)[:, 0]
        end = self._input(request, "end_id")
        end_id = int(np.asarray(end).reshape(-1)[0]) if end is not None else self.end_id
        bad = self._input(request, "bad_words_list")
        stop = self._input(request, "stop_words_list")
        beam = self._input(request, "beam_width")
        beams = int(np.asarray(beam).reshape(-1)[0]) if beam is not None else 1
        prompts, generated = [], []
        for row in range(ids.shape[0]):
            prompt = [int(t) for t in ids[row, : int(lengths[row])]]
            tokens = [t for t in prompt if t != end_id]
            if self.reverse:
                tokens.reverse()
            if bad is not None:
                tokens = remove_phrases(tokens, phrases(bad[row]))
            if stop is not None:
                tokens = cut_after_stop(tokens, phrases(stop[row]))
            tokens = tokens[: int(limit[row])]
            prompts.append(prompt)
            generated.append(tokens)
        return prompts, generated, max(beams, 1)

    def _tensors(self, prompts: list[list[int]], generated: list[list[int]], beams: int) -> list[Any]:
        rows = [(p if self.gpt else []) + generated[at] for at, p in enumerate(prompts)]  # Python 3.8: no zip strict
        width = max((len(r) for r in rows), default=0) + 1
        batch = len(rows)
        output_ids = np.full((batch, beams, width), self.end_id, dtype=self.outputs["output_ids"])
        lengths = np.zeros((batch, beams), dtype=self.outputs["sequence_length"])
        for b, row in enumerate(rows):
            output_ids[b, :, : len(row)] = row
            lengths[b, :] = len(row)
        tensors = {"output_ids": output_ids, "sequence_length": lengths}
        shapes = {
            "response_input_lengths": (batch,),
            "cum_log_probs": (batch, beams),
            "output_log_probs": (batch, beams, width),
            "context_embeddings": (batch, 1),
        }
        for name, dtype in self.outputs.items():
            if name not in tensors:
                tensors[name] = np.zeros(shapes.get(name, (batch, 1)), dtype=dtype)
        if "response_input_lengths" in self.outputs:
            tensors["response_input_lengths"] = np.array([len(p) for p in prompts], dtype=np.int32)
        return [pb_utils.Tensor(name, array) for name, array in tensors.items()]

    def execute(self, requests: list[Any]) -> list[Any] | None:
        behaviour = self._current_behaviour()
        if behaviour.get("sleep_s"):
            time.sleep(float(behaviour["sleep_s"]))
        responses = []
        for request in requests:
            if behaviour.get("record"):
                self._record(request)
            if behaviour.get("fail"):
                error = pb_utils.TritonError(str(behaviour["fail"]))
                response = pb_utils.InferenceResponse(output_tensors=[], error=error)
            else:
                try:
                    prompts, generated, beams = self._generate(request)
                except Exception as exc:  # the stand-in reports, never crashes the stub
                    response = pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(repr(exc)))
                else:
                    if self.decoupled:
                        self._stream(request, prompts, generated, beams, behaviour.get("token_interval_s"))
                        continue
                    response = pb_utils.InferenceResponse(output_tensors=self._tensors(prompts, generated, beams))
            if self.decoupled:
                request.get_response_sender().send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                responses.append(response)
        return None if self.decoupled else responses

    def _record(self, request: Any) -> None:
        received = {}
        for name in sorted(self.inputs):
            value = self._input(request, name)
            if value is not None:
                received[name] = [str(value.dtype), list(value.shape), value.tolist()]
        with self.record_path.open("a") as handle:
            handle.write(json.dumps(received) + "\n")

    def _stream(
        self,
        request: Any,
        prompts: list[list[int]],
        generated: list[list[int]],
        beams: int,
        interval_s: float | None = None,
    ) -> None:
        """One response per generation step (every row's tokens so far), ``interval_s`` apart, then the final
        flag."""
        sender = request.get_response_sender()
        steps = max((len(g) for g in generated), default=0)
        for step in range(1, steps + 1):
            if interval_s:
                time.sleep(float(interval_s))
            partial = [g[:step] for g in generated]
            sender.send(pb_utils.InferenceResponse(output_tensors=self._tensors(prompts, partial, beams)))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
