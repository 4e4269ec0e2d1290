"""The real program's prod plan (`tritonft synth --stack prod`, the mock engine) on what issue 38 reviewed: what a
first `pulumi up -s prod` on a new account would create, in which order, with which protection."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonft.errors import UserError
from tritonft.synth.engine import CALL_RESULTS, Registered
from tritonft.synth.run import SynthResult, synthesize

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    return synthesize("prod", out=tmp_path_factory.mktemp("prod"), project_dir=REPO)


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
        synthesize("prod", out=tmp_path / "prod", project_dir=REPO)
    message = str(info.value)
    assert "gpuNodesMax: the GPU node groups need 384 vCPUs" in message  # 8 x g5.12xlarge x 48
    assert "the account has 0" in message and "--desired-value 384" in message
    assert not (tmp_path / "prod").exists()  # nothing written: the program stopped before any resource
