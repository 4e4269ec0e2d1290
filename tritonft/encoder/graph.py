"""The ONNX graph of a BERT encoder, built node by node from its weights with the ``onnx`` package (no torch).

Inputs (``int64``, dynamic ``batch`` and ``sequence`` axes, padded on the right): ``input_ids``,
``attention_mask`` (1 = token, 0 = padding) and ``token_type_ids``.

Outputs, by task (always ``float32``, whatever the compute type):

* ``embed``: ``embedding`` ``[batch, hidden]`` — the last hidden states pooled inside the graph (mean under the
  attention mask, or the first token), then L2-normalised when asked; pooling happens in the graph so that the
  served path has no Python step after the model;
* ``classify``: ``logits`` ``[batch, labels]``, ``scores`` ``[batch, labels]`` (softmax of the logits) and
  ``label`` ``[batch, 1]`` (string: the top class's ``id2label`` name, picked by ``ArgMax`` + ``Gather`` in the graph).

The layer arithmetic is Hugging Face's ``BertModel`` (eager attention): embeddings (word + position + token
type, LayerNorm), then per layer self-attention (Q, K and V projections; scores divided by ``sqrt(head_size)``;
padding masked with a large negative bias), output dense + residual + LayerNorm, the feed-forward block with the
exact (erf) GELU + residual + LayerNorm. The nodes follow the patterns of Hugging Face's own ONNX export, which
ONNX Runtime's transformer optimizer recognises (``tritonft convert --optimize`` fuses every attention block,
LayerNorm and GELU).

``fp16`` stores the weights as float16 and computes in float16; the pooled output (and the mean pooling's
sums) are computed in float32 after a ``Cast``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from tritonft.encoder.checkpoint import EncoderConfig, Pooling, Task
from tritonft.errors import UserError
from tritonft.spec import WeightDType

OPSET = 17
"""ONNX opset of the graph: 17 has ``LayerNormalization``; ONNX Runtime >= 1.14 and Triton >= 23.04 run it."""
IR_VERSION = 8
"""IR version matching opset 17 (readable by every ONNX Runtime that runs opset 17)."""
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
EMBED_OUTPUTS = ("embedding",)
CLASSIFY_OUTPUTS = ("logits", "scores", "label")
MASK_BIAS = -10000.0
"""Added to the attention scores of padding positions (finite in float16; exp() of it is 0 in either type)."""
PROTOBUF_LIMIT = 2_000_000_000
"""A single-file ONNX model is a protobuf message, which cannot exceed 2 GiB."""

Array = npt.NDArray[Any]
WeightReader = Callable[[str], Array]
"""Reads one checkpoint tensor by name, already cast to the graph's float type."""


def outputs_of(task: Task) -> tuple[str, ...]:
    return EMBED_OUTPUTS if task is Task.EMBED else CLASSIFY_OUTPUTS


def required_tensors(config: EncoderConfig) -> list[str]:
    """Checkpoint tensor names the graph reads (a missing one is reported before anything is built)."""
    return list(expected_shapes(config))


def expected_shapes(config: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """The shape every tensor the graph reads must have (checked against the checkpoint's header), by name."""
    a = config.architecture
    names = config.layout
    h, f = a.hidden_size, a.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {}

    def linear(name: str, rows: int, columns: int) -> None:
        shapes[f"{name}.weight"], shapes[f"{name}.bias"] = (rows, columns), (rows,)

    def norm(name: str) -> None:
        shapes[f"{name}.weight"], shapes[f"{name}.bias"] = (h,), (h,)

    shapes[f"{names.word}.weight"] = (a.vocab_size, h)
    shapes[f"{names.position}.weight"] = (a.max_positions, h)
    if names.token_type is not None:
        shapes[f"{names.token_type}.weight"] = (a.type_vocab_size, h)
    norm(names.embedding_norm)
    for i in range(a.num_layers):
        for part in (names.query, names.key, names.value, names.attention_out):
            linear(names.layer_part(i, part), h, h)
        norm(names.layer_part(i, names.attention_norm))
        linear(names.layer_part(i, names.ffn_in), f, h)
        linear(names.layer_part(i, names.ffn_out), h, f)
        norm(names.layer_part(i, names.ffn_norm))
    if config.task is Task.CLASSIFY:
        linear(names.head_dense, h, h)
        linear(names.head_out, len(config.labels), h)
    return shapes


def shape_problems(config: EncoderConfig, shapes: dict[str, tuple[int, ...]]) -> list[str]:
    problems = []
    for name, want in expected_shapes(config).items():
        have = shapes.get(name)
        if have is None:
            problems.append(f"tensor {name} is missing")
        elif tuple(have) != want:
            problems.append(f"tensor {name} has shape {list(have)}, config.json implies {list(want)}")
    return problems


@dataclass
class _Builder:
    dtype: WeightDType
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    initializer_bytes: int = 0
    _count: int = 0

    @property
    def onnx_type(self) -> int:
        return TensorProto.FLOAT if self.dtype is WeightDType.FP32 else TensorProto.FLOAT16

    @property
    def np_type(self) -> type[np.floating[Any]]:
        return np.float32 if self.dtype is WeightDType.FP32 else np.float16

    def constant(self, name: str, value: Array) -> str:
        array = np.ascontiguousarray(value)
        self.initializers.append(numpy_helper.from_array(array, name))
        self.initializer_bytes += array.nbytes
        return name

    def scalar(self, name: str, value: float) -> str:
        return self.constant(name, np.array(value, dtype=self.np_type))

    def node(self, op: str, inputs: Sequence[str], name: str, outputs: int = 1, **attrs: Any) -> list[str]:
        self._count += 1
        outs = [f"{name}" if outputs == 1 else f"{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=f"{op}_{self._count}_{name}", **attrs))
        return outs

    def op(self, op: str, inputs: Sequence[str], name: str, **attrs: Any) -> str:
        return self.node(op, inputs, name, **attrs)[0]


def build_graph(
    config: EncoderConfig, read: WeightReader, dtype: WeightDType, name: str = "encoder"
) -> onnx.ModelProto:
    """The whole model: ``read(tensor_name)`` returns each checkpoint tensor cast to ``dtype``."""
    a = config.architecture
    names = config.layout
    b = _Builder(dtype)
    h, heads, hd = a.hidden_size, a.num_heads, a.head_size

    for shared_name, value in (
        ("axes_0", np.array([0], dtype=np.int64)),
        ("starts_0", np.array([0], dtype=np.int64)),
        ("ends_1", np.array([1], dtype=np.int64)),
        ("axes_1", np.array([1], dtype=np.int64)),
        ("axes_12", np.array([1, 2], dtype=np.int64)),
        ("axes_2", np.array([2], dtype=np.int64)),
        ("heads_shape", np.array([0, 0, heads, hd], dtype=np.int64)),
        ("hidden_shape", np.array([0, 0, h], dtype=np.int64)),
        ("one", np.array(1.0, dtype=b.np_type)),
        ("half", np.array(0.5, dtype=b.np_type)),
        ("mask_bias", np.array(MASK_BIAS, dtype=b.np_type)),
        ("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=b.np_type)),
        ("attn_sqrt", np.array(math.sqrt(hd), dtype=b.np_type)),
        ("sqrt2", np.array(math.sqrt(2.0), dtype=b.np_type)),
        ("norm_eps", np.array(1e-12, dtype=np.float32)),
        ("count_eps", np.array(1e-9, dtype=np.float32)),
    ):
        b.constant(shared_name, value)

    # embeddings
    # position embeddings of positions 0..S-1: the first S rows of the table
    seq_len = b.op("Shape", ["input_ids"], "seq_len", start=1, end=2)
    word = b.op("Gather", [b.constant("word_embeddings", read(f"{names.word}.weight")), "input_ids"], "word")
    table = b.constant("position_embeddings", read(f"{names.position}.weight"))
    if config.position_offset:
        # RoBERTa numbers the tokens from pad_token_id + 1: rows offset..offset+S-1 (padding is masked anyway)
        start = b.constant("position_start", np.array([config.position_offset], dtype=np.int64))
        end = b.op("Add", [seq_len, "position_start"], "position_end")
        pos = b.op("Slice", [table, start, end, "axes_0"], "pos")
    else:
        pos = b.op("Slice", [table, "starts_0", seq_len, "axes_0"], "pos")
    types = None
    if names.token_type is not None:  # DistilBERT has none (its graph still takes token_type_ids: one contract)
        table_types = b.constant("token_type_embeddings", read(f"{names.token_type}.weight"))
        types = b.op("Gather", [table_types, "token_type_ids"], "types")
    summed = b.op("Add", [word, pos], "word_pos")
    if types is not None:
        summed = b.op("Add", [summed, types], "emb_sum")
    x = _layer_norm(b, summed, read, prefix=names.embedding_norm, name="emb_ln", eps=a.layer_norm_eps)

    # attention bias [B, 1, 1, S]: 0 on tokens, MASK_BIAS on padding
    # (the node order ONNX Runtime's attention fusion recognises: Unsqueeze, Unsqueeze, Cast, Sub, Mul)
    mask_4d = b.op("Unsqueeze", [b.op("Unsqueeze", ["attention_mask", "axes_1"], "mask_3d_i"), "axes_2"], "mask_4d")
    inverted = b.op("Sub", ["one", b.op("Cast", [mask_4d], "mask_f", to=b.onnx_type)], "mask_inv")
    bias = b.op("Mul", [inverted, "mask_bias"], "attn_bias")

    for i in range(a.num_layers):
        x = _layer(b, x, bias, read, index=i, name=f"l{i}", config=config)

    outputs: list[onnx.ValueInfoProto]
    if config.task is Task.EMBED:
        hidden = b.op("Cast", [x], "hidden_f32", to=TensorProto.FLOAT) if dtype is WeightDType.FP16 else x
        pooled = _pool(b, hidden, config.pooling)
        if config.normalize:
            square = b.op("Mul", [pooled, pooled], "sq")
            norm = b.op("Sqrt", [b.op("ReduceSum", [square, "axes_1"], "sq_sum", keepdims=1)], "norm")
            pooled = b.op("Div", [pooled, b.op("Max", [norm, "norm_eps"], "norm_clamped")], "normalized")
        b.nodes.append(helper.make_node("Identity", [pooled], ["embedding"], name="Identity_embedding"))
        outputs = [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", h])]
    else:
        first = _first_token(b, x, "cls_token")
        dense = _linear(b, first, read, names.head_dense, "pooler")
        activation = names.head_activation
        logits = _linear(
            b, b.op(activation, [dense], f"pooler_{activation.lower()}"), read, names.head_out, "classifier"
        )
        if dtype is WeightDType.FP16:
            logits = b.op("Cast", [logits], "logits_f32", to=TensorProto.FLOAT)
        b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="Identity_logits"))
        b.nodes.append(helper.make_node("Softmax", ["logits"], ["scores"], name="Softmax_scores", axis=-1))
        best = b.op("ArgMax", ["scores"], "best", axis=1, keepdims=0)
        label_names = np.array([s.encode() for s in config.labels], dtype=object)
        b.initializers.append(numpy_helper.from_array(label_names, "label_names"))
        picked = b.op("Gather", ["label_names", best], "label_flat", axis=0)
        b.nodes.append(helper.make_node("Unsqueeze", [picked, "axes_1"], ["label"], name="Unsqueeze_label"))
        width = len(config.labels)
        outputs = [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", width]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", width]),
            helper.make_tensor_value_info("label", TensorProto.STRING, ["batch", 1]),
        ]

    if b.initializer_bytes > PROTOBUF_LIMIT:
        raise UserError(
            f"the {dtype} weights take {b.initializer_bytes} bytes, over the 2 GB a single-file ONNX model can hold; "
            "convert with --dtype fp16"
        )
    used = {name for node in b.nodes for name in node.input}
    b.initializers = [t for t in b.initializers if t.name in used]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in INPUTS]
    graph = helper.make_graph(b.nodes, name, inputs, outputs, initializer=b.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="tritonft",
        ir_version=IR_VERSION,
    )
    return model


def _linear(b: _Builder, x: str, read: WeightReader, prefix: str, name: str) -> str:
    """``x @ W.T + b`` with Hugging Face's ``[out, in]`` weight stored transposed (``[in, out]``) for ``MatMul``."""
    weight = b.constant(f"{name}.weight", np.ascontiguousarray(read(f"{prefix}.weight").T))
    bias = b.constant(f"{name}.bias", read(f"{prefix}.bias"))
    return b.op("Add", [b.op("MatMul", [x, weight], f"{name}_mm"), bias], f"{name}_out")


def _layer_norm(b: _Builder, x: str, read: WeightReader, *, prefix: str, name: str, eps: float) -> str:
    scale = b.constant(f"{name}.weight", read(f"{prefix}.weight"))
    shift = b.constant(f"{name}.bias", read(f"{prefix}.bias"))
    return b.op("LayerNormalization", [x, scale, shift], name, axis=-1, epsilon=eps)


def _layer(b: _Builder, x: str, bias: str, read: WeightReader, *, index: int, name: str, config: EncoderConfig) -> str:
    a = config.architecture
    names = config.layout

    def tensor(part: str) -> str:
        return names.layer_part(index, part)

    def projection(part: str) -> str:
        return _linear(b, x, read, tensor(getattr(names, part)), f"{name}_{part}")

    def heads(t: str, what: str, perm: list[int]) -> str:
        return b.op(
            "Transpose", [b.op("Reshape", [t, "heads_shape"], f"{name}_{what}_r")], f"{name}_{what}_t", perm=perm
        )

    q_h = heads(projection("query"), "q", [0, 2, 1, 3])
    k_h = heads(projection("key"), "k", [0, 2, 3, 1])
    v_h = heads(projection("value"), "v", [0, 2, 1, 3])
    raw = b.op("MatMul", [q_h, k_h], f"{name}_scores")
    scores = b.op("Add", [b.op("Div", [raw, "attn_sqrt"], f"{name}_scaled"), bias], f"{name}_masked")
    probs = b.op("Softmax", [scores], f"{name}_probs", axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [probs, v_h], f"{name}_ctx")], f"{name}_ctx_t", perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [context, "hidden_shape"], f"{name}_ctx_merged")
    attn_out = _linear(b, merged, read, tensor(names.attention_out), f"{name}_attn_out")
    x = _layer_norm(
        b,
        b.op("Add", [attn_out, x], f"{name}_attn_res"),
        read,
        prefix=tensor(names.attention_norm),
        name=f"{name}_attn_ln",
        eps=a.layer_norm_eps,
    )
    inter = _linear(b, x, read, tensor(names.ffn_in), f"{name}_ffn_in")
    # exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
    erf = b.op("Erf", [b.op("Div", [inter, "sqrt2"], f"{name}_gelu_scaled")], f"{name}_gelu_erf")
    gelu = b.op(
        "Mul",
        [b.op("Mul", [inter, b.op("Add", [erf, "one"], f"{name}_gelu_1p")], f"{name}_gelu_x"), "half"],
        f"{name}_gelu",
    )
    out = _linear(b, gelu, read, tensor(names.ffn_out), f"{name}_ffn_out")
    return _layer_norm(
        b,
        b.op("Add", [out, x], f"{name}_ffn_res"),
        read,
        prefix=tensor(names.ffn_norm),
        name=f"{name}_ffn_ln",
        eps=a.layer_norm_eps,
    )


def _pool(b: _Builder, hidden: str, pooling: Pooling) -> str:
    """``[B, S, H]`` float32 -> ``[B, H]``."""
    if pooling is Pooling.CLS:
        return _first_token(b, hidden, "cls_pooled")
    mask = b.op("Unsqueeze", [b.op("Cast", ["attention_mask"], "mask_f32", to=TensorProto.FLOAT), "axes_2"], "mask_3d")
    total = b.op("ReduceSum", [b.op("Mul", [hidden, mask], "masked_hidden"), "axes_1"], "hidden_sum", keepdims=0)
    count = b.op("ReduceSum", [mask, "axes_1"], "token_count", keepdims=0)
    return b.op("Div", [total, b.op("Max", [count, "count_eps"], "count_clamped")], "mean_pooled")


def _first_token(b: _Builder, x: str, name: str) -> str:
    """``[B, S, H]`` -> ``[B, H]``: the first position (a ``Slice`` + ``Squeeze``; ONNX Runtime's optimiser rewrites
    a scalar-index ``Gather`` into a ``Slice`` that keeps the axis, an output shape mismatch)."""
    first = b.op("Slice", [x, "starts_0", "ends_1", "axes_1"], f"{name}_slice")
    return b.op("Squeeze", [first, "axes_1"], name)
