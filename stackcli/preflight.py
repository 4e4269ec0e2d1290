"""``tritonft preflight --stack NAME``: check the target cluster before ``pulumi up``; one line per check, exit 0/1.

Checks: the API answers; GPU nodes with allocatable ``nvidia.com/gpu``; GPU nodes whose labels and taints match
the stack's selector and tolerations; for each GPU model a usable node with enough free GPUs for one pod; for each
``device: cpu`` model a schedulable non-GPU node matching ``cpuNodeSelector`` with the CPU and memory of one
replica unrequested; the storage class (and that it can be ReadWriteMany); the ingress class; the CRDs the stack's
features need; each model's ``hfTokenSecret`` (in the stack's namespace, with the key its download Job mounts); and
a server-side dry-run of every object of the plan (``tritonft synth``'s manifests) against the API server.

This is the command's front, above both halves: what a stack asks of its cluster is decided by the same functions
``pulumi up`` runs (:mod:`components.cluster_needs`); the checks (:mod:`tritonft.preflight`) take plain ``Needs``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--project-dir", type=Path, default=None, help="project root (default: nearest Pulumi.yaml)")
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: the stack's kubeconfig, else $KUBECONFIG; an aws stack takes it explicitly, "
        "from its `kubeconfig` output)",
    )
    parser.add_argument(
        "--context", default=None, help="kubeconfig context (default: the stack's kubeContext, else the current one)"
    )
    parser.add_argument("--no-dry-run", action="store_true", help="skip the server-side dry-run of the plan")
    parser.add_argument(
        "--assume-secret",
        action="append",
        default=[],
        metavar="KEY",
        help="check the stack as CI deploys it, with the secret stack key KEY set (e.g. hfToken); never read",
    )


def aws_kubeconfig_needed(stack: str) -> str:
    """Why an ``aws`` stack's preflight takes ``--kubeconfig``, and how to get it."""
    return (
        f"preflight --stack {stack}: this stack (platform aws) checks the cluster its own `up` builds, never the one "
        "$KUBECONFIG happens to name. Before the first `up` there is no cluster to check: everything preflight "
        "would look for is made by that `up`, and the plan's checks stand in (`tritonft synth --stack "
        f"{stack}`). After it, pass the cluster's kubeconfig from the stack's output: `pulumi stack output "
        f"kubeconfig --show-secrets -s {stack} > kubeconfig.json && tritonft preflight --stack {stack} "
        "--kubeconfig kubeconfig.json` (it authenticates with `aws eks get-token`)"
    )


def run(args: argparse.Namespace) -> int:
    from components.cluster_needs import stack_needs
    from tritonft.kube import from_kubeconfig
    from tritonft.preflight.command import load_plan, preflight
    from tritonft.synth.stackfile import find_project_root

    root = args.project_dir or find_project_root(Path.cwd())
    assumed = tuple(args.assume_secret)
    stack = stack_needs(root, args.stack, assumed)
    if stack.builds_cluster and not args.kubeconfig:
        print(aws_kubeconfig_needed(args.stack), file=sys.stderr)
        return 2
    kubeconfig = args.kubeconfig or stack.kubeconfig
    context = args.context or stack.context
    kube = from_kubeconfig(kubeconfig, context)
    plan = None if args.no_dry_run else load_plan(root, args.stack, assumed)
    results = preflight(stack.needs, kube, plan)
    for result in results:
        print(result.line())
    return 0 if all(r.ok for r in results) else 1
