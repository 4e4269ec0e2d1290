"""A conversion Job can write only its own model's directories of the store where the storage owns every directory
it creates to the workloads' user (the stack's EFS class): the rest of the store, every other model's ``model.py``
included, is mounted read-only (issue 51). Elsewhere the whole store stays writable (docs/security/index.md says
why)."""

from __future__ import annotations

from typing import Any

import pytest

from components.common.layout import STORE_MOUNT, model_paths
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.conversion_spec import writable_dirs
from components.models.store import ModelStore, ModelStoreArgs
from tests.components.fixtures import CONVERTER, GPTJ_6B, T5_SMALL, TOOLS_IMAGE, make_target
from tests.components.serving.test_monitoring_rules import of_kind, rendered
from tests.plans import StackPlans
from tritonft.spec import ModelSpec
from tritonft.synth.engine import RecordingMocks, run_program

JOB = "kubernetes:batch/v1:Job"


def _store_mounts(mocks: RecordingMocks, model: ModelSpec, *, owned: bool) -> list[list[dict[str, Any]]]:
    """The store's mounts of each of the model's Jobs (a FasterTransformer generator's conversion and reference)."""

    def program() -> None:
        target = make_target()
        store = ModelStore("s", ModelStoreArgs(target=target, models=(model,), owned_subpaths=owned))
        args = ModelConversionArgs(
            target=target, store=store, model=model, tools_image=TOOLS_IMAGE, converter_version=CONVERTER
        )
        ModelConversion("m", args)

    run_program(program)
    mounts = []
    for job in mocks.of_type(JOB):
        (container,) = job.inputs["spec"]["template"]["spec"]["containers"]
        mounts.append([m for m in container["volumeMounts"] if m["name"] == "store"])
    return mounts


def test_the_jobs_write_only_their_models_checkpoint_repository_and_reference_directories(
    mocks: RecordingMocks,
) -> None:
    jobs = _store_mounts(mocks, GPTJ_6B, owned=True)
    assert len(jobs) == 2, "the conversion Job and the judge's reference Job"
    model = GPTJ_6B.name
    for root, *own in jobs:
        assert root == {"name": "store", "mountPath": STORE_MOUNT, "readOnly": True}
        assert [(m["subPath"], m["mountPath"], m.get("readOnly", False)) for m in own] == [
            (f"checkpoints/{model}", f"{STORE_MOUNT}/checkpoints/{model}", False),
            (f"repositories/{model}", f"{STORE_MOUNT}/repositories/{model}", False),
            (f"references/{model}", f"{STORE_MOUNT}/references/{model}", False),
        ]


def test_the_writable_directories_hold_the_jobs_outputs_and_their_partial_copies() -> None:
    for model in (T5_SMALL, GPTJ_6B):
        paths = model_paths(model, CONVERTER)
        checkpoints, repositories, references = writable_dirs(paths)
        # Outputs and the `.partial-<pod>` directories renamed into place are siblings: both inside the mounts.
        assert paths.checkpoint_dir.startswith(f"{STORE_MOUNT}/{checkpoints}/")
        assert paths.repository_dir.startswith(f"{STORE_MOUNT}/{repositories}/")
        assert paths.judge_reference.startswith(f"{STORE_MOUNT}/{references}/")
        assert "/" not in paths.checkpoint_dir.removeprefix(f"{STORE_MOUNT}/{checkpoints}/")


def test_on_other_storage_the_whole_store_stays_writable(mocks: RecordingMocks) -> None:
    assert _store_mounts(mocks, T5_SMALL, owned=False) == [[{"name": "store", "mountPath": STORE_MOUNT}]] * 2


@pytest.mark.parametrize(("stack", "per_model"), [("prod", True), ("local", False)])
def test_aws_stacks_jobs_get_per_model_write_access(stack_plan: StackPlans, stack: str, per_model: bool) -> None:
    jobs = [j for j in of_kind(rendered(stack_plan(stack)), "Job") if "conversion" in str(j["metadata"]["labels"])]
    assert jobs
    for job in jobs:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        store = [m for m in container["volumeMounts"] if m["name"] == "store"]
        assert (store[0].get("readOnly") is True) == per_model, job["metadata"]["name"]
        assert all("subPath" in m and not m.get("readOnly") for m in store[1:])
        assert len(store) > 2 if per_model else len(store) == 1


def test_a_vllm_models_job_writes_its_download_repository_compile_cache_and_reference_directories() -> None:
    from tests.components.serving.test_service_vllm import LLAMA

    paths = model_paths(LLAMA, CONVERTER)
    assert writable_dirs(paths) == ("hf/llama", "repositories/llama", "compile-cache/llama", "references/llama")
    assert paths.compile_cache == f"{STORE_MOUNT}/compile-cache/llama"
