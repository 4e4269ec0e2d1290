"""Where a pod lands: node selectors, tolerations and affinities of GPU and CPU workloads (pure, no Pulumi).

GPU workloads (the Triton pods of ``device: gpu`` models) select the GPU pool and tolerate its taint
(:class:`components.common.target.GpuScheduling`). CPU workloads (conversion Jobs, the Triton pods of
``device: cpu`` encoders) select the stack's ``cpuNodeSelector``, carry no GPU toleration and are kept off GPU
nodes by a required node affinity, so they never take the CPU or memory a GPU pod needs beside its GPUs.
"""

from __future__ import annotations

from typing import Any

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""Label set by NVIDIA GPU feature discovery on GPU nodes."""


def away_from_gpu_nodes(gpu_node_selector: dict[str, str]) -> dict[str, Any]:
    """Required node affinity that excludes GPU nodes: not the GPU pool's labels, and no GFD GPU label.

    ``NotIn`` also matches nodes without the label, so CPU nodes always qualify.
    """
    expressions = [{"key": k, "operator": "NotIn", "values": [v]} for k, v in sorted(gpu_node_selector.items())]
    expressions.append({"key": GPU_PRESENT_LABEL, "operator": "NotIn", "values": ["true"]})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    }
