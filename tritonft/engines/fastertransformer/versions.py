"""Pinned versions the images are built from (pure constants, shared by the schema defaults and the builders)."""

TRITON_VERSION = "23.04"
"""Triton container release; the FT backend builds against releases up to 23.05."""
FT_BACKEND_COMMIT = "c6936c39be6fc57c161db34cfe5c45d1bef81ee2"
"""triton-inference-server/fastertransformer_backend, last commit (2023-10-19); the project is frozen."""
FT_COMMIT = "df4a7534860137e060e18d2ebf019906120ea204"
"""NVIDIA/FasterTransformer, last commit (2023-10-19)."""
DEFAULT_CUDA_ARCHS = ("70", "75", "80", "86", "89", "90")
"""V100, T4, A100, A10G/A40, L4/L40S, H100/H200: native code for every GPU EC2 offers (FT's ``SM`` variable)."""
