"""``tritonft judge``: the judge of a candidate version, run inside the cluster (the judge Job's command).

A candidate version is judged before the user-facing Services switch to it. Its Triton has no route at the edge (a
FasterTransformer model's 23.04 server, a vLLM model's raw ``generate``: ``docs/security/reach.md``), so the judge runs
where the candidate is reached: a Job in the stack's namespace whose pods the candidate's NetworkPolicy admits by
their label (``components.serving.judge_job``). The Job runs this command with the same probe settings the
in-process probe would get (:func:`config_from_props`: one reading of them for both), asks the candidate's own
Service, and leaves its verdict where Kubernetes keeps it:

* the **exit code**: 0 when every check passed, 1 otherwise (the Job's ``Complete`` or ``Failed``);
* the **termination message** (``/dev/termination-log``, at most :data:`MESSAGE_LIMIT` bytes): the failed checks,
  which the promotion's judge (``components.probe.in_cluster``) puts in the failed ``up``'s message;
* the full report as JSON on stdout (the pod's log).

What is checked is the probe's (``tritonft.probe.runner.run_probe``): nothing here decides a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tritonft.errors import UserError
from tritonft.probe.endpoint import Protocol
from tritonft.probe.expectations import DEFAULT_BLEU_THRESHOLD
from tritonft.probe.report import ProbeReport
from tritonft.probe.runner import DEFAULT_CALL_TIMEOUT_S, DEFAULT_LATENCY_REQUESTS, ModelTarget, ProbeConfig

CONFIG_ENV = "TRITONFT_JUDGE_CONFIG"
"""The environment variable holding the probe's settings as JSON (the judge Job's pod sets it)."""
TERMINATION_LOG = "/dev/termination-log"
MESSAGE_LIMIT = 4096
"""Kubernetes keeps at most 4096 bytes of a container's termination message."""
DEFAULT_DEADLINE_S = 900.0
JUDGE_INPUTS = ("namespace", "job", "candidate_deployment", "rolled")
"""The in-cluster judge's inputs whose change re-runs it (``components.probe.in_cluster``): a new Job (the probe's
settings, the tools image), another candidate, or (a version that rolled in place) another rollout of its
Deployment."""


def config_from_props(props: Mapping[str, Any]) -> ProbeConfig:
    """The probe's settings from their plain-JSON form (an ``IntegrationProbe``'s inputs, or the judge Job's
    :data:`CONFIG_ENV`): ``endpoint``, ``models`` (``ModelTarget.to_dict``), ``protocol``, ``deadline_s``,
    ``call_timeout_s``, ``latency_requests``, ``bleu_threshold``, ``headers``, ``gateway_url``."""
    return ProbeConfig(
        url=str(props["endpoint"]),
        models=tuple(ModelTarget.from_dict(m) for m in props["models"]),
        protocol=Protocol(props["protocol"]) if props.get("protocol") else None,
        deadline_s=float(props.get("deadline_s", DEFAULT_DEADLINE_S)),
        call_timeout_s=float(props.get("call_timeout_s", DEFAULT_CALL_TIMEOUT_S)),
        latency_requests=int(props.get("latency_requests", DEFAULT_LATENCY_REQUESTS)),
        bleu_threshold=float(props.get("bleu_threshold", DEFAULT_BLEU_THRESHOLD)),
        headers=dict(props.get("headers") or {}),
        gateway_url=str(props["gateway_url"]) if props.get("gateway_url") else None,
    )


def termination_message(report: ProbeReport) -> str:
    """What the Job leaves in its termination message: ``passed`` and the models' status, or the failed checks
    (cut to :data:`MESSAGE_LIMIT` bytes, the end marked)."""
    if report.ok:
        text = "passed: " + ", ".join(f"{m.name} {m.status}" for m in report.models)
    else:
        text = report.failure_message()
    raw = text.encode()
    if len(raw) <= MESSAGE_LIMIT:
        return text
    marker = "\n[cut: the whole report is in the pod's log]"
    return raw[: MESSAGE_LIMIT - len(marker.encode())].decode(errors="ignore") + marker


def judge(
    props: Mapping[str, Any],
    termination_log: Path,
    probe: Callable[[ProbeConfig], ProbeReport] | None = None,
) -> int:
    """Run the probe on ``props``, write the termination message and the report (stdout); 0 when it passed."""
    if probe is None:
        from tritonft.probe.runner import run_probe

        probe = run_probe
    report = probe(config_from_props(props))
    termination_log.write_text(termination_message(report))
    print(json.dumps(report.to_dict(), sort_keys=True))
    return 0 if report.ok else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config-env",
        default=CONFIG_ENV,
        help=f"environment variable holding the probe's settings as JSON (default {CONFIG_ENV})",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="a file holding the probe's settings as JSON instead (`tritonft judge-inputs` writes the plan's: to "
        "reproduce a verdict outside the cluster)",
    )
    parser.add_argument(
        "--endpoint",
        help="ask this endpoint (http://host:port) instead of the settings' (the candidate's Service: reach it by "
        "`kubectl port-forward`, or serve the same repository elsewhere)",
    )
    parser.add_argument(
        "--termination-log",
        type=Path,
        default=Path(TERMINATION_LOG),
        help=f"where the verdict's message is written (default {TERMINATION_LOG}, Kubernetes' termination message)",
    )


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The probe's settings the command runs: ``--config``'s file, else the ``--config-env`` variable (the Job's), with
    ``--endpoint`` as the endpoint when given."""
    if args.config is not None:
        where = f"--config {args.config}"
        try:
            raw = args.config.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{where}: {exc.strerror}; give the judge.json `tritonft judge-inputs` wrote") from None
    else:
        where, raw = args.config_env, os.environ.get(args.config_env, "")
        if not raw:
            raise UserError(
                f"{args.config_env} is not set: the judge Job's pod gives the probe's settings there (outside the "
                "cluster: --config FILE)"
            )
    try:
        props = dict(json.loads(raw))
        if args.endpoint:
            props["endpoint"] = args.endpoint
        config_from_props(props)
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{where} does not hold the probe's settings: {exc}") from None
    return props


def run(args: argparse.Namespace) -> int:
    return judge(settings_of(args), args.termination_log)
