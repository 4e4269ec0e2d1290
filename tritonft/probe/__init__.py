"""Post-deploy integration probe for a KServe-V2 endpoint (Triton, or any V2 server such as MLServer).

``run_probe(ProbeConfig(url, models=(ModelTarget("t5", Family.T5),)))`` checks, within one deadline: server live,
server ready, each model ready, the served tensors against the rendered text-in/text-out contract
(:mod:`tritonft.probe.contract`), the model configuration where the server has one, a real inference judged per
family (:mod:`tritonft.probe.expectations`; an encoder, a target with an :class:`EncoderTarget`, on its
embeddings or labels: :mod:`tritonft.probe.encoder`) and latency p50/p95. It returns a :class:`ProbeReport`.
tritonclient is imported only when a probe runs.
"""

from __future__ import annotations

from tritonft.probe.contract import DEFAULT_TEXT_CONTRACT, TensorSpec, TextContract
from tritonft.probe.encoder import EncoderTarget
from tritonft.probe.endpoint import Endpoint, Protocol, parse_endpoint
from tritonft.probe.expectations import DEFAULT_BLEU_THRESHOLD
from tritonft.probe.report import CheckOutcome, ModelReport, ModelStatus, ProbeReport
from tritonft.probe.runner import ModelTarget, ProbeConfig, run_probe
from tritonft.probe.stats import LatencySummary

__all__ = [
    "DEFAULT_BLEU_THRESHOLD",
    "DEFAULT_TEXT_CONTRACT",
    "CheckOutcome",
    "EncoderTarget",
    "Endpoint",
    "LatencySummary",
    "ModelReport",
    "ModelStatus",
    "ModelTarget",
    "ProbeConfig",
    "ProbeReport",
    "Protocol",
    "TensorSpec",
    "TextContract",
    "parse_endpoint",
    "run_probe",
]
