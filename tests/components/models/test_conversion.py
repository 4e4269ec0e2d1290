"""ModelConversion: a content-keyed Job on CPU nodes that Triton waits for."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any

import pytest

from components.common import sizing
from components.common.layout import conversion_job_name, model_paths, reference_job_name
from components.common.placement import GPU_PRESENT_LABEL
from components.models.conversion import ModelConversion, ModelConversionArgs
from components.models.conversion_spec import HF_TOKEN_MOUNT, REFERENCE_SCRIPT
from components.models.store import ModelStore, ModelStoreArgs
from tests.components.fixtures import (
    CONVERTER,
    CPU_POOL,
    GPTJ_6B,
    GPU_POOL,
    MINILM_CPU,
    T5_SMALL,
    TOOLS_IMAGE,
    containers,
    make_target,
    pod_spec,
    serve,
)
from tritonft.errors import UserError
from tritonft.spec import Batching, ModelSpec
from tritonft.synth.engine import RecordingMocks, Registered, run_program
from tritonft.synth.manifests import SECRET_PLACEHOLDER, is_secret, manifests_of

JOB = "kubernetes:batch/v1:Job"


def _job(mocks: RecordingMocks, model: ModelSpec = GPTJ_6B, name: str = "m-job", **kwargs: Any) -> Registered:
    """The conversion Job (``m-job``) or, with ``name="m-reference-job"``, its reference Job."""
    run_program(lambda: serve("m", model, **kwargs))
    (job,) = [j for j in mocks.of_type(JOB) if j.name == name]
    return job


def test_the_job_runs_on_cpu_nodes_only(mocks):
    spec = pod_spec(_job(mocks))
    assert spec["nodeSelector"] == CPU_POOL
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    exprs = {(e["key"], e["operator"], tuple(e["values"])) for e in term["matchExpressions"]}
    ((gpu_key, gpu_value),) = GPU_POOL.items()
    assert (gpu_key, "NotIn", (gpu_value,)) in exprs
    assert (GPU_PRESENT_LABEL, "NotIn", ("true",)) in exprs


def test_the_job_does_not_tolerate_the_gpu_taint_nor_request_gpus(mocks):
    job = _job(mocks)
    assert "tolerations" not in pod_spec(job)
    (container,) = containers(job)
    assert not any("gpu" in k for k in container["resources"]["limits"])


def test_the_job_name_is_the_content_keyed_name(mocks):
    job = _job(mocks)
    assert job.inputs["metadata"]["name"] == conversion_job_name(GPTJ_6B, CONVERTER)


def test_the_job_name_changes_with_the_revision(mocks):
    before = conversion_job_name(GPTJ_6B, CONVERTER)
    job = _job(mocks, model=replace(GPTJ_6B, revision="f" * 40))
    assert job.inputs["metadata"]["name"] != before


def test_the_job_name_does_not_change_with_replicas_or_autoscaling(mocks):
    job = _job(mocks, autoscaler="none", monitoring=False, min_replicas=2)
    assert job.inputs["metadata"]["name"] == conversion_job_name(GPTJ_6B, CONVERTER)


def test_the_job_name_changes_with_a_repository_knob_but_keeps_the_checkpoint(mocks):
    rebatched = replace(GPTJ_6B, batching=Batching(max_batch_size=64))
    job = _job(mocks, model=rebatched)
    env = {e["name"]: e["value"] for e in containers(job)[0]["env"]}
    assert job.inputs["metadata"]["name"] != conversion_job_name(GPTJ_6B, CONVERTER)
    assert env["CHECKPOINT_DIR"].endswith(GPTJ_6B.conversion_key(CONVERTER))


def test_the_job_is_replaced_not_updated_under_its_fixed_name(mocks):
    assert _job(mocks).delete_before_replace


def test_the_job_has_backoff_and_deadline_and_stays_after_finishing_so_refresh_is_clean(mocks):
    spec = _job(mocks).inputs["spec"]
    expected = sizing.job_sizing(GPTJ_6B)
    assert spec["backoffLimit"] == expected.backoff_limit
    assert spec["activeDeadlineSeconds"] == (expected.backoff_limit + 1) * expected.active_deadline_seconds
    assert "ttlSecondsAfterFinished" not in spec


def test_each_try_of_the_job_gets_the_whole_deadline_of_one_try(mocks):
    spec = _job(mocks).inputs["spec"]
    per_try = sizing.job_sizing(GPTJ_6B).active_deadline_seconds
    assert spec["template"]["spec"]["activeDeadlineSeconds"] == per_try, "the pod's deadline bounds one try"
    assert spec["activeDeadlineSeconds"] > spec["backoffLimit"] * per_try, "a retry is not cut by the first's time"


def test_pulumi_waits_for_the_job_with_a_timeout_scaled_from_the_model(mocks):
    small = sizing.job_sizing(T5_SMALL).pulumi_timeout_minutes
    job = _job(mocks)
    assert job.custom_timeouts == {"create": f"{sizing.job_sizing(GPTJ_6B).pulumi_timeout_minutes}m"} | {
        "update": f"{sizing.job_sizing(GPTJ_6B).pulumi_timeout_minutes}m"
    }
    assert sizing.job_sizing(GPTJ_6B).pulumi_timeout_minutes > small


def test_the_job_is_sized_from_the_model(mocks):
    (container,) = containers(_job(mocks))
    expected = sizing.job_sizing(GPTJ_6B)
    assert container["resources"]["requests"] == {
        "cpu": expected.cpu_request,
        "memory": expected.memory_request,
        "ephemeral-storage": expected.ephemeral_request,
    }


def test_the_job_passes_repo_revision_tp_and_dtype_to_the_tools(mocks):
    (container,) = containers(_job(mocks))
    env = {e["name"]: e["value"] for e in container["env"]}
    assert (env["HF_REPO"], env["HF_REVISION"], env["TP"], env["DTYPE"]) == (
        GPTJ_6B.hf_repo,
        GPTJ_6B.revision,
        "4",
        "fp16",
    )


def test_the_spec_reaches_the_job_through_an_immutable_config_map(mocks):
    job = _job(mocks)
    (spec_map,) = [r for r in mocks.of_type("kubernetes:core/v1:ConfigMap") if r.name == "m-spec"]
    assert spec_map.inputs["immutable"] is True
    assert spec_map.inputs["data"]["spec.json"] == GPTJ_6B.to_json()
    assert spec_map.urn in job.depends_on


def test_the_hf_token_is_a_mounted_secret_never_a_plain_value(mocks):
    job = _job(mocks, hf_token="hf_supersecret")
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    spec = pod_spec(job)
    assert any(v.get("secret", {}).get("secretName") == secret.inputs["metadata"]["name"] for v in spec["volumes"])
    assert any(m["mountPath"] == HF_TOKEN_MOUNT for m in containers(job)[0]["volumeMounts"])
    assert "hf_supersecret" not in str([m.body for m in manifests_of(mocks.resources)])
    (secret_manifest,) = [m for m in manifests_of(mocks.resources) if m.kind == "Secret"]
    assert secret_manifest.body["stringData"] == {"token": SECRET_PLACEHOLDER}, "its key kept, its value masked"


def test_without_a_token_no_secret_is_created_or_mounted(mocks):
    job = _job(mocks)
    assert mocks.of_type("kubernetes:core/v1:Secret") == []
    assert not any("secret" in v for v in pod_spec(job)["volumes"])


def test_the_job_waits_for_the_store_claim(mocks):
    job = _job(mocks)
    (claim,) = mocks.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    assert claim.urn in job.depends_on


def test_the_job_pod_is_non_root_and_read_only(mocks):
    job = _job(mocks)
    sc = containers(job)[0]["securityContext"]
    assert pod_spec(job)["securityContext"]["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}


def test_the_token_reaches_the_engine_as_a_pulumi_secret(mocks):
    run_program(lambda: serve("m", T5_SMALL, hf_token="hf_x"))
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    assert is_secret(secret.inputs["stringData"])


def test_the_job_pods_only_reach_dns_and_https_and_accept_nothing(mocks):
    job = _job(mocks)
    (policy,) = [p for p in mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy") if p.name == "m-job-netpol"]
    spec = policy.inputs["spec"]
    pod_labels = job.inputs["spec"]["template"]["metadata"]["labels"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert {p["port"] for rule in spec["egress"] for p in rule["ports"]} == {53, 443}


@pytest.mark.parametrize(
    ("address", "reached"),
    [
        ("18.160.10.1", True),  # a public address (the Hub's CDN is one)
        ("169.254.169.254", False),  # the node's instance metadata (its credentials)
        ("10.0.12.7", False),  # a pod or node of the VPC: a Triton, the gateway
        ("172.20.0.1", False),  # the cluster's Service network, the API server's in-cluster address
        ("192.168.1.10", False),
        ("100.64.3.2", False),  # shared address space some pod networks use
    ],
)
def test_the_jobs_https_reaches_public_addresses_only(mocks, address, reached):
    _job(mocks)
    (policy,) = [p for p in mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy") if p.name == "m-job-netpol"]
    (https,) = [r for r in policy.inputs["spec"]["egress"] if r["ports"] == [{"port": 443, "protocol": "TCP"}]]
    ip = ipaddress.ip_address(address)
    blocks = [peer["ipBlock"] for peer in https["to"]]
    admitted = any(
        ip in ipaddress.ip_network(b["cidr"]) and not any(ip in ipaddress.ip_network(e) for e in b.get("except", []))
        for b in blocks
    )
    assert admitted is reached


def _convert_with(**kwargs: Any) -> None:
    target = make_target()
    store = ModelStore("s", ModelStoreArgs(target=target, models=(T5_SMALL,)))
    ModelConversion(
        "m",
        ModelConversionArgs(
            target=target, store=store, model=T5_SMALL, tools_image=TOOLS_IMAGE, converter_version=CONVERTER, **kwargs
        ),
    )


def test_an_existing_token_secret_is_mounted_without_creating_one(mocks):
    run_program(lambda: _convert_with(hf_token_secret="org-hf-token"))
    jobs = mocks.of_type(JOB)
    assert mocks.of_type("kubernetes:core/v1:Secret") == []
    assert {j.name for j in jobs} == {"m-job", "m-reference-job"}
    for job in jobs:  # the reference Job downloads the same (maybe gated) revision
        assert {
            "name": "hf-token",
            "secret": {
                "secretName": "org-hf-token",
                "defaultMode": 0o440,
                "items": [{"key": "token", "path": "token"}],
            },
        } in pod_spec(job)["volumes"]


def test_a_token_and_a_token_secret_together_are_refused_before_anything_registers(mocks):
    with pytest.raises(UserError, match="hf_token or hf_token_secret"):
        run_program(lambda: _convert_with(hf_token="x", hf_token_secret="y"))
    assert mocks.of_type("triton-ft:conversion:ModelConversion") == []


def _conversion_env(mocks: RecordingMocks, model: ModelSpec, **kwargs: Any) -> dict[str, str]:
    def program() -> None:
        target = make_target()
        store = ModelStore("m-store", ModelStoreArgs(target=target, models=(model,)))
        args = ModelConversionArgs(
            target=target, store=store, model=model, tools_image=TOOLS_IMAGE, converter_version=CONVERTER, **kwargs
        )
        ModelConversion("m", args)

    run_program(program)
    (job,) = [j for j in mocks.of_type(JOB) if j.name == "m-job"]
    (container,) = containers(job)
    return {e["name"]: e["value"] for e in container["env"]}


def test_a_model_the_reference_can_hold_is_checked_for_generation_in_the_job(mocks):
    env = _conversion_env(mocks, T5_SMALL, bleu_threshold=20.0)
    assert env["VERIFY_GENERATE"] == "1"
    assert env["BLEU_THRESHOLD"] == "20.0"


def test_the_stack_knob_turns_the_generation_check_off(mocks):
    assert _conversion_env(mocks, T5_SMALL, verify_generation=False)["VERIFY_GENERATE"] == "0"


def test_a_model_too_large_for_the_reference_is_not_checked_for_generation(mocks):
    assert _conversion_env(mocks, GPTJ_6B)["VERIFY_GENERATE"] == "0"


def test_a_generator_gets_a_reference_job_beside_its_conversion_not_after_it(mocks):
    conversion = _job(mocks)
    (reference,) = [j for j in mocks.of_type(JOB) if j.name == "m-reference-job"]
    assert reference.urn not in conversion.depends_on and conversion.urn not in reference.depends_on
    assert reference.inputs["metadata"]["name"] == reference_job_name(GPTJ_6B, CONVERTER)
    (container,) = containers(reference)
    assert container["command"] == ["/bin/sh", "-c", REFERENCE_SCRIPT]
    env = {e["name"]: e["value"] for e in container["env"]}
    conversion_env = {e["name"]: e["value"] for e in containers(conversion)[0]["env"]}
    assert (
        env["JUDGE_REFERENCE"] == conversion_env["JUDGE_REFERENCE"] == model_paths(GPTJ_6B, CONVERTER).judge_reference
    )
    assert conversion_env["REFERENCE_JOB"] == reference.inputs["metadata"]["name"], "named in the conversion's wait"


def test_the_reference_job_is_sized_and_waited_for_from_its_own_step(mocks):
    reference = _job(mocks, name="m-reference-job")
    expected = sizing.judge_reference_job_sizing(GPTJ_6B)
    (container,) = containers(reference)
    assert container["resources"]["requests"] == {
        "cpu": expected.cpu_request,
        "memory": expected.memory_request,
        "ephemeral-storage": expected.ephemeral_request,
    }
    spec = reference.inputs["spec"]
    assert spec["template"]["spec"]["activeDeadlineSeconds"] == expected.active_deadline_seconds
    assert reference.custom_timeouts["create"] == f"{expected.pulumi_timeout_minutes}m"
    assert spec["backoffLimit"] == sizing.JUDGE_REFERENCE_BACKOFF_LIMIT


def test_the_reference_jobs_blas_threads_are_its_cpu_limit_not_the_nodes_vcpus(mocks):
    conversion = _job(mocks)
    (reference,) = [j for j in mocks.of_type(JOB) if j.name == "m-reference-job"]
    (container,) = containers(reference)
    limit = container["resources"]["limits"]["cpu"]
    assert limit == sizing.judge_reference_job_sizing(GPTJ_6B).cpu_limit and int(limit) >= 1
    env = {e["name"]: e["value"] for e in container["env"]}
    assert [env.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")] == [limit] * 3
    assert "OMP_NUM_THREADS" not in {e["name"] for e in containers(conversion)[0]["env"]}, "only the reference step"


def test_the_reference_job_runs_where_and_as_the_conversion_does(mocks):
    conversion = _job(mocks)
    (reference,) = [j for j in mocks.of_type(JOB) if j.name == "m-reference-job"]
    assert pod_spec(reference)["nodeSelector"] == pod_spec(conversion)["nodeSelector"] == CPU_POOL
    assert pod_spec(reference)["affinity"] == pod_spec(conversion)["affinity"]
    assert pod_spec(reference)["securityContext"] == pod_spec(conversion)["securityContext"]
    labels = reference.inputs["spec"]["template"]["metadata"]["labels"]
    (policy,) = [p for p in mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy") if p.name == "m-job-netpol"]
    assert policy.inputs["spec"]["podSelector"]["matchLabels"].items() <= labels.items(), "only DNS and HTTPS out"


def test_a_serving_knob_keeps_the_reference_job_and_a_new_revision_replaces_it():
    rebatched = replace(GPTJ_6B, batching=Batching(max_batch_size=64))
    assert reference_job_name(rebatched, CONVERTER) == reference_job_name(GPTJ_6B, CONVERTER)
    assert model_paths(rebatched, CONVERTER).judge_reference == model_paths(GPTJ_6B, CONVERTER).judge_reference
    revised = replace(GPTJ_6B, revision="f" * 40)
    assert reference_job_name(revised, CONVERTER) != reference_job_name(GPTJ_6B, CONVERTER)
    assert model_paths(revised, CONVERTER).judge_reference != model_paths(GPTJ_6B, CONVERTER).judge_reference


def test_an_encoder_has_no_reference_job(mocks):
    run_program(lambda: serve("m", MINILM_CPU))
    assert [j.name for j in mocks.of_type(JOB)] == ["m-job"]
