"""``python -m components.platform.build_plan``: the two image builds as the deploy workflow runs them, once.

Prints a JSON list, one entry per image: ``name`` (``server``/``tools``), ``context``, ``dockerfile``,
``buildArgs``, ``platform`` and ``tag``, the tag derived (:func:`components.platform.build_context.context_tag`)
from exactly what the build sends. The workflow's build job builds each tag once (skipping one the registry already
holds: tags there are immutable) and hands the digests to every stack as ``serverImage``/``toolsImage``, so staging
and prod run the bytes dev was probed with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from components.platform.build_context import build_view, context_tag
from components.platform.image import (
    SERVER_CONTEXT,
    SERVER_DOCKERFILE,
    TOOLS_CONTEXT,
    TOOLS_DOCKERFILE,
    ImageBuild,
    server_build_args,
)


def build_plan(root: Path, build: ImageBuild | None = None) -> list[dict[str, Any]]:
    """The builds of both images from the repository at ``root`` (default pins: the stacks' ``image`` settings
    that override them are for stacks that build their own images)."""
    build = build or ImageBuild()
    plans: list[dict[str, Any]] = []
    for name, context, dockerfile, args, prefix in (
        ("server", SERVER_CONTEXT, SERVER_DOCKERFILE, server_build_args(build), f"{build.triton_version}-ft"),
        ("tools", TOOLS_CONTEXT, TOOLS_DOCKERFILE, {}, "tools"),
    ):
        view = build_view(root / context, root / dockerfile)
        plans.append(
            {
                "name": name,
                "context": context,
                "dockerfile": dockerfile,
                "buildArgs": dict(args),
                "platform": build.platform,
                "tag": context_tag(view, {**args, "platform": build.platform}, prefix=prefix),
            }
        )
    return plans


if __name__ == "__main__":
    json.dump(build_plan(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")), sys.stdout, indent=2)
    sys.stdout.write("\n")
