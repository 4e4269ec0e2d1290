"""The ``tritonft`` entry point: commands are listed without importing them; only the chosen one is loaded."""

from __future__ import annotations

import json
import subprocess
import sys

from tritonft.cli import COMMANDS

PROBE = """
import contextlib, io, json, sys
from tritonft.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps({"out": out.getvalue(), "modules": sorted(m for m in sys.modules if m.startswith("tritonft."))}))
"""


def run_cli(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_help_lists_every_command_without_importing_any_command_module():
    result = run_cli("--help")
    listed = {line.split()[0] for line in str(result["out"]).splitlines() if line.startswith("    ")}
    assert set(COMMANDS) <= listed
    loaded = set(result["modules"])  # type: ignore[call-overload]
    assert not loaded & {module for module, _ in COMMANDS.values()}


def test_a_command_imports_only_its_own_module():
    loaded = set(run_cli("verify", "--help")["modules"])  # type: ignore[call-overload]
    assert "tritonft.convert.cmd_verify" in loaded
    assert not loaded & {module for name, (module, _) in COMMANDS.items() if name != "verify"}
