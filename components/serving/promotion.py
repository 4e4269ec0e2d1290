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
The judge reaches the candidate only, from inside the cluster: a Job of the stack's namespace asks its candidate
Service (``components.serving.judge_job``); never the user-facing Service, and never through the edge (no candidate
and no generator's Triton has a route there: ``docs/security/reach.md``).

A model *without room* for a candidate (:func:`room_for_a_candidate`) rolls in place under its old names, each new
pod taking traffic once ready; the same judge Job then asks its user-facing Service right after its rollout watch
passed (:func:`judged_after_its_roll`), so a wrong version fails ``up`` at once: before the gateway's configuration,
the probe and the stack's outputs, and before anything promotes the change further. It keeps serving until it is
rolled back (``docs/rollout/judged-rollouts.md``, "A model without room for a candidate").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from components.common.layout import DNS_LABEL_MAX, dns_label
from components.settings.capacity import Rollout, fixed_rollout

VERSION_LABEL = "triton-ft.io/version"
"""The pod label (and Service selector key) naming the serving version a pod runs."""
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
    """A serving version before it takes traffic (or, ``in_place``, right after it rolled in place): what its judge
    needs to reach it."""

    model: str
    """The model's name (the Triton model the probe asks)."""
    version: str
    service: str
    """Its candidate Service (ClusterIP, ports 8000/8001/8002), which selects only this version's pods."""
    internal_url: Any
    """``http://<candidate service>.<namespace>.svc:8000`` (a ``pulumi.Output`` in a program): what the judge asks."""
    judge_pods: dict[str, str]
    """The labels of the judge's pods (``components.serving.judge_job.judge_pod_labels``): the candidate's Triton
    admits pods carrying them on its HTTP port, and no route at the edge leads to it."""
    in_place: bool = False
    """The version rolled in place (no room for a candidate): ``service`` is the model's user-facing Service and
    ``version`` names what its Deployment now serves; it already takes traffic when its judge asks it."""
    rolled: Any = None
    """In place: the rollout it is judged after (its rollout watch's ``generation``, a ``pulumi.Output`` in a
    program): a revert to this version is another rollout, judged again."""


def room_for_a_candidate(rollout: Rollout) -> bool:
    """Whether a new version can come up beside the serving one: its rollout may add a pod (a CPU model, or a surge
    pod that the GPU nodes at ``replicasMax`` hold), or the cluster's size is unknown (an existing cluster: if the
    candidate cannot be placed, the rollout watch fails ``up`` with the scheduler's reason and the serving version
    keeps its traffic). When the capacity facts show no room for one more pod, the version rolls in place one pod
    at a time as before, and is judged right after the roll (:func:`judged_after_its_roll`)."""
    return rollout.max_surge >= 1 or rollout == fixed_rollout()


def judged_after_its_roll(rollout: Rollout, min_replicas: int) -> bool:
    """Whether a model's judge asks it in the cluster right after an in-place roll: when it has no room for a
    candidate and keeps at least one pod to ask. A model that scales to zero (``min_replicas`` 0) may have none
    after its roll, and the judge's requests to Triton are no demand that wakes it: it is judged after ``up`` by
    the probe, which wakes it through the gateway."""
    return not room_for_a_candidate(rollout) and min_replicas >= 1
