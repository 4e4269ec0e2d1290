"""What ``pulumi up`` reports of each pod's tuning step, read from the init container's termination message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.tritonft.engines.fastertransformer.test_tune_script import start
from tritonft.engines.fastertransformer.gemm import INIT_CONTAINER, tuning_report, tuning_summary


def pod(name: str, *statuses: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"initContainerStatuses": list(statuses)}}


def terminated(message: str, exit_code: int = 0, name: str = INIT_CONTAINER) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": exit_code, "message": message}}}


def test_the_scripts_own_fallback_line_is_the_report(tmp_path: Path):
    start(tmp_path, mode="fail")
    message = (tmp_path / "pod-1" / "termination-log").read_text()
    report = tuning_report(pod("p", terminated(message)))
    assert report is not None and report["status"] == "fallback"
    assert report == json.loads(message)


def test_the_summary_names_each_pod_with_its_status_and_detail():
    line = {"status": "cached", "detail": "reused /models/gemm/x", "gpu": "NVIDIA A10G", "cache": "", "seconds": 1}
    pods = [pod("a", terminated(json.dumps(line))), pod("b", terminated(json.dumps(line | {"status": "fallback"})))]
    assert tuning_summary(pods) == {"a": "cached: reused /models/gemm/x", "b": "fallback: reused /models/gemm/x"}


def test_a_pod_without_the_tuning_step_or_still_tuning_has_no_report():
    running = {"name": INIT_CONTAINER, "state": {"running": {}}}
    assert tuning_report(pod("p")) is None
    assert tuning_report(pod("p", terminated("{}", name="other-init"))) is None
    assert tuning_report(pod("p", running)) is None
    assert tuning_summary([pod("p", running)]) == {}


def test_a_crash_before_the_report_is_unknown_with_the_log_tail_kubernetes_kept():
    report = tuning_report(pod("p", terminated("sh: 1: t5_gemm: Permission denied", exit_code=126)))
    assert report == {"status": "unknown", "detail": "sh: 1: t5_gemm: Permission denied"}
    assert tuning_report(pod("p", terminated("", exit_code=137))) == {
        "status": "unknown",
        "detail": "exited 137 without a report",
    }


def test_a_restarted_init_containers_last_report_is_used():
    status = {"name": INIT_CONTAINER, "state": {"waiting": {}}, "lastState": {"terminated": {"message": "x"}}}
    assert tuning_report(pod("p", status)) == {"status": "unknown", "detail": "x"}


def test_the_report_survives_a_round_trip_through_the_script_for_every_status(tmp_path: Path):
    start(tmp_path, "pod-1")
    start(tmp_path, "pod-2")
    statuses = [
        tuning_report(pod(n, terminated((tmp_path / n / "termination-log").read_text()))) for n in ("pod-1", "pod-2")
    ]
    assert [s["status"] for s in statuses if s] == ["tuned", "cached"]
