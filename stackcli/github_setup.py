"""``tritonft github-setup OWNER/REPO``: print the GitHub REST calls that set the repository's side of the deploy
roles' trust (OIDC subject template, environments' protection, production's required reviewers and deployment
branches), as a script for
``gh api`` (:mod:`components.delivery.github`)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", help="the repository whose workflows deploy the stacks, as OWNER/NAME")
    parser.add_argument(
        "--production-reviewer",
        action="append",
        default=[],
        metavar="user:LOGIN|team:SLUG",
        help="a required reviewer of the production environment (repeatable, at least one, at most six); every run "
        "sets production's reviewers to exactly these",
    )


def run(args: argparse.Namespace) -> int:
    from components.delivery.github import Reviewer, setup_script

    reviewers = [Reviewer.parse(text) for text in args.production_reviewer]
    sys.stdout.write(setup_script(args.repo, reviewers))
    return 0
