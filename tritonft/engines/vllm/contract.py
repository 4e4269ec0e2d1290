"""NVIDIA's vLLM backend for Triton: the request/response contract a ``backend: "vllm"`` model keeps.

Read from ``triton-inference-server/vllm_backend`` at :data:`VLLM_BACKEND_COMMIT` (the backend NGC's
``tritonserver:<yy.mm>-vllm-python-py3`` images ship; paths and lines below are of that commit). The project's
repository for a vLLM model names these inputs, outputs and parameters and no others (tested), and the CPU model
that serves it here (:mod:`tritonft.engines.vllm.triton_model`) reads and answers exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_BACKEND_COMMIT = "8de0c148bda1da25de1e05ffaaf67116dacc7264"
"""``triton-inference-server/vllm_backend`` HEAD of 2026-01-09 (after ``post-25.12``): the backend of the 25.12+
``-vllm-python-py3`` images."""

BACKEND = "vllm"
"""``config.pbtxt`` ``backend:``; the backend is itself a Python-backend ``model.py`` (``src/model.py``)."""
ENGINE_ARGS_FILE = "model.json"
"""``src/model.py:44`` ``_VLLM_ENGINE_ARGS_FILENAME``: vLLM's engine arguments, read from the version directory
(``src/model.py:211-218``) into ``AsyncEngineArgs(**config)`` (``src/model.py:227``)."""
MULTI_LORA_FILE = "multi_lora.json"
"""``src/model.py:45``: the LoRA adapters by name, read when ``model.json`` has ``enable_lora`` (``:337-359``)."""


@dataclass(frozen=True)
class Tensor:
    name: str
    data_type: str
    dims: tuple[int, ...]
    optional: bool = False


INPUTS = (
    Tensor("text_input", "TYPE_STRING", (1,)),
    Tensor("image", "TYPE_STRING", (-1,), optional=True),
    Tensor("stream", "TYPE_BOOL", (1,), optional=True),
    Tensor("sampling_parameters", "TYPE_STRING", (1,), optional=True),
    Tensor("exclude_input_in_output", "TYPE_BOOL", (1,), optional=True),
    Tensor("return_finish_reason", "TYPE_BOOL", (1,), optional=True),
    Tensor("return_cumulative_logprob", "TYPE_BOOL", (1,), optional=True),
    Tensor("return_logprobs", "TYPE_BOOL", (1,), optional=True),
    Tensor("return_num_input_tokens", "TYPE_BOOL", (1,), optional=True),
    Tensor("return_num_output_tokens", "TYPE_BOOL", (1,), optional=True),
)
"""``src/model.py:69-125`` (``_auto_complete_inputs_and_outputs``), in that order. ``embedding_request``
(``:128-133``) is left out: "Triton client should never set this input" (``:127``), and a generator never embeds."""

OUTPUTS = (
    Tensor("text_output", "TYPE_STRING", (-1,)),
    Tensor("finish_reason", "TYPE_STRING", (-1,)),
    Tensor("cumulative_logprob", "TYPE_FP32", (-1,)),
    Tensor("logprobs", "TYPE_STRING", (-1,)),
    Tensor("num_input_tokens", "TYPE_UINT32", (1,)),
    Tensor("num_output_tokens", "TYPE_UINT32", (-1,)),
)
"""``src/model.py:136-143``: one element per completion (``n``) except ``num_input_tokens``."""

PARAMETERS = ("REPORT_CUSTOM_METRICS", "ENABLE_VLLM_HEALTH_CHECK")
"""``config.pbtxt`` parameters the backend reads (``src/model.py:172-174``, ``:184-187``; a value is ``"true"`` or
anything else, ``:382-386``). Metrics need ``disable_log_stats: false`` in ``model.json`` too (``:186``)."""

DECOUPLED = True
"""``src/model.py:207-209`` asserts a decoupled transaction policy; ``:59`` auto-completes it."""
MAX_BATCH_SIZE = 0
"""``src/model.py:62``: Triton does not batch; vLLM schedules its own batches."""
INSTANCE_KIND = "KIND_MODEL"
"""``src/model.py:318-326``: a model on more than one GPU (TP x PP > 1) must be ``KIND_MODEL``; vLLM takes the
devices the pod has."""

STREAMING_NEEDS_EXCLUDED_INPUT = (
    "When streaming, `exclude_input_in_output` = False is not allowed."  # src/utils/request.py:133-136
)
"""The refusal of a streamed request that asks for its prompt back (``src/utils/request.py:121-136``: unset, the
prompt is prepended unless streaming)."""

REQUEST_FLOW = """\
src/utils/request.py:92-165  inputs: text_input[0] (utf-8), image (base64), stream[0] (default false),
                             exclude_input_in_output (default: prepend the prompt unless streaming),
                             sampling_parameters[0] as JSON (else the request's parameters), return_* flags
src/utils/vllm_backend_utils.py:64-106  TritonSamplingParams.from_dict: json.loads, int/float/bool/str coerced
                             by SamplingParams' annotations, SamplingParams(**dict); any failure -> None
src/utils/request.py:192-305 create_response: text_output = [prompt if prepended] + each output's new text
                             (streaming: the delta since the previous response), then the asked-for outputs
src/model.py:520-548         streaming: one response per engine step, the last flagged FINAL;
                             unary: one FINAL response with everything
src/model.py:550-564         any error: text_output ["N/A"] with error "Error generating stream: <exception>"
"""

METRICS = (
    ("vllm:prompt_tokens_total", "COUNTER"),
    ("vllm:generation_tokens_total", "COUNTER"),
    ("vllm:time_to_first_token_seconds", "HISTOGRAM"),
    ("vllm:time_per_output_token_seconds", "HISTOGRAM"),
    ("vllm:e2e_request_latency_seconds", "HISTOGRAM"),
    ("vllm:request_prompt_tokens", "HISTOGRAM"),
    ("vllm:request_generation_tokens", "HISTOGRAM"),
    ("vllm:request_params_n", "HISTOGRAM"),
)
"""The metric families the backend reports with ``REPORT_CUSTOM_METRICS`` and ``disable_log_stats: false``
(``src/utils/metrics.py:37-82``, ``TritonMetrics``), labelled ``model`` and ``version`` (``src/model.py:368-371``),
fed from vLLM's per-step ``IterationStats`` (``src/utils/metrics.py:229-288``). No gauge: requests running or
waiting and KV-cache usage are not reported at this commit (``record`` ignores ``scheduler_stats``)."""
SCHEDULER_GAUGES = (
    ("vllm:num_requests_running", "GAUGE"),
    ("vllm:num_requests_waiting", "GAUGE"),
    ("vllm:kv_cache_usage_perc", "GAUGE"),
)
"""What the stack adds to NVIDIA's :data:`METRICS`: vLLM's scheduler gauges, by vLLM's own names (vLLM 0.27.1
``v1/metrics/loggers.py:494-566``), set from ``scheduler_stats`` after every engine step. The autoscaler scales on
``vllm:num_requests_waiting`` (the queue inside vLLM); the Gateway API Inference Extension's endpoint picker reads
the same three names."""
METRIC_BUCKETS = {
    "vllm:time_to_first_token_seconds": (
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    ),  # src/utils/metrics.py:95-116
    "vllm:time_per_output_token_seconds": (
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
    ),  # src/utils/metrics.py:118-136
    "vllm:e2e_request_latency_seconds": (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0),  # :140-143
    "vllm:request_params_n": (1, 2, 5, 10, 20),  # :157-160
}  # fmt: skip
"""The histograms' fixed buckets; ``vllm:request_prompt_tokens``/``_generation_tokens`` take vLLM's
``build_1_2_5_buckets(max_model_len)`` (``:145-156``)."""
