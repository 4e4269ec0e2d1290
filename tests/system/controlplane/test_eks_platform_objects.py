"""The Kubernetes objects prod's EKS platform writes (its storage classes, the Alertmanager configuration Secret) on
a real kube-apiserver: accepted as written, and the model-store claim bound on the class the plan made for it.

What cannot run here is said where it is decided: the EFS and EBS CSI drivers, the file system policy and the VPC
CNI's network-policy agent exist only on AWS (``docs/aws.md``); the plan tests check their inputs."""

from __future__ import annotations

from typing import Any

from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan
from tests.system.controlplane.prod import deploy
from tritonft.kube import wait_for


def test_the_store_class_mounts_with_tls_and_iam_and_the_claim_binds_on_it(cluster: Cluster, prod_plan: Plan) -> None:
    objs, _ = deploy(cluster, prod_plan)
    kube = cluster.kube
    (claim,) = [o for o in objs if o["kind"] == "PersistentVolumeClaim"]
    class_name = claim["spec"]["storageClassName"]
    stored = kube.get("storage.k8s.io/v1", "StorageClass", class_name)
    assert stored["provisioner"] == "efs.csi.aws.com"
    assert stored["mountOptions"] == ["tls", "iam"]
    assert stored["reclaimPolicy"] == "Retain"  # prod keeps the access point and its models
    name = claim["metadata"]["name"]

    def bound_claim() -> dict[str, Any] | None:
        stored_claim: dict[str, Any] = kube.get("v1", "PersistentVolumeClaim", name, cluster.namespace)
        return stored_claim if stored_claim["status"].get("phase") == "Bound" else None

    bound = wait_for("the model-store claim to bind", bound_claim, 60)
    assert bound["spec"]["storageClassName"] == class_name


def test_prometheus_volumes_class_and_the_alertmanager_secret_are_accepted(cluster: Cluster, prod_plan: Plan) -> None:
    objs, applied = deploy(cluster, prod_plan)
    kube = cluster.kube
    (gp3,) = [o for o in objs if o["kind"] == "StorageClass" and o["provisioner"] == "ebs.csi.aws.com"]
    stored = kube.get("storage.k8s.io/v1", "StorageClass", gp3["metadata"]["name"])
    assert stored["volumeBindingMode"] == "WaitForFirstConsumer"
    assert stored["allowVolumeExpansion"] is True
    assert stored["parameters"] == {"type": "gp3", "encrypted": "true"}
    (secret,) = [o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == "alertmanager-triton-ft"]
    assert f"Secret/{secret['metadata']['name']}" in applied
    assert kube.get("v1", "Secret", secret["metadata"]["name"], secret["metadata"]["namespace"])["type"] == "Opaque"
