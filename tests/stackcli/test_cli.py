"""The installed ``tritonft`` script is the runtime's commands plus the stack's, and the runtime's own entry point
(the tools image's) neither lists nor loads what reads a stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stackcli.cli import COMMANDS, STACK_COMMANDS, main
from tritonft import cli as runtime_cli

PROBE = """
import contextlib, io, json, sys, importlib
main = importlib.import_module(sys.argv[1]).main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[2:])
    except SystemExit:
        pass
print(json.dumps({"out": out.getvalue(), "modules": sorted(m for m in sys.modules if m.split(".")[0] in
    ("tritonft", "components", "stackcli", "pulumi"))}))
"""


def run_cli(entry: str, *args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, entry, *args], capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def listed(out: object) -> set[str]:
    return {line.split()[0] for line in str(out).splitlines() if line.startswith("    ")}


def test_the_installed_script_lists_every_runtime_command_and_preflight() -> None:
    result = run_cli("stackcli.cli", "--help")
    assert listed(result["out"]) >= set(runtime_cli.COMMANDS) | {"preflight"}
    assert set(COMMANDS) == set(runtime_cli.COMMANDS) | set(STACK_COMMANDS)


def test_the_runtimes_entry_point_has_no_command_that_reads_a_stack() -> None:
    result = run_cli("tritonft.cli", "--help")
    assert "preflight" not in listed(result["out"])
    assert not {m for m in result["modules"] if m.split(".")[0] in ("components", "stackcli")}  # type: ignore[attr-defined]


def test_preflight_loads_its_front_and_the_stacks_needs_only_when_chosen() -> None:
    loaded = set(run_cli("stackcli.cli", "preflight", "--help")["modules"])  # type: ignore[call-overload]
    assert "stackcli.preflight" in loaded
    assert not loaded & {module for name, (module, _) in COMMANDS.items() if name != "preflight"}


def test_preflight_through_the_installed_script_names_an_unknown_stack(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["preflight", "--stack", "no-such-stack", "--no-dry-run"])
    assert code == 1
    assert "no-such-stack" in capsys.readouterr().err


def test_preflight_of_an_aws_stack_takes_its_clusters_kubeconfig_never_the_ambient_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/another-cluster")
    code = main(["preflight", "--stack", "dev", "--assume-secret", "hfToken"])
    err = capsys.readouterr().err
    assert code == 2
    assert "never the one $KUBECONFIG happens to name" in err
    assert "pulumi stack output kubeconfig --show-secrets -s dev > kubeconfig.json" in err
