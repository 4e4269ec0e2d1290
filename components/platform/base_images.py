"""The base images each Dockerfile builds on, and whether each is pinned by digest (pure).

Every ``FROM`` of ``images/*/Dockerfile`` names its base through an ``ARG`` (``FROM ${BASE_IMAGE}``), so a build
argument can replace it. A base whose registry digest the project found in a public source is pinned in the
Dockerfile itself (``ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm@sha256:...``, the source cited above it); the tag
stays for humans. A base whose digest could not be checked here (NGC's Triton releases, uv's image) keeps its tag
in the Dockerfile, and the stack's ``baseImageDigests`` setting pins it: :func:`pinned_base_args` turns each such
entry into the build argument ``<ARG>=<repo:tag>@sha256:...``. In prod every build also gets
``REQUIRE_PINNED_BASE=true``, and each Dockerfile stops with a message naming the base and this setting when a base
is still a bare tag (:data:`REQUIRE_PINNED_BASE`); :func:`unpinned_bases` says so already in the plan.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tritonft.errors import UserError

PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")
REQUIRE_PINNED_BASE = "REQUIRE_PINNED_BASE"
"""The build argument that makes a Dockerfile refuse a base that is not pinned by digest (prod)."""

_ARG = re.compile(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$")
_FROM = re.compile(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", re.IGNORECASE)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class BaseImage:
    """One ``FROM`` of a Dockerfile that names an image (not an earlier stage)."""

    arg: str | None
    """The global ``ARG`` it is written as (``FROM ${BASE_IMAGE}``), or None for a literal reference."""
    ref: str
    """The reference the build pulls, with the build arguments and the ``ARG`` defaults applied; empty when the
    ``ARG`` has no default and no argument gives it (the bench image's ``TOOLS_IMAGE``)."""

    @property
    def pinned(self) -> bool:
        return bool(PINNED.search(self.ref))


def _substitute(value: str, scope: Mapping[str, str]) -> str:
    return _VAR.sub(lambda m: scope.get(m.group(1) or m.group(2), ""), value.strip().strip('"'))


def dockerfile_bases(text: str, build_args: Mapping[str, str] | None = None) -> tuple[BaseImage, ...]:
    """The images ``text``'s ``FROM`` lines pull, once each in order, as built with ``build_args``."""
    args = dict(build_args or {})
    scope: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[BaseImage] = []
    seen_from = False
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if match := _ARG.match(line):
            if not seen_from:  # only the global ARGs (before the first FROM) reach FROM lines
                name, default = match.group(1), match.group(2)
                scope[name] = args.get(name, _substitute(default or "", scope))
        elif match := _FROM.match(line):
            seen_from = True
            image, stage = match.group(1), match.group(2)
            variable = _VAR.fullmatch(image)
            name = (variable.group(1) or variable.group(2)) if variable else None
            ref = _substitute(image, scope)
            if ref not in stages and ref != "scratch" and all(b.ref != ref or b.arg != name for b in bases):
                bases.append(BaseImage(arg=name, ref=ref))
            if stage:
                stages.add(stage)
    return tuple(bases)


def pinned_base_args(bases: Sequence[BaseImage], digests: Mapping[str, str]) -> dict[str, str]:
    """The build arguments that pin each unpinned base ``digests`` has a digest for: ``<ARG>: <ref>@<digest>``.

    A base written literally (no ``ARG``) cannot be replaced by an argument: a :class:`UserError` names it."""
    pins: dict[str, str] = {}
    for base in bases:
        if base.pinned or base.ref not in digests:
            continue
        if base.arg is None:
            raise UserError(f"images: FROM {base.ref} is not written through an ARG, so baseImageDigests cannot pin it")
        pins[base.arg] = f"{base.ref}@{digests[base.ref]}"
    return pins


def unpinned_bases(bases: Sequence[BaseImage], pins: Mapping[str, str]) -> list[str]:
    """The references of ``bases`` a build with ``pins`` still pulls by tag alone."""
    return [base.ref for base in bases if not base.pinned and not (base.arg and base.arg in pins)]


def base_build_args(
    text: str, build_args: Mapping[str, str], digests: Mapping[str, str], *, prod: bool
) -> dict[str, str]:
    """The build arguments a stack adds to a build of Dockerfile ``text``: the pins of its bases from ``digests``
    and, in prod, :data:`REQUIRE_PINNED_BASE` (the Dockerfile refuses a base still unpinned)."""
    pins = pinned_base_args(dockerfile_bases(text, build_args), digests)
    return {**pins, **({REQUIRE_PINNED_BASE: "true"} if prod else {})}


def unpinned_message(dockerfile: str, refs: Sequence[str]) -> str:
    """What a prod plan says about a build whose bases ``refs`` are tags alone (the build will stop)."""
    settings = " ".join(f"`pulumi config set --path 'baseImageDigests[\"{ref}\"]' sha256:...`" for ref in refs)
    return (
        f"images: {dockerfile} builds on {', '.join(refs)}, not pinned by digest; a prod build refuses an unpinned "
        f"base, so this build will stop. Look each digest up where the registry can be reached "
        f"(`docker buildx imagetools inspect <ref> --format '{{{{json .Manifest.Digest}}}}'`) and set {settings}"
    )
