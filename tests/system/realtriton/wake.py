"""A wake from zero of ``local``'s models through the OpenAI gateway, with a real ``tritonserver`` (2.51, CPU) that is
started only when the wake signal arrives. Shared by ``test_wake_through_gateway.py`` and ``benchmarks/wake_bench.py``.

What is real: the gateway (its code, the flags the component renders for a stack whose models scale to zero, served
by uvicorn as its container does; here in this process), each model's own ``tritonserver`` on its own repository
(t5-small with its FT step stood in for, the real all-MiniLM-L6-v2 through ONNX Runtime), the probe
(:func:`tritonft.probe.run_probe` as ``pulumi up`` runs it) and the wake signal itself (the gateway's
``tritonft_gateway_model_requests_total{model}``, the series KEDA's request-rate trigger reads).

What stands in:

- **the scaler** (Prometheus scraping the gateway + KEDA polling it + the Deployment going 0 -> 1 + the pod's
  scheduling, image pull and init): :class:`Scaler` reads the gateway's counter every :data:`POLL_S` and, when it
  rose, starts the model's server at once (so the pod's Kubernetes stages are 0 here; the start-up budget measures
  them on a cluster);
- **DNS of the model's headless Service** (``<model>-pods``, one address per *ready* pod): the gateway's resolver
  answers from :attr:`Scaler.ready`, which lists a server once it is READY; the gateway asks it again every
  :data:`tritonft.gateway.triton.REFRESH_S` as deployed (and at once after a call that could not reach a pod);
- **the model's own host** (its ingress, which the probe's direct checks go through): :class:`ModelHost` reaches
  whichever server is up.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from components.gateway.spec import SPEC_MOUNT, Backend, gateway_command, gateway_route, spec_file
from tests.system.realtriton.repos import serve_ready_repository, stack_specs
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
from tritonft.gateway import triton as gateway_triton
from tritonft.gateway.app import build_app
from tritonft.gateway.command import add_arguments, load_config
from tritonft.kube import wait_for
from tritonft.local_triton import LocalTriton, TritonRuntime, free_port
from tritonft.probe import ProbeConfig, ProbeReport, run_probe
from tritonft.probe.client import TritonClient
from tritonft.probe.endpoint import Endpoint, parse_endpoint
from tritonft.probe.expectations import Sample
from tritonft.probe.rendered import target_for_spec
from tritonft.spec import Family, ModelSpec

STACK = "local"
POLL_S = 0.5
"""How often the scaler stand-in reads the gateway's counter (KEDA's ``pollingInterval`` is 15 s, on Prometheus'
scrape of the gateway: a cluster adds up to both to a wake)."""
NAMESPACE = "triton"


def woken_specs() -> list[ModelSpec]:
    """``local``'s models the gateway serves and whose server runs here: t5-small and minilm (its vLLM model runs
    its own image's server: benchmarks/vllm_paths.py)."""
    return [s for s in stack_specs(STACK) if not s.family.is_vllm and gateway_route(s) is not None]


def pods_host(spec: ModelSpec) -> str:
    """The model's headless Service as the gateway is told it (``<stack>-<model>-pods``)."""
    return f"{STACK}-{spec.name}-pods.{NAMESPACE}.svc:8001"


def model_repository(
    spec: ModelSpec,
    out: Path,
    tokenizers: dict[Family, Path],
    encoder_converted: Callable[..., Path],
    encoder_checkpoint: Callable[[str], Path],
) -> Path:
    """The model's own repository, as its Triton pod loads it (each model has its own Deployment)."""
    if spec.encoder is None:
        return serve_ready_repository([spec], out, tokenizers)
    serving = EncoderServing(spec.name, max_batch_size=spec.batching.max_batch_size, engine=OnnxEngine.PYTHON)
    name = "all-minilm-l6-v2"
    write_encoder_repository(serving, encoder_converted(name), encoder_checkpoint(name), out)
    return out


def gateway_flags(specs: list[ModelSpec], spec_dir: Path) -> list[str]:
    """The gateway's command line as the component renders it for these models scaling to zero, the spec files
    (mounted from its ConfigMap in a pod) written to ``spec_dir``."""
    backends = [Backend(s, pods_host(s), {}, scales_to_zero=True) for s in specs]
    command = gateway_command(backends, deadline_seconds=60)
    for spec in specs:
        (spec_dir / spec_file(spec)).write_text(spec.to_json())
    flags = command[command.index("gateway") + 1 :]
    return [f.replace(SPEC_MOUNT, str(spec_dir)) for f in flags]


def requests_counted(gateway_url: str, model: str) -> float:
    """``tritonft_gateway_model_requests_total{model}`` as the gateway exposes it (what KEDA's trigger reads)."""
    with urllib.request.urlopen(f"{gateway_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^tritonft_gateway_model_requests_total{{model="{re.escape(model)}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@dataclass
class Wake:
    """What the scaler stand-in saw and did for one model, on ``time.monotonic()``."""

    signal_at: float
    """The gateway's counter had risen (the wake signal arrived)."""
    ready_at: float
    """The model's server answered READY (its address is in the headless Service from now on)."""
    server: LocalTriton


@dataclass
class Scaler:
    """Starts a model's server when the gateway's counter for it rises (KEDA's activation from 0), and lists it as
    the only ready pod of its headless Service once it is READY."""

    gateway_url: str
    repositories: dict[str, Path]
    runtime: TritonRuntime
    logs: Path
    ready: dict[str, list[str]] = field(default_factory=dict)
    """``<model>-pods`` host:port -> the gRPC addresses of its ready servers (what DNS answers)."""
    wakes: dict[str, Wake] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    baseline: dict[str, float] = field(default_factory=dict)

    def watch(self) -> None:
        try:
            self.baseline = {m: requests_counted(self.gateway_url, m) for m in self.repositories}
            while not self.stop.wait(POLL_S):
                for model, repository in self.repositories.items():
                    if model in self.wakes or requests_counted(self.gateway_url, model) <= self.baseline[model]:
                        continue
                    signal_at = time.monotonic()
                    server = LocalTriton(self.runtime, repository, log_path=self.logs / f"{model}-{signal_at}.log")
                    server.start()  # returns once READY
                    self.wakes[model] = Wake(signal_at, time.monotonic(), server)
                    self.ready.setdefault(f"{STACK}-{model}-pods.{NAMESPACE}.svc:8001", []).append(server.grpc_url)
        except BaseException as exc:  # reported by the test, never swallowed
            self.errors.append(exc)

    def servers(self) -> list[LocalTriton]:
        return [w.server for w in self.wakes.values()]


class ModelHost:
    """The model's own host (its ingress) for the probe's direct checks: the server of the model once it is up."""

    def __init__(self, scaler: Scaler, model: str, headers: Any) -> None:
        self.scaler, self.model, self.headers = scaler, model, headers
        self._client: TritonClient | None = None

    def _target(self) -> TritonClient:
        if self._client is None:
            wake = self.scaler.wakes.get(self.model)
            if wake is None:
                from tritonft.probe.retry import TransientError

                raise TransientError(f"{self.model}'s host: no ready pod (the model is asleep)")
            self._client = TritonClient(parse_endpoint(f"http://{wake.server.http_url}"), self.headers)
        return self._client

    def __getattr__(self, name: str) -> Any:
        if name == "close":
            return lambda: self._client.close() if self._client else None
        return getattr(self._target(), name)


@contextmanager
def gateway_serving(
    flags: list[str], scaler_ready: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The gateway app for ``flags`` on a free loopback port (uvicorn, as its container runs it), its DNS answering
    ``scaler_ready``."""

    def resolver(url: str) -> gateway_triton.Resolver:
        async def resolve() -> list[str]:
            return list(scaler_ready.get(url, []))

        return resolve

    monkeypatch.setattr(gateway_triton, "dns_resolver", resolver)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = load_config(parser.parse_args(flags))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(config), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def scaling(scaler: Scaler) -> Iterator[Scaler]:
    """The scaler watching from before the first request: its baseline is the counter's value then."""
    thread = threading.Thread(target=scaler.watch, daemon=True)
    thread.start()
    try:
        wait_for("the scaler to read the counter before any request", lambda: scaler.baseline or scaler.errors, 30)
        yield scaler
    finally:
        scaler.stop.set()
        thread.join(180)  # a server start under way finishes (or fails) first
        for server in scaler.servers():
            server.stop()


ECHOED_PROMPT = "translate English to German: The house is wonderful."


def stand_in_answers(spec: ModelSpec, tokenizers: dict[Family, Path]) -> tuple[Sample, ...]:
    """The exact answer of a generator whose FT step is stood in for (it echoes the prompt's tokens): the prompt as its
    tokenizer gives it back. None for an encoder (the real model, judged as the stack judges it)."""
    if spec.encoder is not None:
        return ()
    import sentencepiece

    tokenizer = sentencepiece.SentencePieceProcessor(model_file=str(tokenizers[spec.family] / "spiece.model"))
    return (Sample(ECHOED_PROMPT, str(tokenizer.decode(tokenizer.encode(ECHOED_PROMPT)))),)


def probe_wake(
    spec: ModelSpec, gateway_url: str, scaler: Scaler, expected: tuple[Sample, ...], deadline_s: float = 300.0
) -> ProbeReport:
    """``pulumi up``'s probe of ``spec`` for a stack that scales to zero: through the gateway first (the wake), then
    the model's own host. ``expected``: exact answers (:func:`stand_in_answers`), or none for the family's
    judgement."""
    import dataclasses

    target = dataclasses.replace(target_for_spec(spec), scales_to_zero=True, expected=expected)
    config = ProbeConfig(
        "http://model-host.invalid:80",
        (target,),
        deadline_s=deadline_s,
        latency_requests=3,
        gateway_url=f"{gateway_url}/v1",
    )

    def host(_endpoint: Endpoint, headers: Any) -> Any:
        return ModelHost(scaler, spec.name, headers)

    return run_probe(config, client_factory=host)


def served_requests(server: LocalTriton, model: str) -> int:
    """The model's (ensemble's) successful requests on ``server``: its own counter."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf'^nv_inference_request_success{{model="{re.escape(model)}",version="1"}} (\d+)', text, re.M)
    return int(found.group(1)) if found else 0
