"""Fixtures for the model-repository tests: specs per family, tiny tokenizers trained in-process, fake checkpoints."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tritonft.engines import FASTERTRANSFORMER
from tritonft.repo.naming import RepoNames
from tritonft.spec import Architecture, Batching, DataType, Family, ModelSpec, WeightDType

CORPUS = [
    "translate English to German: He swung back the fishing pole and cast the line.",
    "Er schwenkte den Angelstab zurück und warf die Leine aus.",
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, hello triton, hello fastertransformer!",
    "Once upon a time there was a little lamb.",
    "stop here. bad words are not welcome; good words are.",
] * 20

GPT_END = "<|endoftext|>"


def make_spec(family: Family, **changes: object) -> ModelSpec:
    """A realistic small spec of ``family`` (names and sizes like t5-small / gpt2 / a small GPT-J)."""
    arch = {
        Family.T5: Architecture(
            d_model=512, num_heads=8, num_layers=6, d_ff=2048, vocab_size=32128, d_kv=64, num_decoder_layers=6
        ),
        Family.GPT2: Architecture(
            d_model=1024, num_heads=16, num_layers=24, d_ff=4096, vocab_size=50257, max_positions=1024
        ),
        Family.GPTJ: Architecture(d_model=4096, num_heads=16, num_layers=28, d_ff=16384, vocab_size=50400),
    }[family]
    base = ModelSpec(
        name={Family.T5: "t5-small", Family.GPT2: "gpt2-medium", Family.GPTJ: "gpt-j-6b"}[family],
        family=family,
        hf_repo={Family.T5: "t5-small", Family.GPT2: "gpt2-medium", Family.GPTJ: "EleutherAI/gpt-j-6b"}[family],
        revision="0123456789abcdef0123456789abcdef01234567",
        architecture=arch,
        weight_dtype=WeightDType.FP32,
        data_type=DataType.FP16,
        batching=Batching(max_batch_size=16, max_queue_delay_us=2000, preferred_batch_sizes=(4, 8)),
        max_input_len=64,
        max_output_len=32,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture(params=[f for f in Family if f in FASTERTRANSFORMER.families], ids=str)
def family(request: pytest.FixtureRequest) -> Family:
    return request.param  # type: ignore[no-any-return]


def config_ini(spec: ModelSpec, *, tp: int | None = None, weight_dtype: str | None = None, end_id: int = 50256) -> str:
    """A ``config.ini`` as FT's converters write it (ft-format.md §2.3/§3.3/§4.3), trimmed to the keys FT reads."""
    dtype = weight_dtype or str(spec.weight_dtype)
    arch = spec.architecture
    if spec.family is Family.T5:
        section = (
            f"num_heads = {arch.num_heads}\nd_kv = {arch.head_size}\nd_model = {arch.d_model}\nd_ff = {arch.d_ff}\n"
            f"num_layers = {arch.num_layers}\nvocab_size = {arch.vocab_size}\nfeed_forward_proj = relu\n"
            "pad_token_id = 0\neos_token_id = 1\ndecoder_start_token_id = 0\n_name_or_path = t5-small\n"
            f"weight_data_type = {dtype}\nrelative_attention_num_buckets_or_max_pos_seq_len = 32\n"
        )
        return (
            f"[encoder]\n{section}\n[decoder]\n{section}\n"
            "[structure]\nt5_with_bias = false\nuse_gated_activation = false\nposition_embedding_type = relative\n\n"
        )
    name = "gpt" if spec.family is Family.GPT2 else "gptj"
    text = (
        f"[{name}]\nmodel_name = {spec.hf_repo}\nhead_num = {arch.num_heads}\nsize_per_head = {arch.head_size}\n"
        f"inter_size = {arch.d_ff}\nnum_layer = {arch.num_layers}\nvocab_size = {arch.vocab_size}\n"
        f"start_id = {end_id}\nend_id = {end_id}\nweight_data_type = {dtype}\n"
    )
    if spec.family is Family.GPT2:
        text += f"tensor_para_size = {tp or spec.tensor_parallel}\n"
    return text + "\n"


def write_checkpoint(
    directory: Path, spec: ModelSpec, *, tp: int | None = None, weight_dtype: str | None = None, end_id: int = 50256
) -> Path:
    """A converted checkpoint dir ``<directory>/<TP>-gpu`` with config.ini and one (empty) file per rank."""
    ranks = tp or spec.tensor_parallel
    gpu_dir = directory / f"{ranks}-gpu"
    gpu_dir.mkdir(parents=True)
    (gpu_dir / "config.ini").write_text(config_ini(spec, tp=tp, weight_dtype=weight_dtype, end_id=end_id))
    for rank in range(ranks):
        (gpu_dir / f"model.layers.0.attention.dense.weight.{rank}.bin").write_bytes(b"")
    (gpu_dir / "model.wte.bin").write_bytes(b"")
    return gpu_dir


@dataclass(frozen=True)
class RepoCommandInputs:
    """What ``tritonft repo`` reads: a spec file and the converter's output inside the store it renders into."""

    spec: ModelSpec
    spec_file: Path
    out: Path
    """The Triton repository root (the model store)."""
    version_dir: Path
    """The FT model's version directory, holding ``<TP>-gpu/`` as the conversion Job writes it."""


def repo_command_inputs(tmp_path: Path, family: Family, tensor_parallel: int = 2) -> RepoCommandInputs:
    """A spec of ``family`` written to ``tmp_path/spec.json`` and its converted checkpoint under ``tmp_path/store``."""
    spec = make_spec(family, tensor_parallel=tensor_parallel)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    out = tmp_path / "store"
    version_dir = out / RepoNames.of(spec).ft / "1"
    write_checkpoint(version_dir, spec)
    return RepoCommandInputs(spec, spec_file, out, version_dir)


def train_gpt_tokenizer(directory: Path) -> Path:
    """A byte-level BPE ``tokenizer.json`` (GPT-2 style, ``<|endoftext|>`` = id 0) trained on :data:`CORPUS`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=[GPT_END], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def train_t5_tokenizer(directory: Path) -> Path:
    """A SentencePiece Unigram ``spiece.model`` with T5's ids (<pad>=0, </s>=1, <unk>=2) trained on :data:`CORPUS`."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS),
        model_writer=model,
        model_type="unigram",
        vocab_size=120,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "spiece.model").write_bytes(model.getvalue())
    return directory


@pytest.fixture(scope="session")
def gpt_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_gpt_tokenizer(tmp_path_factory.mktemp("gpt-tokenizer"))


@pytest.fixture(scope="session")
def t5_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_t5_tokenizer(tmp_path_factory.mktemp("t5-tokenizer"))


@pytest.fixture
def tokenizer_dir_for(gpt_tokenizer_dir: Path, t5_tokenizer_dir: Path) -> Callable[[Family], Path]:
    return lambda family: t5_tokenizer_dir if family is Family.T5 else gpt_tokenizer_dir
