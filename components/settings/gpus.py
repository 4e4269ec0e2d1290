"""GPU facts the validator sizes against: GPU models and the AWS instance types that carry them."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class GpuModel:
    """One GPU product."""

    name: str
    memory_gib: int
    compute_capability: int
    """SM version, e.g. 86 for A10G; bf16 needs >= 80, FT's kernels cover 70..90."""

    @property
    def supports_bf16(self) -> bool:
        return self.compute_capability >= 80


GPU_MODELS: dict[str, GpuModel] = {
    g.name: g
    for g in (
        GpuModel("T4", 16, 75),
        GpuModel("V100", 16, 70),
        GpuModel("V100-32GB", 32, 70),
        GpuModel("A10G", 24, 86),
        GpuModel("L4", 24, 89),
        GpuModel("L40S", 48, 89),
        GpuModel("A100-40GB", 40, 80),
        GpuModel("A100-80GB", 80, 80),
        GpuModel("H100", 80, 90),
        GpuModel("H200", 141, 90),
    )
}


@dataclass(frozen=True)
class GpuNodeType:
    """A node shape: which GPU and how many per node."""

    name: str
    gpu: GpuModel
    gpus: int
    vcpus: int | None = None
    """The node's CPUs (an EC2 type's vCPUs; an existing cluster's ``gpuNodeCpus``); None: not known. A vLLM
    engine's CPU limit (``components.common.sizing.vllm_server_sizing``)."""

    @property
    def total_memory_bytes(self) -> int:
        return self.gpu.memory_gib * GIB * self.gpus


def ec2_vcpus(size: str) -> int:
    """The vCPUs of an EC2 size of the GPU families here: 4 per ``xlarge`` (``12xlarge`` = 48; p3.2xlarge = 8,
    p5.48xlarge = 192), ``metal`` (g4dn's) 96."""
    if size == "metal":
        return 96
    return 4 * int(size.removesuffix("xlarge") or 1)


def _family(prefix: str, gpu: str, counts: dict[str, int]) -> dict[str, GpuNodeType]:
    return {
        f"{prefix}.{size}": GpuNodeType(f"{prefix}.{size}", GPU_MODELS[gpu], n, ec2_vcpus(size))
        for size, n in counts.items()
    }


_SINGLE = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1}

AWS_GPU_INSTANCES: dict[str, GpuNodeType] = {
    **_family("g4dn", "T4", {**_SINGLE, "12xlarge": 4, "metal": 8}),
    **_family("g5", "A10G", {**_SINGLE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    **_family("g6", "L4", {**_SINGLE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    **_family("g6e", "L40S", {**_SINGLE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    **_family("p3", "V100", {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    **_family("p3dn", "V100-32GB", {"24xlarge": 8}),
    **_family("p4d", "A100-40GB", {"24xlarge": 8}),
    **_family("p4de", "A100-80GB", {"24xlarge": 8}),
    **_family("p5", "H100", {"48xlarge": 8}),
    **_family("p5e", "H200", {"48xlarge": 8}),
    **_family("p5en", "H200", {"48xlarge": 8}),
}
"""AWS GPU instance types we size against (GPU model, GPUs and vCPUs per instance)."""

WEIGHT_BUDGET_FRACTION = 0.8
"""Share of each GPU's memory the weights may take; the rest is KV cache, activations and the CUDA context."""
