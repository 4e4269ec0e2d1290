"""What a Hugging Face BERT model directory says about the encoder to build (pure: files in, decisions out).

Sources, in the order they are consulted:

* ``config.json`` — the architecture (``hidden_size``, ``num_attention_heads``, ``num_hidden_layers``,
  ``intermediate_size``, ``max_position_embeddings``, ``type_vocab_size``, ``layer_norm_eps``, ``hidden_act``),
  ``architectures`` (a ``*ForSequenceClassification`` checkpoint defaults to ``task: classify``) and ``id2label``;
* the sentence-transformers files when present: ``modules.json`` (a ``Normalize`` module means L2-normalised
  embeddings), the pooling module's ``config.json`` (``pooling_mode_mean_tokens`` / ``pooling_mode_cls_token``)
  and ``sentence_bert_config.json`` (``max_seq_length``: the longest input the model was trained for).

Without sentence-transformers files an embedding model gets mean pooling and L2 normalisation (what most
embedding checkpoints and the OpenAI embeddings API return); both can be overridden (``--pooling``,
``--normalize`` / ``--no-normalize``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonft.encoder.layout import Layout, layout_of
from tritonft.errors import UserError
from tritonft.spec import EncoderTask, Pooling

__all__ = [
    "MODEL_TYPES",
    "ST_CONFIG",
    "ST_MODULES",
    "BertArchitecture",
    "EncoderConfig",
    "Pooling",
    "Task",
    "bert_architecture",
    "read_encoder_config",
]

MODEL_TYPES = ("bert", "roberta", "distilbert")
"""config.json ``model_type`` values this path converts (BERT, MiniLM, all-MiniLM, BGE, E5 are all ``bert``;
RoBERTa and sentence-transformers models such as all-distilroberta-v1 are ``roberta``; DistilBERT and its
fine-tunes such as distilbert-base-uncased-finetuned-sst-2-english are ``distilbert``). One body, different tensor
names (:mod:`tritonft.encoder.layout`)."""

ST_MODULES = "modules.json"
ST_CONFIG = "sentence_bert_config.json"


Task = EncoderTask
"""What the served encoder answers (the spec's :class:`~tritonft.spec.EncoderTask`)."""


@dataclass(frozen=True)
class BertArchitecture:
    hidden_size: int
    num_heads: int
    num_layers: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class EncoderConfig:
    """Everything the graph, the manifest and the model repository need to know about one encoder."""

    architecture: BertArchitecture
    task: Task
    pooling: Pooling
    normalize: bool
    max_seq_length: int
    """Longest input in tokens (special tokens included); longer texts are refused, not truncated."""
    labels: tuple[str, ...] = ()
    """Class names by logit index (``task: classify``), from ``id2label``."""
    prefix: str = ""
    """Tensor-name prefix of the body in the checkpoint: ``""`` (BertModel, RobertaModel) or ``"bert."`` /
    ``"roberta."`` (task heads)."""
    model_type: str = "bert"
    """``bert``, ``roberta`` or ``distilbert``: the same body under different names; RoBERTa numbers positions from
    ``pad_token_id + 1``; DistilBERT has no token types."""
    position_offset: int = 0
    """Row of the position table of the first token (RoBERTa: ``pad_token_id + 1``, 2 in every released model)."""
    sources: tuple[str, ...] = ()
    """The small files the decisions were read from (relative to the model directory), for the manifest."""

    @property
    def output_width(self) -> int:
        return self.architecture.hidden_size if self.task is Task.EMBED else len(self.labels)

    @property
    def layout(self) -> Layout:
        """Where the graph's weights sit in the checkpoint."""
        return layout_of(self.model_type, self.prefix)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not readable JSON ({exc}); re-download the model") from exc


def _int(config: Mapping[str, Any], key: str, path: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UserError(f"{path}: {key} = {value!r} must be a positive integer; is this a BERT checkpoint?")
    return value


def bert_architecture(config: Mapping[str, Any], path: str = "config.json") -> BertArchitecture:
    """The architecture from ``config.json``; refuses the variants the graph does not build."""
    arch = BertArchitecture(
        hidden_size=_int(config, "hidden_size", path),
        num_heads=_int(config, "num_attention_heads", path),
        num_layers=_int(config, "num_hidden_layers", path),
        intermediate_size=_int(config, "intermediate_size", path),
        vocab_size=_int(config, "vocab_size", path),
        max_positions=_int(config, "max_position_embeddings", path),
        type_vocab_size=int(config.get("type_vocab_size", 2)),
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
    )
    if arch.hidden_size % arch.num_heads:
        raise UserError(
            f"{path}: hidden_size {arch.hidden_size} is not a multiple of num_attention_heads {arch.num_heads}"
        )
    act = config.get("hidden_act", "gelu")
    if act not in ("gelu", "gelu_python"):
        raise UserError(f"{path}: hidden_act = {act!r} is not supported (supported: 'gelu', the exact erf GELU)")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise UserError(f"{path}: position_embedding_type = {position!r} is not supported (supported: 'absolute')")
    return arch


def distilbert_architecture(config: Mapping[str, Any], path: str = "config.json") -> BertArchitecture:
    """DistilBERT's ``config.json`` names (``dim``, ``n_heads``, ``n_layers``, ``hidden_dim``, ``activation``); no
    token types; its LayerNorm epsilon is fixed at 1e-12 in transformers."""
    arch = BertArchitecture(
        hidden_size=_int(config, "dim", path),
        num_heads=_int(config, "n_heads", path),
        num_layers=_int(config, "n_layers", path),
        intermediate_size=_int(config, "hidden_dim", path),
        vocab_size=_int(config, "vocab_size", path),
        max_positions=_int(config, "max_position_embeddings", path),
        type_vocab_size=0,
        layer_norm_eps=1e-12,
    )
    if arch.hidden_size % arch.num_heads:
        raise UserError(f"{path}: dim {arch.hidden_size} is not a multiple of n_heads {arch.num_heads}")
    act = config.get("activation", "gelu")
    if act != "gelu":
        raise UserError(f"{path}: activation = {act!r} is not supported (supported: 'gelu', the exact erf GELU)")
    return arch


def _st_pooling(directory: Path) -> tuple[Pooling | None, bool | None, list[str]]:
    """Pooling and normalisation declared by sentence-transformers' ``modules.json`` (None when absent)."""
    modules_path = directory / ST_MODULES
    if not modules_path.is_file():
        return None, None, []
    modules = _read_json(modules_path)
    if not isinstance(modules, list):
        raise UserError(f"{modules_path} must hold a list of modules")
    read = [ST_MODULES]
    pooling: Pooling | None = None
    normalize = False
    for module in modules:
        kind = str(module.get("type", "")) if isinstance(module, dict) else ""
        if kind.endswith(".Normalize"):
            normalize = True
        elif kind.endswith(".Pooling"):
            relative = f"{module.get('path') or ''}/config.json".lstrip("/")
            settings = _read_json(directory / relative)
            read.append(relative)
            modes = [k for k, v in settings.items() if k.startswith("pooling_mode_") and v is True]
            if modes == ["pooling_mode_mean_tokens"]:
                pooling = Pooling.MEAN
            elif modes == ["pooling_mode_cls_token"]:
                pooling = Pooling.CLS
            else:
                raise UserError(
                    f"{directory / relative}: pooling {modes} is not supported (supported: exactly one of "
                    "pooling_mode_mean_tokens, pooling_mode_cls_token); pass --pooling mean|cls to override"
                )
        elif kind.endswith(".Dense"):
            raise UserError(
                f"{modules_path}: a sentence-transformers Dense module follows the pooling; it is not converted "
                "(supported modules: Transformer, Pooling, Normalize)"
            )
    return pooling, normalize, read


def read_encoder_config(
    directory: Path,
    config: Mapping[str, Any],
    tensor_names: set[str],
    *,
    task: Task | None = None,
    pooling: Pooling | None = None,
    normalize: bool | None = None,
    max_seq_length: int | None = None,
) -> EncoderConfig:
    """Decide the encoder from the checkpoint; the keyword arguments override what the files say."""
    model_type = str(config.get("model_type", "bert"))
    if model_type not in MODEL_TYPES:
        raise UserError(f"{directory}/config.json: model_type {model_type!r} is not one of {', '.join(MODEL_TYPES)}")
    arch = distilbert_architecture(config) if model_type == "distilbert" else bert_architecture(config)
    prefix = f"{model_type}." if f"{model_type}.embeddings.word_embeddings.weight" in tensor_names else ""
    if f"{prefix}embeddings.word_embeddings.weight" not in tensor_names:
        raise UserError(
            f"{directory} has no embeddings.word_embeddings.weight (nor "
            f"{model_type}.embeddings.word_embeddings.weight); it is not a {model_type} checkpoint"
        )
    offset = 0
    if model_type == "roberta":
        pad = config.get("pad_token_id", 1)
        if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
            raise UserError(f"{directory}/config.json: pad_token_id = {pad!r} must be a token id (RoBERTa: 1)")
        offset = pad + 1
    layout = layout_of(model_type, prefix)
    architectures = [str(a) for a in config.get("architectures") or []]
    if task is None:
        task = Task.CLASSIFY if any(a.endswith("ForSequenceClassification") for a in architectures) else Task.EMBED
    sources: list[str] = ["config.json"]
    labels: tuple[str, ...] = ()
    if task is Task.CLASSIFY:
        needed = [f"{layout.head_dense}.weight", f"{layout.head_out}.weight"]
        if not all(name in tensor_names for name in needed):
            raise UserError(
                f"{directory}: task classify needs a sequence-classification head ({' and '.join(needed)}); this "
                "checkpoint has none — use task embed"
            )
        labels = _labels(config, directory)
    st_pooling, st_normalize, read = _st_pooling(directory)
    sources += read
    chosen_pooling = pooling or st_pooling or Pooling.MEAN
    chosen_normalize = normalize if normalize is not None else (st_normalize if st_normalize is not None else True)
    limit = max_seq_length
    if limit is None and (directory / ST_CONFIG).is_file():
        value = _read_json(directory / ST_CONFIG).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            limit = value
            sources.append(ST_CONFIG)
    usable = arch.max_positions - offset
    limit = limit or usable
    if limit > usable:
        raise UserError(
            f"max_seq_length {limit} exceeds the {usable} positions the model can number "
            f"(max_position_embeddings {arch.max_positions}"
            + (f", the first {offset} reserved by RoBERTa" if offset else "")
            + "); lower it"
        )
    return EncoderConfig(
        architecture=arch,
        task=task,
        pooling=chosen_pooling,
        normalize=chosen_normalize,
        max_seq_length=limit,
        labels=labels,
        prefix=prefix,
        model_type=model_type,
        position_offset=offset,
        sources=tuple(sources),
    )


def _labels(config: Mapping[str, Any], directory: Path) -> tuple[str, ...]:
    raw = config.get("id2label")
    if not isinstance(raw, dict) or not raw:
        raise UserError(f"{directory}/config.json has no id2label; a classifier needs its class names")
    try:
        by_index = {int(k): str(v) for k, v in raw.items()}
    except ValueError as exc:
        raise UserError(f"{directory}/config.json: id2label keys must be integers ({exc})") from exc
    if sorted(by_index) != list(range(len(by_index))):
        raise UserError(f"{directory}/config.json: id2label keys {sorted(by_index)} must be 0..{len(by_index) - 1}")
    return tuple(by_index[i] for i in range(len(by_index)))
