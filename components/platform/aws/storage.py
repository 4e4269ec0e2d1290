"""The ReadWriteMany model store on EFS: file system, mount targets, NFS security group, CSI driver, StorageClass.

Who can write the models (Triton runs whatever ``model.py`` and weights the store holds):

* the network: NFS only from the nodes' security group (not the VPC's CIDR);
* the file system policy (:func:`efs_file_system_policy`): TLS required, IAM required (only the node role may mount,
  and only through a mount target), only through an access point (whose fixed uid/gid and directory the CSI
  driver provisions per claim), and no root access (``ClientRootAccess`` is granted to no one, so root is squashed);
* the pods: IMDSv2 with hop limit 1 on the nodes keeps the node role's credentials from the pod network, so a pod
  cannot mount the file system itself; only the CSI driver (host network) does, with ``tls`` and ``iam``.
"""

from __future__ import annotations

import json
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


MOUNT_OPTIONS = ("tls", "iam")
"""How the CSI driver mounts: encrypted in transit, authorised by the node role (the file system policy needs both)."""


def efs_file_system_policy(file_system_arn: str, node_role_arn: str) -> str:
    """Deny anything without TLS, mount/write only for the node role through a mount target and an access point;
    root access is granted to no one."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyWithoutTls",
                    "Effect": "Deny",
                    "Principal": {"AWS": "*"},
                    "Action": "*",
                    "Resource": file_system_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
                {
                    "Sid": "DenyOutsideAccessPoints",
                    "Effect": "Deny",
                    "Principal": {"AWS": "*"},
                    "Action": ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                    "Resource": file_system_arn,
                    "Condition": {"Null": {"elasticfilesystem:AccessPointArn": "true"}},
                },
                {
                    "Sid": "NodesMountThroughAccessPoints",
                    "Effect": "Allow",
                    "Principal": {"AWS": node_role_arn},
                    "Action": ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
                    "Resource": file_system_arn,
                    "Condition": {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
                },
            ],
        },
        sort_keys=True,
    )


BACKUP_POLICY: aws.efs.BackupPolicyBackupPolicyArgsDict = {"status": "ENABLED"}
"""EFS automatic backups: AWS Backup's default plan for EFS (daily, kept 35 days, in the account's default vault).
A protected (prod) store is backed up: losing it otherwise means hours of re-conversion of every model and the
gated models' token again."""


@dataclass(frozen=True)
class EfsModelStoreArgs:
    vpc_id: pulumi.Input[str]
    node_security_group_id: pulumi.Input[str]
    """The only source NFS is allowed from (every node group carries it)."""
    node_role_arn: pulumi.Input[str]
    """The only principal the file system policy lets mount (the CSI driver mounts with the node's identity)."""
    private_subnet_ids: pulumi.Input[list[str]]
    subnet_count: int
    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_provider_url: pulumi.Input[str]
    protected: bool
    """Protect + retain the file system (and retain provisioned volumes): prod model data survives ``destroy``; and
    back it up (:data:`BACKUP_POLICY`)."""
    storage_class_name: str
    aws_provider: aws.Provider
    k8s_provider: k8s.Provider
    addon_version: pulumi.Input[str] | None = None
    """EKS add-on version of the EFS CSI driver; None = the default version for the cluster's Kubernetes."""
    depends_on: tuple[pulumi.Resource, ...] = ()
    """Resources the CSI add-on needs first (a node group: the add-on only becomes ACTIVE once its pods run)."""


class EfsModelStore(pulumi.ComponentResource):
    """EFS file system reachable from every private subnet, with the CSI driver and an RWX StorageClass."""

    file_system_id: pulumi.Output[str]
    """The EFS file system holding the model repository."""
    storage_class: pulumi.Output[str]
    """Name of the ReadWriteMany StorageClass backed by this file system."""
    storage_class_resource: k8s.storage.v1.StorageClass
    """The StorageClass itself: a claim on it depends on it (and through it on the CSI driver add-on)."""

    def __init__(self, name: str, args: EfsModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-ft:aws:EfsModelStore", name, {}, opts)
        aws_opts = pulumi.ResourceOptions(parent=self, provider=args.aws_provider)

        sg = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=args.vpc_id,
            description="NFS from the cluster nodes to the triton-ft model store",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=2049,
                    to_port=2049,
                    security_groups=[args.node_security_group_id],
                    description="NFS from the nodes",
                )
            ],
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
        if args.protected:
            aws.efs.BackupPolicy(
                f"{name}-backup",
                file_system_id=fs.id,
                backup_policy=BACKUP_POLICY,
                opts=pulumi.ResourceOptions(parent=self, provider=args.aws_provider),
            )
        policy = aws.efs.FileSystemPolicy(
            f"{name}-policy",
            file_system_id=fs.id,
            policy=pulumi.Output.all(fs.arn, args.node_role_arn).apply(
                lambda a: efs_file_system_policy(str(a[0]), str(a[1]))
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=args.aws_provider),
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
                parent=self, provider=args.aws_provider, depends_on=[*args.depends_on, *mount_targets, policy]
            ),
        )
        sc = k8s.storage.v1.StorageClass(
            f"{name}-sc",
            metadata={"name": args.storage_class_name},
            provisioner="efs.csi.aws.com",
            parameters=fs.id.apply(efs_storage_class_parameters),
            reclaim_policy=efs_reclaim_policy(args.protected),
            volume_binding_mode="Immediate",
            mount_options=list(MOUNT_OPTIONS),
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=[addon]),
        )
        self.file_system_id = fs.id
        self.storage_class_resource = sc
        self.storage_class = sc.metadata.apply(lambda m: m["name"] if isinstance(m, dict) else m.name)
        self.register_outputs({"file_system_id": self.file_system_id, "storage_class": self.storage_class})
