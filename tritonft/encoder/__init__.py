"""Encoder models (BERT family: sentence embeddings and sequence classification) served through ONNX Runtime.

The path, stage by stage (each a pure module plus its tests):

* :mod:`.checkpoint` — what a Hugging Face BERT directory says: architecture, task, pooling, labels, limits;
* :mod:`.graph` — the ONNX graph built from the safetensors weights with the ``onnx`` package (no torch);
* :mod:`.convert` — ``tritonft convert`` for encoders: ``OUT/onnx/{model.onnx,manifest.json}``, atomic, idempotent;
* :mod:`.verify` — re-checks a converted directory against its manifest and runs it once with ONNX Runtime;
* :mod:`.repo` — the Triton model repository: tokenizer model, ONNX model, ensemble (text in, answer out).
"""
