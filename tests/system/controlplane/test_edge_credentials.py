"""The API keys the stack generates authenticate a request through the edge, read the way Envoy Gateway reads
them: the credentials Secret and the SecurityPolicy go to the real API server (with the real CRDs), are read back
from it, and configure the data-plane stand-in (nginx, ``edge_standin.py``) in front of a backend. The right key
passes and the backend learns the client's name (never the key); a wrong or missing key is refused."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from components.common.edge import CLIENT_HEADER, GatewayRef
from components.common.exposure import PROBE_CLIENT, EdgeObjects, EdgeObjectsArgs
from components.settings.api_keys import ApiKey
from tests.components.fixtures import make_target
from tests.system.controlplane.edge_standin import NGINX, echo_backend, get, nginx, nginx_conf
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import REAL_CRD_GROUPS, install_crds
from tests.system.controlplane.server import free_port
from tritonft.synth.engine import RecordingMocks, run_program


@pytest.fixture(autouse=True)
def _nginx_installed() -> None:
    """The stand-in data plane is Debian's nginx, which the test command installs: never skipped where it is not."""
    assert Path(NGINX).exists(), f"nginx missing at {NGINX}: run `bash scripts/setup/nginx.sh`"


def planned_edge(mocks: RecordingMocks) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The stack's credentials Secret and SecurityPolicy as the program registers them, and the keys it exports."""
    exported: dict[str, str] = {}

    def build() -> Any:
        args = EdgeObjectsArgs(
            target=make_target(),
            gateway=GatewayRef("test-edge"),
            base_host="triton.example.com",
            models=("t5",),
            api=True,
            keys=(ApiKey(PROBE_CLIENT), ApiKey("webapp"), ApiKey("webapp", "k2")),
        )
        return EdgeObjects("test-edge", args).api_keys.apply(exported.update)

    run_program(build)
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    (policy,) = [
        r for r in mocks.resources if r.inputs.get("kind") == "SecurityPolicy" and "apiKeyAuth" in r.inputs["spec"]
    ]
    return copy.deepcopy(secret.inputs), copy.deepcopy(policy.inputs), exported


def unwrap(value: Any) -> Any:
    """A Pulumi secret's value as the engine would send it to the API server."""
    return value["value"] if isinstance(value, dict) and "value" in value and len(value) == 2 else value


@pytest.fixture
def served_edge(cluster: Cluster, mocks: RecordingMocks, tmp_path: Path) -> Any:
    secret, policy, keys = planned_edge(mocks)
    kube, ns = cluster.kube, cluster.namespace
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    install_crds(kube, (), REAL_CRD_GROUPS)
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {**secret["metadata"], "namespace": ns},
            "type": secret["type"],
            "stringData": unwrap(secret["stringData"]),
        }
    )
    kube.apply({**policy, "metadata": {**policy["metadata"], "namespace": ns}})
    # Read back as the implementation does: the policy names the Secret, the Secret holds client -> key.
    stored_policy = kube.get("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy", policy["metadata"]["name"], ns)
    auth = stored_policy["spec"]["apiKeyAuth"]
    credentials: dict[str, str] = {}
    for ref in auth["credentialRefs"]:
        data = kube.get("v1", "Secret", ref["name"], ns)["data"]
        credentials |= {client: base64.b64decode(key).decode() for client, key in data.items()}
    listen, backend = free_port(), free_port()
    conf = nginx_conf(credentials, auth, listen=listen, backend=backend, prefix=tmp_path / "nginx")
    with echo_backend(backend), nginx(conf, tmp_path / "nginx", listen):
        yield listen, keys


def test_each_clients_key_authenticates_as_that_client(served_edge: Any) -> None:
    port, keys = served_edge
    for client in ("probe", "webapp"):
        status, seen = get(port, {"Authorization": f"Bearer {keys[client]}"})
        assert status == 200
        assert seen[CLIENT_HEADER] == client


def test_the_key_never_reaches_the_backend(served_edge: Any) -> None:
    port, keys = served_edge
    status, seen = get(port, {"Authorization": f"Bearer {keys['probe']}"})
    assert status == 200 and "authorization" not in seen


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer sk-tft-wrong"}, {"Authorization": "Basic cHJvYmU6cHJvYmU="}],
    ids=["no key", "a wrong key", "basic credentials"],
)
def test_a_wrong_or_missing_key_is_refused(served_edge: Any, headers: dict[str, str]) -> None:
    port, _ = served_edge
    assert get(port, headers) == (401, {})


def test_a_client_cannot_claim_another_clients_name(served_edge: Any) -> None:
    port, keys = served_edge
    status, seen = get(port, {"Authorization": f"Bearer {keys['webapp']}", CLIENT_HEADER: "probe"})
    assert status == 200 and seen[CLIENT_HEADER] == "webapp"


def test_a_clients_new_key_works_beside_its_old_one_and_names_itself(served_edge: Any) -> None:
    """The overlap of a rotation (``apiKeys``): both of webapp's keys authenticate, the new one as ``webapp.k2``."""
    port, keys = served_edge
    assert get(port, {"Authorization": f"Bearer {keys['webapp']}"})[1][CLIENT_HEADER] == "webapp"
    status, seen = get(port, {"Authorization": f"Bearer {keys['webapp.k2']}"})
    assert status == 200 and seen[CLIENT_HEADER] == "webapp.k2"
