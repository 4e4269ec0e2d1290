"""``python -m components.platform.build_plan``: every image a stack can run, as the deploy workflow builds them once.

Prints a JSON list, one entry per image: ``name`` (``server``, ``tools``, ``server-<engine>`` for each engine whose
server image is not FasterTransformer's: ``server-onnxruntime``, ``server-vllm``), ``engine`` (the engine a server
image serves; none for ``tools``), ``context``, ``dockerfile``, ``buildArgs``, ``platform``, ``bases`` (the base
images its ``FROM`` lines pull) and ``tag``, the tag derived (:func:`components.platform.build_context.context_tag`)
from exactly what the build sends. The workflow's build job (``.github/scripts/build-images.sh``) builds each once and
hands the digests to every stack (``serverImage``, ``toolsImage``, ``engineImages``), so staging and prod run the
bytes dev was probed with and no stack's ``up`` builds an image.

The promotion path is pinned end to end: ``--bases`` lists the bases a Dockerfile leaves a tag alone (NGC's Triton
releases, uv); the build job looks each up once and ``--base-digests FILE`` (``{"repository:tag": "sha256:..."}``)
turns the plan into builds whose every base is pinned by digest, with ``REQUIRE_PINNED_BASE=true`` (each Dockerfile
refuses a base still a tag: :mod:`components.platform.base_images`). A base the file leaves unpinned stops the plan
with its name, before anything is built.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.platform.base_images import (
    REQUIRE_PINNED_BASE,
    base_build_args,
    dockerfile_bases,
    unpinned_bases,
)
from components.platform.build_context import build_view, context_tag
from components.platform.image import (
    SERVER_CONTEXT,
    SERVER_DOCKERFILE,
    TOOLS_CONTEXT,
    TOOLS_DOCKERFILE,
    ImageBuild,
    extra_server_images,
    server_build_args,
)
from tritonft.engines import ENGINES
from tritonft.engines.fastertransformer import ENGINE as FASTERTRANSFORMER
from tritonft.errors import UserError

BUILD_DISK_GIB = 100
"""Free disk the build job needs for its largest build (FasterTransformer's: NGC's Triton 23.04 base, ~14 GB, the
CUDA compile and the ~20 GB image it exports; NGC's vLLM release alone is ~15-20 GB). A GitHub-hosted runner has
~14 GB: the build job runs on a larger runner (``IMAGE_BUILD_RUNNER``) and checks this before its first build."""


def _images(build: ImageBuild) -> list[tuple[str, str | None, str, str, dict[str, str], str]]:
    """(name, engine, context, dockerfile, build args, tag prefix) of every image."""
    images: list[tuple[str, str | None, str, str, dict[str, str], str]] = [
        (
            "server",
            FASTERTRANSFORMER.name,
            SERVER_CONTEXT,
            SERVER_DOCKERFILE,
            server_build_args(build),
            f"{build.triton_version}-ft",
        ),
        ("tools", None, TOOLS_CONTEXT, TOOLS_DOCKERFILE, {}, "tools"),
    ]
    for engine, image in extra_server_images([engine.name for engine in ENGINES]).items():
        images.append(
            (
                f"server-{engine}",
                engine,
                str(Path(image.dockerfile).parent),
                image.dockerfile,
                dict(image.build_args),
                f"{engine}-{image.build_args.get('TRITON_VERSION', 'c')}",
            )
        )
    return images


def build_plan(
    root: Path, build: ImageBuild | None = None, base_digests: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The builds of every image from the repository at ``root`` (default pins: the stacks' ``image`` settings
    that override them are for stacks that build their own images). With ``base_digests`` every base is pinned by
    them and each build refuses an unpinned base; a base they leave a tag alone is a :class:`UserError`."""
    build = build or ImageBuild()
    plans: list[dict[str, Any]] = []
    for name, engine, context, dockerfile, own_args, prefix in _images(build):
        args = dict(own_args)
        text = (root / dockerfile).read_text()
        bases = dockerfile_bases(text, args)
        if base_digests is not None:
            pins = base_build_args(text, args, base_digests, prod=True)
            left = unpinned_bases(bases, pins)
            if left:
                raise UserError(
                    f"build plan: {name} ({dockerfile}) builds on {', '.join(left)}, which the base digests do not "
                    "pin; every promoted image is built on bases pinned by digest (look each up with "
                    "`docker buildx imagetools inspect <ref>`)"
                )
            args = {**args, **pins}
        view = build_view(root / context, root / dockerfile)
        plans.append(
            {
                "name": name,
                "engine": engine,
                "context": context,
                "dockerfile": dockerfile,
                "buildArgs": dict(args),
                "platform": build.platform,
                "bases": [base.ref for base in bases if base.ref],
                "tag": context_tag(view, {**args, "platform": build.platform}, prefix=prefix),
            }
        )
    return plans


def unpinned_base_refs(root: Path, build: ImageBuild | None = None) -> list[str]:
    """The base images (``repository:tag``) the plan's Dockerfiles leave a tag alone, once each, sorted."""
    plans = build_plan(root, build)
    refs = {ref for plan in plans for ref in plan["bases"] if "@sha256:" not in ref}
    return sorted(refs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.platform.build_plan", description=__doc__)
    parser.add_argument("root", nargs="?", default=".", type=Path, help="the repository")
    parser.add_argument("--bases", action="store_true", help="print the bases left a tag alone (JSON list)")
    parser.add_argument(
        "--base-digests", type=Path, help=f'pin bases ({{"repo:tag": "sha256:..."}}), {REQUIRE_PINNED_BASE}'
    )
    args = parser.parse_args(argv)
    try:
        if args.bases:
            result: Any = unpinned_base_refs(args.root)
        else:
            digests = json.loads(args.base_digests.read_text()) if args.base_digests else None
            result = build_plan(args.root, base_digests=digests)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
