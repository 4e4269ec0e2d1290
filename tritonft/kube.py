"""A small Kubernetes REST client (standard library only): kubeconfig, discovery, server-side apply, reads.

Used by ``tritonft preflight`` and the control-plane tests. Server-side apply is a PATCH with
``application/apply-patch+yaml`` (what ``kubectl apply --server-side`` and the Pulumi provider with
``enableServerSideApply`` send); resources are found through the API's own discovery.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tritonft.errors import UserError
from tritonft.keepalive import KeptAliveClient

FIELD_MANAGER = "triton-ft"
RENEW_BEFORE_EXPIRY_S = 60.0
"""An exec plugin's token is renewed this long before the expiry it states (EKS tokens live 15 minutes; ``up``'s
rollout watches, judges and handovers hold one client for up to 40)."""


class ApiError(Exception):
    """The API server refused a request; ``status`` is its HTTP code, ``message`` its ``Status.message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Credential:
    """A bearer token and, when its issuer states one, when it expires (seconds since the epoch)."""

    token: str
    expires_at: float | None = None


@dataclass(frozen=True)
class ResourceType:
    group_version: str
    plural: str
    namespaced: bool


class Kube:
    """One API server, one identity (a bearer token and/or a client certificate); each thread's requests share a
    kept-alive connection (:mod:`tritonft.keepalive`).

    With ``credentials`` (a kubeconfig's exec plugin, e.g. ``aws eks get-token``) the token is asked for at once,
    again before the expiry it states (:data:`RENEW_BEFORE_EXPIRY_S`), and once more when the server answers 401 (a
    token revoked or expired early), the request then sent again once."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        context: ssl.SSLContext | None = None,
        credentials: Callable[[], Credential] | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self._credentials = credentials
        self._expires_at: float | None = None
        self._renewing = threading.Lock()
        if credentials is not None:
            self._renew()
        if context is None:  # loopback test servers: self-signed serving certificate
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self.context = context
        self._http = KeptAliveClient(self.server, context)
        self._types: dict[tuple[str, str], ResourceType] = {}

    # --- plumbing -------------------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout_s: float = 30,
    ) -> Any:
        target = path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"User-Agent": "triton-ft"}
        if data is not None:
            headers["Content-Type"] = content_type
        if self._expires_at is not None and time.time() >= self._expires_at - RENEW_BEFORE_EXPIRY_S:
            self._renew()
        sent = self.token
        if sent:
            headers["Authorization"] = f"Bearer {sent}"
        answer = self._http.request(method, target, body=data, headers=headers, timeout_s=timeout_s)
        if answer.status == 401 and self._credentials is not None:
            self._renew(unless_changed_from=sent)
            headers["Authorization"] = f"Bearer {self.token}"
            answer = self._http.request(method, target, body=data, headers=headers, timeout_s=timeout_s)
        raw = answer.body
        if answer.status >= 400:
            text = raw.decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except (ValueError, AttributeError):
                message = text
            raise ApiError(answer.status, message)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:  # /readyz, /healthz answer plain text
            return raw.decode(errors="replace")

    def _renew(self, unless_changed_from: str | None = None) -> None:
        """A new token from :attr:`_credentials` (one thread at a time; none when another thread has just renewed
        the token that was refused)."""
        assert self._credentials is not None
        with self._renewing:
            if unless_changed_from is not None and self.token != unless_changed_from:
                return
            credential = self._credentials()
            self.token, self._expires_at = credential.token, credential.expires_at

    def close(self) -> None:
        """Close the kept-alive connections (a later request opens a new one)."""
        self._http.close()

    def healthy(self) -> bool:
        try:
            self.request("GET", "/readyz", timeout_s=5)
        except (ApiError, OSError, ValueError):
            return False
        return True

    def resource(self, api_version: str, kind: str) -> ResourceType:
        key = (api_version, kind)
        if key not in self._types:
            try:
                found = self.request("GET", _base(api_version))["resources"]
            except ApiError as exc:
                if exc.status != 404:
                    raise
                found = []
            for r in found:
                if "/" not in r["name"]:
                    self._types[(api_version, r["kind"])] = ResourceType(api_version, r["name"], r["namespaced"])
        if key not in self._types:
            raise ApiError(404, f"the server has no resource of kind {kind} in {api_version}")
        return self._types[key]

    def forget_discovery(self) -> None:
        self._types.clear()

    def path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        rt = self.resource(api_version, kind)
        ns = f"/namespaces/{namespace}" if rt.namespaced and namespace else ""
        return f"{_base(api_version)}{ns}/{rt.plural}" + (f"/{name}" if name else "")

    # --- verbs ----------------------------------------------------------------------------------------------
    def apply(self, obj: Mapping[str, Any], *, dry_run: bool = False, subresource: str = "") -> Any:
        """Server-side apply of ``obj`` (created if absent); ``dry_run`` asks the server to validate only."""
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.request(
            "PATCH",
            path + (f"/{subresource}" if subresource else ""),
            params=params,
            body=obj,
            content_type="application/apply-patch+yaml",
        )

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def items(self, api_version: str, kind: str, namespace: str | None = None, selector: str = "") -> list[Any]:
        """The API's ``list`` (named so it does not shadow the builtin)."""
        params = {"labelSelector": selector} if selector else None
        found: list[Any] = self.request("GET", self.path(api_version, kind, namespace), params=params)["items"]
        return found

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        try:
            self.request("DELETE", self.path(api_version, kind, namespace, name), params={"gracePeriodSeconds": "0"})
        except ApiError as exc:
            if exc.status != 404:
                raise


def _base(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def from_kubeconfig(path: str | None, context_name: str | None = None) -> Kube:
    """A client for a kubeconfig's context: token, client certificate, CA data or files, or an exec plugin."""
    file = Path(os.path.expanduser(path or os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0]))
    if not file.is_file():
        raise UserError(f"kubeconfig {file} not found; pass --kubeconfig or set the stack's kubeconfig")
    config = yaml.safe_load(file.read_text()) or {}
    name = context_name or config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    if name not in contexts:
        raise UserError(f"kubeconfig {file} has no context {name!r}; it has: {', '.join(contexts) or 'none'}")
    ctx = contexts[name]
    cluster = {c["name"]: c["cluster"] for c in config.get("clusters", [])}[ctx["cluster"]]
    user = {u["name"]: u["user"] for u in config.get("users", [])}.get(ctx.get("user", ""), {})
    ssl_ctx = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        ssl_ctx.check_hostname = False
        ssl_ctx.verify_mode = ssl.CERT_NONE
    elif "certificate-authority-data" in cluster:
        ssl_ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif "certificate-authority" in cluster:
        ssl_ctx.load_verify_locations(cafile=cluster["certificate-authority"])
    cert, key = user.get("client-certificate"), user.get("client-key")
    if "client-certificate-data" in user:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = os.path.join(tmp, "crt"), os.path.join(tmp, "key")
            Path(cert).write_bytes(base64.b64decode(user["client-certificate-data"]))
            Path(key).write_bytes(base64.b64decode(user["client-key-data"]))
            ssl_ctx.load_cert_chain(cert, key)
    elif cert and key:
        ssl_ctx.load_cert_chain(cert, key)
    if "exec" in user:
        spec = user["exec"]
        return Kube(cluster["server"], context=ssl_ctx, credentials=lambda: exec_credential(spec))
    return Kube(cluster["server"], token=user.get("token"), context=ssl_ctx)


def exec_credential(spec: Mapping[str, Any]) -> Credential:
    """Run a kubeconfig exec plugin (e.g. ``aws eks get-token``): the token its ``ExecCredential`` prints, and the
    ``expirationTimestamp`` it states (RFC 3339), if any."""
    env = {**os.environ, **{e["name"]: e["value"] for e in spec.get("env") or []}}
    out = subprocess.run([spec["command"], *spec.get("args", [])], capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise UserError(f"kubeconfig exec plugin {spec['command']!r} failed: {out.stderr.strip()[:300]}")
    status = json.loads(out.stdout)["status"]
    expires = status.get("expirationTimestamp")
    return Credential(str(status["token"]), datetime.fromisoformat(expires).timestamp() if expires else None)


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether ``obj`` reports the status condition ``kind`` as True."""
    conditions = (obj.get("status") or {}).get("conditions") or []  # null on a freshly created CRD
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, interval_s: float = 0.25) -> Any:
    """Poll ``check`` until it returns a truthy value; raise ``TimeoutError`` naming ``what`` after ``timeout_s``.

    The first polls come quickly (20 ms, then half as long again each time, up to every ``interval_s``): most of
    what is waited for (a deletion, an endpoint, a status) happens within a few tens of milliseconds, and a long
    wait still polls only every ``interval_s``."""
    deadline = time.monotonic() + timeout_s
    delay = min(0.02, interval_s)
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, interval_s)
