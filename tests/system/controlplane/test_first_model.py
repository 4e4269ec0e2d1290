"""The newcomer's path on their own cluster, as the README and "Deploy on your cluster" write it, up to ``pulumi
up``: the first stack of "Your first stack" saved unchanged as ``stacks/Pulumi.mine.yaml`` in a checkout, its
kubeconfig context ``my-cluster`` found through ``$KUBECONFIG``, and the pages' commands (``tritonft synth --stack
mine --quiet``, ``tritonft preflight --stack mine``) run there as written, on a cluster shaped as that page says one
must be (a tainted GPU node with the device plugin's resource, a ReadWriteMany storage class, an ingress class, the
resource metrics API for the gateway's autoscaler): every check passes, the dry-run of the plan included."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.stackcli.doc_commands import page_commands, run_as_written
from tests.stackcli.test_first_stack import first_stack, project_with_the_first_stack
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import NodeShape
from tests.system.controlplane.server import ControlPlane
from tests.system.controlplane.test_preflight import metrics_api_service
from tritonft.kube import wait_for

CONTEXT = "my-cluster"
README = "README.md"
YOUR_CLUSTER = "docs/deploy/your-cluster.md"


def kubeconfig_named(plane: ControlPlane, context: str, path: Path) -> Path:
    """The test cluster's kubeconfig with its one context renamed to the stack's ``kubeContext``."""
    config = yaml.safe_load((plane.workdir / "kubeconfig").read_text())
    (entry,) = config["contexts"]
    entry["name"] = context
    config["current-context"] = "some-other-context"  # the stack's kubeContext must be what selects it
    config["contexts"].append({"name": "some-other-context", "context": {"cluster": "nowhere", "user": "nobody"}})
    path.write_text(yaml.safe_dump(config))
    return path


def shape_as_documented(cluster: Cluster, storage_class: str) -> None:
    """What "Deploy on your cluster" says the cluster needs, as a common GPU cluster has it."""
    cluster.add_nodes(
        [
            NodeShape(  # the NVIDIA device plugin's resource, and the taint GPU node pools commonly carry
                f"{cluster.namespace}-l4-0",
                {"nvidia.com/gpu.product": "NVIDIA-L4"},
                [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "200Gi", "nvidia.com/gpu": "1"},
            ),
            NodeShape(
                f"{cluster.namespace}-cpu-0",
                {},
                [],
                {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "200Gi"},
            ),
        ]
    )
    cluster.apply_cluster_scoped(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": "nfs.csi.k8s.io",
        }
    )
    cluster.kube.apply(  # shared with the other preflight tests under this name, so left in place
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "nginx"},
            "spec": {"controller": "k8s.io/ingress-nginx"},
        }
    )
    service = metrics_api_service("local")  # metrics-server's API, which the gateway's CPU autoscaler reads
    cluster.apply_cluster_scoped(service)

    def available() -> bool:
        got = cluster.kube.get(service["apiVersion"], "APIService", service["metadata"]["name"])
        return any(c["type"] == "Available" for c in got.get("status", {}).get("conditions", []))

    wait_for("the API server to judge the metrics APIService", available, 30)


def test_the_pages_commands_pass_on_a_cluster_shaped_as_the_page_says(
    control_plane: ControlPlane, cluster: Cluster, tmp_path: Path
) -> None:
    readme, page = page_commands(README, __file__), page_commands(YOUR_CLUSTER, __file__)
    assert [argv[1] for argv in readme] == ["synth", "preflight"] and [argv[1] for argv in page] == ["preflight"]
    assert page[0] in readme, "the README and the page check the cluster with the same command"
    values = first_stack()
    assert values["kubeContext"] == CONTEXT, "the page's stack names another context: update CONTEXT"
    project = project_with_the_first_stack(tmp_path)
    shape_as_documented(cluster, str(values["storageClass"]))
    kubeconfig = {"KUBECONFIG": str(kubeconfig_named(control_plane, CONTEXT, tmp_path / "kubeconfig"))}

    done = [run_as_written(argv, project, kubeconfig) for argv in readme]

    synth, preflight = done
    assert synth.returncode == 0, synth.stderr[-3000:]
    checks = {line.split(":")[0]: line for line in preflight.stdout.splitlines()}
    assert preflight.returncode == 0, json.dumps(checks, indent=1) + preflight.stderr[-3000:]
    model = values["models"][0]["name"]  # type: ignore[index]
    assert {
        "PASS api",
        "PASS gpu-nodes",
        "PASS gpu-placement",
        f"PASS gpu-shape {model}",
        "PASS storage-class",
        "PASS ingress-class",
        "PASS metrics-apis",
        "PASS dry-run",
    } <= set(checks)
    assert "accepted by the API server" in checks["PASS dry-run"]
