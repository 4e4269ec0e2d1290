"""What the gateway serves: one entry per model spec, and the request limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from tritonft.gateway.embeddings import EmbeddingModel
from tritonft.gateway.limits import MAX_BODY_BYTES
from tritonft.spec import Family, ModelSpec

DEFAULT_DEADLINE_S = 60.0
"""``tritonft gateway --deadline``'s default: the base of every model's deadline (:func:`request_deadline_s`)."""
UNSTREAMED_DEADLINE_MAX_S = 290.0
"""Longest an unstreamed completion may take, whatever its model's deadline: it sends no byte until it is whole, and
the proxies in front end a response idle that long (Envoy's stream idle timeout, 300 s by default; AWS's NLB drops a
TCP flow idle for 350 s). An answer that needs longer is streamed (its bytes keep the connection busy)."""
MAX_BEAMS = 8
"""Largest ``n`` (beam width) the gateway forwards; FT's beam search is built for small widths."""


@dataclass(frozen=True)
class ServedModel:
    """One ensemble as the gateway presents it."""

    name: str
    family: Family
    streaming: bool
    """Rendered decoupled: the ensemble sends one response per generated step."""
    max_output_len: int
    max_input_len: int
    max_batch_size: int = 1
    """The ensemble's ``max_batch_size``: the most rows (prompts) one ModelInfer call may carry."""
    tokenizer_config: str = ""
    """A vLLM model's ``tokenizer_config.json`` (its text): the chat template and special tokens chat is rendered
    with (:mod:`tritonft.engines.vllm.chat`); empty: no chat."""
    context_len: int = 0
    """A vLLM model's context (the engine's ``max_model_len``: ``vllm.maxModelLen``, else the model's positions),
    which prompt and answer share; 0 for the FasterTransformer models, bounded by ``max_input_len`` /
    ``max_output_len`` instead."""
    deadline_s: float = DEFAULT_DEADLINE_S
    """Longest a request for this model may take end to end before the client gets a 504
    (:func:`request_deadline_s`)."""

    @property
    def vllm(self) -> bool:
        """Served by Triton's vLLM backend (``family: llama``): the contract of :mod:`tritonft.gateway.vllm`."""
        return self.family.is_vllm

    @property
    def preprocessing(self) -> str:
        """The Triton model that tokenizes its prompts (``tritonft.repo.naming.RepoNames``)."""
        return f"{self.name}-preprocessing"

    @property
    def prompt_in_stream(self) -> bool:
        """A streamed response carries the prompt's tokens too (FT's GPT models; T5 returns generated tokens)."""
        return self.family is not Family.T5

    @property
    def chat(self) -> bool:
        """The decoder-only families get ``/v1/chat/completions`` (T5 is not a chat model); a vLLM model when its
        tokenizer configuration (with its chat template) is given."""
        return self.family in (Family.GPT2, Family.GPTJ) or (self.vllm and bool(self.tokenizer_config))

    @classmethod
    def from_spec(
        cls, spec: ModelSpec, tokenizer_config: str = "", base_deadline_s: float = DEFAULT_DEADLINE_S
    ) -> ServedModel:
        """``spec`` as served, its requests' deadline from ``base_deadline_s`` (``--deadline``)."""
        return cls(
            spec.name,
            spec.family,
            spec.decoupled,
            spec.max_output_len,
            spec.max_input_len,
            spec.batching.max_batch_size,
            tokenizer_config,
            context_len(spec),
            request_deadline_s(spec, base_deadline_s),
        )


def request_deadline_s(spec: ModelSpec, base_s: float) -> float:
    """How long a request for ``spec`` may take through the gateway: ``base_s`` (``--deadline``: the wait for the
    engine and the prompt's prefill, and all of a FasterTransformer model's few tokens), plus for a vLLM model the
    longest answer it may generate at its slowest stated pace: its context (a chat without ``max_tokens`` may run to
    the end of it) times ``vllm.time_per_output_token_s``. Llama 3.1 8B at 16384 tokens and 0.05 s: 60 + 819.2 s."""
    if spec.vllm is None or not spec.family.is_vllm:
        return base_s
    return base_s + context_len(spec) * spec.vllm.time_per_output_token_s


def context_len(spec: ModelSpec) -> int:
    """The tokens prompt and answer share for a vLLM model: vLLM's ``max_model_len`` as the engine is given it
    (``vllm.max_model_len``, else the checkpoint's positions, :func:`tritonft.engines.vllm.rules.max_model_len`);
    0 for the others."""
    if not spec.family.is_vllm or spec.vllm is None:
        return 0
    return spec.vllm.max_model_len or spec.architecture.max_positions


@dataclass(frozen=True)
class GatewayConfig:
    triton_url: str
    """``HOST:PORT`` of Triton's gRPC endpoint ("" when every model has a route)."""
    models: tuple[ServedModel, ...]
    max_body_bytes: int = MAX_BODY_BYTES
    deadline_s: float = DEFAULT_DEADLINE_S
    """The base of each model's deadline (``--deadline``; :attr:`ServedModel.deadline_s`), and the whole deadline of
    an embedding request."""
    routes: dict[str, str] = field(default_factory=dict)
    """Model name -> ``HOST:PORT`` of the Triton serving it, where that is not ``triton_url`` (a deployed stack
    runs one Triton Deployment per model)."""
    scales_to_zero: frozenset[str] = frozenset()
    """Models whose Triton may have no replica (KEDA scales them to zero when idle): one of them down does not make
    the gateway unready, and a request for it then is answered 503 ``model_starting`` with ``Retry-After``."""
    coalesce: bool = True
    """Send concurrent same-parameter completions of a model to Triton as one batched call (``coalesce.py``)."""
    calls_in_flight: int = 2
    """Calls per model and parameter set sent at once before further requests wait to be merged."""
    embedders: tuple[EmbeddingModel, ...] = ()
    """Encoder ensembles served under ``/v1/embeddings`` (``tritonft.gateway.embeddings``)."""
    unstreamed_deadline_max_s: float = UNSTREAMED_DEADLINE_MAX_S
    """The cap on an unstreamed completion's deadline (:data:`UNSTREAMED_DEADLINE_MAX_S`)."""
    key_expiries: dict[str, date] = field(default_factory=dict)
    """API key id (``x-tritonft-client``) -> the first day (UTC) it is refused: the gateway answers it 401 from that
    day on, with no ``up`` needed (Envoy keeps accepting it until an ``up`` leaves it out of its Secret)."""
    max_in_flight_per_client: int = 0
    """Requests one API client (``x-tritonft-client``) may have in flight at once here; beyond, 429
    (:mod:`tritonft.gateway.limits`). 0 = no limit."""

    def unstreamed_deadline_of(self, model: ServedModel) -> float:
        """The deadline of an unstreamed completion of ``model``: its own, at most :attr:`unstreamed_deadline_max_s`."""
        return min(model.deadline_s, self.unstreamed_deadline_max_s)

    def embedder(self, name: str) -> EmbeddingModel | None:
        return next((m for m in self.embedders if m.name == name), None)

    def model(self, name: str) -> ServedModel | None:
        return next((m for m in self.models if m.name == name), None)

    def deadline_of(self, name: str) -> float:
        """The deadline of a request for model ``name`` (an embedding model's: the base)."""
        model = self.model(name)
        return model.deadline_s if model is not None else self.deadline_s

    def url_of(self, name: str) -> str:
        """The gRPC endpoint of the Triton that serves model ``name``."""
        return self.routes.get(name, self.triton_url)

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.models] + [m.name for m in self.embedders]
