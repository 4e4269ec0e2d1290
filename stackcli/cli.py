"""The ``tritonft`` console script: the runtime's commands (:data:`tritonft.cli.COMMANDS`) and the commands that read
a stack (:data:`STACK_COMMANDS`), which live above both halves because they ask ``components`` what a stack needs."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tritonft import cli as runtime_cli

STACK_COMMANDS: dict[str, tuple[str, str]] = {
    "preflight": (
        "stackcli.preflight",
        "check the target cluster before `pulumi up` (GPU nodes, placement, storage, ingress, CRDs, dry-run)",
    ),
    "github-setup": (
        "stackcli.github_setup",
        "print the `gh api` calls that set the repository's OIDC subject, its environments' deployment branches "
        "and production's required reviewers",
    ),
}
"""Commands that read ``components`` (a stack file's needs, the deploy roles' trust) (module, help), in the order
``--help`` lists them."""

COMMANDS: dict[str, tuple[str, str]] = {
    name: entry
    for runtime_name, runtime_entry in runtime_cli.COMMANDS.items()
    for name, entry in [(runtime_name, runtime_entry), *(STACK_COMMANDS.items() if runtime_name == "diff" else [])]
}
"""Every command of the ``tritonft`` console script (the stack's commands listed after ``diff``)."""


def main(argv: Sequence[str] | None = None) -> int:
    return runtime_cli.main(argv, commands=COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
