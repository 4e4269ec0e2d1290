"""The model store's claim on a real kube-apiserver: a new model used to grow it, which the server refuses.

The claim is the one ``ModelStore`` registers (run under the mock engine, its inputs taken as the manifest), bound
to a volume of a StorageClass without ``allowVolumeExpansion``, as the EFS class is. The old plan sized the claim
from the models (``components.common.sizing.store_size_gi``), so adding a model patched ``resources.requests``;
the plan now requests a size the models never change.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.common.sizing import STORE_HEADROOM, store_size_gi
from components.models.store import ModelStore, ModelStoreArgs
from tests.components.fixtures import GPTJ_6B, T5_SMALL, make_target
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import bind_store
from tritonft.kube import ApiError, wait_for
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, mock_engine, run_program

PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def planned_claim(models: tuple[ModelSpec, ...], namespace: str, storage_class: str) -> dict[str, Any]:
    """The claim exactly as the program registers it for ``models`` on an EFS (elastic) store."""
    mocks = RecordingMocks()
    with mock_engine(mocks, project="triton-ft", stack="test"):
        run_program(lambda: ModelStore("store", ModelStoreArgs(target=make_target(), models=models, elastic=True)))
    (claim,) = mocks.of_type(PVC)
    spec = {**claim.inputs["spec"], "storageClassName": storage_class}
    meta = {**claim.inputs["metadata"], "namespace": namespace}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def old_plan_claim(models: tuple[ModelSpec, ...], namespace: str, storage_class: str) -> dict[str, Any]:
    """The same claim as the program planned it before: sized from the models' converted bytes."""
    claim = planned_claim(models, namespace, storage_class)
    claim["spec"]["resources"] = {"requests": {"storage": f"{store_size_gi(models, STORE_HEADROOM)}Gi"}}
    return claim


def bound_claim(cluster: Cluster, claim: dict[str, Any]) -> dict[str, Any]:
    """Apply ``claim`` with a volume of its class, as EFS's provisioner would, and wait for the binding."""
    cluster.kube.apply(claim)
    bind_store(cluster.kube, [claim], pv_prefix=cluster.namespace)
    name = claim["metadata"]["name"]

    def bound() -> bool:
        got = cluster.kube.get("v1", "PersistentVolumeClaim", name, cluster.namespace)
        return bool(got.get("status", {}).get("phase") == "Bound")

    wait_for(f"claim {name} to be Bound", bound, 60)
    return dict(cluster.kube.get("v1", "PersistentVolumeClaim", name, cluster.namespace))


def efs_like_class(cluster: Cluster) -> str:
    """A StorageClass as the EFS one: EFS's CSI provisioner, no ``allowVolumeExpansion``."""
    name = f"{cluster.namespace}-efs"
    cluster.apply_cluster_scoped(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "efs.csi.aws.com",
            "volumeBindingMode": "Immediate",
        }
    )
    return name


def test_the_old_plan_fails_at_the_claim_when_a_model_is_added(cluster: Cluster) -> None:
    storage_class = efs_like_class(cluster)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    before = old_plan_claim((T5_SMALL,), cluster.namespace, storage_class)
    after = old_plan_claim((T5_SMALL, GPTJ_6B), cluster.namespace, storage_class)
    assert after["spec"]["resources"] != before["spec"]["resources"]
    bound_claim(cluster, before)
    with pytest.raises(ApiError) as refused:
        cluster.kube.apply(after)
    assert refused.value.status in (403, 422)
    assert "resize" in refused.value.message or "expansion" in refused.value.message, refused.value.message


def test_the_plan_leaves_the_claim_untouched_when_a_model_is_added(cluster: Cluster) -> None:
    storage_class = efs_like_class(cluster)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    before = planned_claim((T5_SMALL,), cluster.namespace, storage_class)
    after = planned_claim((T5_SMALL, GPTJ_6B), cluster.namespace, storage_class)
    assert after == before
    live = bound_claim(cluster, before)
    applied = cluster.kube.apply(after)
    assert applied["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    assert applied["spec"]["resources"] == live["spec"]["resources"]
