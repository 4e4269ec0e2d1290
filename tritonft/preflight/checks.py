"""The checks of ``tritonft preflight``, as pure functions over what the cluster reports (plain API dicts).

Each check yields one :class:`Check` line; the command gathers the cluster's objects and prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonft.gpu_pool import GpuPool
from tritonft.quantity import quantity_value

GPU_RESOURCE = "nvidia.com/gpu"
RWO_ONLY_PROVISIONERS = frozenset(
    {
        "ebs.csi.aws.com",
        "kubernetes.io/aws-ebs",
        "pd.csi.storage.gke.io",
        "kubernetes.io/gce-pd",
        "disk.csi.azure.com",
        "kubernetes.io/azure-disk",
        "rancher.io/local-path",
        "cinder.csi.openstack.org",
    }
)
"""Block-storage provisioners whose volumes cannot be mounted ReadWriteMany (the model store needs RWX)."""
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
CRD_FOR_ADDON = {
    "kube-prometheus-stack": ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"),
    "cert-manager": ("certificates.cert-manager.io",),
    "keda": ("scaledobjects.keda.sh",),
    "gateway-api": ("httproutes.gateway.networking.k8s.io", "grpcroutes.gateway.networking.k8s.io"),
    "envoy-gateway": (
        "securitypolicies.gateway.envoyproxy.io",
        "backendtrafficpolicies.gateway.envoyproxy.io",
    ),
}
"""CRDs each add-on brings (the stack needs them when it uses the add-on's feature)."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.detail}"


@dataclass(frozen=True)
class CpuModel:
    """One replica of a ``device: cpu`` model: its requests, as its Triton pod states them."""

    name: str
    cpu: str
    """CPU request (a Kubernetes quantity, e.g. ``2``)."""
    memory: str
    """Memory request (a Kubernetes quantity, e.g. ``1580Mi``)."""


@dataclass(frozen=True)
class TokenSecret:
    """An existing Secret a model's download Job mounts for its Hugging Face token (``hfTokenSecret``)."""

    model: str
    secret: str
    key: str
    """The key the Job mounts as the token file."""


@dataclass(frozen=True)
class Needs:
    """What one stack needs from the cluster it deploys to."""

    gpu_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, str]]
    models: Sequence[tuple[str, int]]
    """(model name, GPUs per pod) of the models on GPU nodes (``device: gpu``)."""
    storage_class: str | None
    """None = the cluster's default class; ignored when ``stack_storage_class``."""
    stack_storage_class: bool
    """The stack creates its storage class itself (``aws``: EFS)."""
    ingress_class: str
    stack_ingress_class: bool
    crds: Sequence[str]
    """CRDs the enabled features need that the stack does not install."""
    metrics_apis: Sequence[tuple[str, str]] = ()
    """(APIService, what reads it and what serves it) for the metrics APIs the autoscalers need and the stack does
    not install: without them an HPA never scales, and nothing else says so."""
    gpu_pool: GpuPool | None = None
    """The stack's own GPU node group (``aws``), whose nodes cluster-autoscaler adds on demand: GPU nodes missing
    or full now are not a failure while the group can grow. None: the cluster's nodes are all there is."""
    cpu_selector: Mapping[str, str] = field(default_factory=dict)
    """``cpuNodeSelector``: where the ``device: cpu`` models' Triton pods run (never on a GPU node)."""
    cpu_models: Sequence[CpuModel] = ()
    """The models served on CPU nodes, with what one replica requests."""
    edge: str = "ingress"
    """``gateway`` (Gateway API routes) or ``ingress``."""
    gateway: tuple[str, str] | None = None
    """(namespace, name) of the cluster's own Gateway the routes attach to; None = the stack makes its own."""
    hosts: Sequence[str] = ()
    """The hosts the stack's routes serve (the Gateway's listeners must accept each)."""
    namespace: str = ""
    """The stack's namespace (where its Jobs read the Secrets they mount)."""
    token_secrets: Sequence[TokenSecret] = ()
    """The existing Secrets the models' download Jobs mount (``hfTokenSecret``): the stack does not make them."""

    def can_add_gpu_node(self, gpu_nodes: int) -> bool:
        """cluster-autoscaler may add a node of the stack's GPU group (fewer than its most are running)."""
        return self.gpu_pool is not None and self.gpu_pool.autoscaled and gpu_nodes < self.gpu_pool.nodes_max

    def growth(self, gpu_nodes: int) -> str:
        pool = self.gpu_pool
        assert pool is not None
        return (
            f"cluster-autoscaler adds {pool.node_type} nodes ({pool.gpus_per_node} GPUs each) on demand, "
            f"{gpu_nodes} of at most {pool.nodes_max} running"
        )


def tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, str]]) -> bool:
    """Kubernetes' rule: same effect (or none given), and Exists on the key (or any key) or Equal key and value."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def gpus_of(node: Mapping[str, Any]) -> int:
    return int(node.get("status", {}).get("allocatable", {}).get(GPU_RESOURCE, "0"))


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def gpu_nodes(nodes: Sequence[Mapping[str, Any]], needs: Needs) -> Check:
    found = [n for n in nodes if gpus_of(n) > 0]
    if not needs.models:
        return Check("gpu-nodes", True, f"no model needs a GPU ({len(found)} GPU node(s) present)")
    if not found and needs.gpu_pool is not None and needs.gpu_pool.nodes_min == 0 and needs.can_add_gpu_node(0):
        return Check("gpu-nodes", True, f"none running (the stack's GPU node group is at 0); {needs.growth(0)}")
    if not found:
        fix = "install the NVIDIA device plugin or add GPU nodes"
        if needs.gpu_pool is not None and needs.gpu_pool.nodes_min > 0:
            fix = (
                f"the stack's GPU node group runs at least {needs.gpu_pool.nodes_min} {needs.gpu_pool.node_type} "
                "node(s): are they still joining, or is the NVIDIA device plugin not running on them?"
            )
        return Check("gpu-nodes", False, f"no node has allocatable {GPU_RESOURCE} ({len(nodes)} node(s)); {fix}")
    counts = sorted({gpus_of(n) for n in found})
    return Check("gpu-nodes", True, f"{len(found)} node(s) with allocatable {GPU_RESOURCE} ({counts} per node)")


NODE_STATE_TAINT_PREFIX = "node.kubernetes.io/"
"""Taints Kubernetes sets from a node's state (not-ready, unreachable, unschedulable, memory/disk/PID pressure): the
fix is the node, never a toleration in the stack."""


def _blocking_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in node.get("spec", {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def node_state(node: Mapping[str, Any]) -> str | None:
    """Why ``node`` takes no new pods whatever the stack tolerates (cordoned, not Ready, a node-state taint), or
    None when it takes them."""
    if node.get("spec", {}).get("unschedulable"):
        return "is cordoned"
    conditions = node.get("status", {}).get("conditions", [])
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        return "is not Ready (no Ready condition yet)"
    if ready.get("status") != "True":
        why = ": ".join(p for p in (ready.get("reason"), ready.get("message")) if p) or f"Ready={ready.get('status')}"
        return f"is not Ready ({why})"
    state = [_taint_text(t) for t in _blocking_taints(node) if t["key"].startswith(NODE_STATE_TAINT_PREFIX)]
    if state:
        return f"has the node-state taint {', '.join(state)}"
    return None


def usable(node: Mapping[str, Any], needs: Needs) -> bool:
    labels = node["metadata"].get("labels", {})
    return (
        node_state(node) is None
        and all(labels.get(k) == v for k, v in needs.gpu_selector.items())
        and all(tolerated(t, needs.tolerations) for t in _blocking_taints(node))
    )


def selector_and_taints(nodes: Sequence[Mapping[str, Any]], needs: Needs) -> Check:
    gpu = [n for n in nodes if gpus_of(n) > 0]
    if not needs.models:
        return Check("gpu-placement", True, "no model needs a GPU")
    ok = [n for n in gpu if usable(n, needs)]
    if ok:
        return Check("gpu-placement", True, f"{len(ok)} GPU node(s) match the selector and tolerations")
    if not gpu and needs.can_add_gpu_node(0):
        return Check("gpu-placement", True, "no GPU node now; the stack's node group labels and taints its nodes")
    selector = ", ".join(f"{k}={v}" for k, v in sorted(needs.gpu_selector.items())) or "(none)"
    problems = []
    stack_fixable = False
    for n in gpu:
        labels = n["metadata"].get("labels", {})
        missing = [f"{k}={v}" for k, v in sorted(needs.gpu_selector.items()) if labels.get(k) != v]
        untolerated = [
            _taint_text(t)
            for t in _blocking_taints(n)
            if not t["key"].startswith(NODE_STATE_TAINT_PREFIX) and not tolerated(t, needs.tolerations)
        ]
        why = [state] if (state := node_state(n)) else []
        if missing:
            why.append(f"lacks label {', '.join(missing)}")
        if untolerated:
            why.append(f"taint {', '.join(untolerated)} is not tolerated")
        stack_fixable = stack_fixable or bool(missing or untolerated)
        problems.append(f"{_name(n)} {' and '.join(why)}")
    detail = "; ".join(problems) if problems else "no GPU nodes"
    fix = (
        "fix gpuNodeSelector/gpuTolerations or the nodes"
        if stack_fixable or not problems
        else "the nodes must be Ready and schedulable (kubectl describe node; kubectl uncordon)"
    )
    return Check("gpu-placement", False, f"no GPU node takes the Triton pods (selector {selector}): {detail}; {fix}")


def free_gpus(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> int:
    return gpus_of(node) - int(_requested(node, pods, GPU_RESOURCE))


def model_shapes_fit(
    nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], needs: Needs
) -> list[Check]:
    gpu_count = sum(1 for n in nodes if gpus_of(n) > 0)
    candidates = [n for n in nodes if gpus_of(n) > 0 and usable(n, needs)]
    free = {_name(n): free_gpus(n, pods) for n in candidates}
    most = max(free.values(), default=0)
    pool = needs.gpu_pool
    checks = []
    for model, gpus in needs.models:
        if most >= gpus:
            best = max(free, key=lambda k: free[k])
            checks.append(Check(f"gpu-shape {model}", True, f"needs {gpus} GPU(s) on one node; {best} has {most} free"))
        elif pool is not None and pool.gpus_per_node >= gpus and needs.can_add_gpu_node(gpu_count):
            checks.append(
                Check(
                    f"gpu-shape {model}",
                    True,
                    f"needs {gpus} GPU(s) on one node; none has them free now, {needs.growth(gpu_count)}",
                )
            )
        else:
            checks.append(
                Check(
                    f"gpu-shape {model}",
                    False,
                    f"needs {gpus} GPU(s) on one node, but the most free on a usable GPU node is {most}; "
                    "use nodes with more GPUs or lower tensorParallel",
                )
            )
    return checks


GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""Set by NVIDIA GPU feature discovery on GPU nodes; a CPU model's pods stay off nodes that carry it."""


def is_gpu_node(node: Mapping[str, Any], needs: Needs) -> bool:
    """What a CPU model's required node affinity excludes: allocatable GPUs, the GFD label, or the GPU pool's
    labels (any one of them)."""
    labels = node["metadata"].get("labels", {})
    in_gpu_pool = any(labels.get(k) == v for k, v in needs.gpu_selector.items())
    return gpus_of(node) > 0 or labels.get(GPU_PRESENT_LABEL) == "true" or in_gpu_pool


def _requested(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], resource: str) -> Any:
    """What the running pods on ``node`` request of ``resource`` (init containers not counted: they have ended)."""
    total = quantity_value("0")
    for pod in pods:
        if pod.get("spec", {}).get("nodeName") != _name(node):
            continue
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in pod["spec"].get("containers", []):
            total += quantity_value(str(c.get("resources", {}).get("requests", {}).get(resource, "0")))
    return total


def _free(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], resource: str) -> Any:
    allocatable = quantity_value(str(node.get("status", {}).get("allocatable", {}).get(resource, "0")))
    return allocatable - _requested(node, pods, resource)


def _gib(value: Any) -> str:
    return f"{float(value) / 2**30:.2f} GiB"


def cpu_models_fit(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], needs: Needs) -> list[Check]:
    """For each ``device: cpu`` model, a schedulable CPU node (``cpuNodeSelector``, not a GPU node, no taint it
    does not tolerate: the pod tolerates none) with enough unrequested CPU and memory for one replica."""
    if not needs.cpu_models:
        return []
    selector = ", ".join(f"{k}={v}" for k, v in sorted(needs.cpu_selector.items())) or "(none)"
    candidates = []
    refused: list[str] = []
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        if is_gpu_node(node, needs) or not all(labels.get(k) == v for k, v in needs.cpu_selector.items()):
            continue
        state = node_state(node)
        taints = [_taint_text(t) for t in _blocking_taints(node)]
        if state or taints:
            refused.append(f"{_name(node)} {state or 'has the taint ' + ', '.join(taints)}")
            continue
        candidates.append(node)
    free = {_name(n): (_free(n, pods, "cpu"), _free(n, pods, "memory")) for n in candidates}
    checks = []
    for model in needs.cpu_models:
        name = f"cpu-shape {model.name}"
        ask = f"needs {model.cpu} CPU and {model.memory} memory on a CPU node"
        cpu, memory = quantity_value(model.cpu), quantity_value(model.memory)
        fits = [n for n, (c, m) in free.items() if c >= cpu and m >= memory]
        if fits:
            best = max(fits, key=lambda n: free[n])
            c, m = free[best]
            checks.append(Check(name, True, f"{ask}; {best} has {c} CPU and {_gib(m)} unrequested"))
        elif not candidates:
            why = f": {'; '.join(refused)}" if refused else ""
            checks.append(
                Check(
                    name,
                    False,
                    f"{ask}, but no schedulable non-GPU node matches cpuNodeSelector {selector}{why}; fix "
                    "cpuNodeSelector or the nodes, or serve the model on a GPU (device: gpu)",
                )
            )
        else:
            most = ", ".join(f"{n} {c} CPU/{_gib(m)}" for n, (c, m) in sorted(free.items()))
            checks.append(
                Check(
                    name,
                    False,
                    f"{ask}, but the CPU nodes have only {most} unrequested; add CPU nodes or lower the model's "
                    "instances, maxBatchSize or maxSeqLength",
                )
            )
    return checks


def storage(classes: Sequence[Mapping[str, Any]], needs: Needs) -> Check:
    if needs.stack_storage_class:
        return Check("storage-class", True, "created by the stack (EFS, ReadWriteMany)")
    by_name = {_name(c): c for c in classes}
    if needs.storage_class is None:
        defaults = [c for c in classes if c["metadata"].get("annotations", {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
        if not defaults:
            return Check("storage-class", False, "storageClass unset and the cluster has no default StorageClass")
        chosen = defaults[0]
    elif needs.storage_class not in by_name:
        have = ", ".join(sorted(by_name)) or "none"
        return Check(
            "storage-class",
            False,
            f"StorageClass {needs.storage_class!r} not found (the cluster has: {have}); set storageClass to a "
            "ReadWriteMany class",
        )
    else:
        chosen = by_name[needs.storage_class]
    provisioner = chosen.get("provisioner", "")
    if provisioner in RWO_ONLY_PROVISIONERS:
        return Check(
            "storage-class",
            False,
            f"{_name(chosen)} ({provisioner}) is block storage: no ReadWriteMany; use an RWX class (EFS, NFS, CephFS)",
        )
    return Check("storage-class", True, f"{_name(chosen)} ({provisioner})")


def ingress(classes: Sequence[Mapping[str, Any]], needs: Needs) -> Check:
    if needs.edge == "gateway":
        return Check("ingress-class", True, "not used: the edge is Gateway API (edge: gateway)")
    if needs.stack_ingress_class:
        return Check("ingress-class", True, f"{needs.ingress_class!r} installed by the stack (ingress-nginx)")
    names = sorted(_name(c) for c in classes)
    if needs.ingress_class in names:
        return Check("ingress-class", True, needs.ingress_class)
    return Check(
        "ingress-class",
        False,
        f"IngressClass {needs.ingress_class!r} not found (the cluster has: {', '.join(names) or 'none'}); set "
        "ingressClass or install the controller",
    )


def _accepts(listener_host: str | None, host: str) -> bool:
    """Gateway API's hostname match: no hostname accepts every host; ``*.x`` accepts names under ``x``."""
    if not listener_host:
        return True
    if listener_host.startswith("*."):
        return host.endswith(listener_host[1:]) and host != listener_host[2:]
    return listener_host == host


def gateway(gateways: Sequence[Mapping[str, Any]] | None, needs: Needs) -> Check:
    """The cluster's own Gateway exists and has a listener for every host of the stack (``edge: gateway``)."""
    if needs.edge != "gateway":
        return Check("gateway", True, "not used (edge: ingress)")
    if needs.gateway is None:
        return Check("gateway", True, "made by the stack (Envoy Gateway, installed by the stack)")
    namespace, name = needs.gateway
    if gateways is None:
        return Check("gateway", False, "the Gateway API CRDs are missing: install a Gateway API implementation")
    found = [g for g in gateways if _name(g) == name and g["metadata"].get("namespace") == namespace]
    if not found:
        return Check(
            "gateway",
            False,
            f"Gateway {namespace}/{name} not found; set gatewayName/gatewayNamespace to the cluster's Gateway",
        )
    listeners = found[0].get("spec", {}).get("listeners", [])
    missing = [h for h in needs.hosts if not any(_accepts(lst.get("hostname"), h) for lst in listeners)]
    if missing:
        return Check(
            "gateway",
            False,
            f"Gateway {namespace}/{name} has no listener for {', '.join(missing)}: add one (HTTPS, allowing routes "
            "from the stack's namespace) or change ingressHost",
        )
    return Check("gateway", True, f"{namespace}/{name} accepts {len(needs.hosts)} host(s)")


def crds(present: Iterable[str], needs: Needs) -> Check:
    have = set(present)
    missing = [c for c in needs.crds if c not in have]
    if missing:
        return Check(
            "crds",
            False,
            f"missing {', '.join(missing)}: install the add-on that brings them or turn the feature off",
        )
    return Check("crds", True, ", ".join(needs.crds) if needs.crds else "none needed")


CUSTOM_METRICS_API = "v1beta1.custom.metrics.k8s.io"
RESOURCE_METRICS_API = "v1beta1.metrics.k8s.io"


def _available(service: Mapping[str, Any]) -> tuple[bool, str]:
    """The APIService's ``Available`` condition: (true?, its reason and message)."""
    for condition in service.get("status", {}).get("conditions", []):
        if condition.get("type") == "Available":
            reason = ": ".join(p for p in (condition.get("reason"), condition.get("message")) if p)
            return condition.get("status") == "True", reason
    return False, "no Available condition yet"


def metrics_apis(services: Mapping[str, Mapping[str, Any]], needs: Needs) -> Check:
    """Each metrics API an autoscaler of the stack reads is registered (an APIService) and available."""
    if not needs.metrics_apis:
        return Check("metrics-apis", True, "none needed")
    problems: list[str] = []
    for name, why in needs.metrics_apis:
        service = services.get(name)
        if service is None:
            problems.append(f"{name} is not registered ({why})")
            continue
        ok, reason = _available(service)
        if not ok:
            problems.append(f"{name} is registered but not available ({reason}; {why})")
    if problems:
        return Check("metrics-apis", False, "; ".join(problems))
    return Check("metrics-apis", True, ", ".join(f"{name} available" for name, _ in needs.metrics_apis))


def token_secret(wanted: TokenSecret, namespace: str, found: Mapping[str, Any] | None) -> Check:
    """``wanted`` exists in ``namespace`` (``found``: the Secret as the API server returns it, None when there is none)
    with the key its download Job mounts: without it the Job's pod never starts (``CreateContainerConfigError``) and
    ``up`` waits out the Job's timeout. Names the keys only, never a value."""
    name = f"hf-token {wanted.model}"
    create = (
        f"kubectl -n {namespace} create secret generic {wanted.secret} --from-literal={wanted.key}=hf_... "
        f"(a token of an account that accepted the model's licence; create the namespace first if it does not exist)"
    )
    if found is None:
        return Check(
            name,
            False,
            f"Secret {wanted.secret!r} (hfTokenSecret) not found in namespace {namespace!r}, so the download Job "
            f"cannot read the Hugging Face token: {create}",
        )
    keys = sorted({*(found.get("data") or {}), *(found.get("stringData") or {})})
    if wanted.key not in keys:
        return Check(
            name,
            False,
            f"Secret {wanted.secret!r} in namespace {namespace!r} has no key {wanted.key!r} (keys: "
            f"{', '.join(keys) or 'none'}), the file the download Job reads the token from: recreate it with "
            f"{create}",
        )
    return Check(name, True, f"Secret {wanted.secret!r} in namespace {namespace!r} has key {wanted.key!r}")
