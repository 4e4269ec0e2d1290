"""``tritonft github-setup OWNER/REPO``: print the GitHub REST calls that set the repository's side of the deploy
roles' trust (OIDC subject template, environments' protection and deployment branches), as a script for
``gh api`` (:mod:`components.delivery.github`)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", help="the repository whose workflows deploy the stacks, as OWNER/NAME")


def run(args: argparse.Namespace) -> int:
    from components.delivery.github import setup_script

    sys.stdout.write(setup_script(args.repo))
    return 0
