"""nginx (Debian) as the stand-in for Envoy Gateway's data plane, configured from the objects the real API server
holds, the way Envoy Gateway reads them:

* the ``SecurityPolicy``'s ``apiKeyAuth``: the key is read from each header of ``extractFrom`` in turn, a leading
  ``Bearer `` dropped (Envoy's api_key_auth filter); it must equal a value of a ``credentialRefs`` Secret, whose data
  key names the client; the client's name goes to the backend in ``forwardClientIDHeader``; with ``sanitize`` the
  key's header is removed before the request goes on; no or an unknown key is answered 401;
* nothing else of Envoy (routing, TLS) is stood in for: one backend behind one listener.

A real Envoy cannot run here (no Envoy binary in the package registries this machine reaches), hence the stand-in.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.threaded_server import serving

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
_SAFE = re.compile(r"^[A-Za-z0-9._~+/= -]+$")


def _quoted(text: str) -> str:
    if not _SAFE.match(text):
        raise ValueError(f"{text!r} cannot be written into the stand-in's configuration safely")
    return f'"{text}"'


def nginx_conf(
    credentials: Mapping[str, str], api_key_auth: Mapping[str, Any], *, listen: int, backend: int, prefix: Path
) -> str:
    """An nginx configuration that authenticates as ``api_key_auth`` says, with ``credentials`` (client -> key)."""
    headers = [h for source in api_key_auth["extractFrom"] for h in source.get("headers", [])]
    if not headers or any("params" in s or "cookies" in s for s in api_key_auth["extractFrom"]):
        raise ValueError("the stand-in reads keys from headers only")
    entries = [
        f"        {_quoted(prefix_ + key)} {_quoted(client)};"
        for client, key in sorted(credentials.items())
        for prefix_ in ("", "Bearer ")
    ]
    maps = []
    previous = '""'
    for i, header in enumerate(reversed(headers)):  # the first header that holds a known key wins
        var = f"$tft_client_{i}"
        maps.append(
            f"    map $http_{header.lower().replace('-', '_')} {var} {{\n        default {previous};\n"
            + "\n".join(entries)
            + "\n    }"
        )
        previous = var
    forward = api_key_auth.get("forwardClientIDHeader")
    sanitize = [f'            proxy_set_header {h} "";' for h in headers] if api_key_auth.get("sanitize") else []
    return "\n".join(
        [
            "worker_processes 1;",
            "daemon off;",
            f"pid {prefix}/nginx.pid;",
            f"error_log {prefix}/error.log info;",
            "events { worker_connections 64; }",
            "http {",
            f"    access_log {prefix}/access.log;",
            "    map_hash_bucket_size 256;",
            f"    client_body_temp_path {prefix}/body;",
            f"    proxy_temp_path {prefix}/proxy;",
            f"    fastcgi_temp_path {prefix}/fastcgi;",
            f"    uwsgi_temp_path {prefix}/uwsgi;",
            f"    scgi_temp_path {prefix}/scgi;",
            *maps,
            "    server {",
            f"        listen 127.0.0.1:{listen};",
            "        location / {",
            f'            if ({previous} = "") {{ return 401; }}',
            *([f"            proxy_set_header {forward} {previous};"] if forward else []),
            *sanitize,
            f"            proxy_pass http://127.0.0.1:{backend};",
            "        }",
            "    }",
            "}",
        ]
    )


class _Echo(BaseHTTPRequestHandler):
    """The backend: answers 200 with the request's headers as JSON."""

    def do_GET(self) -> None:
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def echo_backend(port: int) -> Iterator[None]:
    with serving(ThreadingHTTPServer(("127.0.0.1", port), _Echo)):
        yield


@contextmanager
def nginx(conf: str, prefix: Path, port: int, timeout_s: float = 10.0) -> Iterator[None]:
    """nginx running ``conf`` (its files under ``prefix``) until the block ends; waits for ``port`` to answer."""
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    (prefix / "nginx.conf").write_text(conf)
    conf_path = str(prefix / "nginx.conf")
    check = subprocess.run([NGINX, "-t", "-p", str(prefix), "-c", conf_path], check=False, capture_output=True)
    if check.returncode:
        raise AssertionError(f"nginx refused the configuration:\n{check.stderr.decode()}")
    proc = subprocess.Popen(
        [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except urllib.error.HTTPError:
                break  # nginx answered (401 without a key)
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    why = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else "no answer"
                    raise AssertionError(f"nginx did not start: {why}") from None
                time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def get(port: int, headers: Mapping[str, str]) -> tuple[int, dict[str, str]]:
    """(status, the headers the backend received; empty when refused)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models", headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
