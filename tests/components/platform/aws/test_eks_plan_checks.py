"""What an EKS engineer checks in the synthesized plans of the stacks the project builds (dev, staging, prod)
before a first `up` on a new account: every object a pod or an edge object refers to is made by the plan, the
certificates are ones the in-`up` probes trust, and every component's version agrees with the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform.aws.autoscaler import RELEASES
from components.settings.stack_file import settings_from_stack_file
from tests.plans import StackPlans, deploy_secrets
from tritonft.errors import UserError
from tritonft.synth.result import SynthResult
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[4]
BUILT = ("dev", "staging", "prod")


def manifests(plan: SynthResult) -> list[dict[str, Any]]:
    return [d for p in sorted((plan.out / "manifests").rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def charts(plan: SynthResult) -> dict[str, Any]:
    return {r.inputs["chart"]: r for r in plan.resources if r.typ == "kubernetes:helm.sh/v4:Chart"}


@pytest.mark.parametrize("stack", BUILT)
def test_every_secret_a_pod_mounts_or_reads_is_made_by_the_plan(stack_plan: StackPlans, stack: str) -> None:
    """No exemption: a Secret the plan does not make cannot exist on the cluster the same `up` builds."""
    objs = manifests(stack_plan(stack))
    made = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs if o["kind"] == "Secret"}
    for obj in (o for o in objs if o["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet")):
        namespace = obj["metadata"].get("namespace")
        pod = obj["spec"]["template"]["spec"]
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                assert (namespace, volume["secret"]["secretName"]) in made, (obj["metadata"]["name"], volume)
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                assert ref is None or (namespace, ref["name"]) in made, (obj["metadata"]["name"], ref)


def test_prods_gated_model_downloads_with_the_secret_the_stack_makes_from_hf_token(stack_plan: StackPlans) -> None:
    objs = manifests(stack_plan("prod"))
    (job,) = [o for o in objs if o["kind"] == "Job" and "llama" in o["metadata"]["name"]]
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "hf-token"]
    secrets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Secret"}
    assert volume["secret"]["secretName"] in secrets
    assert secrets[volume["secret"]["secretName"]]["metadata"]["namespace"] == job["metadata"]["namespace"]


def test_prod_without_its_hugging_face_token_stops_before_anything_is_created(tmp_path: Path) -> None:
    """`pulumi up -s prod` by hand without `hfToken` (CI sets it from HF_TOKEN): refused by the settings, so no
    resource is registered (before, the download Job waited ~2 h 20 min for a Secret nothing made)."""
    with pytest.raises(UserError) as info:
        synthesize("prod", out=tmp_path / "prod", project_dir=REPO)
    assert "- hfToken: models[3] (meta-llama/Llama-3.1-8B-Instruct) is gated on the Hugging Face Hub" in str(info.value)
    assert not (tmp_path / "prod").exists()


@pytest.mark.parametrize("stack", BUILT)
def test_every_certificate_comes_from_a_directory_the_probes_trust(stack_plan: StackPlans, stack: str) -> None:
    """The probes and judges of every `up` verify TLS with the system roots: Let's Encrypt's staging directory signs
    with roots no client trusts, so dev's and staging's probes would fail on their own certificates."""
    objs = manifests(stack_plan(stack))
    (issuer,) = [o for o in objs if o["kind"] == "ClusterIssuer"]
    assert issuer["spec"]["acme"]["server"] == "https://acme-v02.api.letsencrypt.org/directory"
    (gateway,) = [o for o in objs if o["kind"] == "Gateway"]
    assert gateway["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] == issuer["metadata"]["name"]


@pytest.mark.parametrize("stack", BUILT)
def test_cluster_autoscalers_chart_image_and_the_cluster_share_one_minor(stack_plan: StackPlans, stack: str) -> None:
    plan = stack_plan(stack)
    (cluster,) = [r for r in plan.resources if r.typ == "eks:index:Cluster"]
    minor = cluster.inputs["version"]
    chart = charts(plan)["cluster-autoscaler"]
    release = RELEASES[minor]
    assert chart.inputs["version"] == release.chart
    assert release.app_version.startswith(f"{minor}.")
    assert chart.inputs["values"]["image"]["tag"].startswith(f"v{minor}.")


@pytest.mark.parametrize("stack", BUILT)
def test_the_stacks_settings_are_what_ci_deploys(stack: str) -> None:
    settings = settings_from_stack_file(REPO, stack, deploy_secrets(stack))
    assert settings.cluster.platform == "aws"
    assert not settings.token_secrets, "no model names a Secret the same `up` could not make first"
