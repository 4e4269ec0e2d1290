"""A push to main, rehearsed: `deploy.yml`'s jobs in order with their own scripts, for dev, staging and prod.

build plan -> promotion (build-images.sh) -> stack-config.sh -> `up` -> probe-stack.sh, with stand-ins for what needs
a cloud (:mod:`tests.delivery.standins`: the registry and BuildKit, the AWS session, the Pulumi engine as the
synthesized plan, the edge). Each blocker the first review found is reintroduced below and must stop the chain.

The Kubernetes half runs for real in ``tests/system/controlplane/test_delivery_rehearsal.py``: there each stage's
stand-in `up` also applies its objects to the test control plane's real API server (validation, admission, the real
Gateway API and Envoy Gateway CRDs) in the CLI's dependency order, the real scheduler places its replicas on kwok
nodes shaped like its node groups, and what a kubelet would wait on (a referenced object, an image's pull) is
checked against the server and the stand-in registry (:mod:`tests.delivery.cluster_half`).

What this cannot rehearse: the real builds (the FT compile, NGC's pulls, their time and disk); ECR beyond an image's
manifest read and a tag added to it (the lifecycle policy is judged by ECR's evaluation rules in
``tests/components/platform/test_promotion_lifecycle.py``) and IAM (the roles' MaxSessionDuration, the repositories'
existence); GitHub's step timeouts and the lock release after a failed `up` (their sums and conditions are checked in
``tests/delivery/test_runner_limits.py``; the pending operations it names, in
``tests/delivery/test_ci_scripts.py``); the EKS API and AWS's side of the cluster (VPC, EFS, the managed add-ons,
node groups rolling; the node groups are kwok nodes of the stack's shape at `gpuNodesDesired` and `systemNodesMin`, with
no cluster-autoscaler and no capacity shortage; the first `up`'s Jobs all at once on the system group at its maximum:
``tests/system/controlplane/test_first_up_jobs.py``, the scale-out to it not); the Helm charts the stack installs (not
applied: cert-manager's, kube-prometheus-stack's and KEDA's CRDs are stubs that accept any spec, so those objects meet
no schema; nothing a chart runs: Envoy, cert-manager issuing from Let's Encrypt and the probe's trust in it,
Alertmanager and prod's out-of-band Secret `alerting`); a kubelet (kwok runs no container: volumes, pulls and probes are
judged from the pod's spec, a Job's pod completes at once, so a download's time and a model's answers are not seen: the
real Triton tests do those); the program's dynamic resources (rollout watches, promotion gates, in-`up` probes and
judges: the judged-promotion tests on the control plane run those); GitHub's own scheduling (environments' approvals,
concurrency).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform.base_images import dockerfile_bases
from tests.delivery.rehearsal import VARS, Rehearsal, StepFailedError

pytestmark = pytest.mark.timeout(1800)
"""The push synthesizes three stacks' plans (a minute or two each on a loaded machine), so its fixture outlasts the
suite's 300 s per test."""


@pytest.fixture(scope="module")
def push(tmp_path_factory: pytest.TempPathFactory) -> tuple[Rehearsal, StepFailedError | None]:
    """The whole workflow once: build, dev, staging, then prod (its failure kept for the tests that read it)."""
    rehearsal = Rehearsal(tmp_path_factory.mktemp("push"))
    rehearsal.run(only=["build", "dev", "staging"])
    try:
        rehearsal.run(only=["prod"])
    except StepFailedError as failure:
        return rehearsal, failure
    return rehearsal, None


def promotion_problems(builds: list[dict[str, Any]], root: Path) -> list[str]:
    """What makes a promoted build not the bytes it claims: an unpinned base, the guard off, a registry cache."""
    problems = []
    for build in builds:
        where = build["dockerfile"]
        if build["args"].get("REQUIRE_PINNED_BASE") != "true":
            problems.append(f"{where}: built without REQUIRE_PINNED_BASE=true")
        for base in dockerfile_bases((root / where).read_text(), build["args"]):
            if base.ref and not base.pinned:
                problems.append(f"{where}: base {base.ref} is a tag alone")
        if {"--cache-from", "--cache-to"} & set(build["flags"]):
            problems.append(f"{where}: pulls or pushes a mutable registry build cache")
    return problems


def pod_images(plan: Path) -> set[str]:
    images = set()
    for path in (plan / "manifests").rglob("*.yaml"):
        manifest = yaml.safe_load(path.read_text())
        template = (manifest.get("spec") or {}).get("template", {}).get("spec", {})
        for container in [*template.get("initContainers", []), *template.get("containers", [])]:
            images.add(container["image"])
    return images


def ours(images: set[str]) -> set[str]:
    return {image for image in images if image.startswith(VARS["IMAGE_REGISTRY"])}


# --- the push, green --------------------------------------------------------------------------------------------


def test_the_build_job_promotes_every_image_on_bases_pinned_by_digest(push: tuple[Rehearsal, Any]) -> None:
    rehearsal, _ = push
    builds = rehearsal.read("builds.json")
    assert sorted(Path(b["dockerfile"]).parent.name for b in builds) == [
        "tools",
        "triton-ft",
        "triton-onnx",
        "triton-vllm",
    ]
    assert promotion_problems(builds, rehearsal.root) == []
    outputs = rehearsal.jobs["build"].outputs
    assert set(yaml.safe_load(outputs["engine-images"])) == {"onnxruntime", "vllm"}


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_no_stacks_up_builds_an_image(push: tuple[Rehearsal, Any], stage: str) -> None:
    rehearsal, _ = push
    assert rehearsal.read("ups.json")[stage] == {"built": []}


@pytest.mark.parametrize("stage", ["dev", "staging"])
def test_each_stack_runs_exactly_the_promoted_digests(push: tuple[Rehearsal, Any], stage: str) -> None:
    rehearsal, _ = push
    promoted = rehearsal.jobs["build"].outputs
    refs = {promoted["server-image"], promoted["tools-image"], *yaml.safe_load(promoted["engine-images"]).values()}
    images = ours(pod_images(rehearsal.state / "plans" / stage))
    assert images and images <= refs


def test_staging_serves_every_engine_prod_serves_from_the_same_images(push: tuple[Rehearsal, Any]) -> None:
    rehearsal, _ = push
    staging = ours(pod_images(rehearsal.state / "plans" / "staging"))
    prod = ours(pod_images(rehearsal.state / "plans" / "prod"))
    assert prod and prod <= staging
    assert any("/server-vllm@" in image for image in prod) and any("/server-onnxruntime@" in image for image in prod)


@pytest.mark.parametrize("stage", ["dev", "staging"])
def test_the_probe_asks_every_model_through_the_edge_with_the_stacks_key(
    push: tuple[Rehearsal, Any], stage: str
) -> None:
    rehearsal, _ = push
    outputs = rehearsal.read("outputs.json")[stage]["outputs"]
    endpoints, gateway = outputs["endpoints"], outputs["openaiBaseUrl"]
    probed = [
        p
        for p in rehearsal.read("probes.json")
        if p["url"] in endpoints.values() or (p["url"] is None and p["gateway"] == gateway)
    ]
    assert sorted(m for p in probed for m in p["models"]) == sorted(outputs["models"])
    assert {p["gateway"] for p in probed} == {gateway}
    # a model with a route of its own (an encoder) at it, the others (FT, vLLM) through the gateway alone
    assert all(
        p["url"] == endpoints.get(m) or (p["url"] is None and m not in endpoints) for p in probed for m in p["models"]
    )


def test_prods_up_completes_and_is_probed(push: tuple[Rehearsal, StepFailedError | None]) -> None:
    _, failure = push
    assert failure is None, failure


# --- each blocker, reintroduced, stops the chain ---------------------------------------------------------------


def test_ci_building_only_server_and_tools_stops_prod_before_its_up_naming_the_engine_images(tmp_path: Path) -> None:
    """The first review's blocker (prod's `up` building the engines' images itself, stopped by the pinned-base guard
    hours in) is now stopped at the stage's configuration, before any Pulumi call: deploy.yml requires every image a
    stack runs to be promoted (``REQUIRE_PROMOTED_IMAGES``)."""
    rehearsal = Rehearsal(tmp_path)
    rehearsal.edit(".github/scripts/build-images.sh", """$(jq -r '.[].name' <<<"$plan")""", "server tools")
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "prod"])
    assert failed.value.job == "prod" and failed.value.step == "Stack secrets, ESC environment and the promoted images"
    assert "promoted no engine server images (engineImages) (ENGINE_IMAGES is empty)" in failed.value.output
    assert "prod" not in (rehearsal.read("ups.json") or {})


def test_a_build_on_an_unpinned_base_or_through_the_registry_cache_is_caught(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    rehearsal.edit(".github/scripts/build-images.sh", ' --base-digests "$work/base-digests.json"', "")
    rehearsal.edit(
        ".github/scripts/build-images.sh",
        "--pull --platform",
        '--cache-from "type=registry,ref=$registry/c" --platform',
    )
    rehearsal.run(only=["build"])
    problems = promotion_problems(rehearsal.read("builds.json"), rehearsal.root)
    assert any("built without REQUIRE_PINNED_BASE=true" in p for p in problems)
    assert any("base nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3 is a tag alone" in p for p in problems)
    assert any("mutable registry build cache" in p for p in problems)


def test_an_existing_tag_holding_other_bytes_is_never_promoted(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    rehearsal.run(only=["build"])
    first = rehearsal.jobs["build"].outputs["server-image"]
    registry = rehearsal.read("registry.json")
    planted = "sha256:" + "e" * 64
    for tag in [t for t in registry if "/server:" in t]:
        registry[tag.rsplit("-r4242.1", 1)[0]] = planted  # someone pushed other bytes under the content tag
    (rehearsal.state / "registry.json").write_text(__import__("json").dumps(registry))
    rehearsal.env["GITHUB_RUN_ID"] = "4243"
    rehearsal.run(only=["build"])
    again = rehearsal.jobs["build"].outputs["server-image"]
    assert planted not in again and again.endswith(first.split("@")[1])


def test_a_missing_output_stops_the_probe(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    rehearsal.edit("__main__.py", 'pulumi.export("endpoints", endpoints)\n', "")
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "dev"])
    assert (failed.value.job, failed.value.step) == ("dev", "Probe dev, then mark the images it runs live")
    assert "the stack exports no `endpoints` output" in failed.value.output
    tags = {key.rsplit(":", 1)[1] for key in rehearsal.read("registry.json")}
    assert "dev-try-r4242.1" in tags and "dev-live-r4242.1" not in tags, "a failed probe marks nothing live"


def test_a_probe_without_the_edges_api_key_is_refused(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    rehearsal.edit(".github/scripts/probe-stack.sh", ' "${headers[@]}" "${gateway_args[@]}"', ' "${gateway_args[@]}"')
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "dev"])
    assert (failed.value.job, failed.value.step) == ("dev", "Probe dev, then mark the images it runs live")
    assert "HTTP 401 Unauthorized" in failed.value.output


def test_a_secret_nothing_creates_stops_up(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    rehearsal.edit(
        "stacks/Pulumi.staging.yaml",
        "      revision: a09a35458c702b33eeacc393d103063234e8bc28\n",
        "      revision: a09a35458c702b33eeacc393d103063234e8bc28\n      hfTokenSecret: hf-token\n",
    )
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "staging"])
    assert failed.value.job == "staging"
    assert "models[3].hfTokenSecret: 'hf-token' names a Secret" in failed.value.output, failed.value.output


def test_the_default_one_hour_aws_session_stops_a_long_up(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    text = (rehearsal.root / ".github/workflows/deploy.yml").read_text()
    start = text.index("role-session-name: triton-ft-deploy-dev-")
    duration = text.index("role-duration-seconds:", start)
    line_end = text.index("\n", duration)
    (rehearsal.root / ".github/workflows/deploy.yml").write_text(text[:duration] + "# removed" + text[line_end:])
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "dev"])
    assert failed.value.job == "dev"
    assert "the job's AWS session ends at minute 60" in failed.value.output


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
@pytest.mark.parametrize("mark", ["try", "live"])
def test_each_stage_tags_every_image_it_promotes_try_before_up_and_live_after_its_probe(
    push: tuple[Rehearsal, Any], stage: str, mark: str
) -> None:
    """What the repositories' lifecycle policy keeps (components/platform/promotion_lifecycle.py)."""
    rehearsal, _ = push
    promoted = rehearsal.jobs["build"].outputs
    refs = [promoted["server-image"], promoted["tools-image"], *yaml.safe_load(promoted["engine-images"]).values()]
    registry = rehearsal.read("registry.json")
    assert {ref: registry.get(f"{ref.split('@')[0]}:{stage}-{mark}-r4242.1") for ref in refs} == {
        ref: ref.split("@")[1] for ref in refs
    }


def test_an_empty_promoted_image_stops_the_stage_before_up_naming_it(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    rehearsal.edit(
        ".github/workflows/deploy.yml",
        "tools-image: ${{ steps.images.outputs.tools-image }}",
        "tools-image: ${{ steps.images.outputs.tool-image }}",
    )
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "dev"])
    assert (failed.value.job, failed.value.step) == ("dev", "Stack secrets, ESC environment and the promoted images")
    assert "the build job promoted no tools image (toolsImage) (TOOLS_IMAGE is empty)" in failed.value.output
    assert "dev" not in (rehearsal.read("ups.json") or {})


def test_an_up_step_timeout_below_the_plans_longest_up_is_caught(tmp_path: Path) -> None:
    rehearsal = Rehearsal(tmp_path)
    text = (rehearsal.root / ".github/workflows/deploy.yml").read_text()
    start = text.index("stack-name: ${{ env.STACK_PREFIX }}dev")
    timeout = text.rindex("timeout-minutes:", 0, start)
    line_end = text.index("\n", timeout)
    (rehearsal.root / ".github/workflows/deploy.yml").write_text(
        text[:timeout] + "timeout-minutes: 60" + text[line_end:]
    )
    with pytest.raises(StepFailedError) as failed:
        rehearsal.run(only=["build", "dev"])
    assert failed.value.job == "dev"
    assert "the `up` step's timeout-minutes 60 stops a healthy `up`" in failed.value.output
