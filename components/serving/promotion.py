"""Judged promotion (pure): a change to what a model serves comes up beside the serving version, is judged by the
probe directly, and only then takes traffic.

A model's *serving version* is a short digest of what it serves: the rendered repository's directory on the store
(its key covers the revision, dtypes, tensor parallelism, the converter and every serving knob of the repository
files), the server image's pins (``settings.image``: Triton release, FT commit, ...) and the Triton release. A change
to any of them is a new version; a change to anything else of the pod (resources, probes, placement) rolls the
current version's Deployment in place as before.

Each version has its own Deployment and its own *candidate* Service, both named ``<model>-<version>`` and keyed by
the version in their Pulumi names too: a new version is a *new* resource beside the old one, never a replacement of
it. The user-facing Services select the pods of one version (:data:`VERSION_LABEL`) and depend on the new version's
judge, so the switch of their selector waits for a passed judgement; the old version's resources are no longer
declared, so ``pulumi up`` deletes them last, after every create and update succeeded (and never when one failed).
The judge reaches the candidate only: through its own route on the edge (:func:`judge_http_route_spec`, matched
on the :data:`CANDIDATE_HEADER` the judge sends) or its candidate Service in the cluster; never through the
user-facing Service or route.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from components.common.edge import EdgeArgs, WeightedBackend, model_http_route_spec, triton_paths
from components.common.ingress import NGINX
from components.common.layout import DNS_LABEL_MAX, dns_label
from components.settings.capacity import Rollout, fixed_rollout

VERSION_LABEL = "triton-ft.io/version"
"""The pod label (and Service selector key) naming the serving version a pod runs."""
CANDIDATE_HEADER = "x-tritonft-candidate"
"""The header the judge sends (the version it judges): only the candidate's judge route matches it."""
VERSION_LENGTH = 8


def serving_version(repository_dir: str, image_pins: str, triton_release: str) -> str:
    """The version of what a model serves: :data:`VERSION_LENGTH` hex digits of a digest of the repository's
    store directory, the server image's pins and the Triton release."""
    material = json.dumps(
        {"repository": repository_dir, "image": image_pins, "triton": triton_release}, sort_keys=True
    ).encode()
    return hashlib.sha256(material).hexdigest()[:VERSION_LENGTH]


def versioned_name(base: str, version: str) -> str:
    """``<base>-<version>`` within a DNS label (the base is shortened, never the version)."""
    return f"{dns_label(base, DNS_LABEL_MAX - len(version) - 1)}-{version}"


def version_selector(selector: dict[str, str], version: str) -> dict[str, str]:
    """The component's selector narrowed to one version's pods."""
    return {**selector, VERSION_LABEL: version}


@dataclass(frozen=True)
class Candidate:
    """A serving version before it takes traffic: what its judge needs to reach it."""

    model: str
    """The model's name (the Triton model the probe asks)."""
    version: str
    service: str
    """Its candidate Service (ClusterIP, ports 8000/8001/8002), which selects only this version's pods."""
    internal_url: Any
    """``http://<candidate service>.<namespace>.svc:8000`` (a ``pulumi.Output`` in a program)."""
    judge_route: str | None
    """Its judge route: an HTTPRoute on the Gateway API edge, or a canary Ingress beside the model's Ingress (None
    when the model is not exposed): requests carrying ``CANDIDATE_HEADER: <version>`` reach the candidate there."""
    public_url: str | None = None
    """The model's public HTTP base URL, where the judge route is matched (None when the model is not exposed: the
    judge asks ``internal_url``)."""

    @property
    def headers(self) -> dict[str, str]:
        """What the judge sends with every request so the edge routes it to this candidate."""
        return {CANDIDATE_HEADER: self.version}


def judge_route_name(base: str, version: str) -> str:
    """The judge HTTPRoute of a version: ``<base>-<version>-judge``."""
    return f"{versioned_name(base, version)}-judge"


def judge_http_route_spec(args: EdgeArgs, model: str, candidate_service: str, version: str) -> dict[str, Any]:
    """The model's inference paths on its host, matched only with ``CANDIDATE_HEADER: <version>``, to the
    candidate's Service: Gateway API gives a match with more header matches precedence over the user-facing route's
    same path, so the judge's requests reach the candidate and no other request does."""
    spec = model_http_route_spec(args, model, [WeightedBackend(candidate_service)])
    header = {"type": "Exact", "name": CANDIDATE_HEADER, "value": version}
    spec["rules"][0]["matches"] = [
        {"path": {"type": "Exact", "value": p}, "headers": [header]} for p in triton_paths(model)
    ]
    return spec


def judge_ingress_annotations(version: str) -> dict[str, str]:
    """ingress-nginx's canary by header: the candidate's Ingress (same host and path as the model's) gets only the
    requests whose ``CANDIDATE_HEADER`` is exactly ``version``; every other request goes to the model's Ingress."""
    return {
        f"{NGINX}/canary": "true",
        f"{NGINX}/canary-by-header": CANDIDATE_HEADER,
        f"{NGINX}/canary-by-header-value": version,
    }


def room_for_a_candidate(rollout: Rollout) -> bool:
    """Whether a new version can come up beside the serving one: its rollout may add a pod (a CPU model, or a surge
    pod that the GPU nodes at ``replicasMax`` hold), or the cluster's size is unknown (an existing cluster: if the
    candidate cannot be placed, the rollout watch fails ``up`` with the scheduler's reason and the serving version
    keeps its traffic). When the capacity facts show no room for one more pod, the version rolls in place one pod
    at a time as before, and the probe judges it after the roll."""
    return rollout.max_surge >= 1 or rollout == fixed_rollout()
