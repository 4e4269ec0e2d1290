"""Where the server is and how to talk to it: ``--url`` parsing (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit


class Protocol(StrEnum):
    """KServe-V2 transport."""

    HTTP = "http"
    GRPC = "grpc"


_SCHEMES: dict[str, tuple[Protocol, bool, int]] = {
    "http": (Protocol.HTTP, False, 80),
    "https": (Protocol.HTTP, True, 443),
    "grpc": (Protocol.GRPC, False, 8001),
    "grpcs": (Protocol.GRPC, True, 443),
}
_TRITON_PORTS = {Protocol.HTTP: 8000, Protocol.GRPC: 8001}


@dataclass(frozen=True)
class Endpoint:
    """A parsed endpoint: ``address`` is ``host:port[/path]`` as tritonclient wants it (no scheme)."""

    address: str
    protocol: Protocol
    ssl: bool = False

    @property
    def url(self) -> str:
        scheme = {Protocol.HTTP: "http", Protocol.GRPC: "grpc"}[self.protocol] + ("s" if self.ssl else "")
        return f"{scheme}://{self.address}"


def parse_endpoint(url: str, protocol: Protocol | str | None = None) -> Endpoint:
    """Parse ``url`` into an :class:`Endpoint`.

    Accepted forms: ``http://host[:port][/prefix]``, ``https://...`` (TLS), ``grpc://host[:port]``,
    ``grpcs://host[:port]`` (TLS) and a bare ``host[:port]``. A bare address uses ``protocol`` (default HTTP) and
    Triton's default port for it (8000 HTTP, 8001 gRPC); a scheme without a port uses the scheme's usual port.
    ``protocol``, when given with a scheme, must agree with it. Raises ``ValueError`` naming the fix.
    """
    wanted = Protocol(protocol) if protocol is not None else None
    text = url.strip()
    if not text:
        raise ValueError("endpoint URL is empty; pass e.g. http://127.0.0.1:8000 or grpc://127.0.0.1:8001")
    if "://" not in text:
        chosen = wanted or Protocol.HTTP
        parts = urlsplit(f"{chosen.value}://{text}")
        ssl, default_port = False, _TRITON_PORTS[chosen]
    else:
        parts = urlsplit(text)
        if parts.scheme not in _SCHEMES:
            raise ValueError(f"endpoint URL {url!r} has scheme {parts.scheme!r}; use one of {sorted(_SCHEMES)}")
        chosen, ssl, default_port = _SCHEMES[parts.scheme]
        if wanted is not None and wanted is not chosen:
            raise ValueError(
                f"endpoint URL {url!r} is a {chosen.value} URL but protocol {wanted.value!r} was requested; "
                f"drop the protocol or use a {wanted.value}:// URL"
            )
    if not parts.hostname:
        raise ValueError(f"endpoint URL {url!r} has no host")
    try:
        port = parts.port or default_port
    except ValueError as exc:
        raise ValueError(f"endpoint URL {url!r} has an invalid port: {exc}") from exc
    path = parts.path.rstrip("/")
    if path and chosen is Protocol.GRPC:
        raise ValueError(f"endpoint URL {url!r}: gRPC endpoints cannot have a path ({path!r})")
    if parts.query or parts.fragment:
        raise ValueError(f"endpoint URL {url!r} must not carry a query or fragment")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return Endpoint(address=f"{host}:{port}{path}", protocol=chosen, ssl=ssl)


# The integration probe resource's diff (components/probe) compares these inputs; `tritonft diff` reads them.
COMPARED_INPUTS = (
    "endpoint",
    "protocol",
    "models",
    "trigger",
    "deadline_s",
    "call_timeout_s",
    "latency_requests",
    "bleu_threshold",
    "header_env",
    "gateway_url",
)
"""Inputs whose change re-runs the probe (``headers`` is deliberately absent: a rotated token is not a release)."""
