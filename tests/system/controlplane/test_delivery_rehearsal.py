"""The delivery chain's Kubernetes half: `deploy.yml` rehearsed (:mod:`tests.delivery.rehearsal`) with each stage's
`up` applying its plan to this real control plane (:mod:`tests.delivery.cluster_half`), dev, staging then prod.

With the config each job's steps set (the promoted digests, `stack-config.sh`'s output), every stage's Kubernetes
objects are accepted by the real API server in the CLI's dependency order, every object a workload references exists
(or is one preflight checks), every image of the stack's registry is there, and the real scheduler places every
replica where the plan says. Each class of blocker, reintroduced, stops the stage's `up`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.settings.stack_file import settings_from_stack_file
from tests.delivery.cluster_half import missing_references, on_server, preflight_named, remove, stage_namespace
from tests.delivery.rehearsal import Rehearsal, StepFailedError
from tests.system.controlplane.fixtures import remove_pods
from tests.system.controlplane.plan import retarget
from tests.system.controlplane.pulumi_engine import program
from tests.system.controlplane.server import ControlPlane
from tritonft.kube import Kube

pytestmark = pytest.mark.timeout(1800)
"""The chain synthesizes three stacks' plans (a minute or two each on a loaded machine) and applies them."""
STAGES = ("dev", "staging", "prod")


def clean(kube: Kube, prefix: str, rehearsal: Rehearsal) -> None:
    """Remove what the rehearsal made under ``prefix``: its stage namespaces (their pods at once), nodes, volumes, and
    the cluster-scoped objects its stages applied (a later test applies its own of the same names)."""
    for stage in (rehearsal.read("cluster.json") or {}).values():
        remove(kube, [tuple(o) for o in stage["cluster_scoped"]])
    for namespace in kube.items("v1", "Namespace"):
        name = namespace["metadata"]["name"]
        if name.startswith(f"{prefix}-"):
            kube.delete("v1", "Namespace", name)
            remove_pods(kube, name)
    for kind in ("Node", "PersistentVolume"):
        for obj in kube.items("v1", kind):
            if obj["metadata"]["name"].startswith(f"{prefix}-"):
                kube.delete("v1", kind, obj["metadata"]["name"])


_counter = itertools.count(1)


@pytest.fixture
def rehearsal(control_plane: ControlPlane, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rehearsal]:
    """A push rehearsed on this control plane, under names of the test's own (the control plane's log lines naming
    them are attached to a failure's report)."""
    prefix = f"blocker{next(_counter)}"
    request.node._control_plane, request.node._cluster_namespace = control_plane, prefix
    made = Rehearsal(tmp_path)
    made.on_cluster(control_plane.workdir / "kubeconfig", prefix)
    try:
        yield made
    finally:
        clean(control_plane.kube, prefix, made)


@pytest.fixture(scope="module")
def chain(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Rehearsal, StepFailedError | None]]:
    """The whole workflow once on this control plane: build, dev, staging, then prod."""
    prefix = "chain"
    made = Rehearsal(tmp_path_factory.mktemp("chain"))
    made.on_cluster(control_plane.workdir / "kubeconfig", prefix)
    try:
        failure = None
        try:
            made.run()
        except StepFailedError as failed:
            failure = failed
        yield made, failure
    finally:
        clean(control_plane.kube, prefix, made)


def stage_manifests(rehearsal: Rehearsal, stage: str) -> list[dict[str, Any]]:
    """The stage's Kubernetes objects as its `up` applied them (retargeted into its namespace)."""
    settings = settings_from_stack_file(rehearsal.root, stage)
    namespace = rehearsal.read("cluster.json")[stage]["namespace"]
    applied = [dict(r.inputs) for r in program(rehearsal.state / "plans" / stage) if r.applied]
    return retarget(applied, settings.namespace, namespace)


# --- the push, green --------------------------------------------------------------------------------------------


def test_the_chain_reaches_prod_with_every_stage_applied_in_order(chain: tuple[Rehearsal, Any]) -> None:
    rehearsal, failure = chain
    assert failure is None, failure
    clusters = rehearsal.read("cluster.json")
    assert sorted(clusters, key=lambda stage: clusters[stage]["order"]) == list(STAGES)
    assert {stage: clusters[stage]["problems"] for stage in STAGES} == {stage: [] for stage in STAGES}


@pytest.mark.parametrize("stage", STAGES)
def test_the_api_server_accepts_every_kubernetes_object_of_the_stage(chain: tuple[Rehearsal, Any], stage: str) -> None:
    rehearsal, _ = chain
    applied = rehearsal.read("cluster.json")[stage]["applied"]
    manifests = stage_manifests(rehearsal, stage)
    assert len(manifests) > 20
    assert sorted(applied) == sorted(
        f"{m['kind']}/{m['metadata'].get('namespace') or ''}/{m['metadata']['name']}" for m in manifests
    )


@pytest.mark.parametrize("stage", STAGES)
def test_every_object_the_stages_workloads_reference_exists_on_the_api_server(
    chain: tuple[Rehearsal, Any], control_plane: ControlPlane, stage: str
) -> None:
    rehearsal, _ = chain
    settings = settings_from_stack_file(rehearsal.root, stage)
    namespace = stage_namespace("chain", stage)
    manifests = stage_manifests(rehearsal, stage)
    assert missing_references(manifests, preflight_named(settings, namespace), on_server(control_plane.kube)) == []
    assert any(m["kind"] == "Job" for m in manifests) and any(m["kind"] == "Deployment" for m in manifests)


@pytest.mark.parametrize("stage", STAGES)
def test_every_models_replicas_are_scheduled_gpu_pods_on_the_stages_gpu_nodes(
    chain: tuple[Rehearsal, Any], stage: str
) -> None:
    rehearsal, _ = chain
    settings = settings_from_stack_file(rehearsal.root, stage)
    placement = rehearsal.read("cluster.json")[stage]["placement"]
    by_model = Counter(p["instance"] for p in placement.values())
    models = {f"{stage}-{m.name}": settings.serving.replicas_min for m in settings.models}
    assert {k: v for k, v in by_model.items() if k in models} == models
    for pod in placement.values():
        assert pod["node"].startswith(f"chain-{stage}-")
        assert pod["pool"] == ("system" if pod["gpus"] == 0 else "gpu"), pod


# --- each blocker, reintroduced, stops a stage's `up` on the cluster -----------------------------------------------


def failed_up(rehearsal: Rehearsal, stage: str = "dev") -> StepFailedError:
    """The build job, then ``stage``'s: its `up` must fail."""
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", stage])
    assert failed.value.job == stage and failed.value.step.startswith("pulumi/actions"), failed.value
    return failed.value


def test_an_image_the_build_never_pushed_stops_dev_before_its_up_naming_the_digest(rehearsal: Rehearsal) -> None:
    """Tagging the promoted images before `up` (``mark-promoted.sh``) reads each one from the registry: an image the
    build never pushed stops the stage there, before anything is applied (without that step its pods would fail at the
    pull: the cluster half's check, ``tests/delivery/test_cluster_half.py``)."""
    rehearsal.edit(".github/scripts/build-images.sh", ' --tag "$ref" --push ', ' --tag "$ref" ')
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "dev"])
    assert failed.value.job == "dev" and failed.value.step == "Stack secrets, ESC environment and the promoted images"
    assert (
        '"failureCode": "ImageNotFound"' in failed.value.output
        or '"failureCode":"ImageNotFound"' in failed.value.output
    )
    assert '"imageDigest":"sha256:' in failed.value.output.replace(" ", "")


def test_a_secret_nothing_creates_stops_prods_up_before_its_gated_download_would_hang(rehearsal: Rehearsal) -> None:
    """prod's Llama download mounts its Hugging Face token (dev's and staging's models need none): a Job mounting a
    Secret of another name than the one the stack makes is refused before anything is applied."""
    rehearsal.edit(
        "components/models/conversion.py",
        "hf_token_secret=token_secret,",
        'hf_token_secret="hf-token" if token_secret else None,',
    )
    failure = failed_up(rehearsal, "prod")
    assert (
        "needs Secret hf-token, which neither the stack creates nor `tritonft preflight` checks: the kubelet leaves "
        "its pods in ContainerCreating"
    ) in failure.output
    assert rehearsal.read("cluster.json")["prod"]["applied"] == []


def test_gpu_pods_selecting_a_label_the_node_group_lacks_stay_pending_on_the_real_scheduler(
    rehearsal: Rehearsal,
) -> None:
    rehearsal.edit(
        "components/platform/aws/platform.py",
        'GpuScheduling(node_selector={ACCELERATOR_LABEL: "nvidia"})',
        'GpuScheduling(node_selector={ACCELERATOR_LABEL: "nvidia-a10g"})',
    )
    failure = failed_up(rehearsal)
    assert "is Pending: 0/" in failure.output and "didn't match Pod's node affinity/selector" in failure.output
