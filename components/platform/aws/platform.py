"""``platform: aws``: VPC, EKS, CPU + GPU node groups, NVIDIA device plugin, EFS model store, add-ons.

Ends in the same :class:`components.common.target.ClusterTarget` as ``ExistingCluster``, so downstream components do
not know which platform they run on. Teardown is ordered by construction: Kubernetes objects (LoadBalancer Services
above all) hang off the node groups and the cluster, which hang off the VPC, so ``destroy`` removes them in reverse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s
import yaml

from components.common.podsec import WORKLOAD_POD_SECURITY, PodSecurityLevel, namespace_labels
from components.common.target import ClusterTarget, GpuScheduling
from components.platform.aws import charts, decisions
from components.platform.aws.addons import AddonFlags, install_addons, install_chart
from components.platform.aws.autoscaler import IMAGE_TAGS, image_tag, install_node_autoscaler
from components.platform.aws.dns import EdgeDns, install_external_dns
from components.platform.aws.iam import CNI_POLICY, irsa_role, node_role
from components.platform.aws.logs import install_log_shipping
from components.platform.aws.network import ExistingVpc, Network, NetworkArgs, NewVpc
from components.platform.aws.nodegroups import (
    ACCELERATOR_LABEL,
    DEVICE_PLUGIN_LABEL,
    POOL_LABEL,
    SYSTEM_POOL,
    GpuNodeGroup,
    NodeGroupWiring,
    SystemNodeGroup,
    current_scaling,
    gpu_node_group,
    system_node_group,
)
from components.platform.aws.storage import EfsModelStore, EfsModelStoreArgs
from components.platform.signals import EdgeProbe
from components.settings import eks as eks_facts
from components.settings.alerting import credential_secrets
from tritonft.errors import UserError

CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


@dataclass(frozen=True)
class AwsPlatformArgs:
    """Everything ``platform: aws`` needs; defaults give a small two-zone cluster with one g5.xlarge GPU node."""

    region: str
    """AWS region; it must offer the GPU instance types (``aws ec2 describe-instance-type-offerings``)."""
    environment: str
    """``dev``/``staging``/``prod``...; prod protects the model store and refuses force-deletes."""
    namespace: str = "triton-ft"
    """Namespace every workload of this stack lives in."""
    cluster_name: str | None = None
    """Physical EKS cluster name; None = ``<project>-<stack>``."""
    kubernetes_version: str = eks_facts.DEFAULT_KUBERNETES_VERSION
    """EKS Kubernetes minor, one of ``components.settings.eks.EKS_VERSIONS`` still offered (the settings warn of
    extended support)."""
    eks_support: str = eks_facts.DEFAULT_SUPPORT
    """The cluster's upgrade policy (``standard``: no extended-support billing, EKS upgrades the control plane at the
    end of standard support; ``extended``)."""
    vpc: NewVpc | ExistingVpc = field(default_factory=NewVpc)
    system_nodes: SystemNodeGroup = field(default_factory=SystemNodeGroup)
    gpu_node_groups: tuple[GpuNodeGroup, ...] = (GpuNodeGroup(),)
    server_image_gib: float = 20.0
    """Unpacked size of the Triton + FT server image (sizes GPU node disks)."""
    model_weights_gib: float = 0.0
    """Converted weights a GPU node may stage on local disk (0 = served straight from the EFS store)."""
    conversion_scratch_gib: float = 60.0
    """Local scratch on CPU nodes for a Hugging Face checkpoint during conversion (sizes system node disks)."""
    addons: AddonFlags = field(default_factory=AddonFlags)
    longest_pod_grace_seconds: int = 600
    """The longest ``terminationGracePeriodSeconds`` of the stack's pods (a vLLM model's Triton or the gateway, whose
    drains cover its longest answer): how long the node autoscaler lets a pod of a node it removes terminate."""
    dns: EdgeDns | None = None
    """Route53 records for the edge's hosts through external-dns (the zone is looked up); None = no DNS."""
    ingress_class: str = "nginx"
    storage_class_name: str = "triton-ft-efs"
    protect_model_store: bool | None = None
    """Protect + retain the EFS store on ``destroy``; None = only in prod. Set False (then ``pulumi up``) to let a
    prod ``destroy`` delete it."""
    efs_csi_addon_version: str | None = None
    """EKS add-on version of the EFS CSI driver (e.g. ``v2.1.4-eksbuild.1``); None = EKS's default for the cluster's
    Kubernetes version, looked up (so it follows a version bump)."""
    admin_role_arns: tuple[str, ...] = ()
    """IAM principals (CI roles, operators) granted cluster-admin through EKS access entries."""
    public_access_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    """Who may reach the public Kubernetes API endpoint."""
    private_endpoint_only: bool = False
    """No public Kubernetes API endpoint: ``pulumi up`` and CI must then run from inside the VPC (VPN, runners)."""
    ship_logs: bool = False
    """Ship the stack's and the edge's container logs to CloudWatch Logs (:mod:`components.platform.aws.logs`),
    kept ``control_plane_log_retention_days``."""
    control_plane_log_retention_days: int = 90
    """Retention of the control plane's api/audit/authenticator logs (the log group exists before the cluster)."""
    protect_infrastructure: bool | None = None
    """``protect`` the EKS cluster and the VPC; None = only in prod."""
    node_ssm_access: bool = False
    """Attach SSM's managed policy to the node role (break-glass shell through Session Manager)."""
    gpu_quota_check: bool = True
    """Read the account's GPU vCPU quota (Service Quotas) and refuse node groups it cannot hold."""
    tools_image_gib: float = 1.0
    """Unpacked size of the tools image (conversion Jobs on the system nodes)."""
    system_runs_server_image: bool = True
    """A ``device: cpu`` model's Triton pod runs the server image on the system nodes (sizes their disks)."""
    alert_receivers: tuple[dict[str, object], ...] = ()
    """Alertmanager receivers (Alertmanager's format); sent to the chart as a secret."""
    alert_routing: dict[str, str | None] = field(default_factory=dict)
    """Receiver per route (``critical``, ``warning``, ``watchdog``), as :func:`alerting.alert_routing` gives it."""
    edge_probes: tuple[EdgeProbe, ...] = ()
    """The public hosts the blackbox exporter probes (with kube-prometheus-stack)."""
    prometheus_storage_gib: int = 50
    """Prometheus's EBS volume (15 days of the cluster's and Triton's series)."""
    tags: dict[str, str] = field(default_factory=dict)
    """Extra tags for every AWS resource (merged into the provider's default tags)."""
    pod_security: PodSecurityLevel = WORKLOAD_POD_SECURITY
    kms_key_arn: str | None = None
    """Customer-managed KMS key for EKS envelope encryption of Kubernetes Secrets; None = EKS's default (AWS-managed
    encryption of etcd's volumes only)."""
    """Pod Security Admission level enforced on the workload namespace."""


def validate_platform_args(args: AwsPlatformArgs) -> list[str]:
    """Every problem with ``args``, each naming its input and the fix."""
    problems = list(args.addons.problems())
    problems += decisions.validate_scaling(
        "systemNodes", args.system_nodes.min_size, args.system_nodes.desired_size, args.system_nodes.max_size
    )
    if args.system_nodes.min_size < 1:
        problems.append("systemNodes.minSize: must be at least 1 (controllers and the EFS driver run there)")
    if not args.gpu_node_groups:
        problems.append("gpuNodeGroups: empty; Triton needs at least one GPU node group")
    seen: set[str] = set()
    for group in args.gpu_node_groups:
        if group.name in seen or group.name == SYSTEM_POOL:
            problems.append(f"gpuNodeGroups.{group.name}: duplicate or reserved name; give each group its own name")
        seen.add(group.name)
        problems += decisions.validate_gpu_instance_types(group.name, group.instance_types)
        problems += decisions.validate_ami_type(group.name, group.ami_type)
        problems += decisions.validate_scaling(
            f"gpuNodeGroups.{group.name}", group.min_size, group.desired_size, group.max_size
        )
        if group.capacity_type not in {"ON_DEMAND", "SPOT"}:
            problems.append(f"gpuNodeGroups.{group.name}.capacityType: '{group.capacity_type}'; use ON_DEMAND or SPOT")
    problems += eks_facts.version_problems(args.kubernetes_version, eks_facts.today(), args.eks_support)
    if node_autoscaling(args) and image_tag(args.kubernetes_version) is None:
        problems.append(
            f"kubernetesVersion: {args.kubernetes_version!r} has no pinned cluster-autoscaler chart and image of its "
            f"minor (cluster-autoscaler's minor must match the cluster's, and its chart's RBAC the release's); use "
            f"one of {', '.join(IMAGE_TAGS)}, or fixed-size node groups (min = max)"
        )
    if isinstance(args.vpc, ExistingVpc) and len(args.vpc.private_subnet_ids) < 2:
        problems.append("vpc.privateSubnetIds: EKS needs subnets in at least 2 availability zones")
    return problems


def node_autoscaling(args: AwsPlatformArgs) -> bool:
    """cluster-autoscaler is installed when some node group may grow beyond its minimum."""
    groups = [(args.system_nodes.min_size, args.system_nodes.max_size)]
    groups += [(g.min_size, g.max_size) for g in args.gpu_node_groups]
    return any(hi > lo for lo, hi in groups)


def gpu_scheduling() -> GpuScheduling:
    """How workloads reach the GPU nodes of this platform (label shared by every GPU group + the GPU taint)."""
    return GpuScheduling(node_selector={ACCELERATOR_LABEL: "nvidia"})


def device_plugin_node_selector() -> dict[str, str]:
    return {ACCELERATOR_LABEL: "nvidia", DEVICE_PLUGIN_LABEL: "helm"}


class AwsPlatform(pulumi.ComponentResource):
    """An EKS cluster ready for Triton: GPU nodes with the device plugin, an RWX model store, add-ons."""

    aws_provider: aws.Provider
    """The explicit AWS provider (region + default tags); pass it to other AWS components such as TritonImage."""
    cluster_name: pulumi.Output[str]
    """Physical EKS cluster name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig of the cluster (secret)."""
    vpc_id: pulumi.Output[str]
    """The VPC the cluster runs in."""
    model_store_file_system_id: pulumi.Output[str]
    """EFS file system holding the model repository."""
    namespace: pulumi.Output[str]
    """The namespace every workload of this stack lives in."""
    target: ClusterTarget

    def __init__(self, name: str, args: AwsPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        problems = validate_platform_args(args)
        if problems:
            raise UserError(f"platform aws ({name}): invalid settings", problems)
        super().__init__("triton-ft:aws:AwsPlatform", name, {}, opts)
        project, stack = pulumi.get_project(), pulumi.get_stack()
        cluster_name = args.cluster_name or decisions.cluster_physical_name(project, stack)
        protected = decisions.storage_protected(args.environment, args.protect_model_store)
        infra_protected = decisions.storage_protected(args.environment, args.protect_infrastructure)
        gpu_disks = {
            g.name: g.disk_gib or decisions.node_disk_gib(args.server_image_gib, args.model_weights_gib)
            for g in args.gpu_node_groups
        }
        system_disk = args.system_nodes.disk_gib or decisions.node_disk_gib(
            system_images_gib(args), args.conversion_scratch_gib
        )

        self.aws_provider = aws.Provider(
            f"{name}-aws",
            region=args.region,
            default_tags=aws.ProviderDefaultTagsArgs(
                tags=decisions.default_tags(project, stack, args.environment, args.tags)
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        if args.gpu_quota_check:
            # Before any resource: a node group beyond the quota fails only after its 40-minute timeout.
            refusals = decisions.quota_problems(
                quota_groups(args),
                read_gpu_quotas(args, self.aws_provider, self),
                args.region,
            )
            if refusals:
                raise UserError(f"platform aws ({name}): the account's GPU quota is too small", refusals)
        if args.admin_role_arns:
            # Before any resource: a second access entry for the creator fails only once the cluster exists.
            caller = aws.get_caller_identity(opts=pulumi.InvokeOptions(provider=self.aws_provider, parent=self))
            refused = decisions.creator_admin_problems(caller.arn, args.admin_role_arns)
            if refused:
                raise UserError(f"platform aws ({name}): cluster access", refused)
        network = Network(
            f"{name}-net",
            NetworkArgs(
                vpc=with_protection(args.vpc, infra_protected), cluster_name=cluster_name, provider=self.aws_provider
            ),
            opts=pulumi.ResourceOptions(parent=self, providers=[self.aws_provider]),
        )
        role = node_role(name, self.aws_provider, self, ssm_access=args.node_ssm_access)
        # EKS writes the control plane's logs to this group; created first, it has a retention (EKS's own has none).
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=args.control_plane_log_retention_days,
            opts=pulumi.ResourceOptions(parent=self, provider=self.aws_provider),
        )
        cluster = eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=args.kubernetes_version,
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=args.eks_support.upper()),
            vpc_id=network.vpc_id,
            private_subnet_ids=network.private_subnet_ids,
            public_subnet_ids=network.public_subnet_ids,
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            # Only managed node groups here: they get the EKS-created cluster security group (plus the nodes' own
            # group, below); pulumi-eks's extra groups are for self-managed nodes.
            skip_default_security_groups=True,
            # The VPC CNI is EKS's bootstrapped one, taken over below as a managed add-on with its own IRSA role.
            use_default_vpc_cni=True,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries(args.admin_role_arns),
            create_oidc_provider=True,  # IRSA for the VPC CNI, the CSI drivers and the cluster autoscaler
            endpoint_public_access=not args.private_endpoint_only,
            endpoint_private_access=True,
            public_access_cidrs=None if args.private_endpoint_only else list(args.public_access_cidrs),
            enabled_cluster_log_types=list(CONTROL_PLANE_LOGS),
            encryption_config_key_arn=args.kms_key_arn,
            opts=pulumi.ResourceOptions(
                parent=self,
                providers={"aws": self.aws_provider},
                depends_on=[log_group],
                protect=infra_protected,
                custom_timeouts=pulumi.CustomTimeouts(create="30m", update="60m", delete="30m"),
            ),
        )
        cni = self._vpc_cni(name, cluster_name, cluster, args.kubernetes_version)
        kube_proxy = self._kube_proxy(name, cluster_name, cluster, args.kubernetes_version)
        nodes_sg = aws.ec2.SecurityGroup(
            f"{name}-nodes",
            vpc_id=network.vpc_id,
            description="triton-ft nodes: the source the model store's NFS accepts",
            tags={"Name": f"{name}-nodes"},
            opts=pulumi.ResourceOptions(parent=self, provider=self.aws_provider),
        )
        node_sgs = pulumi.Output.all(cluster.cluster_security_group_id, nodes_sg.id).apply(list)
        # Node groups wait for the whole network (NAT route included: nodes pull images on boot), the cluster, the
        # VPC CNI add-on (aws-node must find its IRSA role when the first node boots) and kube-proxy (so a version
        # bump upgrades it before the nodes: kube-proxy may be newer than the kubelet, never than the API server).
        node_deps: list[pulumi.Resource] = [cluster, network, cni, kube_proxy]
        wiring = NodeGroupWiring(
            cluster_name=cluster_name,
            node_role_arn=role.arn,
            subnet_ids=network.private_subnet_ids,
            provider=self.aws_provider,
            parent=self,
            depends_on=node_deps,
            security_group_ids=node_sgs,
            kubernetes_version=args.kubernetes_version,
        )
        # Read before the groups are declared: a changed gpuNodesMin/Max must come with a desired size inside it.
        current = current_scaling(cluster_name, self.aws_provider, self)
        system = system_node_group(name, args.system_nodes, system_disk, wiring, current.get(f"{name}-{SYSTEM_POOL}"))
        gpu_groups = [
            gpu_node_group(name, g, gpu_disks[g.name], wiring, current.get(f"{name}-{g.name}"))
            for g in args.gpu_node_groups
        ]
        self._coredns(name, cluster_name, args.kubernetes_version, depends_on=[system])
        k8s_provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig_json,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        in_cluster = [system, *gpu_groups]
        if node_autoscaling(args):
            install_node_autoscaler(
                name,
                cluster_name=cluster_name,
                region=args.region,
                kubernetes_version=args.kubernetes_version,
                longest_pod_grace_seconds=args.longest_pod_grace_seconds,
                node_groups=in_cluster,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_provider_url=cluster.oidc_provider_url,
                aws_provider=self.aws_provider,
                k8s_provider=k8s_provider,
                parent=self,
                depends_on=in_cluster,
            )

        if any(decisions.needs_device_plugin(g.ami_type) for g in args.gpu_node_groups):
            install_chart(
                f"{name}-nvidia-device-plugin",
                charts.NVIDIA_DEVICE_PLUGIN,
                charts.device_plugin_values(device_plugin_node_selector()),
                provider=k8s_provider,
                parent=self,
                depends_on=in_cluster,
            )
        store = EfsModelStore(
            f"{name}-store",
            EfsModelStoreArgs(
                vpc_id=network.vpc_id,
                node_security_group_id=nodes_sg.id,
                node_role_arn=role.arn,
                private_subnet_ids=network.private_subnet_ids,
                subnet_count=network.private_subnet_count,
                cluster_name=cluster_name,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_provider_url=cluster.oidc_provider_url,
                protected=protected,
                storage_class_name=args.storage_class_name,
                aws_provider=self.aws_provider,
                k8s_provider=k8s_provider,
                addon_version=args.efs_csi_addon_version
                or self._addon_version("aws-efs-csi-driver", args.kubernetes_version),
                depends_on=(system,),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        block_storage: list[pulumi.Resource] = []
        if args.addons.kube_prometheus_stack:
            block_storage = self._ebs_csi(
                name,
                cluster_name,
                cluster,
                k8s_provider,
                kubernetes_version=args.kubernetes_version,
                depends_on=[system],
            )
        addons = install_addons(
            name,
            args.addons,
            ingress_class=args.ingress_class,
            system_node_selector={POOL_LABEL: SYSTEM_POOL},
            provider=k8s_provider,
            parent=self,
            depends_on=in_cluster,
            prometheus_values=charts.kube_prometheus_stack_values(
                EBS_STORAGE_CLASS,
                args.prometheus_storage_gib,
                alertmanager_secret=charts.ALERTMANAGER_SECRET,
                alertmanager_secrets=credential_secrets(args.alert_receivers),
                replicas=2 if args.environment == "prod" else 1,
            ),
            prometheus_depends_on=block_storage,
            alertmanager_config=yaml.safe_dump(
                charts.alertmanager_config(args.alert_receivers, args.alert_routing), sort_keys=True
            ),
            edge_probes=args.edge_probes,
            gpu_node_selector={ACCELERATOR_LABEL: "nvidia"},
            stack_namespace=args.namespace,
        )
        crd_installers = list(addons.crd_installers)
        if args.dns is not None:
            # After the Gateway API CRDs it watches; the routes wait for it (as for a CRD installer), so `destroy`
            # deletes them, and external-dns their records, before it goes.
            crd_installers.append(
                install_external_dns(
                    name,
                    args.dns,
                    region=args.region,
                    oidc_provider_arn=cluster.oidc_provider_arn,
                    oidc_provider_url=cluster.oidc_provider_url,
                    aws_provider=self.aws_provider,
                    k8s_provider=k8s_provider,
                    parent=self,
                    depends_on=[*in_cluster, *addons.crd_installers],
                )
            )
        if args.ship_logs:
            install_log_shipping(
                name,
                cluster_name=cluster_name,
                region=args.region,
                retention_days=args.control_plane_log_retention_days,
                namespaces=(args.namespace, charts.ENVOY_GATEWAY.namespace),
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_provider_url=cluster.oidc_provider_url,
                aws_provider=self.aws_provider,
                k8s_provider=k8s_provider,
                parent=self,
                depends_on=in_cluster,
            )
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={"name": args.namespace, "labels": namespace_labels(args.pod_security)},
            opts=pulumi.ResourceOptions(parent=self, provider=k8s_provider, depends_on=in_cluster),
        )

        self.cluster_name = pulumi.Output.from_input(cluster_name)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json.apply(_as_json))
        self.vpc_id = network.vpc_id
        self.model_store_file_system_id = store.file_system_id
        self.namespace = ns.metadata.apply(lambda m: m["name"] if isinstance(m, dict) else m.name)
        self.target = ClusterTarget(
            provider=k8s_provider,
            namespace=self.namespace,
            gpu=gpu_scheduling(),
            cpu_node_selector={POOL_LABEL: SYSTEM_POOL},
            storage_class=args.storage_class_name,
            ingress_class=args.ingress_class,
            crd_installers=crd_installers,
            addons=addons.names,
            kubeconfig=self.kubeconfig,
            storage_ready=[store.storage_class_resource],
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "vpc_id": self.vpc_id,
                "model_store_file_system_id": self.model_store_file_system_id,
                "namespace": self.namespace,
            }
        )

    def _addon_role(self, name: str, cluster: eks.Cluster, service_account: str, policy_arn: str) -> aws.iam.Role:
        """The IRSA role of an EKS add-on's ``kube-system`` service account, with AWS's managed ``policy_arn``."""
        return irsa_role(
            name,
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_provider_url=cluster.oidc_provider_url,
            namespace="kube-system",
            service_account=service_account,
            policy_arns=(policy_arn,),
            provider=self.aws_provider,
            parent=self,
        )

    def _addon_version(self, addon: str, kubernetes_version: str) -> pulumi.Output[str]:
        """EKS's default version of ``addon`` for the cluster's minor (``aws eks describe-addon-versions``): it moves
        with ``kubernetesVersion``, so a version bump upgrades the add-ons after the control plane."""
        return aws.eks.get_addon_version_output(
            addon_name=addon,
            kubernetes_version=kubernetes_version,
            most_recent=False,
            opts=pulumi.InvokeOutputOptions(provider=self.aws_provider, parent=self),
        ).version

    def _coredns(
        self, name: str, cluster_name: str, kubernetes_version: str, depends_on: list[pulumi.Resource]
    ) -> aws.eks.Addon:
        """CoreDNS as a managed EKS add-on (pulumi-eks manages it only with its default node group): EKS's
        self-managed CoreDNS is taken over (OVERWRITE) and upgraded with the cluster's version; after the system
        nodes, where its pods run."""
        return self._taken_over_addon(name, "coredns", cluster_name, kubernetes_version, depends_on)

    def _kube_proxy(self, name: str, cluster_name: str, cluster: eks.Cluster, kubernetes_version: str) -> aws.eks.Addon:
        """kube-proxy as a managed EKS add-on: EKS's bootstrapped (self-managed) kube-proxy is taken over (OVERWRITE)
        and moves with the cluster's version, after the control plane and before the node groups."""
        return self._taken_over_addon(name, "kube-proxy", cluster_name, kubernetes_version, [cluster])

    def _taken_over_addon(
        self, name: str, addon: str, cluster_name: str, kubernetes_version: str, depends_on: list[pulumi.Resource]
    ) -> aws.eks.Addon:
        """``addon`` as a managed EKS add-on that takes over EKS's self-managed one (OVERWRITE on create and update),
        at EKS's default version for the cluster's minor."""
        return aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=cluster_name,
            addon_name=addon,
            addon_version=self._addon_version(addon, kubernetes_version),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, provider=self.aws_provider, depends_on=depends_on),
        )

    def _vpc_cni(self, name: str, cluster_name: str, cluster: eks.Cluster, kubernetes_version: str) -> aws.eks.Addon:
        """The VPC CNI as an EKS add-on: pod networking's IAM policy on ``aws-node``'s own IRSA role (not the node
        role), and the network-policy agent on, so the stack's NetworkPolicies are enforced (eBPF on each node)."""
        role = self._addon_role(f"{name}-vpc-cni", cluster, "aws-node", CNI_POLICY)
        return aws.eks.Addon(
            f"{name}-vpc-cni",
            cluster_name=cluster_name,
            addon_name="vpc-cni",
            addon_version=self._addon_version("vpc-cni", kubernetes_version),
            service_account_role_arn=role.arn,
            configuration_values=json.dumps(decisions.vpc_cni_configuration(), sort_keys=True),
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, provider=self.aws_provider, depends_on=[cluster]),
        )

    def _ebs_csi(
        self,
        name: str,
        cluster_name: str,
        cluster: eks.Cluster,
        k8s_provider: k8s.Provider,
        *,
        kubernetes_version: str,
        depends_on: list[pulumi.Resource],
    ) -> list[pulumi.Resource]:
        """The EBS CSI driver (EKS add-on, IRSA) and an encrypted gp3 StorageClass for Prometheus and Alertmanager."""
        role = self._addon_role(f"{name}-ebs-csi", cluster, "ebs-csi-controller-sa", EBS_CSI_POLICY)
        addon = aws.eks.Addon(
            f"{name}-ebs-csi",
            cluster_name=cluster_name,
            addon_name="aws-ebs-csi-driver",
            addon_version=self._addon_version("aws-ebs-csi-driver", kubernetes_version),
            service_account_role_arn=role.arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, provider=self.aws_provider, depends_on=depends_on),
        )
        sc = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={"name": EBS_STORAGE_CLASS},
            provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"},
            reclaim_policy="Delete",
            volume_binding_mode="WaitForFirstConsumer",
            allow_volume_expansion=True,
            opts=pulumi.ResourceOptions(parent=self, provider=k8s_provider, depends_on=[addon]),
        )
        return [addon, sc]


CONTROL_PLANE_LOGS = ("api", "audit", "authenticator")
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
EBS_STORAGE_CLASS = "triton-ft-gp3"


def access_entries(principal_arns: tuple[str, ...]) -> dict[str, eks.AccessEntryArgs]:
    """Cluster-admin access entries for the settings' admin principals (CI's deploy role, operators)."""
    return {
        f"admin-{i}": eks.AccessEntryArgs(
            principal_arn=arn,
            access_policies={
                "admin": eks.AccessPolicyAssociationArgs(
                    policy_arn=CLUSTER_ADMIN_POLICY,
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                )
            },
        )
        for i, arn in enumerate(principal_arns)
    }


def system_images_gib(args: AwsPlatformArgs) -> float:
    """Images the system nodes hold: the tools image, and the server image when a ``device: cpu`` model runs there."""
    return args.tools_image_gib + (args.server_image_gib if args.system_runs_server_image else 0.0)


def with_protection(vpc: NewVpc | ExistingVpc, protect: bool) -> NewVpc | ExistingVpc:
    return replace(vpc, protect=protect) if isinstance(vpc, NewVpc) else vpc


def node_group_zones(vpc: NewVpc | ExistingVpc) -> int:
    """Zones the node groups span: a new VPC's ``az_count``; an existing one's private subnets (one per zone, at
    most: the count bounds the zones)."""
    return vpc.az_count if isinstance(vpc, NewVpc) else len(vpc.private_subnet_ids)


def quota_groups(args: AwsPlatformArgs) -> list[decisions.QuotaGroup]:
    """The GPU node groups as the quota check counts them."""
    zones = node_group_zones(args.vpc)
    return [
        decisions.QuotaGroup(g.name, g.instance_types, g.capacity_type, g.desired_size, g.max_size, zones)
        for g in args.gpu_node_groups
    ]


def read_gpu_quotas(args: AwsPlatformArgs, provider: aws.Provider, parent: pulumi.Resource) -> dict[str, float | None]:
    """Service Quotas' value of each quota the GPU node groups count against (None where it cannot be read)."""
    values: dict[str, float | None] = {}
    for group in args.gpu_node_groups:
        code = decisions.gpu_quota(group.instance_types[0], group.capacity_type).code
        if code in values:
            continue
        try:
            quota = aws.servicequotas.get_service_quota(
                service_code="ec2", quota_code=code, opts=pulumi.InvokeOptions(provider=provider, parent=parent)
            )
        except Exception as exc:
            pulumi.log.warn(f"could not read the EC2 quota {code} in {args.region} ({exc}); not checked")
            values[code] = None
            continue
        values[code] = None if quota.value is None else float(quota.value)
    return values


def _as_json(kubeconfig: object) -> str:
    return kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig)


__all__ = ["AddonFlags", "AwsPlatform", "AwsPlatformArgs", "ExistingVpc", "GpuNodeGroup", "NewVpc", "SystemNodeGroup"]
