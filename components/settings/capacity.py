"""GPU capacity, rollout and placement decisions, as pure functions (no Pulumi, no Kubernetes calls).

Three failures a manifest check cannot see, each decided here before any resource exists:

* **capacity**: the Triton pods of every model at ``replicasMin`` must fit the GPU nodes that exist at the start
  (or the node autoscaler's maximum, with a warning that the first ``up`` waits for nodes), and at
  ``replicasMax`` they must fit ``gpuNodesMax``. Nodes are counted by packing whole pods onto nodes
  (first-fit decreasing): a sum of GPUs would call 2 x 3-GPU pods on two 4-GPU nodes "6 <= 8" and be wrong.
  With GPUs per pod a power of two that divides the node's count (the settings enforce it) the packing is exact.
* **rollout**: a surge pod needs a free slot of its shape. A model surges (``maxSurge 1, maxUnavailable 0``) only
  when every surging model's extra pod still fits the nodes that can exist at ``replicasMax``; otherwise it
  replaces one pod at a time (``maxSurge 0, maxUnavailable 1``), which its PodDisruptionBudget
  (``maxUnavailable 1``) allows, so a change rolls out on a full cluster instead of hanging.
* **placement**: models that take a whole node need nodes with every GPU free. Pods that take part of a node
  prefer nodes that already run other part-node Triton pods (pod affinity on the node), so small models pack
  together and leave whole nodes to the big ones; the default scheduler would spread them (it scores CPU and
  memory, never GPUs, as least-allocated).

Only GPU models count: an encoder on ``device: cpu`` takes no GPU (its pods land on CPU nodes), so it is left out
of the GPU packing, and its rollout may always surge (a surge pod needs no free GPU). On ``aws`` one replica of a
CPU model must fit a system node (``systemInstanceType``: :func:`cpu_fit_verdict`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.settings.gpus import GIB
from components.settings.model import ClusterSettings
from tritonft.gpu_pool import GpuPool
from tritonft.probe.judge_reference import has_reference
from tritonft.reference_memory import reference_memory_bytes
from tritonft.spec import ModelSpec

PACKING_LABEL = "triton-ft.io/gpu-packing"
"""On Triton pods: ``partial`` when the pod takes part of a node's GPUs, ``whole`` when it takes them all, ``cpu``
when it takes none (``device: cpu``)."""
PLACEMENT_ANNOTATION = "triton-ft.io/placement"
"""On Triton Deployments: where the model's pods can land, in words."""
HOSTNAME_KEY = "kubernetes.io/hostname"
MIB = 1024**2


@dataclass(frozen=True)
class ModelShape:
    """How many GPUs one pod of a model takes (TP x PP; one pod per node, FT drives all its GPUs)."""

    name: str
    gpus_per_pod: int


@dataclass(frozen=True)
class CapacityVerdict:
    """Problems refuse the plan; warnings are printed and the plan goes ahead."""

    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    nodes_at_min: int
    nodes_at_max: int


def nodes_needed(pods: Iterable[int], gpus_per_node: int) -> int:
    """Nodes needed to hold pods of the given GPU counts, packed first-fit decreasing (a pod never splits; a pod
    of 0 GPUs needs no GPU node)."""
    free: list[int] = []
    for gpus in sorted((g for g in pods if g > 0), reverse=True):
        if gpus > gpus_per_node:
            raise ValueError(f"a pod of {gpus} GPUs cannot fit a node of {gpus_per_node}")
        for i, left in enumerate(free):
            if left >= gpus:
                free[i] = left - gpus
                break
        else:
            free.append(gpus_per_node - gpus)
    return len(free)


def spread_nodes_needed(models: Sequence[ModelShape], replicas: int, gpus_per_node: int) -> int:
    """Nodes needed for ``replicas`` pods of each model with no two pods of one model on a node (each model's
    replicas spread over nodes, :func:`spread_affinity`), part-node pods of different models packed together;
    first-fit decreasing as :func:`nodes_needed`."""
    nodes: list[tuple[int, set[str]]] = []  # (GPUs left, models on it)
    pods = sorted((m.gpus_per_pod, m.name) for m in models for _ in range(replicas) if m.gpus_per_pod > 0)
    for gpus, name in reversed(pods):
        if gpus > gpus_per_node:
            raise ValueError(f"a pod of {gpus} GPUs cannot fit a node of {gpus_per_node}")
        for i, (left, held) in enumerate(nodes):
            if left >= gpus and name not in held:
                nodes[i] = (left - gpus, held | {name})
                break
        else:
            nodes.append((gpus_per_node - gpus, {name}))
    return len(nodes)


def _pods(models: Sequence[ModelShape], replicas: int, extra: Iterable[ModelShape] = ()) -> list[int]:
    return [m.gpus_per_pod for m in models for _ in range(replicas)] + [m.gpus_per_pod for m in extra]


def _ask(models: Sequence[ModelShape], replicas: int) -> str:
    parts = " + ".join(f"{replicas} x {m.gpus_per_pod} ({m.name})" for m in models)
    return f"{parts} = {sum(_pods(models, replicas))} GPUs"


def check_capacity(
    models: Sequence[ModelShape], replicas_min: int, replicas_max: int, pool: GpuPool, *, nodes_key: str | None = None
) -> CapacityVerdict:
    """Whether every model's pods fit the pool at ``replicas_min`` and ``replicas_max``; messages name the keys
    (``nodes_key``: the one key that sets a fixed pool's nodes, an existing cluster's ``gpuNodes``)."""
    problems: list[str] = []
    warnings: list[str] = []
    per_node = pool.gpus_per_node
    too_big = [m for m in models if m.gpus_per_pod > per_node]
    for m in too_big:
        problems.append(
            f"models.{m.name}: needs {m.gpus_per_pod} GPUs in one pod, but a {pool.node_type} node has {per_node}; "
            "use a larger gpuInstanceType or lower tensorParallel x pipelineParallel"
        )
    fitting = [m for m in models if m.gpus_per_pod <= per_node]
    # At replicasMin each model's replicas are on nodes of their own (one node lost never takes a model down);
    # beyond it the spread is a preference and pods pack (:func:`spread_affinity`).
    at_min = spread_nodes_needed(fitting, replicas_min, per_node)
    at_max = nodes_needed(_pods(fitting, max(replicas_max, replicas_min)), per_node)
    if too_big:
        return CapacityVerdict(tuple(problems), (), at_min, at_max)
    unit = f"{pool.node_type} node(s) of {per_node} GPUs"
    if at_min > pool.nodes_min:
        if pool.autoscaled and at_min <= pool.nodes_max:
            warnings.append(
                f"replicasMin: {_ask(fitting, replicas_min)} need {at_min} {unit}, gpuNodesMin is {pool.nodes_min}: "
                f"the first `pulumi up` waits while the node autoscaler adds {at_min - pool.nodes_min} node(s); "
                f"set gpuNodesMin (and gpuNodesDesired) to {at_min} to start with them"
            )
        elif nodes_key is not None:
            problems.append(
                f"replicasMin: {_ask(fitting, replicas_min)} need {at_min} {unit}, but only {nodes_key} "
                f"{pool.nodes_min} exist; raise {nodes_key} to {at_min} (with the nodes) or lower replicasMin"
            )
        else:
            limit = f"gpuNodesMax {pool.nodes_max}" if pool.autoscaled else f"gpuNodesMin {pool.nodes_min}"
            problems.append(
                f"replicasMin: {_ask(fitting, replicas_min)} need {at_min} {unit}, but only {limit} can exist; "
                f"raise gpuNodesMin/gpuNodesMax to {at_min} or lower replicasMin"
            )
    if replicas_max > replicas_min and at_max > pool.reachable_nodes:
        key = nodes_key or ("gpuNodesMax" if pool.autoscaled else "gpuNodesMin (no node autoscaler)")
        problems.append(
            f"replicasMax: {_ask(fitting, replicas_max)} need {at_max} {unit}, but {key} is "
            f"{pool.reachable_nodes}; raise {key.split(' ', maxsplit=1)[0]} to {at_max} or lower replicasMax"
        )
    return CapacityVerdict(tuple(problems), tuple(warnings), at_min, at_max)


@dataclass(frozen=True)
class Rollout:
    """A Deployment's rolling-update parameters and why they were chosen."""

    max_surge: int
    max_unavailable: int
    reason: str

    def strategy(self) -> dict[str, Any]:
        return {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": self.max_surge, "maxUnavailable": self.max_unavailable},
        }


def surging_models(models: Sequence[ModelShape], replicas_max: int, pool: GpuPool) -> frozenset[str]:
    """Models whose rollout may add one pod beyond ``replicas_max``: all of them if their extra pods fit together
    on the nodes that can exist, else the largest shapes drop out first (they need a whole free node each)."""
    surging = sorted(models, key=lambda m: m.gpus_per_pod)
    while surging:
        if nodes_needed(_pods(models, replicas_max, surging), pool.gpus_per_node) <= pool.reachable_nodes:
            break
        surging.pop()
    return frozenset(m.name for m in surging)


def nodes_for_a_surge(models: Sequence[ModelShape], replicas_max: int, pool: GpuPool, name: str) -> int:
    """The GPU nodes that must be reachable for model ``name`` to surge (so to have room for a judged candidate):
    :func:`surging_models` lets the smaller shapes surge first, so every model with pods as small as its surges too."""
    ordered = sorted(models, key=lambda m: m.gpus_per_pod)
    names = [m.name for m in ordered]
    surging = ordered[: names.index(name) + 1]
    return nodes_needed(_pods(models, replicas_max, surging), pool.gpus_per_node)


def rollout_for(model: ModelShape, surging: frozenset[str], replicas_min: int) -> Rollout:
    """Surge when the extra pod has room; otherwise replace one pod at a time (the PDB allows one down). A model
    without GPUs (``device: cpu``) always surges: its extra pod needs no free GPU."""
    if model.gpus_per_pod == 0:
        return Rollout(1, 0, "a CPU model: a surge pod needs no free GPU, so no capacity is lost")
    if model.name in surging:
        return Rollout(1, 0, "a surge pod fits the GPU nodes that can exist at replicasMax: no capacity is lost")
    reason = "no free node for a surge pod at replicasMax: replace one pod at a time"
    if replicas_min <= 1:
        reason += " (with one replica the model is down while its pod restarts)"
    return Rollout(0, 1, reason)


def fixed_rollout() -> Rollout:
    """Without capacity facts (an existing cluster of unknown size): never needs a free slot."""
    return Rollout(0, 1, "cluster size unknown: replace one pod at a time, which needs no free GPUs")


def packing(gpus_per_pod: int, gpus_per_node: int) -> str:
    """``whole`` / ``partial`` node of GPUs; ``cpu`` for a pod without GPUs (``device: cpu``: packed with nothing)."""
    if gpus_per_pod == 0:
        return "cpu"
    return "whole" if gpus_per_pod >= gpus_per_node else "partial"


PACKING_WEIGHT = 50
"""Weight of the packing preference: half the spread's (:func:`spread_affinity`), so a node holding another
model's part-node pod scores above an empty node, and a node holding one of the model's own pods below both."""
SPREAD_WEIGHT = 100
ZONE_KEY = "topology.kubernetes.io/zone"


def spread_affinity(pod_selector: dict[str, str]) -> dict[str, Any]:
    """Pod anti-affinity that keeps a model's replicas (``pod_selector``) on different nodes.

    Preferred at the maximum weight, not required: a required rule would leave a replica pending whenever the
    model has more replicas than there are nodes without it (at ``replicasMax`` the pods pack: the capacity check
    counts them so), and topology spread's ``DoNotSchedule`` counts every GPU node, whole-node models' included, as
    a domain (a second pod of the model could never join a node while one of those has none). The capacity check
    sizes ``gpuNodesMin`` so that at ``replicasMin`` every replica has a node of its own
    (:func:`spread_nodes_needed`)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": SPREAD_WEIGHT,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": dict(pod_selector)},
                        "topologyKey": HOSTNAME_KEY,
                    },
                }
            ]
        }
    }


def zone_spread(pod_selector: dict[str, str]) -> list[dict[str, Any]]:
    """Topology spread of a model's replicas over zones (where the cluster's nodes have zones; ``ScheduleAnyway``:
    a GPU node group in one zone still schedules)."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": dict(pod_selector)},
        }
    ]


def placement_affinity(gpus_per_pod: int, gpus_per_node: int) -> dict[str, Any] | None:
    """Pod affinity that packs part-node Triton pods onto the same nodes; None for whole-node and CPU pods.

    Preferred, not required: a pod still schedules when the node with company is full. Its weight
    (:data:`PACKING_WEIGHT`) outweighs the scheduler's least-allocated spreading of CPU and memory but not the
    model's own spread (:func:`spread_affinity`): small models pack with each other, never with themselves.
    """
    if packing(gpus_per_pod, gpus_per_node) != "partial":
        return None
    return {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": PACKING_WEIGHT,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {PACKING_LABEL: "partial"}},
                        "topologyKey": HOSTNAME_KEY,
                    },
                }
            ]
        }
    }


def placement_note(gpus_per_pod: int, gpus_per_node: int, node_type: str) -> str:
    """Where a model's pods can land, in words (the Deployment's placement annotation)."""
    if packing(gpus_per_pod, gpus_per_node) == "cpu":
        return "on CPU nodes (device: cpu), no GPU: never on, and never packed with, the GPU nodes' Triton pods"
    if packing(gpus_per_pod, gpus_per_node) == "whole":
        return f"one pod per {node_type} node, taking all {gpus_per_node} GPUs; needs a node with every GPU free"
    per = gpus_per_node // gpus_per_pod
    return (
        f"{gpus_per_pod} of {gpus_per_node} GPUs of a {node_type} node; packed with other part-node models "
        f"(up to {per} such pods per node), leaving whole nodes to whole-node models"
    )


def placements(models: Sequence[ModelShape], pool: GpuPool) -> Mapping[str, str]:
    return {m.name: placement_note(m.gpus_per_pod, pool.gpus_per_node, pool.node_type) for m in models}


# --- a stack's settings mapped onto the rules above ------------------------------------------------------------
def model_shapes(models: Sequence[ModelSpec]) -> tuple[ModelShape, ...]:
    """The GPU models' shapes (a ``device: cpu`` model occupies no GPU node and is left out)."""
    return tuple(ModelShape(m.name, m.gpus) for m in models if m.gpus > 0)


def gpu_pool(cluster: ClusterSettings) -> GpuPool | None:
    """The GPU nodes of an ``aws`` stack (its node group and cluster-autoscaler); None when the node count is
    not the stack's to say (an existing cluster: ``tritonft preflight`` checks that one)."""
    if cluster.aws is None:
        return None
    aws = cluster.aws
    return GpuPool(
        node_type=cluster.gpu_node.name,
        gpus_per_node=cluster.gpu_node.gpus,
        nodes_min=aws.gpu_nodes_min,
        nodes_max=aws.gpu_nodes_max,
        # cluster-autoscaler is installed on every aws stack; it can add nodes only when the group may grow.
        autoscaled=aws.gpu_nodes_max > aws.gpu_nodes_min,
    )


def capacity_pool(cluster: ClusterSettings) -> GpuPool | None:
    """The GPU nodes the stack plans on: an ``aws`` stack's node group, or the ``gpuNodes`` an existing cluster's
    stack states (a fixed count: nothing the stack knows of adds nodes); None when the stack does not know them."""
    pool = gpu_pool(cluster)
    if pool is not None or cluster.kubernetes is None or cluster.kubernetes.gpu_nodes is None:
        return pool
    nodes = cluster.kubernetes.gpu_nodes
    return GpuPool(
        node_type=cluster.gpu_node.name,
        gpus_per_node=cluster.gpu_node.gpus,
        nodes_min=nodes,
        nodes_max=nodes,
        autoscaled=False,
    )


def nodes_key(cluster: ClusterSettings) -> str:
    """The stack key that sets how many GPU nodes can exist: ``gpuNodesMax`` on aws, ``gpuNodes`` otherwise."""
    return "gpuNodesMax" if cluster.aws is not None else "gpuNodes"


def capacity_verdict(
    cluster: ClusterSettings, models: Sequence[ModelSpec], replicas_min: int, replicas_max: int
) -> CapacityVerdict:
    pool = capacity_pool(cluster)
    if pool is None:
        return CapacityVerdict((), (), 0, 0)
    key = None if cluster.aws is not None else "gpuNodes"
    return check_capacity(model_shapes(models), replicas_min, replicas_max, pool, nodes_key=key)


# --- CPU models on the CPU nodes -----------------------------------------------------------------------------------
_CPU_TYPE = re.compile(
    r"^(?P<kind>[cmr])(?P<gen>\d)(?P<variant>[a-z]*)(-flex)?\.(?P<size>medium|large|(?P<n>\d*)xlarge)$"
)
GIB_PER_VCPU = {"c": 2, "m": 4, "r": 8}
"""EC2's compute (c), general-purpose (m) and memory (r) families, 5th generation on: 2, 4 and 8 GiB per vCPU at
every size (``medium`` = 1 vCPU, ``large`` = 2, ``xlarge`` = 4, ``Nxlarge`` = 4N)."""
IRREGULAR_CPU_FAMILIES = frozenset({"c5n"})
"""Families of those letters whose memory is not the ratio above (c5n: 5.25 GiB per 2 vCPUs)."""
EKS_RESERVED_MEMORY_MIB = 255 + 11 * 110 + 100
"""What the EKS node images keep from the pods: kube-reserved 255 MiB + 11 MiB per pod (at most 110 pods), and
the 100 MiB hard-eviction threshold."""
VM_MEMORY_OVERHEAD = 0.075
"""The share of an instance type's nominal memory the kubelet does not see (the hypervisor's and the kernel's):
Karpenter's ``vmMemoryOverheadPercent`` default, for the same estimate (a 32 GiB m6i.2xlarge reports ~31 GiB)."""
DAEMONSET_MEMORY_MIB = 512
"""What the DaemonSets on every system node request (the VPC CNI, kube-proxy, the EBS and EFS CSI node plugins,
node-exporter, Fluent Bit): an allowance, left to the Jobs' and pods' requests no more."""
CPU_SERVER_MIN_MEMORY = GIB
"""tritonserver, its backends and the tokenizer's Python stub, before any model weights."""
ORT_LOAD_COPIES = 2
"""ONNX Runtime holds the parsed ``model.onnx`` and the session's weights at once while it loads."""


@dataclass(frozen=True)
class CpuNode:
    """A CPU node's allocatable resources (capacity minus what the node image reserves)."""

    node_type: str
    vcpus: int
    allocatable_cpu: float
    allocatable_memory: int
    """Bytes."""


def _reserved_cpu(vcpus: int) -> float:
    """EKS kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest."""
    shares = [0.06, 0.01, 0.005, 0.005]
    return sum(shares[i] if i < len(shares) else 0.0025 for i in range(vcpus))


def cpu_node(instance_type: str) -> CpuNode | None:
    """The allocatable shape of an EC2 c/m/r instance type (5th generation on), None for any other type."""
    match = _CPU_TYPE.match(instance_type)
    if match is None or int(match["gen"]) < 5:
        return None
    if f"{match['kind']}{match['gen']}{match['variant']}" in IRREGULAR_CPU_FAMILIES:
        return None
    size = match["size"]
    vcpus = 1 if size == "medium" else 2 if size == "large" else 4 * int(match["n"] or 1)
    memory = vcpus * GIB_PER_VCPU[match["kind"]] * GIB
    return CpuNode(
        node_type=instance_type,
        vcpus=vcpus,
        allocatable_cpu=vcpus - _reserved_cpu(vcpus),
        allocatable_memory=int(memory * (1 - VM_MEMORY_OVERHEAD)) - EKS_RESERVED_MEMORY_MIB * MIB,
    )


def cpu_replica_floor(model: ModelSpec) -> tuple[int, int]:
    """(CPUs, bytes) one replica of a CPU model needs at the least: one CPU per ONNX instance plus one for HTTP/gRPC
    and the tokenizer; 1 GiB for the server plus ONNX Runtime's load peak of each instance (2 x the ONNX weights).
    The Triton pod's own request (``components.common.sizing``) adds the batch's activations and ``/dev/shm``."""
    instances = max(1, model.instances)
    return instances + 1, CPU_SERVER_MIN_MEMORY + instances * ORT_LOAD_COPIES * model.weight_bytes


def _unknown_node(node_type: str, whether: str) -> str:
    return (
        f"systemInstanceType: the size of a {node_type} node is not known to the stack (it knows the c, m and r "
        f"families, 5th generation on), so whether {whether} is not checked before `up`"
    )


def cpu_fit_verdict(cluster: ClusterSettings, models: Sequence[ModelSpec]) -> tuple[list[str], list[str]]:
    """Whether one replica of every ``device: cpu`` model fits an aws stack's system node (problems, warnings).
    An existing cluster's CPU nodes are not the stack's to know: nothing is checked there."""
    on_cpu = [(i, m) for i, m in enumerate(models) if m.on_cpu]
    if cluster.aws is None or not on_cpu:
        return [], []
    node_type = cluster.aws.system_instance_type
    node = cpu_node(node_type)
    if node is None:
        names = ", ".join(m.name for _, m in on_cpu)
        return [], [_unknown_node(node_type, f"{names} fit(s) it on device cpu")]
    problems = []
    for i, m in on_cpu:
        cpus, memory = cpu_replica_floor(m)
        if cpus <= node.allocatable_cpu and memory <= node.allocatable_memory:
            continue
        problems.append(
            f"systemInstanceType: a {node_type} node ({node.allocatable_cpu:.2f} CPUs, "
            f"{node.allocatable_memory / GIB:.1f} GiB allocatable) cannot hold one replica of models[{i}] {m.name!r} "
            f"on device cpu, which needs at least {cpus} CPUs ({max(1, m.instances)} ONNX instance(s) + 1) and "
            f"{memory / GIB:.1f} GiB (2 x {m.weight_bytes / GIB:.2f} GiB of ONNX weights per instance + 1 GiB); use "
            "a larger systemInstanceType or fewer instances"
        )
    return problems, []


def reference_job_fit_verdict(cluster: ClusterSettings, models: Sequence[ModelSpec]) -> tuple[list[str], list[str]]:
    """Whether each generator's judge reference step (every weight at fp32, on the CPU: a FasterTransformer
    generator's reference Job, a Llama/Qwen2's vLLM Job) fits an aws stack's system node, beside the node's
    DaemonSets (problems, warnings). A Job that fits no node stays Pending until its deadline and fails ``up`` hours
    in: refused here instead. An existing cluster's nodes are not the stack's to know: preflight reads them."""
    generators = [(i, m) for i, m in enumerate(models) if has_reference(m)]
    if cluster.aws is None or not generators:
        return [], []
    node_type = cluster.aws.system_instance_type
    node = cpu_node(node_type)
    if node is None:
        names = ", ".join(m.name for _, m in generators)
        return [], [_unknown_node(node_type, f"the judge reference Jobs of {names} fit it")]
    room = node.allocatable_memory - DAEMONSET_MEMORY_MIB * MIB
    problems = []
    for i, m in generators:
        need = reference_memory_bytes(m)
        if need <= room:
            continue
        problems.append(
            f"systemInstanceType: a {node_type} node ({room / GIB:.1f} GiB left to pods beside its DaemonSets) cannot "
            f"hold the judge reference {'Job' if m.family.is_fastertransformer else 'step (its vLLM Job)'} of "
            f"models[{i}] {m.name!r}, which needs {need / GIB:.1f} GiB (every weight "
            "at fp32 on the CPU): it would stay Pending until its deadline; use a systemInstanceType with more memory "
            "(the r family has twice the m family's at the same vCPUs, e.g. r6i.2xlarge: 64 GiB)"
        )
    return problems, []
