"""The Gateway component with a vLLM model among its backends: the pod mounts that model's downloaded checkpoint
directory read-only from the model store by ``subPath`` (once its download Job has completed) and runs with
``--tokenizer-config MODEL=<mount>/tokenizer_config.json``, so chat renders the model's own template; asserted on the
captured inputs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from components.common.layout import model_paths
from components.common.podsec import container_security_context
from components.gateway import Gateway, GatewayArgs, GatewayBackend
from components.gateway.spec import CHECKPOINT_MOUNT, gateway_selector
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.store import ModelStore, ModelStoreArgs
from tests.components.fixtures import CONVERTER, GPTJ_6B, TOOLS_IMAGE, make_target, serve
from tests.components.serving.test_service_vllm import LLAMA
from tritonft.engines.vllm.versions import TRITON_VERSION as VLLM_RELEASE
from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks, Registered, run_program

GATEWAY = "gw"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
JOB = "kubernetes:batch/v1:Job"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def _stack(*, with_conversion: bool = True, with_store: bool = True) -> None:
    """A vLLM Llama and GPT-J behind one gateway; the Llama's conversion (download Job) on the stack's store."""
    target = make_target()
    pods = gateway_selector(GATEWAY)
    store = ModelStore("store", ModelStoreArgs(target=target, models=(LLAMA, GPTJ_6B)))
    download = ModelConversion(
        "llama-download",
        ModelConversionArgs(
            target=target, store=store, model=LLAMA, tools_image=TOOLS_IMAGE, converter_version=CONVERTER
        ),
    )
    llama = serve("llama", LLAMA, target=target, gateway_pods=pods, triton_release=VLLM_RELEASE)
    gptj = serve("gptj", GPTJ_6B, target=target, gateway_pods=pods)
    backends = (
        GatewayBackend(LLAMA, llama, download if with_conversion else None),
        GatewayBackend(GPTJ_6B, gptj),
    )
    Gateway(
        GATEWAY,
        GatewayArgs(target=target, image=TOOLS_IMAGE, backends=backends, store=store if with_store else None),
    )


def _deployment(mocks: RecordingMocks) -> Registered:
    run_program(_stack)
    (deployment,) = [d for d in mocks.of_type(DEPLOYMENT) if d.inputs["metadata"]["name"] == GATEWAY]
    return deployment


def _pod(mocks: RecordingMocks) -> dict[str, Any]:
    return dict(_deployment(mocks).inputs["spec"]["template"]["spec"])


def _flag_values(command: list[str], flag: str) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == flag]


def test_the_gateway_reads_the_vllm_models_tokenizer_config_from_its_mounted_checkpoint(mocks):
    (container,) = _pod(mocks)["containers"]
    assert _flag_values(container["command"], "--tokenizer-config") == [
        f"llama={CHECKPOINT_MOUNT}/llama/tokenizer_config.json"
    ]


def test_the_vllm_models_checkpoint_is_mounted_read_only_by_subpath_from_the_store(mocks):
    pod = _pod(mocks)
    (container,) = pod["containers"]
    store_mounts = [m for m in container["volumeMounts"] if m["name"] == "store"]
    assert store_mounts == [
        {
            "name": "store",
            "mountPath": f"{CHECKPOINT_MOUNT}/llama",
            "subPath": f"hf/llama/{LLAMA.revision}",
            "readOnly": True,
        }
    ]
    (claim,) = [c for c in mocks.of_type(PVC) if c.name == "store-claim"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "store"]
    assert volume == {
        "name": "store",
        "persistentVolumeClaim": {"claimName": claim.inputs["metadata"]["name"], "readOnly": True},
    }


def test_the_mounted_subpath_is_the_checkpoint_directory_the_download_job_writes(mocks):
    pod = _pod(mocks)
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "store"]
    (job,) = [j for j in mocks.of_type(JOB) if j.name == "llama-download-job"]
    (job_container,) = job.inputs["spec"]["template"]["spec"]["containers"]
    # The Job mounts the store's root at /models: the gateway's subPath is the directory it publishes there.
    assert {"name": "CHECKPOINT_DIR", "value": f"/models/{mount['subPath']}"} in job_container["env"]


def test_the_gateway_deployment_waits_for_the_vllm_models_download_job_and_the_store(mocks):
    deployment = _deployment(mocks)
    (job,) = [j for j in mocks.of_type(JOB) if j.name == "llama-download-job"]
    (claim,) = [c for c in mocks.of_type(PVC) if c.name == "store-claim"]
    assert job.urn in deployment.depends_on
    assert claim.urn in deployment.depends_on


def test_the_pod_stays_restricted_with_the_store_mounted(mocks):
    pod = _pod(mocks)
    (container,) = pod["containers"]
    assert container["securityContext"] == container_security_context()
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert all(m.get("readOnly") for m in container["volumeMounts"] if m["name"] in ("store", "specs"))
    assert {next(iter(set(v) - {"name"})) for v in pod["volumes"]} <= {"configMap", "emptyDir", "persistentVolumeClaim"}


def test_the_ft_models_mount_no_checkpoint_and_get_no_tokenizer_config(mocks):
    command = _pod(mocks)["containers"][0]["command"]
    assert not any(value.startswith("gpt-j-6b=") for value in _flag_values(command, "--tokenizer-config"))


@pytest.mark.parametrize(
    "overrides", [{"with_conversion": False}, {"with_store": False}], ids=["no conversion", "no store"]
)
def test_a_vllm_backend_without_its_conversion_or_the_store_is_refused_by_name(mocks, overrides):
    with pytest.raises(UserError, match=r"'llama' is served by vLLM: give its conversion .* and the model store"):
        run_program(lambda: _stack(**overrides))


def test_without_a_vllm_model_the_gateway_mounts_no_store(mocks):
    def stack() -> None:
        target = make_target()
        gptj = serve("gptj", GPTJ_6B, target=target, gateway_pods=gateway_selector(GATEWAY))
        Gateway(GATEWAY, GatewayArgs(target=target, image=TOOLS_IMAGE, backends=(GatewayBackend(GPTJ_6B, gptj),)))

    run_program(stack)
    (deployment,) = [d for d in mocks.of_type(DEPLOYMENT) if d.inputs["metadata"]["name"] == GATEWAY]
    pod = deployment.inputs["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["specs", "tmp"]
    assert "--tokenizer-config" not in pod["containers"][0]["command"]


def test_a_changed_revision_moves_the_mount_to_the_new_checkpoint():
    newer = dataclasses.replace(LLAMA, revision="1" * 40)
    assert model_paths(newer, CONVERTER).checkpoint_subpath == f"hf/llama/{'1' * 40}"
    assert model_paths(LLAMA, CONVERTER).checkpoint_subpath == f"hf/llama/{LLAMA.revision}"
