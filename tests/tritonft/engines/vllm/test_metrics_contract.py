"""The project's ``vllm`` backend reports NVIDIA's metric families at the pinned ``vllm_backend`` commit: same names,
kinds and buckets (the alerts, the autoscaler and the dashboard read them on a GPU node from NVIDIA's backend)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from tritonft.engines.vllm import contract

MODEL_FILE = Path(contract.__file__).with_name("triton_model.py")
GAUGES_FILE = Path(contract.__file__).parents[3] / "images" / "triton-vllm" / "scheduler_gauges.py"


def _constants() -> dict[str, Any]:
    tree = ast.parse(MODEL_FILE.read_text())
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()
        and node.targets[0].id.endswith(("_BUCKETS", "_FAMILIES"))
    }  # fmt: skip


def test_the_backend_reports_nvidias_families_and_vllms_scheduler_gauges() -> None:
    families = _constants()["METRIC_FAMILIES"]
    assert tuple((name, kind) for name, kind, _ in families) == contract.METRICS


def test_the_image_patch_adds_vllms_scheduler_gauges_by_their_names() -> None:
    tree = ast.parse(GAUGES_FILE.read_text())
    (gauges,) = [
        n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "GAUGES"
    ]
    assert tuple((name, "GAUGE") for name, _, _ in ast.literal_eval(gauges)) == contract.SCHEDULER_GAUGES


def test_the_backends_histograms_have_nvidias_buckets() -> None:
    constants = _constants()
    mine = {
        "vllm:time_to_first_token_seconds": constants["TTFT_BUCKETS"],
        "vllm:time_per_output_token_seconds": constants["ITL_BUCKETS"],
        "vllm:e2e_request_latency_seconds": constants["E2E_BUCKETS"],
        "vllm:request_params_n": constants["N_BUCKETS"],
    }
    assert {name: tuple(buckets) for name, buckets in mine.items()} == contract.METRIC_BUCKETS
