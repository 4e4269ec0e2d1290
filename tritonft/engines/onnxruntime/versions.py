"""Pinned versions of the ONNX Runtime engine's server image (pure constants)."""

TRITON_VERSION = "25.12"
"""NGC ``nvcr.io/nvidia/tritonserver:<version>-py3``: a release after NVIDIA's August 2025 fixes (25.07: the HTTP
chunked-encoding overflow CVE-2025-23310/23311 and the Python backend's shared-memory chain CVE-2025-23319/23320/
23334), with Triton's ONNX Runtime and Python backends; the same release as the vLLM engine's image."""
SERVER_DOCKERFILE = "images/triton-onnx/Dockerfile"
SERVER_REQUIREMENTS = "images/triton-onnx/requirements.txt"
