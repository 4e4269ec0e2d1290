"""The commands the documentation writes, read as a test reads them: the shell blocks a test runs (marked
``# run-by: tests/<file>.py``), split into argument vectors as the shell splits them, and every ``tritonft`` command
a page names (in a block or in inline code) with the flags it gives."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from stackcli.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELLS = ("bash", "sh", "shell")
RUN_BY = re.compile(r"^# run-by: (tests/\S+\.py)$")
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
COMMAND = re.compile(r"(?<![\w.-])tritonft ([a-z][a-z-]*)")
FLAG = re.compile(r"(?<![\w-])--(\[no-\])?([a-z][a-z0-9-]*)")
END = re.compile(r"&&|;|\$\(|(?<!\\)\|(?!\|)|\s#|^#")
"""Where a command named in a line stops: the next command of the line, a comment, a command substitution."""


def shell_lines(body: str) -> list[str]:
    """The lines of a shell block with continuations joined, comments (``  # ...``) and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    lines = (line.split("  #", 1)[0].strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def page_blocks(page: str, test: str) -> list[str]:
    """The shell blocks of ``page`` (relative to the repository) whose first line is ``# run-by: <test>``, in order,
    as written: for a test that runs each block with bash, as a reader pastes it (variables and quoting included).

    ``test`` is the calling test's ``__file__``: a block names the test that runs it, and that test runs what this
    returns, so the commands a page shows are the commands the test runs."""
    marker = str(Path(test).resolve().relative_to(ROOT))
    text = (ROOT / page).read_text(encoding="utf-8")
    found: list[str] = []
    for match in FENCE.finditer(text):
        body = match.group(2)
        first = body.strip().splitlines()[0] if body.strip() else ""
        run_by = RUN_BY.match(first)
        if match.group(1) in SHELLS and run_by and run_by.group(1) == marker:
            found.append(body)
    assert found, f"{page} has no shell block marked `# run-by: {marker}`"
    return found


def page_commands(page: str, test: str) -> list[list[str]]:
    """Every command of :func:`page_blocks`, in order, each split as the shell splits it (``a && b`` is two
    commands)."""
    return [
        shlex.split(part) for body in page_blocks(page, test) for line in shell_lines(body) for part in line.split("&&")
    ]


def checkout(tmp_path: Path) -> Path:
    """The project as a reader's checkout has it, in ``tmp_path/project``: its files copied (the image builds hash
    their contexts' real files, as Docker sends them), its ``.venv`` the one running the tests, an empty ``stacks/``,
    no ``build/`` or ``site/``."""
    project = tmp_path / "project"
    project.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in ("stacks", "build", "site") or entry.name.startswith("."):
            continue
        if entry.is_dir():
            shutil.copytree(entry, project / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(entry, project / entry.name)
    (project / ".venv").symlink_to(Path(sys.prefix))
    (project / "stacks").mkdir()
    return project


def run_as_written(
    argv: list[str], project: Path, env: Mapping[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """One command of a page, unchanged, in ``project`` as the reader's shell runs it after ``source
    .venv/bin/activate`` (``.venv/bin`` first on the ``PATH``): ``.venv/bin/tritonft ...`` and ``tritonft ...``
    alike."""
    environment = {**os.environ, **(env or {})}
    environment["PATH"] = f"{project / '.venv' / 'bin'}{os.pathsep}{environment.get('PATH', '')}"
    return subprocess.run(
        argv, cwd=project, env=environment, capture_output=True, text=True, check=False, timeout=timeout
    )


@dataclass(frozen=True)
class Named:
    """One ``tritonft`` command a page names: where, the command, its flags, its words as written, and whether it is
    a line of a shell block (a command the reader runs) rather than inline code or another block's line."""

    where: str
    command: str
    flags: tuple[str, ...]
    text: str
    shell: bool = False


def named_commands(page: Path) -> list[Named]:
    """Every ``tritonft <command> ...`` of ``page``: each line of its fenced blocks (continuations joined) and each
    inline code span outside them. A usage line's ``--[no-]flag`` names both flags."""
    text = page.read_text(encoding="utf-8")
    pieces: list[tuple[int, str, bool]] = []
    outside = text
    for match in FENCE.finditer(text):
        line = text[: match.start()].count("\n") + 2
        joined = re.sub(r"\\\n\s*", " ", match.group(2))
        shell = match.group(1) in SHELLS
        pieces += [(line + i, piece, shell) for i, piece in enumerate(joined.splitlines())]
        outside = outside.replace(match.group(0), "\n" * match.group(0).count("\n"), 1)
    for number, raw in enumerate(outside.splitlines(), start=1):
        pieces += [(number, span.group(1), False) for span in INLINE.finditer(raw)]
    found = []
    for number, piece, shell in pieces:
        for match in COMMAND.finditer(piece):
            rest = piece[match.end() :]
            stop = END.search(rest)
            words = rest[: stop.start()] if stop else rest
            flags: list[str] = []
            for negated, name in FLAG.findall(words):
                flags += [f"--{name}", f"--no-{name}"] if negated else [f"--{name}"]
            where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name}:{number}"
            found.append(Named(where, match.group(1), tuple(flags), f"tritonft {match.group(1)}{words}".strip(), shell))
    return found


def parser_of(command: str) -> argparse.ArgumentParser:
    """``tritonft COMMAND``'s own parser, built as the console script builds it."""
    module, help_text = COMMANDS[command]
    parser = argparse.ArgumentParser(prog=f"tritonft {command}", description=help_text)
    importlib.import_module(module).add_arguments(parser)
    return parser


def option_strings(command: str) -> set[str]:
    return {option for action in parser_of(command)._actions for option in action.option_strings}
