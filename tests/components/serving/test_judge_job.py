"""The in-cluster judge's Job: a verdict is never retried into a pass, but a disrupted pod (evicted, preempted) is
run again, and the node autoscaler never drains a node under it."""

from __future__ import annotations

from typing import Any

from components.serving.judge_job import CHECKPOINT_MOUNT, judge_job_manifest


def manifest() -> dict[str, Any]:
    return judge_job_manifest(
        name="prod-t5-3b-abcd1234-judge",
        namespace="triton",
        pod_labels={"app.kubernetes.io/component": "judge"},
        image="tools@sha256:" + "0" * 64,
        probe_settings_json="{}",
        cpu_node_selector={"triton-ft.io/node-pool": "system"},
        gpu_node_selector={"triton-ft.io/node-pool": "gpu"},
        deadline_s=1800,
    )


def test_a_failed_verdict_fails_the_job_at_once() -> None:
    spec = manifest()["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_an_evicted_or_preempted_judge_pod_is_run_again_not_counted_as_a_verdict() -> None:
    (rule,) = manifest()["spec"]["podFailurePolicy"]["rules"]
    assert rule == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def test_the_node_autoscaler_never_drains_a_node_under_a_running_judge() -> None:
    annotations = manifest()["spec"]["template"]["metadata"]["annotations"]
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


def test_a_judge_given_the_versions_checkpoint_mounts_it_read_only_from_the_store() -> None:
    job = judge_job_manifest(
        name="prod-llama-3-1-8b-abcd1234-judge",
        namespace="triton",
        pod_labels={"app.kubernetes.io/component": "judge"},
        image="tools@sha256:" + "0" * 64,
        probe_settings_json="{}",
        cpu_node_selector={"triton-ft.io/node-pool": "system"},
        gpu_node_selector={"triton-ft.io/node-pool": "gpu"},
        deadline_s=1800,
        checkpoint=("prod-model-store", "hf/llama-3-1-8b/0e9e39f249a16976918f6564b8830bc894c89659"),
    )

    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "store", "persistentVolumeClaim": {"claimName": "prod-model-store", "readOnly": True}} in (
        pod["volumes"]
    )
    assert {
        "name": "store",
        "mountPath": CHECKPOINT_MOUNT,
        "subPath": "hf/llama-3-1-8b/0e9e39f249a16976918f6564b8830bc894c89659",
        "readOnly": True,
    } in container["volumeMounts"]


def test_a_judge_without_a_checkpoint_mounts_nothing_of_the_store() -> None:
    pod = manifest()["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
