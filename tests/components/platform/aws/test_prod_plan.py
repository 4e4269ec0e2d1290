"""The real program's prod plan (`tritonft synth --stack prod`, the mock engine) on what issue 38 reviewed: what a
first `pulumi up -s prod` on a new account would create, in which order, with which protection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.plans import StackPlans, deploy_secrets
from tritonft.errors import UserError
from tritonft.synth.engine import CALL_RESULTS, Registered
from tritonft.synth.result import SynthResult
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def prod(stack_plan: StackPlans) -> SynthResult:
    return stack_plan("prod")


def _named(result: SynthResult, name: str) -> Registered:
    (match,) = [r for r in result.resources if r.name == name]
    return match


def _of_type(result: SynthResult, typ: str) -> list[Registered]:
    return [r for r in result.resources if r.typ == typ]


def test_the_model_store_claim_waits_for_the_efs_storage_class(prod: SynthResult) -> None:
    (claim,) = _of_type(prod, "kubernetes:core/v1:PersistentVolumeClaim")
    (efs_class,) = [
        r
        for r in _of_type(prod, "kubernetes:storage.k8s.io/v1:StorageClass")
        if r.inputs["provisioner"] == "efs.csi.aws.com"
    ]
    assert claim.inputs["spec"]["storageClassName"] == efs_class.inputs["metadata"]["name"]
    assert efs_class.urn in claim.depends_on


def test_prod_has_a_nat_gateway_in_each_zone(prod: SynthResult) -> None:
    nats = _of_type(prod, "aws:ec2/natGateway:NatGateway")
    subnets = {n.inputs["subnetId"] for n in nats}
    public = {f"{s.name}-id" for s in _of_type(prod, "aws:ec2/subnet:Subnet") if "-public-" in s.name}
    assert len(nats) == 2 and subnets == public


def test_prod_protects_cluster_vpc_model_store_and_image_repositories(prod: SynthResult) -> None:
    protected = {r.typ for r in prod.resources if r.protect}
    assert {
        "eks:index:Cluster",
        "aws:ec2/vpc:Vpc",
        "aws:efs/fileSystem:FileSystem",
        "aws:ecr/repository:Repository",
    } <= protected
    assert all(r.protect for r in _of_type(prod, "aws:ecr/repository:Repository"))


def test_prod_system_nodes_have_room_for_the_server_image_minilm_runs_there(prod: SynthResult) -> None:
    # 20 reserve + 2 x (20 GiB server + 1 GiB tools) + 1.25 x 60 GiB conversion scratch = 137 -> 140
    (mapping,) = _named(prod, "prod-system-lt").inputs["blockDeviceMappings"]
    assert mapping["ebs"]["volumeSize"] == 140


def test_prod_on_a_new_account_stops_at_the_quota_naming_the_number_to_ask_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_account = {"value": 0.0, "quotaCode": "L-DB2E81BA", "serviceCode": "ec2"}
    monkeypatch.setitem(CALL_RESULTS, "aws:servicequotas/getServiceQuota:getServiceQuota", new_account)
    with pytest.raises(UserError) as info:
        synthesize("prod", out=tmp_path / "prod", project_dir=REPO, assume_secrets=deploy_secrets("prod"))
    message = str(info.value)
    assert "gpuNodesMax: the GPU node groups need 672 vCPUs" in message  # (10 + 4 surging) x g5.12xlarge x 48
    assert "the account has 0" in message and "--desired-value 672" in message
    assert not (tmp_path / "prod").exists()  # nothing written: the program stopped before any resource


def test_prod_nodes_answer_metadata_one_hop_away_with_imdsv2_only(prod: SynthResult) -> None:
    groups = _of_type(prod, "aws:eks/nodeGroup:NodeGroup")
    assert {g.name for g in groups} == {"prod-system", "prod-gpu"}
    for group in groups:
        options = _named(prod, f"{group.name}-lt").inputs["metadataOptions"]
        assert (options["httpTokens"], options["httpPutResponseHopLimit"]) == ("required", 1)


def test_prod_enforces_network_policies_with_the_cni_on_its_own_role(prod: SynthResult) -> None:
    addon = _named(prod, "prod-vpc-cni")
    assert '"enableNetworkPolicy": "true"' in addon.inputs["configurationValues"]
    node_policies = {
        a.inputs["policyArn"]
        for a in _of_type(prod, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == "prod-node-role"
    }
    assert "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy" not in node_policies
    assert "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore" not in node_policies


def test_prod_keeps_control_plane_logs_ninety_days_in_a_group_made_first(prod: SynthResult) -> None:
    group = _named(prod, "prod-control-plane-logs")
    (cluster,) = _of_type(prod, "eks:index:Cluster")
    assert group.inputs["retentionInDays"] == 90
    assert group.urn in cluster.depends_on


def test_prod_runs_a_kubernetes_in_standard_support_with_the_matching_autoscaler(prod: SynthResult) -> None:
    (cluster,) = _of_type(prod, "eks:index:Cluster")
    (autoscaler,) = [
        c for c in _of_type(prod, "kubernetes:helm.sh/v4:Chart") if c.inputs["chart"] == "cluster-autoscaler"
    ]
    version = cluster.inputs["version"]
    assert autoscaler.inputs["values"]["image"]["tag"].startswith(f"v{version}.")


def test_prod_pulls_images_through_s3_and_ecr_endpoints(prod: SynthResult) -> None:
    services = sorted(
        e.inputs["serviceName"].rsplit(".", 2)[-1] for e in _of_type(prod, "aws:ec2/vpcEndpoint:VpcEndpoint")
    )
    assert services == ["api", "dkr", "s3"]


def test_prod_monitoring_persists_and_skips_what_eks_hides(prod: SynthResult) -> None:
    (kps,) = [c for c in _of_type(prod, "kubernetes:helm.sh/v4:Chart") if c.inputs["chart"] == "kube-prometheus-stack"]
    values = kps.inputs["values"]
    assert values["kubeEtcd"] == {"enabled": False} and values["kubeControllerManager"] == {"enabled": False}
    assert "storageSpec" in values["prometheus"]["prometheusSpec"]
    assert values["alertmanager"]["alertmanagerSpec"]["configSecret"] == "alertmanager-triton-ft"


def test_ci_reaches_a_cluster_an_operator_created_through_the_settings_access_entry(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "stacks", project / "stacks")
    stack = project / "stacks/Pulumi.prod.yaml"
    deploy_role = "arn:aws:iam::123456789012:role/github-deploy"
    operators = 'triton-ft:adminPrincipalArns: ["arn:aws:iam::123456789012:role/triton-ft-operators"]'
    assert operators in stack.read_text(), "prod states its admins (built-cluster-prod-api-access-is-stated)"
    stack.write_text(stack.read_text().replace(operators, f"triton-ft:adminPrincipalArns: ['{deploy_role}']"))
    result = synthesize("prod", out=tmp_path / "out", project_dir=project, assume_secrets=deploy_secrets("prod"))
    (cluster,) = _of_type(result, "eks:index:Cluster")
    assert cluster.inputs["authenticationMode"] == "API"
    (entry,) = cluster.inputs["accessEntries"].values()
    assert entry["principalArn"] == deploy_role
    (policy,) = entry["accessPolicies"].values()
    assert policy["policyArn"].endswith(":cluster-access-policy/AmazonEKSClusterAdminPolicy")


def test_prod_runs_only_the_ft_models_on_the_ft_image_and_the_others_on_their_current_triton(prod: SynthResult) -> None:
    images = {
        d.inputs["metadata"]["labels"]["triton-ft/model"]: [
            c["image"] for c in d.inputs["spec"]["template"]["spec"]["containers"]
        ]
        for d in _of_type(prod, "kubernetes:apps/v1:Deployment")
        if d.inputs["metadata"]["labels"].get("app.kubernetes.io/component") == "triton"
    }
    repositories = {model: {image.split("@")[0].rsplit("/", 1)[1] for image in refs} for model, refs in images.items()}
    assert repositories == {
        "t5-3b": {"server"},
        "gpt-j-6b": {"server"},
        "minilm": {"server-onnxruntime"},
        "llama-3-1-8b": {"server-vllm"},
    }
    (onnx,) = [r for r in _of_type(prod, "docker-build:index:Image") if r.name.endswith("server-onnxruntime")]
    assert onnx.inputs["buildArgs"]["TRITON_VERSION"] == "25.12"


def test_prod_closes_the_restricted_apis_over_http_too_on_the_encoders_current_triton(prod: SynthResult) -> None:
    def http_restricted(model: str) -> bool:
        (deployment,) = [
            d
            for d in _of_type(prod, "kubernetes:apps/v1:Deployment")
            if d.inputs["metadata"]["labels"].get("triton-ft/model") == model
        ]
        (server,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
        return any(arg.startswith("--http-restricted-api=") for arg in server["command"])

    assert http_restricted("minilm")
    assert http_restricted("llama-3-1-8b")
    assert not http_restricted("t5-3b"), "Triton 23.04 has no --http-restricted-api (the NetworkPolicy closes HTTP)"


def test_the_node_autoscaler_lets_a_drained_pod_take_its_whole_grace_period(prod: SynthResult) -> None:
    (chart,) = [r for r in _of_type(prod, "kubernetes:helm.sh/v4:Chart") if r.inputs["chart"] == "cluster-autoscaler"]
    graces = [
        int(r.inputs["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])
        for r in _of_type(prod, "kubernetes:apps/v1:Deployment")
        if "terminationGracePeriodSeconds" in r.inputs.get("spec", {}).get("template", {}).get("spec", {})
    ]
    longest = max(graces)
    assert longest > 600, "prod's Llama drains longer than cluster-autoscaler's default (600 s)"
    assert chart.inputs["values"]["extraArgs"]["max-graceful-termination-sec"] >= longest
