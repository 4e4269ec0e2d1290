"""A kubeconfig's exec plugin (``aws eks get-token``) outlives its 15-minute token: the client asks the plugin again
before the expiry the plugin states, and once more when the server answers 401, then sends the request again.
``up``'s rollout watches, judges and handovers hold one client for up to 40 minutes (prod's plan)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.threaded_server import serving
from tritonft.kube import ApiError, Credential, Kube, from_kubeconfig


class StubApi(ThreadingHTTPServer):
    """An API server that accepts only the bearer tokens in :attr:`accepted`, and records the ones it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Answer)
        self.accepted: set[str] = set()
        self.seen: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Answer(BaseHTTPRequestHandler):
    server: StubApi

    def do_GET(self) -> None:
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        self.server.seen.append(token)
        accepted = token in self.server.accepted
        body = json.dumps({"items": []} if accepted else {"kind": "Status", "message": "Unauthorized"}).encode()
        self.send_response(200 if accepted else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[StubApi]:
    server = StubApi()
    with serving(server):
        yield server


def plugin_kubeconfig(tmp_path: Path, server: str, lifetime_s: int) -> Path:
    """A kubeconfig whose user runs an exec plugin that prints ``token-<n>`` on its n-th run, valid ``lifetime_s``."""
    plugin = tmp_path / "get-token"
    plugin.write_text(
        textwrap.dedent(f"""\
            #!{sys.executable}
            import json, pathlib, datetime
            runs = pathlib.Path({str(tmp_path / "runs")!r})
            n = len(runs.read_text()) + 1 if runs.exists() else 1
            runs.write_text("x" * n)
            expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds={lifetime_s})
            print(json.dumps({{"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1",
                "status": {{"token": f"token-{{n}}", "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
        """)
    )
    plugin.chmod(0o755)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "eks",
        "clusters": [{"name": "eks", "cluster": {"server": server}}],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "eks"}}],
        "users": [{"name": "eks", "user": {"exec": {"command": str(plugin), "args": []}}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_token_the_plugin_says_expires_within_the_margin_is_renewed_before_the_request(
    api: StubApi, tmp_path: Path
) -> None:
    api.accepted = {"token-2"}
    kube = from_kubeconfig(str(plugin_kubeconfig(tmp_path, api.url, lifetime_s=30)))  # token-1 at once

    assert kube.request("GET", "/api/v1/pods") == {"items": []}
    assert api.seen == ["token-2"]


def test_a_token_refused_with_401_is_renewed_once_and_the_request_sent_again(api: StubApi, tmp_path: Path) -> None:
    kube = from_kubeconfig(str(plugin_kubeconfig(tmp_path, api.url, lifetime_s=900)))
    api.accepted = {"token-1"}
    assert kube.request("GET", "/api/v1/pods") == {"items": []}

    api.accepted = {"token-2"}  # token-1 revoked before the expiry it stated
    assert kube.request("GET", "/api/v1/pods") == {"items": []}
    assert api.seen == ["token-1", "token-1", "token-2"]


def test_a_renewed_token_that_is_refused_too_fails_with_the_servers_401_after_one_retry(api: StubApi) -> None:
    renewed: list[str] = []

    def credentials() -> Credential:
        renewed.append(f"token-{len(renewed) + 1}")
        return Credential(renewed[-1], (datetime.now(UTC) + timedelta(minutes=15)).timestamp())

    kube = Kube(api.url, credentials=credentials)
    with pytest.raises(ApiError) as refused:
        kube.request("GET", "/api/v1/pods")
    assert refused.value.status == 401
    assert api.seen == ["token-1", "token-2"]


def test_a_static_token_is_never_renewed(api: StubApi) -> None:
    kube = Kube(api.url, token="static")
    with pytest.raises(ApiError):
        kube.request("GET", "/api/v1/pods")
    assert api.seen == ["static"]
