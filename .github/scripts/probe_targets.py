"""What `probe-stack.sh` probes of a deployed stack, from the outputs the stack exports (pure, no network).

    python .github/scripts/probe_targets.py OUTPUTS.json STACK SPEC_DIR

Reads the outputs (`pulumi stack output --json`): `models`, `endpoints` (model -> its public URL) and, when the stack
has a gateway, `openaiBaseUrl`; writes each model's spec (`SPEC_DIR/<model>.json`, from the checked-out stack file,
so the probe judges each model by its family and its rendered contract) and prints one line per model:
`<model> TAB <endpoint or -> TAB <spec file> TAB <gateway base URL or ->`. A model without an endpoint of its own
(a FasterTransformer or vLLM model: its Triton has no route at the edge) is judged through the gateway alone, by its
family's rule (the reference of its weights cannot be read there: `up` judged it against that in the cluster, by its
judge Job, before it took traffic or right after it rolled in place); a missing output, or such a model without a
gateway, stops it with the output's name (exit 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class MissingOutputError(Exception):
    """The stack does not export what the probe needs."""


def probe_targets(outputs: dict[str, Any], specs: dict[str, str]) -> list[tuple[str, str, str, str | None]]:
    """(model, endpoint or "", spec JSON, gateway URL) of every model ``outputs`` lists; ``specs`` by model name."""
    for key in ("models", "endpoints"):
        if key not in outputs:
            raise MissingOutputError(f"the stack exports no `{key}` output (it has: {', '.join(sorted(outputs))})")
    gateway = outputs.get("openaiBaseUrl") or None
    targets: list[tuple[str, str, str, str | None]] = []
    for model in outputs["models"]:
        url = (outputs["endpoints"] or {}).get(model) or ""
        if not url and gateway is None:
            raise MissingOutputError(
                f"`endpoints` has no URL for model {model} and the stack exports no `openaiBaseUrl`: it is not "
                "reachable from outside"
            )
        if model not in specs:
            raise MissingOutputError(f"model {model} of the outputs is not in the checked-out stack file")
        targets.append((model, str(url), specs[model], gateway))
    if not targets:
        raise MissingOutputError("the stack exports no models")
    return targets


def stack_specs(stack: str) -> dict[str, str]:
    """Each model's spec JSON from ``stacks/Pulumi.<stack>.yaml`` (``org/project/dev`` -> ``dev``)."""
    sys.path.insert(0, str(REPO))
    from components.settings.stack_file import settings_from_stack_file

    settings = settings_from_stack_file(REPO, stack.rsplit("/", 1)[-1])
    return {model.name: model.to_json() for model in settings.models}


def main(argv: list[str]) -> int:
    outputs_path, stack, spec_dir = Path(argv[0]), argv[1], Path(argv[2])
    try:
        targets = probe_targets(json.loads(outputs_path.read_text()), stack_specs(stack))
    except MissingOutputError as exc:
        print(f"::error::stack {stack}: {exc}")
        return 1
    spec_dir.mkdir(parents=True, exist_ok=True)
    for model, url, spec, gateway in targets:
        path = spec_dir / f"{model}.json"
        path.write_text(spec)
        print(f"{model}\t{url or '-'}\t{path}\t{gateway or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
