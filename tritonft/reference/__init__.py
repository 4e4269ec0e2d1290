"""A CPU reference of FasterTransformer's model step, reading the converter's files (numpy only).

FasterTransformer cannot run on these machines and its loader never checks shapes, so a conversion wrong by one
transpose would serve garbage silently. This package loads a converted ``<TP>-gpu/`` directory exactly as FT's
loader reads it (:mod:`.checkpoint`: ``config.ini`` + raw ``.bin`` files, TP shards merged), runs T5, GPT-2 and
GPT-J with a KV cache (:mod:`.models`) and decodes as FT does (:mod:`.decoding`: greedy, beam search, sampling,
bad/stop words, end id), returning FT's output layout. It is a checking tool, not a serving engine.
"""

from tritonft.reference.checkpoint import Checkpoint, load_checkpoint
from tritonft.reference.decoding import GenerationRequest, GenerationResult, generate
from tritonft.reference.models import build_model

__all__ = ["Checkpoint", "GenerationRequest", "GenerationResult", "build_model", "generate", "load_checkpoint"]
