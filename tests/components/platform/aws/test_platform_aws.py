"""AwsPlatform under the mock engine: what it asks AWS and Kubernetes for, and in which order."""

from __future__ import annotations

import fnmatch
import json

import pytest

from components.platform.aws import charts
from components.platform.aws.addons import AddonFlags
from components.platform.aws.decisions import BOTTLEROCKET_NVIDIA
from components.platform.aws.dns import EdgeDns
from components.platform.aws.network import ExistingVpc
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL, GpuNodeGroup
from components.platform.cluster import namespace_labels
from tests.components.platform.aws.helpers import aws_resources, build_platform, provider_ref
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CHART = "kubernetes:helm.sh/v4:Chart"


def _chart(mocks: RecordingMocks, chart: str):
    (match,) = [r for r in mocks.of_type(CHART) if r.inputs["chart"] == chart]
    return match


def test_gpu_node_group_uses_the_nvidia_ami_and_the_gpu_taint(mocks: RecordingMocks) -> None:
    build_platform()
    gpu = mocks.named("tft-gpu")
    assert gpu.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert gpu.inputs["labels"]["triton-ft.io/accelerator"] == "nvidia"
    assert gpu.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 2}
    assert gpu.inputs["instanceTypes"] == ["g5.xlarge"]


def test_system_node_group_is_an_untainted_cpu_group(mocks: RecordingMocks) -> None:
    build_platform()
    system = mocks.named("tft-system")
    assert system.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert "taints" not in system.inputs
    assert system.inputs["labels"] == {"triton-ft.io/node-pool": "system"}


def test_autoscaler_owned_desired_size_is_ignored_on_later_updates(mocks: RecordingMocks) -> None:
    build_platform()
    for group in mocks.of_type(NODE_GROUP):
        assert group.ignore_changes == ("scalingConfig.desiredSize",)


def _data_volume(mocks: RecordingMocks, group: str) -> dict[str, object]:
    template = mocks.named(f"{group}-lt")
    assert mocks.named(group).inputs["launchTemplate"]["id"] == f"{template.name}-id"
    assert "diskSize" not in mocks.named(group).inputs
    (mapping,) = template.inputs["blockDeviceMappings"]
    return dict(mapping)


def test_gpu_disk_is_sized_from_the_server_image_and_staged_weights(mocks: RecordingMocks) -> None:
    build_platform(server_image_gib=20.0, model_weights_gib=24.0)
    # 20 reserve + 2 * 20 + 1.25 * 24 = 90
    volume = _data_volume(mocks, "tft-gpu")
    assert volume["deviceName"] == "/dev/xvda"
    assert volume["ebs"] == {"volumeSize": 90, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"}


def test_device_plugin_is_pinned_and_scheduled_only_on_gpu_nodes_that_need_it(mocks: RecordingMocks) -> None:
    build_platform()
    plugin = _chart(mocks, "nvidia-device-plugin")
    assert plugin.inputs["version"] == charts.NVIDIA_DEVICE_PLUGIN.version
    values = plugin.inputs["values"]
    selector = values["nodeSelector"]
    assert selector == {"triton-ft.io/accelerator": "nvidia", "triton-ft.io/device-plugin": "helm"}
    gpu_labels = mocks.named("tft-gpu").inputs["labels"]
    assert all(gpu_labels[k] == v for k, v in selector.items())
    assert mocks.named("tft-system").inputs["labels"].keys().isdisjoint(selector.keys())
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"] for e in term["matchExpressions"]} == set(selector)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]


def test_bottlerocket_groups_get_no_device_plugin_chart(mocks: RecordingMocks) -> None:
    build_platform(gpu_node_groups=(GpuNodeGroup(name="br", ami_type=BOTTLEROCKET_NVIDIA),))
    assert mocks.named("tft-br").inputs["amiType"] == "BOTTLEROCKET_x86_64_NVIDIA"
    assert mocks.named("tft-br").inputs["labels"]["triton-ft.io/device-plugin"] == "bundled"
    assert "nvidia-device-plugin" not in [c.inputs["chart"] for c in mocks.of_type(CHART)]


def test_every_aws_resource_goes_through_the_tagged_regional_provider(mocks: RecordingMocks) -> None:
    build_platform(tags={"team": "ml-platform"})
    (provider,) = mocks.of_type("pulumi:providers:aws")
    assert provider.inputs["region"] == "us-west-2"
    # Provider configuration travels JSON-encoded, as the engine hands it to the provider plugin.
    tags = json.loads(provider.inputs["defaultTags"])["tags"]
    assert tags["team"] == "ml-platform"
    assert tags["environment"] == "dev"
    assert tags["pulumi:stack"] == "test"
    ref = provider_ref(mocks, "pulumi:providers:aws")
    resources = aws_resources(mocks)
    assert len(resources) > 20
    assert {r.provider for r in resources} == {ref}


def test_eks_cluster_uses_api_auth_without_default_node_group_and_with_oidc(mocks: RecordingMocks) -> None:
    build_platform(admin_role_arns=("arn:aws:iam::123456789012:role/ci",))
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["authenticationMode"] == "API"
    assert cluster.inputs["skipDefaultNodeGroup"] is True
    assert cluster.inputs["createOidcProvider"] is True
    assert cluster.inputs["name"] == "triton-ft-test"
    entry = cluster.inputs["accessEntries"]["admin-0"]
    assert entry["principalArn"] == "arn:aws:iam::123456789012:role/ci"
    assert entry["accessPolicies"]["admin"]["policyArn"].endswith("AmazonEKSClusterAdminPolicy")


def test_ingress_load_balancer_is_destroyed_before_nodes_cluster_and_vpc(mocks: RecordingMocks) -> None:
    build_platform(addons=AddonFlags(ingress_nginx=True))
    ingress = _chart(mocks, "ingress-nginx")
    node_groups = {g.urn for g in mocks.of_type(NODE_GROUP)}
    assert node_groups <= set(ingress.depends_on)
    (cluster,) = mocks.of_type("eks:index:Cluster")
    # depends_on a component means every custom child: NAT route included, so nodes can pull images at boot.
    network = {r.urn for r in mocks.resources if r.custom and "triton-ft:aws:Network$" in r.urn}
    assert mocks.named("tft-net-nat").urn in network
    for group in mocks.of_type(NODE_GROUP):
        assert {cluster.urn, *network} <= set(group.depends_on)
    annotations = ingress.inputs["values"]["controller"]["service"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-type"] == "nlb"


def test_envoy_gateway_is_installed_pinned_with_its_gateway_class_after_the_nodes(mocks: RecordingMocks) -> None:
    built = build_platform(addons=AddonFlags(envoy_gateway=True, kube_prometheus_stack=False, prometheus_adapter=False))
    eg = _chart(mocks, charts.ENVOY_GATEWAY.chart)
    assert (eg.inputs["version"], eg.inputs["name"]) == ("v1.9.1", "gateway-helm")
    assert {g.urn for g in mocks.of_type(NODE_GROUP)} <= set(eg.depends_on)
    (gateway_class,) = [r for r in mocks.resources if r.inputs.get("kind") == "GatewayClass"]
    assert gateway_class.inputs["spec"] == {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}
    assert eg.urn in gateway_class.depends_on
    assert "envoy-gateway" in built["platform"].target.addons


def test_cert_manager_serves_gateway_listeners_and_starts_after_the_gateway_api_crds(mocks: RecordingMocks) -> None:
    build_platform(addons=AddonFlags(envoy_gateway=True, cert_manager=True))
    cm = _chart(mocks, "cert-manager")
    assert cm.inputs["values"]["config"]["enableGatewayAPI"] is True
    assert _chart(mocks, charts.ENVOY_GATEWAY.chart).urn in cm.depends_on


def test_nat_gateway_goes_before_the_internet_gateway_on_destroy(mocks: RecordingMocks) -> None:
    build_platform()
    (igw,) = mocks.of_type("aws:ec2/internetGateway:InternetGateway")
    assert igw.urn in mocks.named("tft-net-nat").depends_on
    assert igw.urn in mocks.named("tft-net-nat-ip").depends_on


def test_prod_model_store_is_protected_and_retained(mocks: RecordingMocks) -> None:
    build_platform(environment="prod")
    fs = mocks.named("tft-store-fs")
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["encrypted"] is True
    assert mocks.named("tft-store-sc").inputs["reclaimPolicy"] == "Retain"
    assert not any(mt.protect for mt in mocks.of_type("aws:efs/mountTarget:MountTarget"))


def test_dev_model_store_is_deleted_with_the_stack(mocks: RecordingMocks) -> None:
    build_platform(environment="dev")
    fs = mocks.named("tft-store-fs")
    assert not fs.protect and not fs.retain_on_delete
    assert mocks.named("tft-store-sc").inputs["reclaimPolicy"] == "Delete"


def test_the_override_flag_unprotects_prod_storage(mocks: RecordingMocks) -> None:
    build_platform(environment="prod", protect_model_store=False)
    assert not mocks.named("tft-store-fs").protect


def test_efs_store_is_reachable_from_every_private_subnet_over_nfs_only(mocks: RecordingMocks) -> None:
    build_platform()
    targets = mocks.of_type("aws:efs/mountTarget:MountTarget")
    private = [mocks.named(f"tft-net-private-{i}") for i in range(2)]
    assert sorted(t.inputs["subnetId"] for t in targets) == sorted(f"{s.name}-id" for s in private)
    (rule,) = mocks.named("tft-store-nfs").inputs["ingress"]
    assert (rule["fromPort"], rule["toPort"], rule["protocol"]) == (2049, 2049, "tcp")
    assert rule["securityGroups"] == ["tft-nodes-id"]
    assert "cidrBlocks" not in rule


def test_efs_csi_driver_runs_with_its_own_irsa_role(mocks: RecordingMocks) -> None:
    build_platform()
    addon = mocks.named("tft-store-efs-csi")
    role = mocks.named("tft-store-efs-csi-irsa")
    assert addon.inputs["addonName"] == "aws-efs-csi-driver"
    assert addon.inputs["serviceAccountRoleArn"] == "arn:aws:iam::123456789012:role/tft-store-efs-csi-irsa"
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    conditions = statement["Condition"]["StringEquals"]
    assert "system:serviceaccount:kube-system:efs-csi-controller-sa" in conditions.values()
    assert mocks.named("tft-system").urn in addon.depends_on


def test_storage_class_is_efs_access_point_provisioning(mocks: RecordingMocks) -> None:
    build_platform()
    sc = mocks.named("tft-store-sc")
    assert sc.inputs["provisioner"] == "efs.csi.aws.com"
    assert sc.inputs["metadata"]["name"] == "triton-ft-efs"
    assert sc.inputs["parameters"]["provisioningMode"] == "efs-ap"
    assert sc.inputs["parameters"]["fileSystemId"] == "tft-store-fs-id"


def test_addon_flags_choose_the_charts_and_feed_the_crd_installers(mocks: RecordingMocks) -> None:
    built = build_platform(
        addons=AddonFlags(
            ingress_nginx=False, cert_manager=True, kube_prometheus_stack=False, prometheus_adapter=False, keda=True
        )
    )
    target = built["platform"].target
    assert target.addons == frozenset({"cert-manager", "keda"})
    assert len(target.crd_installers) == 2
    installed = {c.inputs["chart"]: c.inputs["version"] for c in mocks.of_type(CHART)}
    assert installed == {
        "nvidia-device-plugin": "0.20.0",
        "cert-manager": "v1.21.1",
        "keda": "2.20.2",
        "cluster-autoscaler": charts.CLUSTER_AUTOSCALER.version,
    }


def test_prometheus_adapter_reads_the_stack_prometheus_and_installs_after_it(mocks: RecordingMocks) -> None:
    build_platform()
    kps, adapter = _chart(mocks, "kube-prometheus-stack"), _chart(mocks, "prometheus-adapter")
    assert kps.urn in adapter.depends_on
    assert adapter.inputs["values"]["prometheus"]["url"] == "http://kube-prometheus-stack-prometheus.monitoring.svc"
    assert kps.inputs["values"]["fullnameOverride"] == "kube-prometheus-stack"


def test_target_is_placed_through_the_eks_kubeconfig_provider(mocks: RecordingMocks) -> None:
    built = build_platform()
    target = built["platform"].target
    (k8s_provider,) = mocks.of_type("pulumi:providers:kubernetes")
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert json.loads(k8s_provider.inputs["kubeconfig"])["current-context"] == cluster.name
    assert target.provider is not None
    ref = provider_ref(mocks, "pulumi:providers:kubernetes")
    assert {r.provider for r in mocks.resources if r.typ.startswith("kubernetes:")} == {ref}
    assert target.gpu.node_selector == {"triton-ft.io/accelerator": "nvidia"}
    assert target.cpu_node_selector == {"triton-ft.io/node-pool": "system"}
    assert target.storage_class == "triton-ft-efs"


def test_workload_namespace_has_the_same_labels_as_an_existing_cluster(mocks: RecordingMocks) -> None:
    build_platform(namespace="models")
    ns = mocks.named("tft-ns")
    assert ns.inputs["metadata"] == {"name": "models", "labels": namespace_labels("restricted")}


def test_existing_vpc_is_used_as_given(mocks: RecordingMocks) -> None:
    vpc = ExistingVpc("vpc-0123456789abcdef0", ("subnet-a", "subnet-b"), ("subnet-pa", "subnet-pb"))
    build_platform(vpc=vpc)
    assert mocks.of_type("aws:ec2/vpc:Vpc") == []
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["privateSubnetIds"] == ["subnet-a", "subnet-b"]
    assert sorted(t.inputs["subnetId"] for t in mocks.of_type("aws:efs/mountTarget:MountTarget")) == [
        "subnet-a",
        "subnet-b",
    ]
    assert mocks.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") == []


def test_invalid_settings_are_all_reported_before_any_resource_exists(mocks: RecordingMocks) -> None:
    bad = (
        GpuNodeGroup(name="gpu", instance_types=("m6i.large",), min_size=3, desired_size=1, max_size=2),
        GpuNodeGroup(name="gpu", ami_type="AL2023_x86_64_STANDARD"),
    )
    with pytest.raises(UserError) as err:
        build_platform(gpu_node_groups=bad)
    problems = err.value.problems
    assert any("m6i.large" in p for p in problems)
    assert any("minSize (3)" in p for p in problems)
    assert any("duplicate" in p for p in problems)
    assert any("AL2023_x86_64_STANDARD" in p for p in problems)
    assert mocks.resources == []


def test_metrics_server_runs_on_the_system_nodes_for_the_gateways_hpa(mocks: RecordingMocks) -> None:
    build_platform(addons=AddonFlags(metrics_server=True))
    chart = _chart(mocks, "metrics-server")
    assert (chart.inputs["version"], chart.inputs["repositoryOpts"]["repo"]) == (
        charts.METRICS_SERVER.version,
        charts.METRICS_SERVER.repo,
    )
    assert chart.inputs["values"]["nodeSelector"] == {POOL_LABEL: SYSTEM_POOL}
    assert chart.inputs["values"]["replicas"] == 2


def test_kubernetes_secrets_are_envelope_encrypted_with_the_customer_managed_key_when_given(
    mocks: RecordingMocks,
) -> None:
    key = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    build_platform(kms_key_arn=key)
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert cluster.inputs["encryptionConfigKeyArn"] == key


def test_without_a_key_the_cluster_has_no_encryption_config(mocks: RecordingMocks) -> None:
    build_platform()
    (cluster,) = mocks.of_type("eks:index:Cluster")
    assert "encryptionConfigKeyArn" not in cluster.inputs


def test_external_dns_writes_only_the_stacks_zone_for_its_hosts(mocks: RecordingMocks) -> None:
    dns = EdgeDns(zone="example.com", domain="triton.example.com", owner="triton-ft-prod")
    build_platform(addons=AddonFlags(envoy_gateway=True), dns=dns)
    chart = _chart(mocks, "external-dns")
    values = chart.inputs["values"]
    assert values["sources"] == ["gateway-httproute", "gateway-grpcroute"]
    assert (values["domainFilters"], values["txtOwnerId"], values["policy"]) == (
        ["triton.example.com"],
        "triton-ft-prod",
        "sync",
    )
    assert "--zone-id-filter=Z0123456789MOCKZONE" in values["extraArgs"]
    (policy,) = [p for p in mocks.of_type("aws:iam/rolePolicy:RolePolicy") if "route53" in p.inputs["policy"]]
    statements = json.loads(policy.inputs["policy"])["Statement"]
    (change,) = [s for s in statements if "route53:ChangeResourceRecordSets" in s["Action"]]
    assert change["Resource"] == ["arn:aws:route53:::hostedzone/Z0123456789MOCKZONE"]
    # Only the stack's hosts and their registry TXT records (a-<host>), never the apex or a neighbour's record.
    names = change["Condition"]["ForAllValues:StringLike"]["route53:ChangeResourceRecordSetsNormalizedRecordNames"]
    assert names == ["triton.example.com", "*.triton.example.com", "*-triton.example.com"]
    for allowed in (
        "triton.example.com",
        "t5.triton.example.com",
        "a-triton.example.com",
        "cname-t5.triton.example.com",
    ):
        assert any(fnmatch.fnmatchcase(allowed, n) for n in names), allowed
    for refused in ("example.com", "www.example.com", "triton.example.com.evil.org", "mail.example.com"):
        assert not any(fnmatch.fnmatchcase(refused, n) for n in names), refused


def test_routes_wait_for_external_dns_so_destroy_removes_its_records_first(mocks: RecordingMocks) -> None:
    dns = EdgeDns(zone="example.com", domain="triton.example.com", owner="o")
    built = build_platform(addons=AddonFlags(envoy_gateway=True), dns=dns)
    chart = _chart(mocks, "external-dns")
    assert any(getattr(r, "_name", None) == "tft-external-dns" for r in built["platform"].target.crd_installers)
    assert _chart(mocks, charts.ENVOY_GATEWAY.chart).urn in chart.depends_on
