"""The gateway speaks only the Triton calls it needs: health (server and model readiness) and inference. Every
``GRPCInferenceService`` method its code calls is read from the source, and each must belong to an API group the
Triton pods leave open (``components.serving.server_spec.RESTRICTED_APIS`` are closed to it)."""

from __future__ import annotations

import ast
from pathlib import Path

from components.serving.server_spec import RESTRICTED_APIS

GATEWAY = Path(__file__).resolve().parents[3] / "tritonft" / "gateway"
GROUP_OF = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelConfig": "model-config",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "ModelStatistics": "statistics",
    "RepositoryIndex": "model-repository",
    "RepositoryModelLoad": "model-repository",
    "RepositoryModelUnload": "model-repository",
    "SystemSharedMemoryStatus": "shared-memory",
    "SystemSharedMemoryRegister": "shared-memory",
    "SystemSharedMemoryUnregister": "shared-memory",
    "CudaSharedMemoryStatus": "shared-memory",
    "CudaSharedMemoryRegister": "shared-memory",
    "CudaSharedMemoryUnregister": "shared-memory",
    "TraceSetting": "trace",
    "LogSettings": "logging",
}
"""Triton's gRPC methods and the group ``--grpc-restricted-protocol`` names each by (Triton's protocol docs)."""


def stub_calls() -> dict[str, set[str]]:
    """``GRPCInferenceService`` methods called anywhere in the gateway's code, by file: ``<...>stub.Method(...)``, or
    a method named by its string to a call helper (``self._unary("ServerReady", ...)``, which calls the stub's)."""
    calls: dict[str, set[str]] = {}
    for path in sorted(GATEWAY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr in GROUP_OF:
                owner = node.func.value
                if isinstance(owner, ast.Call):  # self._next_stub().ModelStreamInfer(...): the stub a call returns
                    owner = owner.func
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if name.endswith("stub"):
                    calls.setdefault(node.func.attr, set()).add(path.name)
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value in GROUP_OF:
                calls.setdefault(first.value, set()).add(path.name)
    return calls


def test_the_gateway_calls_readiness_and_inference_and_nothing_else() -> None:
    assert set(stub_calls()) == {"ServerReady", "ModelReady", "ModelInfer", "ModelStreamInfer"}


def test_none_of_the_gateways_calls_is_in_a_group_the_triton_pods_restrict() -> None:
    groups = {GROUP_OF[method] for method in stub_calls()}
    assert groups == {"health", "inference"}
    assert groups.isdisjoint(RESTRICTED_APIS)
