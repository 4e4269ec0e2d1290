"""``tritonft judge-inputs``: what a synthesized plan gives one model's judge, as files, to reproduce its verdict.

Two inputs decide a judge's verdict besides the served model: the model's spec, which its Jobs receive as
``$SPEC_PATH`` (``spec.json`` of its ``<model>-...-spec`` ConfigMap: ``tritonft reference`` and ``tritonft repo``
read it), and the judge Job's settings, which its pod receives in ``TRITONFT_JUDGE_CONFIG`` (the plan's
``InClusterJudge``: ``tritonft judge`` reads them). This command copies both out of a plan ``tritonft synth --out``
wrote, unchanged::

    tritonft synth --stack dev --out plan --quiet
    tritonft judge-inputs --plan plan --model gpt2 --out inputs     # inputs/spec.json, inputs/judge.json
    tritonft judge --config inputs/judge.json --endpoint http://127.0.0.1:8000

(``docs/judge.md``, "Reproduce a verdict": the reference step and the repository in between.)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tritonft.errors import UserError
from tritonft.probe.in_cluster import CONFIG_ENV

JUDGE_TYPE = "pulumi-python:dynamic/tritonft:InClusterJudge"
SPEC_FILE = "spec.json"
JUDGE_FILE = "judge.json"


def judge_settings(resource: Mapping[str, Any]) -> dict[str, Any]:
    """An ``InClusterJudge``'s settings: its Job's container's :data:`CONFIG_ENV`."""
    (container,) = resource["inputs"]["job"]["spec"]["template"]["spec"]["containers"]
    (raw,) = [e["value"] for e in container.get("env") or [] if e["name"] == CONFIG_ENV]
    return dict(json.loads(raw))


def judged_models(settings: Mapping[str, Any]) -> list[str]:
    return [str(m["name"]) for m in settings.get("models") or []]


def planned_judge(resources: Iterable[Mapping[str, Any]], model: str) -> dict[str, Any]:
    """The settings of ``model``'s judge among a plan's resources."""
    judges = [judge_settings(r) for r in resources if r.get("type") == JUDGE_TYPE]
    mine = [s for s in judges if model in judged_models(s)]
    if not mine:
        named = sorted({m for s in judges for m in judged_models(s)})
        raise UserError(
            f"--model: the plan declares no judge of {model!r}; it judges {', '.join(named) or 'no model'} (a model "
            "is judged in the cluster when the probe is on and it is a GPU generator or has room for a candidate)"
        )
    if len(mine) > 1:
        raise UserError(f"--model: the plan declares {len(mine)} judges of {model!r}; give a plan of one stack")
    return mine[0]


def planned_spec(manifests: Path, model: str) -> str:
    """``spec.json`` of ``model``'s spec ConfigMap among a plan's manifests (what its Jobs read as ``$SPEC_PATH``)."""
    import yaml

    found: dict[str, str] = {}
    for path in sorted(manifests.glob("*/configmap-*-spec.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        text = str((doc.get("data") or {}).get(SPEC_FILE, ""))
        if text:
            found[str(json.loads(text)["name"])] = text
    if model not in found:
        raise UserError(
            f"--model: {manifests} holds no spec of {model!r}; its models are {', '.join(sorted(found)) or 'none'}"
        )
    return found[model]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", required=True, type=Path, help="a directory `tritonft synth --out` wrote")
    parser.add_argument("--model", required=True, help="the model's name in the stack (models[].name)")
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help=f"where to write {SPEC_FILE} (the model's Jobs' $SPEC_PATH) and {JUDGE_FILE} (its judge Job's settings)",
    )


def run(args: argparse.Namespace) -> int:
    from tritonft.synth.plandiff import load_plan

    settings = planned_judge(load_plan(args.plan), args.model)
    spec = planned_spec(args.plan / "manifests", args.model)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / SPEC_FILE).write_text(spec, encoding="utf-8")  # the ConfigMap's value, byte for byte
    (args.out / JUDGE_FILE).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{args.out / SPEC_FILE}: the spec {args.model}'s Jobs read ($SPEC_PATH)")
    print(f"{args.out / JUDGE_FILE}: its judge Job's settings ({CONFIG_ENV}), asking {settings.get('endpoint')}")
    return 0
