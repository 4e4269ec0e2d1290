"""Broken copies of the real stacks (one defect each, or several independent ones) never reach a provider.

Each goes through `tritonft synth` (exit 1, every problem listed, no traceback, nothing written) and through the
real program under the mock engine (no resource registered).
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.settings.aws_names import provider_version
from tritonft.cli import main
from tritonft.synth.engine import RecordingMocks, mock_engine, run_program
from tritonft.synth.stackfile import read_stack

REPO = Path(__file__).resolve().parents[3]


def stack_values(stack: str) -> dict[str, Any]:
    data = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {k.removeprefix("triton-ft:"): v for k, v in data["config"].items()}


def with_model(values: dict[str, Any], index: int, **fields: Any) -> dict[str, Any]:
    models = [dict(m) for m in values["models"]]
    models[index].update(fields)
    return values | {"models": models}


DEV, PROD, LOCAL = stack_values("dev"), stack_values("prod"), stack_values("local")
AWS = provider_version()

# name -> (config, the problems a user gets, exactly)
BROKEN: dict[str, tuple[dict[str, Any], list[str]]] = {
    "unknown GPU instance, cert-manager listed": (
        DEV | {"gpuInstanceType": "g5.3xlarge"},
        ["gpuInstanceType: 'g5.3xlarge' is not a known value; did you mean g5.xlarge, g5.8xlarge, g5.4xlarge?"],
    ),
    "ingress host not a DNS name": (
        DEV | {"ingressHost": "triton dev.example.com"},
        [
            "ingressHost: 'triton dev.example.com' is not a valid RFC 1123 subdomain: use lower-case letters, "
            "digits, '-' and '.', each part starting and ending with a letter or digit (e.g. 'example.com')"
        ],
    ),
    "abbreviated revision": (
        with_model(DEV, 0, revision="df1b051"),
        [
            "models[0].revision: 'df1b051' is an abbreviated or mixed-case sha (7 hex digits): the Hub does not "
            "resolve it as a pinned commit; write the full 40 lower-case hex digits (the commit's page or "
            "`git rev-parse` shows it)"
        ],
    ),
    "VPC too small": (
        DEV | {"vpcCidr": "10.0.0.0/24"},
        ["vpcCidr: '10.0.0.0/24' must be a /16 to /21 block (room for node and pod IPs), got /24"],
    ),
    "GPT-2 lengths past its position table": (
        with_model(DEV, 1, maxInputLen=1000),
        [
            "models[1].maxInputLen: 1000 + maxOutputLen 64 = 1064 tokens exceeds the model's 1024 positions; "
            "lower maxInputLen or maxOutputLen so they sum to at most 1024"
        ],
    ),
    "node selector label key": (
        LOCAL | {"gpuNodeSelector": {"gpu type": "l4"}},
        [
            "gpuNodeSelector: label key 'gpu type' is not a qualified name: alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric, with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/my-key')"
        ],
    ),
    "AWS region AWS does not have": (
        DEV | {"awsRegion": "us-west-3"},
        [
            f"awsRegion: 'us-west-3' is not an AWS region (the regions pulumi_aws {AWS} knows, e.g. `us-west-2`); "
            "did you mean `us-west-2` or `us-west-1` or `eu-west-3`?"
        ],
    ),
    "EC2 instance type EC2 does not have": (
        PROD | {"systemInstanceType": "m6i.3xlarge"},
        [
            f"systemInstanceType: 'm6i.3xlarge' is not an EC2 instance type (the types pulumi_aws {AWS} knows, e.g. "
            "`m6i.2xlarge`); m6i comes in m6i.large, m6i.xlarge, m6i.2xlarge, m6i.4xlarge, m6i.8xlarge, "
            "m6i.12xlarge, m6i.16xlarge, m6i.24xlarge, m6i.32xlarge, m6i.metal"
        ],
    ),
    "a Gateway API edge without its implementation": (
        DEV | {"addons": ["cert-manager"]},
        [
            "addons: edge: gateway on the cluster this stack builds (platform aws) needs the implementation the "
            "stack installs: add `envoy-gateway` to `addons` (its Gateway, routes and API-key policy are Envoy "
            "Gateway's), or set edge: ingress"
        ],
    ),
    "certificates from an issuer nothing creates": (
        {k: v for k, v in PROD.items() if k != "acmeEmail"} | {"tlsIssuer": "letsencrypt-prod"},
        [
            "tlsIssuer: 'letsencrypt-prod' names a ClusterIssuer nothing creates on the cluster this stack builds "
            "(platform aws): no certificate would ever be issued; set acmeEmail (the stack then makes it, on Let's "
            "Encrypt's production directory)"
        ],
    ),
    "weight-only int8 with fp32 compute": (
        with_model(DEV, 1, int8Mode=1, dataType="fp32"),
        [
            "models[1].int8Mode: 1 with dataType fp32: FasterTransformer refuses weight-only int8 with fp32 compute "
            'at model load ("Weight only quant does not work with FP32 compute."); use dataType fp16 or bf16, or '
            "int8Mode: 0"
        ],
    ),
    "weight-only int8 on an H100": (
        LOCAL | {"gpuType": "H100", "models": [DEV["models"][1] | {"int8Mode": 1}]},
        [
            "models[0].int8Mode: 1 on H100 (sm_90): FasterTransformer's weight-only int8 GEMM runs on sm_70 to sm_89 "
            'only (it throws "Arch unsupported for CUTLASS mixed type GEMM"); use int8Mode: 0 or a '
            "V100/T4/A10G/L4/L40S/A100 GPU"
        ],
    ),
    "several independent problems": (
        with_model(PROD | {"replicasMin": 7, "namespace": "Triton", "ingressHost": "10.0.0.1"}, 1, tensorParallel=3),
        [
            "namespace: 'Triton' is not a valid RFC 1123 label: use lower-case letters, digits and '-', starting "
            "and ending with a letter or digit (e.g. 'my-name')",
            "ingressHost: '10.0.0.1' is an IP address; an Ingress host must be a DNS name (e.g. triton.example.com)",
            "models[1].tensorParallel: must be one of 1, 2, 4, 8; got 3",
            "replicasMin: 7 is larger than replicasMax=5; lower the minimum or raise the maximum",
        ],
    ),
}


def write_stack(project: Path, name: str, values: dict[str, Any]) -> None:
    config = {f"triton-ft:{k}": v for k, v in values.items()}
    (project / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_stack_exits_1_listing_every_problem_before_any_resource(
    case: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values, expected = BROKEN[case]
    write_stack(project, "broken", values)
    # CI sets prod's hfToken as a secret (the committed file cannot hold it): these stacks, made from prod's, too
    code = main(["synth", "--stack", "broken", "--project-dir", str(project), "--assume-secret", "hfToken"])
    err = capsys.readouterr().err
    assert code == 1
    listed = [line.removeprefix("  - ") for line in err.splitlines() if line.startswith("  - ")]
    assert sorted(listed) == sorted(expected)
    assert f"has {len(expected)} configuration problem(s)" in err
    assert "Traceback" not in err and "None" not in err
    assert not (project / "build").exists(), "nothing is written for an invalid stack"


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_stack_registers_no_resource_under_the_mock_engine(case: str, project: Path) -> None:
    write_stack(project, "broken", BROKEN[case][0])
    config = read_stack(project, "broken")
    mocks = RecordingMocks()
    with (
        mock_engine(mocks, config.project, config.stack, config.values, sorted(config.secret_keys)),
        pytest.raises(pulumi.RunError) as info,
    ):
        run_program(lambda: runpy.run_path(str(project / "__main__.py"), run_name="__main__"))
    assert mocks.resources == []
    assert "configuration problem(s)" in str(info.value)
