"""How far apart two floats computed in different processes may be, each with the reason for its size.

A float that a test compares was computed twice: once by the code under test (inside a Triton Python-backend stub
with its own environment and numpy build, by ONNX Runtime, by vLLM) and once by the test or a golden file's script
(the test's `.venv`, PyTorch + transformers). The two runs execute different kernels: numpy builds dispatch other
SIMD loops (exp, log, tanh) per CPU, OpenBLAS picks its matmul kernels per CPU (`OPENBLAS_CORETYPE`), ONNX Runtime
fuses differently from PyTorch. Their sums are equal only to the last few bits, and which bits differ depends on the
machine: an exact comparison passes where the suite was written and fails on another CPU. So every such comparison
uses one of these tolerances; token ids, texts, shapes and orderings stay exact (they are what the user sees, and a
kernel's last bits do not move them on the suite's checkpoints, whose greedy choices have wide margins).

Each bound is far above the kernels' disagreement and far below what a wrong model, a wrong conversion or a
wrong token produces, so it still fails on every error the test exists to catch.
"""

# Log-probabilities of chosen tokens from the float32 reference engine, served from the Python-backend stub vs the
# same engine in the test's process. Observed apart by up to 1.4e-6 (an AVX-512 Xeon's numpy vs this suite's,
# GPT-2's seeded checkpoint); a user reads them to ~3 decimals, and a different token or model moves them by > 1e-2.
LOGPROB_ATOL = 1e-4

# Beam-search cumulative log-probabilities of the numpy reference vs PyTorch's (the goldens): summed over the
# generated tokens, so relative; 1e-4 of a score is far below the gap between two beams the goldens rank.
BEAM_SCORE_RTOL = 1e-4

# Float32 encoder outputs (embeddings in [-1, 1], similarity scores) from ONNX Runtime vs sentence-transformers
# (PyTorch): fused attention and GELU kernels differ by ~1e-6 per element; a wrong weight or pooling moves
# elements by > 1e-2.
FP32_ATOL = 2e-5

# The same outputs from an fp16-converted graph vs the float32 truth: fp16's 10-bit mantissa gives ~1e-3 relative
# per operation, accumulated through six layers.
FP16_ATOL = 1e-2

# Cosine similarity an fp16 embedding keeps with the float32 one (direction is what retrieval ranks by).
FP16_MIN_COSINE = 0.999

# Classifier logits (unbounded, ~10 in size) from an fp16 graph vs float32: fp16's relative error on that scale.
FP16_LOGITS_ATOL = 5e-2
