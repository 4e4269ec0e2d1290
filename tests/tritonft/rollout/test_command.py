"""``tritonft startup-budget``'s reading of a cluster, against a stand-in API that answers as kube-apiserver does
(the real one: ``tests/system/controlplane/test_startup_budget.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tritonft.rollout.test_startup import TRITON_LOG, event, pod
from tritonft.errors import UserError
from tritonft.kube import ApiError
from tritonft.rollout.command import LOG_LIMIT_BYTES, deployment_startups

DEPLOYMENT = {"spec": {"selector": {"matchLabels": {"app.kubernetes.io/instance": "prod-t5-3b"}}}}


class Api:
    """Answers get/items/request like the API server, for one namespace; ``refuse`` kinds answer 403."""

    def __init__(self, pods: list[dict[str, Any]], events: list[dict[str, Any]], *, log: str | None = None) -> None:
        self.pods, self.events, self.log = pods, events, log
        self.refuse: set[str] = set()
        self.log_params: list[dict[str, str]] = []

    def _check(self, kind: str) -> None:
        if kind in self.refuse:
            raise ApiError(403, f'{kind.lower()}s is forbidden: User "ci" cannot list resource')

    def get(self, _api: str, kind: str, name: str, _ns: str | None = None) -> Any:
        self._check(kind)
        if name != "prod-t5-3b":
            raise ApiError(404, f'deployments.apps "{name}" not found')
        return DEPLOYMENT

    def items(self, _api: str, kind: str, _ns: str | None = None, selector: str = "") -> list[Any]:
        self._check(kind)
        if kind == "Pod":
            assert selector == "app.kubernetes.io/instance=prod-t5-3b"
            return self.pods
        return self.events

    def path(self, _api: str, _kind: str, ns: str | None, name: str | None = None) -> str:
        return f"/api/v1/namespaces/{ns}/pods/{name}"

    def request(self, _method: str, path: str, *, params: dict[str, str]) -> Any:
        assert path.endswith("/log")
        self.log_params.append(params)
        if self.log is None:
            raise ApiError(502, "dial tcp 192.0.2.1:10250: connect: connection refused")
        return self.log


def named(name: str, created: str, **kwargs: Any) -> dict[str, Any]:
    found = pod(**kwargs)
    found["metadata"].update(name=name, creationTimestamp=created, uid=name)
    return found


def test_one_budget_per_pod_oldest_first() -> None:
    api = Api([named("b", "2026-11-26T14:00:05Z"), named("a", "2026-11-26T14:00:09Z")], [])
    assert [s.pod for s in deployment_startups(api, "ns", "prod-t5-3b")] == ["b", "a"]  # type: ignore[arg-type]


def test_a_pod_being_deleted_is_left_out() -> None:
    going = named("old", "2026-11-26T13:00:00Z")
    going["metadata"]["deletionTimestamp"] = "2026-11-26T14:00:00Z"
    api = Api([going, named("new", "2026-11-26T14:00:00Z")], [])
    assert [s.pod for s in deployment_startups(api, "ns", "prod-t5-3b")] == ["new"]  # type: ignore[arg-type]


def test_the_servers_log_gives_the_model_loads_read_from_its_start_and_bounded() -> None:
    api = Api([named("a", "2026-11-26T14:00:00Z")], [], log=TRITON_LOG)
    (found,) = deployment_startups(api, "ns", "prod-t5-3b")  # type: ignore[arg-type]
    assert found.models["t5-3b-ft"] == 68.753
    assert api.log_params == [{"container": "triton", "limitBytes": str(LOG_LIMIT_BYTES)}]


def test_a_log_the_kubelet_cannot_give_leaves_the_stages_without_model_loads() -> None:
    api = Api([named("a", "2026-11-26T14:00:00Z")], [], log=None)
    (found,) = deployment_startups(api, "ns", "prod-t5-3b")  # type: ignore[arg-type]
    assert found.total == 230.0 and not found.models


def test_events_the_identity_may_not_list_leave_the_stages_and_drop_only_the_details() -> None:
    api = Api([named("a", "2026-11-26T14:00:00Z")], [event("Nominated", 1, name="a")])
    api.refuse.add("Event")
    (found,) = deployment_startups(api, "ns", "prod-t5-3b", logs=False)  # type: ignore[arg-type]
    assert found.total == 230.0 and found.details["node_provisioned"] is None


def test_a_missing_deployment_is_named_with_how_to_list_them() -> None:
    with pytest.raises(UserError, match=r"--deployment nope: no such Deployment in namespace ns; list them with"):
        deployment_startups(Api([], []), "ns", "nope")  # type: ignore[arg-type]
