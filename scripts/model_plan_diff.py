"""Compare the resources of each model of one synthesized plan with another's, byte for byte.

    python scripts/model_plan_diff.py OLD_SYNTH_DIR NEW_SYNTH_DIR [--mask-digests]

``OLD_SYNTH_DIR``/``NEW_SYNTH_DIR`` are ``tritonft synth --out`` directories of the same stack. For every model of the
old plan (its ``outputs.json`` ``models``), every resource named for it (``<stack>-<model>`` and its children: the
conversion Job and spec, the Deployment, Services, routes, autoscaler, monitoring, rollout watch, probe) is compared
input by input, and its Kubernetes manifest file by file. ``--mask-digests`` first replaces every image digest
(``@sha256:<64 hex>``: the content tags of images built from the source, which change with any commit), the
rollout watch's ``spec_hash`` (a digest of the Deployment spec that holds them) and the probe's ``trigger`` (a digest
of the image digests, revisions and serving config) by placeholders, so a plan of new code can be compared with one
of old code. Prints one line per model, and the differing input paths; exits 1 when any
model's resources differ.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")
HASHES_OF_DIGESTS = ("spec_hash", "trigger")
"""Inputs that are digests of what holds the image digests: the rollout watch's Deployment spec, the probe's image."""


def mask(value: Any) -> Any:
    if isinstance(value, str):
        return DIGEST.sub("@sha256:<digest>", value)
    if isinstance(value, dict):
        return {k: f"<{k}>" if k in HASHES_OF_DIGESTS else mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                found.append(f"{path}.{key}" if path else key)
            else:
                found += differences(old[key], new[key], f"{path}.{key}" if path else key)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if old == new else [path or "<value>"]


def model_resources(plan: Path, stack: str, model: str) -> dict[str, Any]:
    resources = json.loads((plan / "resources.json").read_text())
    prefix = f"{stack}-{model}"
    return {
        f"{r['type']} {r['name']}": {"inputs": r.get("inputs"), "options": r.get("options")}
        for r in resources
        if r["name"] == prefix or r["name"].startswith(f"{prefix}-")
    }


def model_manifests(plan: Path, model: str) -> dict[str, str]:
    root = plan / "manifests"
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*.yaml"))
        if f"-{model}-" in p.name or p.name.endswith(f"-{model}.yaml")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--mask-digests", action="store_true")
    args = parser.parse_args(argv)
    outputs = json.loads((args.old / "outputs.json").read_text())
    stack = args.old.resolve().name
    models = outputs["models"]
    changed = False
    for model in models:
        old, new = model_resources(args.old, stack, model), model_resources(args.new, stack, model)
        old_files, new_files = model_manifests(args.old, model), model_manifests(args.new, model)
        if args.mask_digests:
            old, new = mask(old), mask(new)
            old_files = {k: mask(v) for k, v in old_files.items()}
            new_files = {k: mask(v) for k, v in new_files.items()}
        paths = differences(old, new)
        files = sorted(k for k in set(old_files) | set(new_files) if old_files.get(k) != new_files.get(k))
        if paths or files:
            changed = True
            print(f"{stack} {model}: {len(old)} resources, DIFFERENT")
            for p in paths:
                print(f"  {p}")
            for f in files:
                print(f"  manifest {f}")
        else:
            print(f"{stack} {model}: {len(old)} resources, {len(old_files)} manifests identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
