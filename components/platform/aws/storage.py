"""The ReadWriteMany model store on EFS: file system, mount targets, NFS security group, CSI driver, StorageClass."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.platform.aws.decisions import efs_reclaim_policy
from components.platform.aws.iam import irsa_role
from components.platform.aws.network import nth

EFS_CSI_ADDON = "aws-efs-csi-driver"
EFS_CSI_NAMESPACE = "kube-system"
EFS_CSI_SERVICE_ACCOUNT = "efs-csi-controller-sa"
EFS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
MODEL_STORE_UID = 1000
"""POSIX identity of every file written through the access points: ``triton-server`` (uid/gid 1000) in the
NGC Triton image and the ``tritonft`` user of the tools image, so conversion Jobs and Triton share files."""


def efs_storage_class_parameters(file_system_id: str) -> dict[str, str]:
    """Dynamic provisioning: one EFS access point (own directory, fixed uid/gid) per PersistentVolumeClaim."""
    return {
        "provisioningMode": "efs-ap",
        "fileSystemId": file_system_id,
        "directoryPerms": "750",
        "uid": str(MODEL_STORE_UID),
        "gid": str(MODEL_STORE_UID),
        "basePath": "/triton-ft",
    }


@dataclass(frozen=True)
class EfsModelStoreArgs:
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    subnet_count: int
    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_provider_url: pulumi.Input[str]
    protected: bool
    """Protect + retain the file system (and retain provisioned volumes): prod model data survives ``destroy``."""
    storage_class_name: str
    aws_provider: aws.Provider
    k8s_provider: k8s.Provider
    addon_version: str | None = None
    """EKS add-on version of the EFS CSI driver; None = the default version for the cluster's Kubernetes."""
    depends_on: tuple[pulumi.Resource, ...] = ()
    """Resources the CSI add-on needs first (a node group: the add-on only becomes ACTIVE once its pods run)."""


class EfsModelStore(pulumi.ComponentResource):
    """EFS file system reachable from every private subnet, with the CSI driver and an RWX StorageClass."""

    file_system_id: pulumi.Output[str]
    """The EFS file system holding the model repository."""
    storage_class: pulumi.Output[str]
    """Name of the ReadWriteMany StorageClass backed by this file system."""

    def __init__(self, name: str, args: EfsModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-ft:aws:EfsModelStore", name, {}, opts)
        aws_opts = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)

        sg = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=args.vpc_id,
            description="NFS from the cluster VPC to the triton-ft model store",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp", from_port=2049, to_port=2049, cidr_blocks=[args.vpc_cidr], description="NFS"
                )
            ],
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])],
            tags={"Name": f"{name}-nfs"},
            opts=aws_opts,
        )
        fs = aws.efs.FileSystem(
            f"{name}-fs",
            encrypted=True,
            performance_mode="generalPurpose",
            # Elastic throughput: model loads are short bursts far above what bursting credits give a small store.
            throughput_mode="elastic",
            tags={"Name": f"{name}-model-store"},
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.aws_provider,
                protect=args.protected,
                retain_on_delete=args.protected,
            ),
        )
        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mt-{i}",
                file_system_id=fs.id,
                subnet_id=nth(args.private_subnet_ids, i),
                security_groups=[sg.id],
                opts=pulumi.ResourceOptions(
                    parent=self, provider=args.aws_provider
                ),  # not under fs: no inherited protect
            )
            for i in range(args.subnet_count)
        ]
        role = irsa_role(
            f"{name}-efs-csi",
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_provider_url=args.oidc_provider_url,
            namespace=EFS_CSI_NAMESPACE,
            service_account=EFS_CSI_SERVICE_ACCOUNT,
            policy_arns=(EFS_CSI_POLICY,),
            provider=args.aws_provider,
            parent=self,
        )
        addon = aws.eks.Addon(
            f"{name}-efs-csi",
            cluster_name=args.cluster_name,
            addon_name=EFS_CSI_ADDON,
            addon_version=args.addon_version,
            service_account_role_arn=role.arn,
            # No configuration_values: the driver's node DaemonSet tolerates every taint by default
            # (``node.tolerations: [{operator: Exists}]``), so it also runs on the tainted GPU nodes.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.aws_provider, depends_on=[*args.depends_on, *mount_targets]
            ),
        )
        sc = k8s.storage.v1.StorageClass(
            f"{name}-sc",
            metadata={"name": args.storage_class_name},
            provisioner="efs.csi.aws.com",
            parameters=fs.id.apply(efs_storage_class_parameters),
            reclaim_policy=efs_reclaim_policy(args.protected),
            volume_binding_mode="Immediate",
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[addon]),
        )
        self.file_system_id = fs.id
        self.storage_class = sc.metadata.apply(lambda m: m["name"] if isinstance(m, dict) else m.name)
        self.register_outputs({"file_system_id": self.file_system_id, "storage_class": self.storage_class})
