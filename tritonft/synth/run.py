"""Run the project's ``__main__.py`` under the mock engine and write the whole plan to disk.

Output (``build/synth/<stack>/`` by default), all deterministic (same input -> byte-identical files):

- ``resources.json``: every registered resource, sorted by URN: type token, logical name, URN, parent
  URN, provider, resource options that matter for review (protect, dependsOn, ...), inputs; secrets ``[secret]``.
- ``manifests/<namespace>/<kind>-<name>.yaml``: each Kubernetes object as ``kubectl`` would apply it.
- ``outputs.json``: the stack outputs (secret outputs ``[secret]``).
- ``summary.txt``: the resource tree per component and the counts per type (also printed).
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import yaml

from tritonft.errors import UserError
from tritonft.synth.engine import RecordingMocks, Registered, mock_engine, run_program
from tritonft.synth.manifests import SECRET_PLACEHOLDER, Manifest, canonical_json_string, manifests_of, plain
from tritonft.synth.result import Extra, SynthResult, render_summary
from tritonft.synth.stackfile import StackConfig, find_project_root, read_stack


def synthesize(
    stack: str,
    *,
    out: Path | None = None,
    project_dir: Path | None = None,
    extras: tuple[Extra, ...] | None = None,
    assume_secrets: tuple[str, ...] = (),
) -> SynthResult:
    """Synthesize one stack. Raises :class:`UserError` (every problem listed) for an invalid stack config.

    ``extras`` are later stages writing into the same output; by default the rendered model repositories.
    ``assume_secrets``: secrets CI sets before each deploy, planned as set (``tritonft.synth.stackfile.read_stack``).
    """
    if extras is None:
        from tritonft.synth.model_repos import write_model_repositories

        extras = (write_model_repositories,)
    root = project_dir.resolve() if project_dir else find_project_root(Path.cwd())
    config = read_stack(root, stack, assume_secrets)
    mocks = RecordingMocks()
    outputs = _run(root, config, mocks)
    target = out if out is not None else root / "build" / "synth" / stack
    result = SynthResult(config, target, list(mocks.resources), manifests_of(mocks.resources), outputs)
    _write_atomically(result, extras)
    return result


@contextlib.contextmanager
def _on_sys_path(folder: Path) -> Iterator[None]:
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


def _run(root: Path, config: StackConfig, mocks: RecordingMocks) -> dict[str, Any]:
    exports: dict[str, pulumi.Output[Any]] = {}

    def program() -> None:
        runpy.run_path(str(root / "__main__.py"), run_name="__main__")
        stack = pulumi.runtime.settings.get_root_resource()
        for key, value in (getattr(stack, "outputs", None) or {}).items():
            exports[key] = pulumi.Output.from_input(value)

    with (
        _on_sys_path(root),
        mock_engine(mocks, config.project, config.stack, config.values, sorted(config.secret_keys)),
    ):
        try:
            run_program(program)
        except pulumi.RunError as exc:
            raise UserError(str(exc)) from None
        resolved = {key: out._data.result() for key, out in exports.items()}
    return {k: SECRET_PLACEHOLDER if data.is_secret else plain(data.value) for k, data in sorted(resolved.items())}


def resource_record(res: Registered) -> dict[str, Any]:
    record: dict[str, Any] = {"type": res.typ, "name": res.name, "urn": res.urn}
    if res.parent:
        record["parent"] = res.parent
    if res.provider:
        record["provider"] = res.provider.split("::")[-2] if "::" in res.provider else res.provider
    options = {
        "protect": res.protect,
        "retainOnDelete": res.retain_on_delete,
        "deleteBeforeReplace": res.delete_before_replace,
        "dependsOn": sorted(res.depends_on),
        "customTimeouts": res.custom_timeouts,
        "ignoreChanges": list(res.ignore_changes),
        "replaceOnChanges": list(res.replace_on_changes),
        "additionalSecretOutputs": list(res.additional_secret_outputs),
    }
    record["options"] = {k: v for k, v in options.items() if v}
    inputs = plain(res.inputs)
    if res.typ.startswith("pulumi:providers:"):
        inputs = {k: canonical_json_string(v) for k, v in inputs.items()}
    record["inputs"] = inputs
    return record


def manifest_yaml(manifest: Manifest) -> str:
    first: tuple[str, ...] = ("apiVersion", "kind", "metadata")
    head = {k: manifest.body[k] for k in first if k in manifest.body}
    rest = {k: manifest.body[k] for k in sorted(manifest.body) if k not in head}
    ordered: dict[str, Any] = {**head, **rest}
    return yaml.safe_dump(ordered, sort_keys=False, default_flow_style=False, width=120)


def _dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _write_atomically(result: SynthResult, extras: tuple[Extra, ...]) -> None:
    """Write into a temporary sibling, then swap it into place: a failed run never leaves half a plan."""
    target = result.out.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        # Registration order follows the async resolution of outputs, which varies between runs: sort by URN.
        ordered = sorted(result.resources, key=lambda r: r.urn)
        (staging / "resources.json").write_text(_dump_json([resource_record(r) for r in ordered]))
        (staging / "outputs.json").write_text(_dump_json(result.outputs))
        seen: dict[str, str] = {}
        for manifest in result.manifests:
            path = staging / "manifests" / manifest.filename
            if manifest.filename in seen:
                raise UserError(
                    f"two resources ({seen[manifest.filename]}, {manifest.logical_name}) render the same object "
                    f"{manifest.filename}; give them distinct metadata.name"
                )
            seen[manifest.filename] = manifest.logical_name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(manifest_yaml(manifest))
        for extra in extras:
            extra(result, staging)
        (staging / "summary.txt").write_text(render_summary(result, with_path=False) + "\n")
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
