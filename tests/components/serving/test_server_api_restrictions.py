"""Triton's APIs no client of the stack calls (shared memory, repository, statistics, trace, logging) are restricted
on the server itself, by the flags its release has (``components.serving.server_spec``), asserted on the Deployment
the program registers. The real servers' answers to these flags:
``tests/system/realtriton/test_server_api_restrictions.py``."""

from __future__ import annotations

from typing import Any

import pytest

from components.serving.server_spec import (
    ADMIN_HEADER,
    ADMIN_KEY_ENV,
    RESTRICTED_APIS,
    api_restriction_flags,
    release_tuple,
)
from tests.components.fixtures import GPTJ_6B, T5_SMALL, served_deployment, triton_container
from tritonft.engines.fastertransformer.versions import TRITON_VERSION
from tritonft.errors import UserError


def _flag(command: list[str], name: str) -> str | None:
    values = [f.split("=", 1)[1] for f in command if f.startswith(f"{name}=")]
    assert len(values) <= 1, f"{name} given twice"
    return values[0] if values else None


def _restriction(value: str) -> tuple[set[str], str]:
    apis, _, grant = value.partition(":")
    return set(apis.split(",")), grant


def test_the_ft_images_triton_restricts_the_unneeded_grpc_apis_to_a_header_valued_with_the_pods_uid(mocks: Any) -> None:
    container = triton_container(served_deployment(mocks, GPTJ_6B))
    value = _flag(container["command"], "--grpc-restricted-protocol")
    assert value is not None
    apis, grant = _restriction(value)
    assert apis == set(RESTRICTED_APIS) >= {"shared-memory", "model-repository"}
    assert grant == f"{ADMIN_HEADER}=$({ADMIN_KEY_ENV})"
    (key,) = [e for e in container["env"] if e["name"] == ADMIN_KEY_ENV]
    assert key == {"name": ADMIN_KEY_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}


def test_the_ft_images_triton_23_04_gets_no_http_restriction_flag_it_does_not_have(mocks: Any) -> None:
    command = triton_container(served_deployment(mocks, T5_SMALL))["command"]
    assert TRITON_VERSION == "23.04"
    assert _flag(command, "--http-restricted-api") is None


def test_a_current_triton_restricts_the_same_apis_over_http_too(mocks: Any) -> None:
    command = triton_container(served_deployment(mocks, T5_SMALL, triton_release="24.10"))["command"]
    http = _flag(command, "--http-restricted-api")
    grpc = _flag(command, "--grpc-restricted-protocol")
    assert http is not None and grpc is not None
    assert _restriction(http) == _restriction(grpc)


def test_model_control_is_off_so_no_client_can_load_or_unload_a_model(mocks: Any) -> None:
    command = triton_container(served_deployment(mocks, T5_SMALL))["command"]
    assert _flag(command, "--model-control-mode") == "none"


@pytest.mark.parametrize(("release", "http"), [("23.04", False), ("24.09", False), ("24.10", True), ("25.07", True)])
def test_the_http_restriction_follows_the_release(release: str, http: bool) -> None:
    flags = api_restriction_flags(release)
    assert any(f.startswith("--http-restricted-api=") for f in flags) is http
    assert any(f.startswith("--grpc-restricted-protocol=") for f in flags)


def test_a_release_that_is_not_yy_mm_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"'latest' is not YY\.MM"):
        release_tuple("latest")


def test_a_service_with_a_bad_triton_release_is_refused_before_anything_registers(mocks: Any) -> None:
    with pytest.raises(UserError, match=r"triton_release: Triton release 'r23' is not YY\.MM"):
        served_deployment(mocks, T5_SMALL, triton_release="r23")
