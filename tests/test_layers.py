"""The house's import rules, over every module of ``components/`` and ``tritonft/`` (imports at module level and
inside functions both count; so do ``TYPE_CHECKING`` ones):

- in ``components``, arrows run one way (settings <- common <- stages <- composition), and a stage never imports
  another stage (``components/__init__.py`` says why; what two stages share lives in ``components.common``);
- no import circle anywhere in the house;
- the runtime half (``tritonft``) never imports the infrastructure half (``components``): what both need lives in
  ``tritonft`` (e.g. ``tritonft.quantity``, ``tritonft.gpu_pool``, ``tritonft.spec``), which ``components`` may import;
- the room above both halves (``stackcli``: the commands that read a stack, the docs generator) may import both, and
  nothing in either half imports it, nor names a module of it or of ``components`` to import by name (the CLI's
  table of command modules is such a name).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("platform", "models", "serving", "gateway", "probe")
COMPOSITION = ("args", "cluster_needs")
"""Top-level modules of ``components`` that compose the stages (like ``__main__.py``): they may import any layer."""
ALLOWED: dict[str, set[str]] = {
    "settings": {"settings"},
    "common": {"common", "settings"},
    **{stage: {stage, "common", "settings", "rollout_watch"} for stage in STAGES},
    "rollout_watch": {"rollout_watch"},
    "delivery": {"delivery"},
}
"""Per layer of ``components``: the layers its modules may import (``tritonft`` is always allowed)."""

HALVES = ("tritonft", "components")
ABOVE = "stackcli"
"""The package above both halves: it may import either, neither may import it."""


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
    return sorted(
        p for p in (ROOT / "components").rglob("*.py") if p.parent != ROOT / "components" or p.stem not in COMPOSITION
    )


def house_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``tritonft``, ``components`` and ``stackcli`` by dotted name (a package by its ``__init__``)."""
    modules: dict[str, Path] = {}
    for top in (*HALVES, ABOVE):
        if not (root / top).is_dir():
            continue
        for path in (root / top).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the house modules it imports: ``from a.b import c`` counts ``a.b.c`` when that is a module, else
    ``a.b``; relative imports are resolved; anything outside the house is left out."""

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {known(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in node.names}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): every import circle, as its members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def top(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def runtime_to_infrastructure(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(m, t) for m, ts in graph.items() if top(m) == "tritonft" for t in ts if top(t) == "components"}


def arrows_up(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Imports from either half into the room above them."""
    return {(m, t) for m, ts in graph.items() if top(m) in HALVES for t in ts if top(t) == ABOVE}


def module_names_in_strings(path: Path, tops: tuple[str, ...]) -> set[str]:
    """String constants of a file that are a dotted module name under ``tops`` (what ``importlib`` would import)."""
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"[a-z_]+(\.[a-z_0-9]+)+", node.value)
        and node.value.split(".")[0] in tops
    }


@pytest.mark.parametrize("path", module_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_the_layers_below_it(path: Path) -> None:
    own = layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
    if own == "__init__":
        return  # components/__init__.py: the layer map itself, imports nothing
    wrong = sorted(m for m in component_imports(path) if layer(m) not in ALLOWED[own])
    assert wrong == [], f"{path.relative_to(ROOT)} ({own}) imports {wrong}; move what they share to components.common"


def test_every_package_of_components_is_a_known_layer() -> None:
    packages = {p.name for p in (ROOT / "components").iterdir() if (p / "__init__.py").is_file()}
    assert packages == {*STAGES, "common", "settings", "delivery"}


def test_the_rule_catches_a_stage_importing_another(tmp_path: Path) -> None:
    sneaky = tmp_path / "gateway.py"
    sneaky.write_text("def f():\n    from components.serving.service import TritonService\n")
    assert component_imports(sneaky) == {"components.serving.service", "components.serving.service.TritonService"}
    assert layer("components.serving.service") not in ALLOWED["gateway"]


def test_the_house_has_no_import_circle() -> None:
    assert circles(import_graph(house_modules())) == []


def test_the_runtime_imports_nothing_of_the_infrastructure() -> None:
    arrows = runtime_to_infrastructure(import_graph(house_modules()))
    assert arrows == set(), "tritonft must not import components: move what both need down, or the command above both"


def test_neither_half_imports_the_room_above_them() -> None:
    assert arrows_up(import_graph(house_modules())) == set(), f"{ABOVE} stands on both halves, never under them"


def test_the_runtime_names_no_module_above_it_to_import_by_name() -> None:
    named = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "tritonft").rglob("*.py"))
        if (found := module_names_in_strings(path, ("components", ABOVE)))
    }
    assert named == {}, "tritonft must not import components or stackcli by name either (importlib, CLI tables)"


def test_the_stack_reading_commands_are_above_both_halves_and_the_rule_sees_them() -> None:
    graph = import_graph(house_modules())
    assert "components.cluster_needs" in graph["stackcli.preflight"]
    assert "tritonft.preflight.command" in graph["stackcli.preflight"]


def test_a_module_name_in_a_string_is_seen(tmp_path: Path) -> None:
    sneaky = tmp_path / "cli.py"
    sneaky.write_text('COMMANDS = {"preflight": ("stackcli.preflight", "check the cluster")}\n"""components.args"""\n')
    assert module_names_in_strings(sneaky, ("components", ABOVE)) == {"stackcli.preflight", "components.args"}


def test_the_graph_sees_lazy_relative_and_type_only_imports_and_finds_their_circle(tmp_path: Path) -> None:
    (tmp_path / "tritonft" / "probe").mkdir(parents=True)
    (tmp_path / "components").mkdir()
    (tmp_path / "tritonft" / "__init__.py").write_text("")
    (tmp_path / "tritonft" / "probe" / "__init__.py").write_text("")
    (tmp_path / "components" / "__init__.py").write_text("")
    (tmp_path / "tritonft" / "probe" / "a.py").write_text("from . import b\n")
    (tmp_path / "tritonft" / "probe" / "b.py").write_text("def f():\n    from tritonft.probe.c import g\n")
    (tmp_path / "tritonft" / "probe" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tritonft.probe import a\nimport components\n"
    )
    graph = import_graph(house_modules(tmp_path))
    assert circles(graph) == [["tritonft.probe.a", "tritonft.probe.b", "tritonft.probe.c"]]
    assert runtime_to_infrastructure(graph) == {("tritonft.probe.c", "components")}


def test_the_graph_sees_an_arrow_up_into_the_room_above(tmp_path: Path) -> None:
    for package in ("tritonft", "components", "stackcli"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "stackcli" / "cli.py").write_text("import tritonft\nimport components\n")
    (tmp_path / "components" / "args.py").write_text("from stackcli import cli\n")
    assert arrows_up(import_graph(house_modules(tmp_path))) == {("components.args", "stackcli.cli")}
