"""Where each weight of an encoder sits in its checkpoint, by ``model_type`` (pure: names and shapes only).

BERT, RoBERTa and DistilBERT share one body — embeddings + LayerNorm, then per layer Q/K/V projections, attention
output + residual + LayerNorm, feed-forward (GELU) + residual + LayerNorm — under different tensor names:

* ``bert``: ``[bert.]embeddings.{word,position,token_type}_embeddings``, ``[bert.]encoder.layer.N.attention.self.
  {query,key,value}``, ``…attention.output.{dense,LayerNorm}``, ``…intermediate.dense``, ``…output.{dense,
  LayerNorm}``; classification head: ``[bert.]pooler.dense`` + tanh + ``classifier``;
* ``roberta``: BERT's body under ``roberta.``; head ``classifier.dense`` + tanh + ``classifier.out_proj``;
* ``distilbert``: ``[distilbert.]embeddings.{word,position}_embeddings`` (no token types),
  ``[distilbert.]transformer.layer.N.attention.{q,k,v,out}_lin``, ``…sa_layer_norm``, ``…ffn.lin{1,2}``,
  ``…output_layer_norm``; head ``pre_classifier`` + ReLU + ``classifier``.

The prefix in brackets is present in checkpoints saved with a task head (``*ForSequenceClassification``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Layout", "layout_of"]


@dataclass(frozen=True)
class Layout:
    """The tensor names (without ``.weight`` / ``.bias``) of one model type's body and classification head."""

    word: str
    position: str
    token_type: str | None
    """None: the model has no token-type embedding (DistilBERT)."""
    embedding_norm: str
    layer: str
    """Prefix of layer ``{i}``."""
    query: str
    key: str
    value: str
    attention_out: str
    attention_norm: str
    ffn_in: str
    ffn_out: str
    ffn_norm: str
    head_dense: str
    head_out: str
    head_activation: str
    """ONNX operator between the head's two layers: ``Tanh`` (BERT, RoBERTa) or ``Relu`` (DistilBERT)."""

    def layer_part(self, index: int, part: str) -> str:
        return f"{self.layer.format(i=index)}.{part}"


def layout_of(model_type: str, prefix: str) -> Layout:
    """The layout of ``model_type`` (``bert``, ``roberta``, ``distilbert``) whose body sits under ``prefix``."""
    p = prefix
    if model_type == "distilbert":
        return Layout(
            word=f"{p}embeddings.word_embeddings",
            position=f"{p}embeddings.position_embeddings",
            token_type=None,
            embedding_norm=f"{p}embeddings.LayerNorm",
            layer=f"{p}transformer.layer.{{i}}",
            query="attention.q_lin",
            key="attention.k_lin",
            value="attention.v_lin",
            attention_out="attention.out_lin",
            attention_norm="sa_layer_norm",
            ffn_in="ffn.lin1",
            ffn_out="ffn.lin2",
            ffn_norm="output_layer_norm",
            head_dense="pre_classifier",
            head_out="classifier",
            head_activation="Relu",
        )
    roberta = model_type == "roberta"
    return Layout(
        word=f"{p}embeddings.word_embeddings",
        position=f"{p}embeddings.position_embeddings",
        token_type=f"{p}embeddings.token_type_embeddings",
        embedding_norm=f"{p}embeddings.LayerNorm",
        layer=f"{p}encoder.layer.{{i}}",
        query="attention.self.query",
        key="attention.self.key",
        value="attention.self.value",
        attention_out="attention.output.dense",
        attention_norm="attention.output.LayerNorm",
        ffn_in="intermediate.dense",
        ffn_out="output.dense",
        ffn_norm="output.LayerNorm",
        head_dense="classifier.dense" if roberta else f"{p}pooler.dense",
        head_out="classifier.out_proj" if roberta else "classifier",
        head_activation="Tanh",
    )
