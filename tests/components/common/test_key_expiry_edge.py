"""An API key is refused on every route of the edge from 00:00 UTC of its ``expires`` day, with no ``up``: the Lua
check ``key_expiry_lua`` renders, run here in LuaJIT (the Lua Envoy runs) with a stand-in of Envoy's request handle
and a set clock; the ``EnvoyExtensionPolicy`` that carries it covers what the API-key policy covers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import pytest
from lupa import luajit21  # type: ignore[import-untyped]

from components.common.edge import (
    CLIENT_HEADER,
    KEY_EXPIRY_GRPC_STATUS,
    GatewayRef,
    key_expiry_lua,
    key_expiry_policy_spec,
)
from components.common.exposure import PROBE_CLIENT, EdgeObjects, EdgeObjectsArgs
from components.settings.api_keys import ApiKey
from tests.components.fixtures import make_target
from tests.components.validation import check_custom_resource
from tritonft.gateway.limits import key_expired
from tritonft.synth.engine import RecordingMocks, run_program

DAY = date(2026, 12, 31)
EXPIRING = ApiKey("webapp", "default", DAY)
SECOND_KEY = ApiKey("webapp", "k2")
MIDNIGHT = int(datetime(2026, 12, 31, tzinfo=UTC).timestamp())

HANDLE = """
function(headers)
  local handle = {}
  local view = {}
  function view:get(name) return headers[name] end
  function handle:headers() return view end
  function handle:respond(answer, body)
    handle.answer = answer
    handle.body = body
  end
  return handle
end
"""
"""Envoy's stream handle as the script uses it (``headers():get``, ``respond``: Envoy's Lua filter API)."""


@dataclass(frozen=True)
class Answer:
    headers: dict[str, str]
    body: str


def run(script: str, headers: Mapping[str, str], now: int) -> Answer | None:
    """``envoy_on_request`` of ``script`` for a request with ``headers`` at Unix time ``now``: the answer it sends
    itself, or None when the request goes on to its route."""
    lua = luajit21.LuaRuntime()
    lua.execute(script)
    lua.execute(f"os.time = function() return {now} end")
    handle = lua.eval(HANDLE)(lua.table_from(dict(headers)))
    lua.globals().envoy_on_request(handle)
    if handle.answer is None:
        return None
    return Answer(dict(handle.answer.items()), str(handle.body))


def script_of(*keys: ApiKey) -> str:
    script = key_expiry_lua(keys)
    assert script is not None
    return script


def test_a_key_is_refused_from_midnight_utc_of_its_day_with_the_gateways_own_401() -> None:
    answer = run(script_of(EXPIRING, SECOND_KEY), {CLIENT_HEADER: "webapp"}, MIDNIGHT)
    assert answer is not None
    assert answer.headers == {":status": "401", "content-type": "application/json"}
    assert json.loads(answer.body) == key_expired("webapp", DAY).body()


def test_the_key_is_refused_on_every_later_day_too() -> None:
    answer = run(script_of(EXPIRING), {CLIENT_HEADER: "webapp"}, MIDNIGHT + 40 * 86400)
    assert answer is not None and answer.headers[":status"] == "401"


def test_the_second_before_its_day_the_key_still_passes() -> None:
    assert run(script_of(EXPIRING), {CLIENT_HEADER: "webapp"}, MIDNIGHT - 1) is None


def test_a_grpc_call_with_the_key_ends_unauthenticated_with_the_same_message() -> None:
    headers = {CLIENT_HEADER: "webapp", "content-type": "application/grpc+proto"}
    answer = run(script_of(EXPIRING), headers, MIDNIGHT)
    assert answer is not None
    assert answer.headers == {
        ":status": "200",
        "content-type": "application/grpc",
        "grpc-status": str(KEY_EXPIRY_GRPC_STATUS),
        "grpc-message": key_expired("webapp", DAY).message,
    }
    assert answer.body == ""


def test_the_clients_other_key_passes_on_that_day() -> None:
    assert run(script_of(EXPIRING, SECOND_KEY), {CLIENT_HEADER: "webapp.k2"}, MIDNIGHT) is None


def test_a_request_without_a_key_id_passes() -> None:
    """The public routes (the HTTPS redirect, ACME's challenges): no API key, so no id to refuse."""
    assert run(script_of(EXPIRING), {"content-type": "application/json"}, MIDNIGHT) is None


def test_each_key_is_refused_from_its_own_day() -> None:
    later = ApiKey("batch", "default", date(2027, 1, 31))
    script = script_of(EXPIRING, later)
    assert run(script, {CLIENT_HEADER: "batch"}, MIDNIGHT) is None
    refused = run(script, {CLIENT_HEADER: "batch"}, int(datetime(2027, 1, 31, tzinfo=UTC).timestamp()))
    assert refused is not None and json.loads(refused.body) == key_expired("batch", date(2027, 1, 31)).body()


def test_without_a_key_that_expires_there_is_no_script() -> None:
    assert key_expiry_lua([ApiKey(PROBE_CLIENT), SECOND_KEY]) is None


def test_the_check_covers_every_route_of_the_stacks_own_gateway() -> None:
    spec = key_expiry_policy_spec("-- lua", GatewayRef("prod-edge"))
    assert spec["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "prod-edge"}]
    assert spec["lua"] == [{"type": "Inline", "inline": "-- lua"}]


def _edge(mocks: RecordingMocks, keys: tuple[ApiKey, ...], *, make_gateway: bool = True) -> dict[str, list[Any]]:
    """The inputs of the stack-wide edge objects, by kind (one program run)."""
    args = EdgeObjectsArgs(
        target=make_target(),
        gateway=GatewayRef("test-edge"),
        base_host="triton.example.com",
        models=("minilm",),
        api=True,
        make_gateway=make_gateway,
        keys=(ApiKey(PROBE_CLIENT), *keys),
        monitoring=True,
    )
    run_program(lambda: EdgeObjects("edge", args))
    made: dict[str, list[Any]] = {}
    for resource in mocks.resources:
        made.setdefault(str(resource.inputs.get("kind")), []).append(resource.inputs)
    return made


def _expired_alert(made: dict[str, list[Any]]) -> dict[str, Any]:
    (rules,) = made["PrometheusRule"]
    (rule,) = [r for g in rules["spec"]["groups"] for r in g["rules"] if r["alert"] == "ApiKeyExpired"]
    return dict(rule)


def test_the_stack_makes_the_policy_with_the_script_of_its_live_keys(mocks: RecordingMocks) -> None:
    made = _edge(mocks, (EXPIRING, SECOND_KEY))
    (policy,) = made["EnvoyExtensionPolicy"]
    assert policy["spec"] == key_expiry_policy_spec(script_of(EXPIRING), GatewayRef("test-edge"))
    assert policy["metadata"]["name"] == "edge-api-keys-expiry"
    assert check_custom_resource(policy) == []
    untargeted = {**policy, "spec": {"lua": policy["spec"]["lua"]}}
    (problem,) = check_custom_resource(untargeted)
    assert problem.endswith("an EnvoyExtensionPolicy needs targetRefs or targetSelectors")
    assert _expired_alert(made)["annotations"]["summary"].endswith("the edge refuses it")


def test_on_a_clusters_own_envoy_gateway_no_lua_policy_is_made_and_the_alert_says_so(mocks: RecordingMocks) -> None:
    """Envoy Gateway answers 500 on every route a Lua policy targets where its configuration leaves Lua off (its
    default), and a cluster's own Envoy Gateway is not the stack's to configure: there the OpenAI gateway refuses the
    key on its day, an encoder's own routes at the next ``up``, and the alert says to run one."""
    made = _edge(mocks, (EXPIRING,), make_gateway=False)
    assert "EnvoyExtensionPolicy" not in made
    rule = _expired_alert(made)
    assert rule["annotations"]["summary"].endswith("but the edge still accepts it")
    assert rule["annotations"]["description"].endswith("run one.")


@pytest.mark.parametrize("keys", [(), (SECOND_KEY,)], ids=["no-client-key", "no-expiry"])
def test_no_policy_when_no_key_expires(mocks: RecordingMocks, keys: tuple[ApiKey, ...]) -> None:
    assert "EnvoyExtensionPolicy" not in _edge(mocks, keys)
