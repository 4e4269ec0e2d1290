"""``tritonft preflight`` against the real control plane: passes on a fitting cluster, names the missing piece
on broken ones. The stack is an existing-cluster (``kubernetes``) stack whose kubeconfig is the test cluster's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.settings.stack_file import settings_from_stack_file
from stackcli.cli import main
from tests.components.settings.test_validation import aws_stack
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import cpu_node_shape, gpu_node_shape, install_crds
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import wait_for

REPO = Path(__file__).resolve().parents[3]
T5_3B = {"name": "t5-3b", "hfRepo": "t5-3b", "revision": "bed96aab9ee46012a5046386105ee5fd0ac572f0"}
GPTJ = {"name": "gpt-j-6b", "hfRepo": "EleutherAI/gpt-j-6b", "revision": "47e169305d2e8376be1d31e765533382721b2cc1"}


def write_project(tmp_path: Path, plane: ControlPlane, cluster: Cluster, **overrides: Any) -> Path:
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, project / name)
    values: dict[str, Any] = {
        "platform": "kubernetes",
        "environment": "local",
        "namespace": cluster.namespace,
        "kubeconfig": str(plane.workdir / "kubeconfig"),
        "gpuType": "A10G",
        "gpusPerNode": 4,
        "imageRegistry": "registry.example/triton-ft",
        "storageClass": f"{cluster.namespace}-rwx",
        "existingAddons": ["kube-prometheus-stack", "prometheus-adapter"],
        "ingressAuth": "none",
        "ingressTls": False,
        "autoscaling": False,
        "models": [dict(T5_3B, tensorParallel=4), dict(GPTJ)],
    } | overrides
    config = {f"triton-ft:{k}": v for k, v in values.items()}
    (project / "stacks/Pulumi.cp.yaml").write_text(yaml.safe_dump({"config": config}))
    return project


def metrics_api_service(state: str) -> dict[str, Any]:
    """``v1beta1.metrics.k8s.io`` as metrics-server registers it. ``local`` (no backing Service) is one the
    API server's availability controller marks Available itself: the stand-in for a running metrics-server, which
    cannot run here. ``broken`` names a Service that does not exist: that controller marks it unavailable."""
    spec: dict[str, Any] = {
        "group": "metrics.k8s.io",
        "version": "v1beta1",
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
    }
    if state == "broken":
        spec |= {"service": {"namespace": "kube-system", "name": "metrics-server"}, "insecureSkipTLSVerify": True}
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": spec,
    }


def fitting(
    cluster: Cluster,
    project: Path,
    *,
    gpus: int = 4,
    taint: dict[str, str] | None = None,
    cordoned: bool = False,
    metrics_api: str | None = "local",
    cpu_node_cpus: str | None = None,
) -> None:
    settings = settings_from_stack_file(project, "cp")
    gpu = gpu_node_shape(settings, f"{cluster.namespace}-gpu-0", gpus=gpus)
    if taint is not None:
        gpu = type(gpu)(gpu.name, gpu.labels, [taint], gpu.allocatable)
    cpu = cpu_node_shape(settings, f"{cluster.namespace}-cpu-0")
    if cpu_node_cpus is not None:
        cpu = type(cpu)(cpu.name, cpu.labels, cpu.taints, cpu.allocatable | {"cpu": cpu_node_cpus})
    cluster.add_nodes([gpu, cpu])
    if cordoned:  # as `kubectl cordon` does
        cluster.kube.apply(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": gpu.name}, "spec": {"unschedulable": True}}
        )
    cluster.kube.apply(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"{cluster.namespace}-rwx"},
            "provisioner": "efs.csi.aws.com",
        }
    )
    cluster.kube.apply(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "nginx"},
            "spec": {"controller": "k8s.io/ingress-nginx"},
        }
    )
    install_crds(cluster.kube, ["ServiceMonitor", "PrometheusRule"])
    if metrics_api is not None:  # the gateway's CPU HPA reads it
        service = metrics_api_service(metrics_api)
        cluster.apply_cluster_scoped(service)

        def judged() -> bool:
            got = cluster.kube.get(service["apiVersion"], "APIService", service["metadata"]["name"])
            return any(c["type"] == "Available" for c in got.get("status", {}).get("conditions", []))

        wait_for("the API server to judge the metrics APIService", judged, 30)


def preflight(project: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, str]]:
    code = main(["preflight", "--stack", "cp", "--project-dir", str(project), *extra])
    lines = capsys.readouterr().out.splitlines()
    return code, {line.split(":")[0]: line for line in lines}


def test_preflight_passes_on_a_fitting_cluster_including_a_dry_run_of_the_whole_plan(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = write_project(tmp_path, control_plane, cluster)
    fitting(cluster, project)
    code, lines = preflight(project, capsys)
    assert code == 0, json.dumps(lines, indent=1)
    assert set(lines) >= {
        "PASS api",
        "PASS gpu-nodes",
        "PASS gpu-placement",
        "PASS gpu-shape t5-3b",
        "PASS gpu-shape gpt-j-6b",
        "PASS storage-class",
        "PASS ingress-class",
        "PASS crds",
        "PASS metrics-apis",
        "PASS dry-run",
    }
    assert "accepted by the API server" in lines["PASS dry-run"]


BROKEN: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    ("no GPU nodes", {}, {"gpus": 0}, "FAIL gpu-nodes", "no node has allocatable nvidia.com/gpu"),
    (
        "wrong taint",
        {},
        {"taint": {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}},
        "FAIL gpu-placement",
        "taint dedicated=gpu:NoSchedule is not tolerated",
    ),
    ("cordoned GPU node", {}, {"cordoned": True}, "FAIL gpu-placement", "-gpu-0 is cordoned; the nodes must be Ready"),
    ("missing storage class", {"storageClass": "fast-nfs"}, {}, "FAIL storage-class", "'fast-nfs' not found"),
    (
        "missing CRD",
        {
            "existingAddons": ["kube-prometheus-stack", "prometheus-adapter", "cert-manager"],
            "ingressTls": True,
            "tlsIssuer": "letsencrypt",
            "ingressAuth": "basic",  # a public (TLS) endpoint needs authentication
            "basicAuthSecretName": "triton-basic-auth",
        },
        {},
        "FAIL crds",
        "missing certificates.cert-manager.io",
    ),
    (
        "no resource metrics API",
        {},
        {"metrics_api": None},
        "FAIL metrics-apis",
        "v1beta1.metrics.k8s.io is not registered (the gateway's HPA scales on CPU through it",
    ),
    (
        "resource metrics API unavailable",
        {},
        {"metrics_api": "broken"},
        "FAIL metrics-apis",
        "v1beta1.metrics.k8s.io is registered but not available (ServiceNotFound",
    ),
    (
        "too few GPUs per node",
        {},
        {"gpus": 2},
        "FAIL gpu-shape t5-3b",
        "needs 4 GPU(s) on one node, but the most free on a usable GPU node is 2",
    ),
]


@pytest.mark.parametrize(
    ("stack_overrides", "cluster_shape", "line", "expected"),
    [case[1:] for case in BROKEN],
    ids=[case[0] for case in BROKEN],
)
def test_preflight_fails_naming_the_missing_piece(
    *,
    control_plane: ControlPlane,
    cluster: Cluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stack_overrides: dict[str, Any],
    cluster_shape: dict[str, Any],
    line: str,
    expected: str,
) -> None:
    project = write_project(tmp_path, control_plane, cluster, **stack_overrides)
    fitting(cluster, project, **cluster_shape)
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 1
    assert expected in lines[line], json.dumps(lines, indent=1)
    failed = {key for key in lines if key.startswith("FAIL")}
    if line == "FAIL gpu-nodes":  # without GPU nodes nothing GPU-shaped can pass
        assert failed == {line, "FAIL gpu-placement", "FAIL gpu-shape t5-3b", "FAIL gpu-shape gpt-j-6b"}
    elif line == "FAIL gpu-placement":  # no usable GPU node: no model's shape can fit either
        assert failed == {line, "FAIL gpu-shape t5-3b", "FAIL gpu-shape gpt-j-6b"}
    else:
        assert failed == {line}, "only the broken piece fails"


def test_an_aws_stack_with_its_gpu_node_group_at_zero_passes_on_a_cluster_without_gpu_nodes(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # EKS at rest with gpuNodesMin 0: cluster-autoscaler adds the GPU nodes when the Triton pods ask for them.
    project = write_project(tmp_path, control_plane, cluster)
    models = [dict(T5_3B, tensorParallel=4), dict(GPTJ)]
    # r6i.2xlarge: gpt-j-6b's judge reference Job holds ~30 GiB (rule reference-job-fits-cpu-node)
    stack = aws_stack(models=models, gpuNodesMin=0, gpuNodesMax=2, systemInstanceType="r6i.2xlarge")
    (project / "stacks/Pulumi.cp.yaml").write_text(
        yaml.safe_dump({"config": {f"triton-ft:{k}": v for k, v in stack.items()}})
    )
    settings = settings_from_stack_file(project, "cp")
    cluster.add_nodes([cpu_node_shape(settings, f"{cluster.namespace}-cpu-0")])

    kubeconfig = str(control_plane.workdir / "kubeconfig")
    code, lines = preflight(project, capsys, "--no-dry-run", "--kubeconfig", kubeconfig)

    assert code == 0, json.dumps(lines, indent=1)
    assert lines["PASS gpu-nodes"].endswith(
        "cluster-autoscaler adds g5.12xlarge nodes (4 GPUs each) on demand, 0 of at most 2 running"
    )
    assert lines["PASS gpu-shape t5-3b"].startswith(
        "PASS gpu-shape t5-3b: needs 4 GPU(s) on one node; none has them free now"
    )


MINILM_CPU = {
    "name": "minilm",
    "family": "bert",
    "hfRepo": "sentence-transformers/all-MiniLM-L6-v2",
    "revision": "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    "device": "cpu",
}
CPU_POOL = {"triton-ft/pool": "cpu"}


def test_preflight_passes_a_cpu_model_with_a_cpu_node_that_holds_a_replica(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = [dict(T5_3B, tensorParallel=4), dict(MINILM_CPU)]
    project = write_project(tmp_path, control_plane, cluster, models=models, cpuNodeSelector=CPU_POOL)
    fitting(cluster, project)
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 0, json.dumps(lines, indent=1)
    assert lines["PASS cpu-shape minilm"].startswith("PASS cpu-shape minilm: needs 2 CPU and ")
    assert f"{cluster.namespace}-cpu-0 has " in lines["PASS cpu-shape minilm"]
    assert "gpu-shape minilm" not in {key.split(" ", 1)[1] for key in lines}, "a CPU model is no GPU shape"


def test_preflight_fails_a_cpu_model_whose_cpu_nodes_are_too_small(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = [dict(T5_3B, tensorParallel=4), dict(MINILM_CPU)]
    project = write_project(tmp_path, control_plane, cluster, models=models, cpuNodeSelector=CPU_POOL)
    fitting(cluster, project, cpu_node_cpus="1")
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 1
    assert "but the CPU nodes have only" in lines["FAIL cpu-shape minilm"], json.dumps(lines, indent=1)
    assert {key for key in lines if key.startswith("FAIL")} == {"FAIL cpu-shape minilm"}


QWEN7B = {"name": "qwen", "hfRepo": "Qwen/Qwen2.5-7B-Instruct", "revision": "a09a35458c702b33eeacc393d103063234e8bc28"}


def test_preflight_counts_a_vllm_models_gpus_and_dry_runs_its_objects(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qwen = dict(QWEN7B, tensorParallel=2, vllm={"maxModelLen": 8192})
    project = write_project(tmp_path, control_plane, cluster, gpusPerNode=2, models=[dict(GPTJ), qwen])
    fitting(cluster, project, gpus=2)
    code, lines = preflight(project, capsys)
    assert code == 0, json.dumps(lines, indent=1)
    assert {"PASS gpu-shape qwen", "PASS gpu-shape gpt-j-6b", "PASS dry-run"} <= set(lines)


def test_preflight_fails_a_vllm_model_whose_tensor_parallel_gpus_no_node_has_free(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qwen = dict(QWEN7B, tensorParallel=4, vllm={"maxModelLen": 8192})
    project = write_project(tmp_path, control_plane, cluster, models=[qwen])
    fitting(cluster, project, gpus=2)
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 1
    assert "needs 4 GPU(s) on one node" in lines["FAIL gpu-shape qwen"], json.dumps(lines, indent=1)


LLAMA8B_GATED = {
    "name": "llama",
    "hfRepo": "meta-llama/Llama-3.1-8B-Instruct",
    "revision": "0e9e39f249a16976918f6564b8830bc894c89659",
    "vllm": {"maxModelLen": 16384},
    "hfTokenSecret": "hf-token",
}
TOKEN_VALUE = "hf_preflightMustNeverPrintThis"


def token_secret(cluster: Cluster, data: dict[str, str]) -> None:
    """As the fix says: the namespace (the stack's, which ``up`` then adopts), then the Secret in it."""
    cluster.apply_cluster_scoped({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    cluster.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token", "namespace": cluster.namespace},
            "type": "Opaque",
            "stringData": data,
        }
    )


def gated_project(control_plane: ControlPlane, cluster: Cluster, tmp_path: Path) -> Path:
    project = write_project(tmp_path, control_plane, cluster, models=[dict(GPTJ), dict(LLAMA8B_GATED)])
    fitting(cluster, project)
    return project


def test_preflight_fails_a_gated_models_token_secret_that_does_not_exist_naming_it_and_the_fix(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = gated_project(control_plane, cluster, tmp_path)
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 1
    assert lines["FAIL hf-token llama"] == (
        f"FAIL hf-token llama: Secret 'hf-token' (hfTokenSecret) not found in namespace '{cluster.namespace}', so the "
        f"download Job cannot read the Hugging Face token: kubectl -n {cluster.namespace} create secret generic "
        "hf-token --from-literal=token=hf_... (a token of an account that accepted the model's licence; create the "
        "namespace first if it does not exist)"
    )
    assert {key for key in lines if key.startswith("FAIL")} == {"FAIL hf-token llama"}, "only the secret is missing"


def test_preflight_fails_a_token_secret_without_the_key_the_job_mounts(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = gated_project(control_plane, cluster, tmp_path)
    token_secret(cluster, {"HF_TOKEN": TOKEN_VALUE})
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 1
    line = lines["FAIL hf-token llama"]
    assert f"Secret 'hf-token' in namespace '{cluster.namespace}' has no key 'token' (keys: HF_TOKEN)" in line
    assert "--from-literal=token=hf_..." in line
    assert TOKEN_VALUE not in json.dumps(lines)


def test_preflight_passes_a_token_secret_with_its_key_and_never_prints_the_token(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = gated_project(control_plane, cluster, tmp_path)
    token_secret(cluster, {"token": TOKEN_VALUE})
    code, lines = preflight(project, capsys, "--no-dry-run")
    assert code == 0, json.dumps(lines, indent=1)
    assert lines["PASS hf-token llama"] == (
        f"PASS hf-token llama: Secret 'hf-token' in namespace '{cluster.namespace}' has key 'token'"
    )
    assert TOKEN_VALUE not in json.dumps(lines)
    assert "hf-token gpt-j-6b" not in {key.split(" ", 1)[1] for key in lines}, "a model without hfTokenSecret"
