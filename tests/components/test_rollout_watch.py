"""The RolloutWatch dynamic resource: pickled by reference, re-run exactly when the rollout changes."""

from __future__ import annotations

import base64
import pickletools
from io import StringIO
from typing import Any

import dill  # type: ignore[import-untyped]
from pulumi.dynamic.dynamic import serialize_provider

from components.rollout_watch import RolloutWatchProvider, spec_hash, startup_report
from tests.tritonft.rollout.test_command import Api, named
from tritonft.rollout.verdict import COMPARED_INPUTS

PROPS: dict[str, Any] = {
    "namespace": "triton",
    "deployment": "prod-t5-3b",
    "spec_hash": "a" * 64,
    "min_replicas": 2,
    "autoscaler": True,
    "nodes_max": 8,
    "deadline_s": 1500.0,
    "grace_s": 60.0,
    "kubeconfig": "[secret]",
    "context": None,
}


def test_provider_is_pickled_by_reference() -> None:
    blob = base64.b64decode(serialize_provider(RolloutWatchProvider()))
    listing = StringIO()
    pickletools.dis(blob, out=listing)
    assert "'components.rollout_watch'" in listing.getvalue() and "'RolloutWatchProvider'" in listing.getvalue()
    assert b"co_code" not in blob
    assert type(dill.loads(blob)) is RolloutWatchProvider


def test_a_new_deployment_spec_re_runs_the_wait() -> None:
    diff = RolloutWatchProvider().diff("triton/prod-t5-3b", PROPS, {**PROPS, "spec_hash": "b" * 64})
    assert diff.changes is True


def test_a_live_generation_is_not_an_input_so_an_autoscalers_scale_does_not_re_run_it() -> None:
    """Olds written by the previous version carried ``generation``; the watch no longer compares it."""
    assert "generation" not in COMPARED_INPUTS
    olds = {**PROPS, "generation": 3}
    assert RolloutWatchProvider().diff("triton/prod-t5-3b", olds, {**PROPS, "generation": 9}).changes is False


def test_the_spec_hash_follows_the_applied_spec_only() -> None:
    spec = {"template": {"spec": {"containers": [{"image": "r@sha256:1"}]}}, "strategy": {"type": "RollingUpdate"}}
    same = {"strategy": {"type": "RollingUpdate"}, "template": {"spec": {"containers": [{"image": "r@sha256:1"}]}}}
    assert spec_hash(spec) == spec_hash(same)
    assert spec_hash(spec) != spec_hash({**spec, "template": {"spec": {"containers": [{"image": "r@sha256:2"}]}}})


def test_an_unchanged_deployment_or_rotated_credentials_do_not_re_run_it() -> None:
    provider = RolloutWatchProvider()
    assert provider.diff("triton/prod-t5-3b", PROPS, dict(PROPS)).changes is False
    assert provider.diff("triton/prod-t5-3b", PROPS, {**PROPS, "kubeconfig": "other"}).changes is False


def test_the_startup_report_never_fails_a_rollout_that_succeeded() -> None:
    api = Api([named("a", "2026-11-26T14:00:00Z")], [])
    api.refuse.add("Pod")  # an identity that may not list pods after all: no report, the rollout stands
    assert startup_report(api, "ns", "prod-t5-3b") == {}
