"""prod's Llama-family model (vLLM) on the real kube-apiserver + kube-scheduler, nodes simulated by kwok: its download
Job runs on a CPU node and completes, its Triton pods take exactly their GPUs (TP) on the GPU nodes, packed beside
the other 1-GPU model so the 4-GPU model keeps whole nodes, the API server accepts every object of it, and the
gateway's pods (admitted in the restricted namespace) mount its checkpoint read-only for its chat template."""

from __future__ import annotations

from components.common.target import GPU_RESOURCE
from components.gateway.spec import CHECKPOINT_MOUNT
from components.platform.aws.nodegroups import POOL_LABEL, SYSTEM_POOL
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import Plan
from tests.system.controlplane.prod import deploy, deploy_and_schedule, gpus
from tritonft.kube import wait_for

LLAMA = "llama-3-1-8b"


def test_the_vllm_models_pods_take_their_tensor_parallel_gpus_on_gpu_nodes(cluster: Cluster, prod_plan: Plan) -> None:
    settings = prod_plan.settings
    (model,) = [m for m in settings.models if m.name == LLAMA]
    assert model.family.is_vllm
    pods = [p for p in deploy_and_schedule(cluster, prod_plan) if p["metadata"]["labels"]["triton-ft/model"] == LLAMA]
    assert len(pods) == settings.serving.replicas_min
    for pod in pods:
        assert gpus(pod) == model.tensor_parallel == 1
        node = cluster.kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"]["triton-ft.io/accelerator"] == "nvidia"
        assert int(node["status"]["allocatable"][GPU_RESOURCE]) >= gpus(pod)
        (container,) = pod["spec"]["containers"]
        assert "/server-vllm@sha256:" in container["image"]


def test_the_vllm_model_packs_beside_the_other_one_gpu_model_leaving_whole_nodes(
    cluster: Cluster, prod_plan: Plan
) -> None:
    pods = deploy_and_schedule(cluster, prod_plan)
    by_model: dict[str, set[str]] = {}
    for pod in pods:
        by_model.setdefault(pod["metadata"]["labels"]["triton-ft/model"], set()).add(pod["spec"]["nodeName"])
    assert by_model[LLAMA] == by_model["gpt-j-6b"], "the 1-GPU pods share one node"
    assert by_model[LLAMA].isdisjoint(by_model["t5-3b"]), "each t5-3b replica keeps a whole node"


def test_the_vllm_models_download_job_runs_on_a_cpu_node_and_completes(cluster: Cluster, prod_plan: Plan) -> None:
    objs, applied = deploy(cluster, prod_plan)
    (job,) = [o["metadata"]["name"] for o in objs if o["kind"] == "Job" and LLAMA in o["metadata"]["name"]]
    conversion_pods = cluster.pods("app.kubernetes.io/component=conversion")
    (pod,) = [p for p in conversion_pods if p["metadata"]["labels"]["job-name"] == job]
    node = cluster.kube.get("v1", "Node", pod["spec"]["nodeName"])
    assert node["metadata"]["labels"][POOL_LABEL] == SYSTEM_POOL
    assert pod["status"]["phase"] == "Succeeded"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    secret = volumes["hf-token"]["secret"]["secretName"]
    made = {f"{o['kind']}/{o['metadata']['name']}" for o in objs}
    assert f"Secret/{secret}" in made, "the gated model's token Secret is one the plan makes (from hfToken)"
    mine = {f"{o['kind']}/{o['metadata']['name']}" for o in objs if LLAMA in o["metadata"]["name"]}
    assert {f"Deployment/{prod_plan.deployment('prod-llama-3-1-8b')}", f"Job/{job}"} <= mine
    assert mine <= set(applied), "the API server accepted every object of the vLLM model"


def test_the_gateway_pods_mount_the_vllm_models_checkpoint_read_only_and_read_its_tokenizer_config(
    cluster: Cluster, prod_plan: Plan
) -> None:
    deploy(cluster, prod_plan)
    replicas = prod_plan.settings.serving.gateway.replicas_min
    selector = "app.kubernetes.io/component=gateway"
    pods = wait_for(
        f"{replicas} gateway pods admitted",
        lambda: (found := cluster.pods(selector)) and len(found) == replicas and found,
        90,
    )
    (model,) = [m for m in prod_plan.settings.models if m.name == LLAMA]
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        (mount,) = [m for m in container["volumeMounts"] if m.get("subPath")]
        assert mount == {
            "name": "store",
            "mountPath": f"{CHECKPOINT_MOUNT}/{LLAMA}",
            "subPath": f"hf/{LLAMA}/{model.revision}",
            "readOnly": True,
        }
        (store,) = [v for v in pod["spec"]["volumes"] if v["name"] == "store"]
        assert store["persistentVolumeClaim"]["readOnly"] is True
        command = container["command"]
        assert command[command.index("--tokenizer-config") + 1] == (
            f"{LLAMA}={CHECKPOINT_MOUNT}/{LLAMA}/tokenizer_config.json"
        )
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
