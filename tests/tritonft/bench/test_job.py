"""``tritonft bench --in-cluster``: the Job that runs the sweep next to the Services, valid for the Kubernetes API
(strict schemas) and checkov, with credentials only from Secrets; its results come back through its log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.components.validation import run_checkov, validate_manifest, write_manifests
from tests.tritonft.bench.test_cli import OUTPUTS
from tritonft.bench.job import (
    RESULTS_DIR,
    bench_job,
    bench_network_policy,
    parse_secret_headers,
    read_results_line,
    results_line,
)
from tritonft.cli import main
from tritonft.errors import UserError

IMAGE = "registry.example.com/tritonft-bench@sha256:" + "a" * 64


def job() -> dict[str, Any]:
    return bench_job(
        name="tritonft-bench",
        namespace="tritonft-dev",
        image=IMAGE,
        bench_args=["--gateway", "https://triton.dev.example.com/v1", "--chat", "gpt2"],
        secret_headers=parse_secret_headers(["Authorization=gateway-auth/header"]),
    )


def policy() -> dict[str, Any]:
    return bench_network_policy(name="tritonft-bench", namespace="tritonft-dev")


def test_the_job_and_its_network_policy_are_valid_for_the_kubernetes_schemas() -> None:
    assert validate_manifest(job()) == [] and validate_manifest(policy()) == []


@pytest.mark.slow
def test_the_job_passes_checkov(tmp_path: Path) -> None:
    write_manifests([job(), policy()], tmp_path)
    passed, failures = run_checkov(tmp_path)
    assert passed > 0 and [str(f) for f in failures] == []


def container(manifest: dict[str, Any]) -> dict[str, Any]:
    (only,) = manifest["spec"]["template"]["spec"]["containers"]
    assert isinstance(only, dict)
    return only


def test_the_job_runs_the_sweep_once_into_its_results_volume_and_prints_them() -> None:
    manifest = job()
    args = container(manifest)["args"]
    assert args[0] == "bench" and args[-3:] == ["--out", RESULTS_DIR, "--print-results"]
    assert args[1:5] == ["--gateway", "https://triton.dev.example.com/v1", "--chat", "gpt2"]
    assert manifest["spec"]["backoffLimit"] == 0


def test_a_secret_header_is_read_from_its_secret_mounted_as_a_file() -> None:
    manifest = job()
    bench = container(manifest)
    args = bench["args"]
    path = args[args.index("--header-from-file") + 1]
    assert path == "Authorization=/var/run/secrets/tritonft-bench/gateway-auth/header"
    (mount,) = [m for m in bench["volumeMounts"] if m["name"].startswith("secret-")]
    assert mount["mountPath"] == "/var/run/secrets/tritonft-bench/gateway-auth" and mount["readOnly"] is True
    volumes = manifest["spec"]["template"]["spec"]["volumes"]
    assert {"name": mount["name"], "secret": {"secretName": "gateway-auth", "defaultMode": 0o440}} in volumes
    assert all("valueFrom" not in e for e in bench["env"])


@pytest.mark.parametrize("bad", ["X", "X=secret", "=s/k", "X=/k", "X=s/"])
def test_a_bad_secret_header_names_the_flag(bad: str) -> None:
    with pytest.raises(UserError, match=r"--secret-header .* HEADER=SECRET/KEY"):
        parse_secret_headers([bad])


def test_nothing_may_reach_the_bench_pod() -> None:
    spec = policy()["spec"]
    assert spec["ingress"] == [] and spec["policyTypes"] == ["Ingress", "Egress"]


def test_in_cluster_writes_the_job_for_the_stacks_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outputs, out = tmp_path / "outputs.json", tmp_path / "job.yaml"
    outputs.write_text(json.dumps(OUTPUTS))
    argv = ["bench", "--stack-outputs", str(outputs), "--chat", "gpt2", "--kserve", "gpt2", "--concurrency", "1,8"]
    argv += ["--secret-header", "Authorization=gateway-auth/header"]

    code = main([*argv, "--in-cluster", "--image", IMAGE, "--job-out", str(out)])

    assert code == 0
    manifest, network_policy = yaml.safe_load_all(out.read_text())
    assert manifest["metadata"]["namespace"] == "tritonft-dev" and validate_manifest(manifest) == []
    assert network_policy["kind"] == "NetworkPolicy" and validate_manifest(network_policy) == []
    args = container(manifest)["args"]
    assert args[:9] == [
        "bench",
        "--gateway",
        "https://triton.dev.example.com/v1",
        "--chat",
        "gpt2",
        "--triton",
        "https://gpt2.triton.dev.example.com",
        "--kserve",
        "gpt2",
    ]
    assert "--concurrency" in args and args[args.index("--concurrency") + 1] == "1,8"
    assert args[args.index("--header-from-file") + 1].startswith("Authorization=/var/run/secrets/")


def test_in_cluster_refuses_a_header_value_from_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--gateway", "http://gw:8080/v1", "--chat", "gpt2", "--in-cluster", "--namespace", "ns"]
    code = main([*argv, "--image", IMAGE, "--header-from-env", "Authorization=HOME"])
    assert code == 1 and "--secret-header" in capsys.readouterr().err


def test_in_cluster_without_an_image_says_what_to_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--gateway", "http://gw:8080/v1", "--chat", "gpt2", "--in-cluster", "--namespace", "ns"])
    assert code == 1 and "--image" in capsys.readouterr().err


def test_the_results_line_carries_the_results_through_a_log() -> None:
    payload = {"meta": {"title": "dev"}, "points": [{"tool": "aiperf"}]}
    log = f"progress...\n{results_line(payload)}\nmore\n"
    assert read_results_line(log) == payload


def test_a_log_without_results_says_the_job_did_not_finish() -> None:
    with pytest.raises(UserError, match="has not finished or failed"):
        read_results_line("AIPerf failed\n")


def test_a_bench_json_is_read_as_it_is() -> None:
    document = {"meta": {"title": "dev"}, "points": [{"tool": "perf_analyzer"}]}
    assert read_results_line(json.dumps(document, indent=2)) == document
