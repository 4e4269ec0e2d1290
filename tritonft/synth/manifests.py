"""Turn what the program registered into real Kubernetes manifests and a plain, secret-free resource plan.

Under the mock engine, inputs arrive as the engine sees them: numbers as floats, secrets wrapped in Pulumi's
secret signature, absent values as ``None``. Manifests must be what ``kubectl`` would apply: integers as
integers, no nulls, and every secret replaced by ``[secret]`` so nothing secret ever reaches the disk.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tritonft.synth.engine import Registered

SECRET_PLACEHOLDER = "[secret]"
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG_VALUE = "1b47061264138c4ac30d75fd1eb44270"
_K8S_TOKEN = re.compile(r"^kubernetes:(?P<group>[^/:]+)/(?P<version>[^:]+):(?P<kind>[A-Za-z0-9]+)$")
_NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml", "kubernetes:kustomize")


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_SECRET_SIG_KEY) == _SECRET_SIG_VALUE


def plain(value: Any) -> Any:
    """Inputs as JSON/YAML-ready data: secrets masked (a secret map keeps its key names, so a Secret's ``stringData``
    stays a map the API server accepts), integral floats as ints, ``None`` dropped, keys sorted.

    Keys are sorted because the engine hands maps over as protobuf Structs, whose iteration order is not stable
    between runs; sorting is what makes synth output byte-identical.
    """
    if is_secret(value):
        inner = value.get("value")
        if isinstance(inner, dict):  # a secret map (a Secret's stringData): its key names stay, every value masked
            return {str(k): SECRET_PLACEHOLDER for k in sorted(inner, key=str) if not str(k).startswith("__")}
        return SECRET_PLACEHOLDER
    if isinstance(value, dict):
        items = sorted((str(k), v) for k, v in value.items() if v is not None and not str(k).startswith("__"))
        return {k: plain(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value if v is not None]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def canonical_json_string(value: Any) -> Any:
    """Provider configuration arrives as JSON text (e.g. ``defaultTags``); re-dump it with sorted keys."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value
    return value


def api_version_of(typ: str) -> str | None:
    """``kubernetes:apps/v1:Deployment`` -> ``apps/v1``; ``kubernetes:core/v1:Service`` -> ``v1``; else None."""
    if typ.startswith(_NOT_OBJECTS):
        return None
    match = _K8S_TOKEN.match(typ)
    if match is None:
        return None
    group, version = match["group"], match["version"]
    return version if group == "core" else f"{group}/{version}"


@dataclass(frozen=True)
class Manifest:
    """One Kubernetes object the program would apply."""

    logical_name: str
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def namespace(self) -> str:
        return str(self.body.get("metadata", {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str(self.body.get("metadata", {}).get("name") or self.logical_name)

    @property
    def filename(self) -> str:
        """Stable relative path: ``<namespace or _cluster>/<kind>-<name>.yaml`` in lower case."""
        folder = self.namespace or "_cluster"
        return f"{folder}/{self.kind.lower()}-{self.name}.yaml"


def manifests_of(resources: list[Registered]) -> list[Manifest]:
    """Every Kubernetes object among the registered resources, as a plain manifest, in registration order."""
    out: list[Manifest] = []
    for res in resources:
        api_version = api_version_of(res.typ)
        if api_version is None or not res.custom:
            continue
        body = plain(res.inputs)
        if not isinstance(body, dict):
            body = {}
        body = {"apiVersion": api_version, "kind": res.typ.rsplit(":", 1)[1], **body}
        out.append(Manifest(res.name, body))
    return out
