"""A vLLM pod's readiness: one generated token within a timeout, not Triton's ``/v2/health/ready`` (pure).

Triton's readiness stays true when vLLM's engine is dead or hung: NVIDIA's backend checks the engine only with
``ENABLE_VLLM_HEALTH_CHECK``, only when a request arrives, and answers by unloading the model, which
``--model-control-mode=none`` (the stack's) refuses (``vllm_backend`` ``src/model.py:438-440``, ``:604-626``). So the
pod's readinessProbe asks the model itself for one token through Triton's HTTP ``generate`` (the server's own loopback,
the inference API no restriction covers): a dead engine answers an error and a hung one nothing within
:data:`TIMEOUT_S`, and after :data:`FAILURES` such answers the kubelet marks the pod unready; its Endpoints drop it
and the gateway, resolving the pods' headless Service, stops sending to it (``tritonft.gateway.triton``).
"""

from __future__ import annotations

from typing import Any

PERIOD_S = 10
"""How often the kubelet asks."""
TIMEOUT_S = 20
"""How long one token may take: above any time to first token the SLO accepts (``VllmTTFTSLO``), so a loaded but
working engine stays ready; a hung one fails."""
FAILURES = 3
"""Consecutive failures before the pod is unready (one slow answer does not take a pod out)."""
UNREADY_WITHIN_S = FAILURES * PERIOD_S + TIMEOUT_S
"""The longest a dead or hung engine's pod stays ready: three periods and the last probe's timeout (50 s)."""

SCRIPT = """\
import json, sys, urllib.request
url, model, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
body = {"text_input": "ready", "sampling_parameters": json.dumps({"max_tokens": 1}), "exclude_input_in_output": True}
request = urllib.request.Request(
    f"{url}/v2/models/{model}/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
)
try:
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        text = json.load(answer).get("text_output")
except Exception as exc:
    sys.exit(f"no token from {model}: {exc}")
sys.exit(0 if isinstance(text, str) else f"{model} answered no text_output")
"""
"""The probe: exits 0 when ``model`` generated a token at ``url`` within ``timeout`` s, else non-zero naming why.
Standard library only (the image's ``python3``)."""


def generate_command(model: str, url: str = "http://127.0.0.1:8000", timeout_s: float = TIMEOUT_S - 1) -> list[str]:
    """The probe's command for ``model`` (its client timeout one second under the kubelet's)."""
    return ["python3", "-c", SCRIPT, url, model, f"{timeout_s:g}"]


def readiness_probe(model: str) -> dict[str, Any]:
    """The Triton container's readinessProbe for a vLLM model."""
    return {
        "exec": {"command": generate_command(model)},
        "periodSeconds": PERIOD_S,
        "timeoutSeconds": TIMEOUT_S,
        "failureThreshold": FAILURES,
    }
