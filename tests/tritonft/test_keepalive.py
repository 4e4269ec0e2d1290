"""The kept-alive HTTP client: one connection per thread, a connection the server closed replaced without losing
the request (never a POST sent twice), answers of every status read whole, proxies from the environment.

Against real servers on loopback (``http.server``; for TLS a certificate ``openssl`` makes), which count the
connections they accept and record each request as it arrived."""

from __future__ import annotations

import http.server
import json
import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.threaded_server import serving
from tritonft import keepalive
from tritonft.keepalive import KeptAliveClient


@dataclass
class Seen:
    connections: int = 0
    requests: list[tuple[str, str, int, dict[str, str]]] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)


class Handler(http.server.BaseHTTPRequestHandler):
    """``/ok`` answers 200; ``/missing`` 404 with a JSON body; ``/close-after`` answers, then closes the connection
    without saying so (a server's idle close); ``/drop-on-reused`` closes without answering when it arrives on a
    connection that already served a request (the server closing it in the instant the client reuses it)."""

    protocol_version = "HTTP/1.1"
    server: Server

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.seen.connections += 1
            self.conn_id = self.server.seen.connections
        self.served = 0

    def finish(self) -> None:
        super().finish()
        self.server.seen.closed.set()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.seen.requests.append((self.command, self.path, self.conn_id, dict(self.headers)))
        if self.path.endswith("/drop-on-reused") and self.served:
            self.close_connection = True
            return
        self.served += 1
        status, answer = (
            (404, {"message": "not here"}) if self.path.endswith("/missing") else (200, {"body": body.decode()})
        )
        raw = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        if self.path.endswith("/close-after"):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815 (http.server's names)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen = Seen()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    with serving(srv):
        yield srv


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def get(client: KeptAliveClient, path: str, method: str = "GET", body: bytes | None = None) -> keepalive.Response:
    return client.request(method, path, body=body, headers={"X-Test": "1"}, timeout_s=5)


@pytest.mark.usefixtures("no_proxy_env")
def test_a_threads_requests_share_one_connection(server: Server) -> None:
    client = KeptAliveClient(server.url)
    answers = [get(client, f"/ok?n={n}") for n in range(5)]
    assert [a.status for a in answers] == [200] * 5
    assert server.seen.connections == 1
    assert [r[1] for r in server.seen.requests] == [f"/ok?n={n}" for n in range(5)]


@pytest.mark.usefixtures("no_proxy_env")
def test_each_thread_has_its_own_connection(server: Server) -> None:
    client = KeptAliveClient(server.url)
    get(client, "/ok")
    others = [threading.Thread(target=lambda: [get(client, "/ok") for _ in range(3)]) for _ in range(2)]
    for t in others:
        t.start()
    for t in others:
        t.join()
    assert server.seen.connections == 3
    assert sorted(r[2] for r in server.seen.requests) == [1, 2, 2, 2, 3, 3, 3]


@pytest.mark.usefixtures("no_proxy_env")
def test_an_error_status_is_an_answer_read_whole_and_the_connection_stays(server: Server) -> None:
    client = KeptAliveClient(server.url)
    missing = get(client, "/missing")
    assert (missing.status, json.loads(missing.body)) == (404, {"message": "not here"})
    assert get(client, "/ok").status == 200
    assert server.seen.connections == 1


@pytest.mark.usefixtures("no_proxy_env")
def test_a_connection_the_server_closed_while_idle_is_replaced_before_the_next_request(server: Server) -> None:
    client = KeptAliveClient(server.url)
    get(client, "/close-after")
    assert server.seen.closed.wait(5)
    assert get(client, "/ok").status == 200
    assert server.seen.connections == 2
    assert [r[1] for r in server.seen.requests] == ["/close-after", "/ok"]  # /ok arrived once


@pytest.mark.usefixtures("no_proxy_env")
def test_a_get_on_a_connection_closed_in_the_instant_it_was_reused_is_sent_again_on_a_new_one(server: Server) -> None:
    client = KeptAliveClient(server.url)
    get(client, "/ok")
    assert get(client, "/drop-on-reused").status == 200
    assert [(r[1], r[2]) for r in server.seen.requests] == [("/ok", 1), ("/drop-on-reused", 1), ("/drop-on-reused", 2)]


@pytest.mark.usefixtures("no_proxy_env")
def test_a_post_on_a_connection_closed_in_the_instant_it_was_reused_is_never_sent_twice(server: Server) -> None:
    client = KeptAliveClient(server.url)
    get(client, "/ok")
    with pytest.raises(ConnectionError):
        get(client, "/drop-on-reused", method="POST", body=b"{}")
    assert [(r[0], r[1]) for r in server.seen.requests] == [("GET", "/ok"), ("POST", "/drop-on-reused")]
    assert get(client, "/ok").status == 200  # and the client goes on, on a new connection
    assert server.seen.connections == 2


@pytest.mark.usefixtures("no_proxy_env")
def test_a_connection_idle_longer_than_the_limit_is_not_reused(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    client = KeptAliveClient(server.url)
    get(client, "/ok")
    monkeypatch.setattr(keepalive, "MAX_IDLE_S", -1.0)
    get(client, "/ok")
    assert server.seen.connections == 2


@pytest.mark.usefixtures("no_proxy_env")
def test_close_closes_the_connections_of_every_thread(server: Server) -> None:
    client = KeptAliveClient(server.url)
    get(client, "/ok")
    client.close()
    assert server.seen.closed.wait(5)
    assert get(client, "/ok").status == 200
    assert server.seen.connections == 2


@pytest.mark.usefixtures("no_proxy_env")
def test_a_server_that_answers_no_http_is_a_connection_error_naming_it() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def garbage() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")
        conn.close()

    threading.Thread(target=garbage, daemon=True).start()
    with pytest.raises(ConnectionError, match=f"http://127.0.0.1:{port} answered GET /ok with no valid HTTP"):
        get(KeptAliveClient(f"http://127.0.0.1:{port}"), "/ok")
    listener.close()


def test_a_server_that_is_no_http_url_is_refused() -> None:
    with pytest.raises(ValueError, match="'ftp://host' is not an http:// or https:// URL"):
        KeptAliveClient("ftp://host")


def test_plain_http_through_a_proxy_names_the_server_in_the_request_line(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = Server()  # records what a proxy receives and answers it itself
    with serving(proxy):
        monkeypatch.setenv("http_proxy", f"http://user:p%40ss@127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        client = KeptAliveClient("http://api.example.test:8080")
        get(client, "/ok")
        get(client, "/ok")
    assert proxy.seen.connections == 1
    assert [r[1] for r in proxy.seen.requests] == ["http://api.example.test:8080/ok"] * 2
    assert proxy.seen.requests[0][3]["Proxy-Authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss


def test_a_host_in_no_proxy_is_reached_directly(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there: using it would fail
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert get(KeptAliveClient(server.url), "/ok").status == 200


# --- TLS: one handshake for many requests, and through a CONNECT tunnel --------------------------------------------
@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the TLS server's certificate (Debian package openssl)")
    work = tmp_path_factory.mktemp("tls")
    crt, key = work / "server.crt", work / "server.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)),
        ],
        check=True,
        capture_output=True,
    )
    return crt, key


class TlsServer(Server):
    def __init__(self, certificate: tuple[Path, Path]) -> None:
        super().__init__()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*certificate)
        self.handshakes = 0
        self.context = context

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = super().get_request()
        self.handshakes += 1
        return self.context.wrap_socket(sock, server_side=True), addr


def verifying(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certificate[0]))
    return context


@pytest.mark.usefixtures("no_proxy_env")
def test_https_requests_share_one_tls_handshake(certificate: tuple[Path, Path]) -> None:
    server = TlsServer(certificate)
    with serving(server):
        client = KeptAliveClient(f"https://127.0.0.1:{server.server_address[1]}", verifying(certificate))
        assert [get(client, "/ok").status for _ in range(4)] == [200] * 4
    assert (server.handshakes, len(server.seen.requests)) == (1, 4)


class Tunnel(socketserver.ThreadingTCPServer):
    """A CONNECT proxy: records the CONNECT line and its headers, then relays bytes both ways."""

    daemon_threads = True

    def __init__(self) -> None:
        self.connects: list[tuple[str, dict[str, str]]] = []
        super().__init__(("127.0.0.1", 0), TunnelHandler)


class TunnelHandler(socketserver.StreamRequestHandler):
    server: Tunnel

    def handle(self) -> None:
        line = self.rfile.readline().decode().strip()
        headers: dict[str, str] = {}
        while (header := self.rfile.readline().decode().strip()) != "":
            name, _, value = header.partition(":")
            headers[name] = value.strip()
        self.server.connects.append((line, headers))
        host, _, port = line.split()[1].rpartition(":")
        upstream = socket.create_connection(("127.0.0.1" if host == "api.example.test" else host, int(port)))
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        ends = [self.connection, upstream]
        while True:
            readable, _, _ = select.select(ends, [], [], 5)
            if not readable:
                break
            for end in readable:
                data = end.recv(65536)
                if not data:
                    upstream.close()
                    return
                (upstream if end is self.connection else self.connection).sendall(data)


def test_https_through_a_proxy_is_a_connect_tunnel_to_the_server(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, tunnel = TlsServer(certificate), Tunnel()
    with serving(server), serving(tunnel):
        monkeypatch.setenv("https_proxy", f"http://ops:secret@127.0.0.1:{tunnel.server_address[1]}")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        context = verifying(certificate)
        context.check_hostname = False  # the certificate names 127.0.0.1, the client api.example.test
        client = KeptAliveClient(f"https://api.example.test:{server.server_address[1]}", context)
        assert [get(client, "/ok").status for _ in range(3)] == [200] * 3
    assert [c[0].split()[:2] for c in tunnel.connects] == [["CONNECT", f"api.example.test:{server.server_address[1]}"]]
    assert tunnel.connects[0][1]["Proxy-Authorization"] == "Basic b3BzOnNlY3JldA=="  # ops:secret
    assert (server.handshakes, [r[1] for r in server.seen.requests]) == (1, ["/ok"] * 3)
