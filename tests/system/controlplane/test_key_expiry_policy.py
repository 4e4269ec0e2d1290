"""The edge's key-expiry check as Envoy Gateway receives it: the ``EnvoyExtensionPolicy`` the stack makes is accepted
by the real API server under Envoy Gateway's own CRD (its schema and CEL rules, v1.9.1), and its Lua passes Envoy
Gateway's strict validation as that release runs it (its mocks of Envoy's stream handle and its sandbox, read from
the release's source, run here in LuaJIT; ``internal/gatewayapi/luavalidator``) (issue 51)."""

from __future__ import annotations

from datetime import date

from lupa import luajit21  # type: ignore[import-untyped]

from components.common.edge import ENVOY_GATEWAY_API, GatewayRef, key_expiry_lua, key_expiry_policy_spec
from components.settings.api_keys import ApiKey
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import REAL_CRD_GROUPS, envoy_gateway_source, install_crds

KEYS = (ApiKey("probe"), ApiKey("webapp", "default", date(2026, 12, 31)), ApiKey("webapp", "k2"))


def script() -> str:
    made = key_expiry_lua(KEYS)
    assert made is not None
    return made


def test_the_api_server_accepts_the_policy_under_envoy_gateways_crd(cluster: Cluster) -> None:
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    policy = {
        "apiVersion": ENVOY_GATEWAY_API,
        "kind": "EnvoyExtensionPolicy",
        "metadata": {"name": "t-edge-api-keys-expiry", "namespace": cluster.namespace},
        "spec": key_expiry_policy_spec(script(), GatewayRef("t-edge")),
    }
    stored = cluster.kube.apply(policy)
    assert stored["spec"]["lua"][0]["inline"] == script()


def test_the_script_passes_envoy_gateways_strict_lua_validation() -> None:
    """What ``LuaValidator.runLua`` does with the default (strict) validation: the mocks, then the sandbox, then the
    script and a call of ``envoy_on_request`` with the mocked handle; an error there marks the policy invalid."""
    validator = envoy_gateway_source() / "internal/gatewayapi/luavalidator"
    lua = luajit21.LuaRuntime()
    lua.execute((validator / "mocks.lua").read_text())
    lua.execute((validator / "security.lua").read_text())
    lua.execute(script() + "\nenvoy_on_request(StreamHandle)")
