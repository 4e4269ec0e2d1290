"""The house's import rule: arrows run one way (settings <- common <- stages <- composition), and a stage never
imports another stage (``components/__init__.py`` says why; what two stages share lives in ``components.common``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("platform", "models", "serving", "gateway", "probe")
ALLOWED: dict[str, set[str]] = {
    "settings": {"settings"},
    "common": {"common", "settings"},
    **{stage: {stage, "common", "settings", "rollout_watch"} for stage in STAGES},
    "rollout_watch": {"rollout_watch"},
}
"""Per layer of ``components``: the layers its modules may import (``tritonft`` is always allowed)."""


def layer(module: str) -> str:
    return module.split(".")[1]


def component_imports(path: Path) -> set[str]:
    """The ``components.*`` modules a file imports (at any depth: lazy imports count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found |= {n for n in names if n.startswith("components.")}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("components.")}
    return found


def module_files() -> list[Path]:
    return sorted(p for p in (ROOT / "components").rglob("*.py") if p.parent != ROOT / "components" or p.stem != "args")


@pytest.mark.parametrize("path", module_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_the_layers_below_it(path: Path) -> None:
    own = layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
    if own == "__init__":
        return  # components/__init__.py: the layer map itself, imports nothing
    wrong = sorted(m for m in component_imports(path) if layer(m) not in ALLOWED[own])
    assert wrong == [], f"{path.relative_to(ROOT)} ({own}) imports {wrong}; move what they share to components.common"


def test_every_package_of_components_is_a_known_layer() -> None:
    packages = {p.name for p in (ROOT / "components").iterdir() if (p / "__init__.py").is_file()}
    assert packages == {*STAGES, "common", "settings"}


def test_the_rule_catches_a_stage_importing_another(tmp_path: Path) -> None:
    sneaky = tmp_path / "gateway.py"
    sneaky.write_text("def f():\n    from components.serving.service import TritonService\n")
    assert component_imports(sneaky) == {"components.serving.service", "components.serving.service.TritonService"}
    assert layer("components.serving.service") not in ALLOWED["gateway"]
