"""The numerical building blocks FT's kernels compute, in numpy float32."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

NEG_INF = np.float32(-np.inf)


def layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(var + np.float32(eps)) * weight + bias, np.float32)


def rms_norm(x: Array, weight: Array, eps: float = 1e-6) -> Array:
    """T5's layer norm: no mean subtraction, no bias."""
    var = (x * x).mean(axis=-1, keepdims=True)
    return np.asarray(x / np.sqrt(var + np.float32(eps)) * weight, np.float32)


def gelu_tanh(x: Array) -> Array:
    """FT's ``Gelu`` (the tanh approximation; HF ``gelu_new``)."""
    c = np.float32(math.sqrt(2.0 / math.pi))
    inner = np.tanh(c * (x + np.float32(0.044715) * x * x * x))
    return np.asarray(np.float32(0.5) * x * (np.float32(1.0) + inner), np.float32)


def relu(x: Array) -> Array:
    return np.asarray(np.maximum(x, np.float32(0)), np.float32)


def silu(x: Array) -> Array:
    return np.asarray(x / (np.float32(1) + np.exp(-x)), np.float32)


ACTIVATIONS = {"relu": relu, "gelu": gelu_tanh, "silu": silu}
"""FT's activation kernels by name (FT's T5 ``gelu``/``gated-gelu`` and GPT ``Gelu`` are all the tanh form)."""


def softmax(x: Array) -> Array:
    shifted = x - x.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return np.asarray(e / e.sum(axis=-1, keepdims=True), np.float32)


def log_softmax(x: Array) -> Array:
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis=-1, keepdims=True)
    return np.asarray(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)), np.float32)


def attention(q: Array, k: Array, v: Array, bias: Array | None = None) -> Array:
    """``softmax(q k^T + bias) v`` over heads: q ``[n, H, t, e]``, k/v ``[n, H, T, e]``, bias broadcastable to
    ``[n, H, t, T]`` (masks are ``-inf`` entries of the bias); q must already carry any scaling."""
    scores = q @ k.swapaxes(-1, -2)
    if bias is not None:
        scores = scores + bias
    return softmax(scores) @ v


def causal_mask(start: int, count: int) -> Array:
    """``[count, start + count]`` bias: query ``start + i`` sees keys ``0 .. start + i``."""
    keys = np.arange(start + count)[None, :]
    queries = np.arange(start, start + count)[:, None]
    return np.asarray(np.where(keys <= queries, np.float32(0), NEG_INF), np.float32)


def relative_position_bucket(relative: Array, bidirectional: bool, num_buckets: int, max_distance: int = 128) -> Array:
    """T5's bucket of ``key - query`` (FT hard-codes ``max_distance`` 128, as HF's default)."""
    buckets = np.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).astype(relative.dtype) * num_buckets
        distance = np.abs(relative)
    else:
        distance = -np.minimum(relative, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    with np.errstate(divide="ignore"):
        scaled = (
            np.log(distance.astype(np.float32) / np.float32(max_exact))
            / np.float32(math.log(max_distance / max_exact))
            * np.float32(num_buckets - max_exact)
        )
    large = max_exact + np.where(is_small, 0, scaled).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(is_small, distance, large)


def rotary_tables(positions: Array, rotary_dim: int) -> tuple[Array, Array]:
    """GPT-J rotary ``(sin, cos)`` for ``positions``, each ``[t, rotary_dim]`` with pairs interleaved."""
    inv_freq = (1.0 / (10000 ** (np.arange(0, rotary_dim, 2, dtype=np.int64).astype(np.float32) / rotary_dim))).astype(
        np.float32
    )
    angles = positions.astype(np.float32)[:, None] * inv_freq[None, :]
    sin = np.repeat(np.sin(angles), 2, axis=-1).astype(np.float32)
    cos = np.repeat(np.cos(angles), 2, axis=-1).astype(np.float32)
    return sin, cos


def apply_rotary(x: Array, sin: Array, cos: Array) -> Array:
    """GPT-J style (rotate every two) on the first ``rotary_dim`` features of ``x`` ``[..., t, e]``."""
    width = sin.shape[-1]
    rot, rest = x[..., :width], x[..., width:]
    rotated = np.empty_like(rot)
    rotated[..., 0::2] = -rot[..., 1::2]
    rotated[..., 1::2] = rot[..., 0::2]
    return np.concatenate([rot * cos + rotated * sin, rest], axis=-1).astype(np.float32)


def rope_inv_freq(head_dim: int, theta: float, scaling: dict[str, Any] | None = None) -> Array:
    """The rotary inverse frequencies of a Llama-family model (``[head_dim / 2]``), as transformers' rope
    initialisation computes them: ``theta ** -(2i / head_dim)``; with ``scaling`` of type ``linear`` divided by its
    ``factor``, of type ``llama3`` (Llama 3.1/3.2) low frequencies divided by ``factor``, high ones kept and the band
    between interpolated. ``ValueError`` for another type (``dynamic``, ``yarn``, ... are not implemented)."""
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(head_dim)
    inv_freq = np.asarray(1.0 / (np.float32(theta) ** exponents), np.float32)
    kind = str((scaling or {}).get("rope_type", (scaling or {}).get("type", "default")))
    if kind == "default":
        return inv_freq
    assert scaling is not None
    factor = float(scaling["factor"])
    if kind == "linear":
        return np.asarray(inv_freq / np.float32(factor), np.float32)
    if kind != "llama3":
        raise ValueError(f"rope scaling {kind!r} is not implemented by the reference (default, linear, llama3)")
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old = float(scaling["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.asarray(np.where(medium, smoothed, scaled), np.float32)


def rotary_half_tables(positions: Array, inv_freq: Array) -> tuple[Array, Array]:
    """Llama-style rotary ``(sin, cos)`` for ``positions``, each ``[t, 2 * len(inv_freq)]`` (the frequencies twice,
    not interleaved)."""
    angles = positions.astype(np.float32)[:, None] * inv_freq[None, :]
    both = np.concatenate([angles, angles], axis=-1)
    return np.sin(both).astype(np.float32), np.cos(both).astype(np.float32)


def apply_rotary_half(x: Array, sin: Array, cos: Array) -> Array:
    """Llama style (rotate the two halves: ``x * cos + rotate_half(x) * sin``) on ``x`` ``[..., t, e]``."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return np.asarray(x * cos + rotated * sin, np.float32)
