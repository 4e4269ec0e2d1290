"""`tritonft synth`: the real program under the mock engine, written to disk deterministically and secret-free."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from components.settings.eks import EKS_VERSIONS
from components.settings.stack_file import settings_from_stack_file
from tests.components.validation import CheckovFailure, run_checkov_per_folder, validate_directory
from tests.plans import StackPlans, deploy_secrets
from tritonft.cli import main
from tritonft.synth.run import synthesize

REPO = Path(__file__).resolve().parents[3]
STACKS = sorted(p.name.split(".")[1] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
OLDEST_EXISTING_CLUSTER = "1.29.0"
"""The oldest Kubernetes an existing cluster's stack (``platform: kubernetes``) is checked against."""
OLDEST_EKS = f"{min(EKS_VERSIONS, key=lambda minor: tuple(int(n) for n in minor.split('.')))}.0"
"""The oldest Kubernetes a stack that builds its cluster can run: the oldest EKS minor it accepts (its admission
policy, ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy, is GA from 1.30 and absent from 1.29)."""
KUBERNETES_VERSIONS = ("oldest", "1.33.0")


def oldest_kubernetes(stack: str) -> str:
    """The oldest Kubernetes ``stack`` can run on: its manifests must be valid there."""
    platform = settings_from_stack_file(REPO, stack, deploy_secrets(stack)).cluster.platform
    return OLDEST_EKS if platform == "aws" else OLDEST_EXISTING_CLUSTER


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_the_four_environments_have_stack_files() -> None:
    assert set(STACKS) >= {"local", "dev", "staging", "prod"}


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_synthesises_resources_manifests_and_outputs(stack: str, stack_plan: StackPlans) -> None:
    result = stack_plan(stack)
    out = result.out
    resources = json.loads((out / "resources.json").read_text())
    assert len(resources) == len(result.resources) > 0
    assert all({"type", "name", "urn", "inputs"} <= set(r) for r in resources)
    assert list((out / "manifests").rglob("*.yaml")), "every stack creates at least its namespace"
    assert json.loads((out / "outputs.json").read_text())["models"]


@pytest.mark.parametrize("stack", STACKS)
def test_synth_twice_gives_identical_bytes(stack: str, stack_plan: StackPlans, tmp_path: Path) -> None:
    first = stack_plan(stack).out  # the session's run of this stack, made earlier in the same process
    synthesize(stack, out=tmp_path / "again", project_dir=REPO, assume_secrets=deploy_secrets(stack))
    assert tree_digest(first) == tree_digest(tmp_path / "again")


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_passes_strict_kubernetes_validation(stack: str, version: str, stack_plan: StackPlans) -> None:
    checked = oldest_kubernetes(stack) if version == "oldest" else version
    assert validate_directory(stack_plan(stack).out / "manifests", versions=(checked,)) == []


@pytest.fixture(scope="module")
def checkov_per_stack(
    tmp_path_factory: pytest.TempPathFactory, stack_plan: StackPlans
) -> dict[str, tuple[int, list[CheckovFailure]]]:
    """Every stack's manifests scanned by one checkov run (each run pays checkov's start-up), split per stack."""
    root = tmp_path_factory.mktemp("checkov")
    for stack in STACKS:
        shutil.copytree(stack_plan(stack).out / "manifests", root / "manifests" / stack)
    return run_checkov_per_folder(root / "manifests")


@pytest.mark.parametrize("stack", STACKS)
def test_checkov_reports_no_failed_check_on_any_manifest(
    stack: str, checkov_per_stack: dict[str, tuple[int, list[CheckovFailure]]]
) -> None:
    passed, failures = checkov_per_stack[stack]
    assert failures == []
    assert passed > 0


def test_manifests_hold_integers_as_integers_and_no_nulls(stack_plan: StackPlans) -> None:
    plan = stack_plan("local").out

    def walk(node: object) -> None:
        assert node is not None
        assert not isinstance(node, float) or not node.is_integer()
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        if isinstance(node, list):
            for value in node:
                walk(value)

    for path in (plan / "manifests").rglob("*.yaml"):
        walk(yaml.safe_load(path.read_text()))


def test_rerun_replaces_the_previous_plan_without_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    synthesize("local", out=out, project_dir=REPO)
    stale = out / "manifests" / "stale.yaml"
    stale.write_text("kind: Stale\n")
    synthesize("local", out=out, project_dir=REPO)
    assert not stale.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no staging directory is left behind"


SECURE_STACK = """\
config:
  triton-ft:platform: kubernetes
  triton-ft:environment: dev
  triton-ft:gpuType: A10G
  triton-ft:imageRegistry: registry.example.com/triton-ft
  triton-ft:hfToken:
    secure: v1:HFTOKENCIPHERTEXTzq8x3Pqk1
  triton-ft:ingressHtpasswd:
    secure: v1:HTPASSWDCIPHERTEXTa9d7Wm2
  triton-ft:models:
    - name: t5-small
      hfRepo: google-t5/t5-small
      revision: df1b051c49625cf57a3d0d8d3863ed4d13564fe4
"""


def test_secure_values_never_reach_files_or_stdout(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "stacks" / "Pulumi.secure.yaml").write_text(SECURE_STACK)
    out = tmp_path / "secure"
    code = main(["synth", "--stack", "secure", "--out", str(out), "--project-dir", str(project)])
    assert code == 0
    printed = capsys.readouterr()
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    for secret in ("HFTOKENCIPHERTEXTzq8x3Pqk1", "HTPASSWDCIPHERTEXTa9d7Wm2"):
        assert secret not in written
        assert secret not in printed.out + printed.err


def test_invalid_config_exits_1_listing_every_error_without_traceback(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "stacks" / "Pulumi.broken.yaml").write_text(
        "config:\n  triton-ft:platform: kubernetes\n  triton-ft:gpuTyp: A10G\n  triton-ft:replicasMin: 3\n"
        "  triton-ft:replicasMax: 1\n  triton-ft:models: []\n"
    )
    code = main(["synth", "--stack", "broken", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert code == 1
    assert "gpuTyp: unknown key; did you mean `gpuType`?" in err
    assert "replicasMin: 3 is larger than replicasMax=1" in err
    assert "models: needs at least one model entry" in err
    assert "Traceback" not in err
    assert not (project / "build").exists(), "nothing is written for an invalid stack"


def test_unknown_stack_names_the_stacks_that_exist(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["synth", "--stack", "nope", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert code == 1
    assert "stack 'nope' has no config file" in err and "local" in err


def test_summary_prints_the_resource_tree_and_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["synth", "--stack", "local", "--out", str(tmp_path), "--project-dir", str(REPO)]) == 0
    out = capsys.readouterr().out
    assert "+ local  [triton-ft:cluster:ExistingCluster]" in out
    assert "Resources by type:" in out
    assert "kubernetes:core/v1:Namespace" in out


def test_synth_writes_each_models_rendered_repository(stack_plan: StackPlans) -> None:
    from google.protobuf import text_format  # type: ignore[import-untyped]
    from tritonclient.grpc import model_config_pb2 as mc

    plan = stack_plan("local").out
    ensemble = plan / "model_repos" / "t5-small" / "t5-small" / "config.pbtxt"
    config = text_format.Parse(ensemble.read_text(), mc.ModelConfig())
    assert config.platform == "ensemble"
    ft = text_format.Parse((plan / "model_repos/t5-small/t5-small-ft/config.pbtxt").read_text(), mc.ModelConfig())
    assert ft.parameters["model_checkpoint_path"].string_value == "/models/t5-small-ft/1/1-gpu"


def test_synth_fails_when_a_rendered_repository_breaks_the_ensemble_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from tritonft.errors import UserError
    from tritonft.repo import templates

    broken = tmp_path / "templates"
    shutil.copytree(REPO / "model_repo", broken)
    pbtxt = broken / "t5" / "ensemble" / "config.pbtxt"
    pbtxt.write_text(pbtxt.read_text().replace('"output_ids"', '"output_idz"', 1))
    monkeypatch.setenv(templates.TEMPLATES_ENV, str(broken))
    templates._read.cache_clear()
    with pytest.raises(UserError, match="fails the ensemble check"):
        synthesize("local", out=tmp_path / "plan", project_dir=REPO)
    assert not (tmp_path / "plan").exists(), "a failed synth writes nothing"


def test_prod_hpa_scales_down_after_the_configured_window_and_up_at_once(stack_plan: StackPlans) -> None:
    plan = stack_plan("prod").out
    every = [yaml.safe_load(p.read_text()) for p in (plan / "manifests").rglob("horizontalpodautoscaler-*.yaml")]
    hpas = [h for h in every if h["metadata"]["labels"]["app.kubernetes.io/component"] == "triton"]
    served = {h["metadata"]["labels"]["triton-ft/model"] for h in hpas}
    assert len(hpas) == len(served) == 4, "one per served model"
    assert served == {"t5-3b", "gpt-j-6b", "minilm", "llama-3-1-8b"}
    for hpa in hpas:
        behavior = hpa["spec"]["behavior"]
        assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 900
        assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0


def test_every_stack_serves_the_openai_gateway_on_its_base_host_unless_turned_off(
    project: Path, stack_plan: StackPlans, tmp_path: Path
) -> None:
    dev = stack_plan("dev").out
    route = yaml.safe_load(next((dev / "manifests").rglob("httproute-dev-gateway.yaml")).read_text())
    assert route["spec"]["hostnames"] == ["triton.dev.example.com"]
    assert json.loads((dev / "outputs.json").read_text())["openaiBaseUrl"] == ("https://triton.dev.example.com/v1")
    probes = [r for r in json.loads((dev / "resources.json").read_text()) if r["name"].endswith("-probe")]
    assert sorted(r["name"] for r in probes) == ["dev-gpt2-probe", "dev-t5-small-probe"]
    assert {r["inputs"]["gateway_url"] for r in probes} == {"https://triton.dev.example.com/v1"}
    stack = project / "stacks" / "Pulumi.local.yaml"
    stack.write_text(stack.read_text() + "  triton-ft:gateway: false\n")
    synthesize("local", out=tmp_path / "off", project_dir=project)
    names = [p.name for p in (tmp_path / "off" / "manifests").rglob("*.yaml")]
    assert [n for n in names if "gateway" in n] == []
    (policy,) = [p for p in (tmp_path / "off" / "manifests").rglob("networkpolicy-local-t5-small.yaml")]
    rules = yaml.safe_load(policy.read_text())["spec"]["ingress"]
    # No gateway pods admitted; the one same-namespace peer left is the model's own judge (a promotion's Job).
    judge = {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/component": "judge", "app.kubernetes.io/instance": "local-t5-small"}
        }
    }
    assert [peer for rule in rules for peer in rule["from"] if "namespaceSelector" not in peer] == [judge]
