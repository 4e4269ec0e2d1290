"""``tritonft bench --in-cluster``: the same sweep as a Kubernetes Job next to the Services (pure Job spec).

The Job runs ``tritonft bench`` with the arguments given here (the endpoints resolved from the stack's outputs, or
the in-cluster Services passed with ``--gateway``/``--triton``), writes its results into an ``emptyDir`` and prints
them on its log as one line, ``TRITONFT_BENCH_RESULTS <json>``; ``tritonft bench --collect LOG --out DIR`` turns
that line back into the CSV, the JSON and the plots on your machine::

    tritonft bench --stack-outputs outputs.json --chat gpt2 --in-cluster --image REGISTRY/tritonft-bench@sha256:...\\
        --job-out bench-job.yaml
    kubectl apply -f bench-job.yaml && kubectl -n NS wait --for=condition=complete job/tritonft-bench --timeout=1h
    kubectl -n NS logs job/tritonft-bench > bench.log && tritonft bench --collect bench.log --out bench/

The image must hold tritonft, AIPerf and perf_analyzer: ``images/bench/Dockerfile`` builds it on the tools image.
Credentials come from Secrets mounted as files (``--secret-header NAME=SECRET/KEY``: the Job's ``tritonft bench``
reads header NAME from the file with ``--header-from-file``), never from the manifest or the environment. A
NetworkPolicy lets the pod reach only DNS and the HTTP(S)/gRPC ports the endpoints use, and nothing reach it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonft.errors import UserError

RESULTS_MARKER = "TRITONFT_BENCH_RESULTS "
RESULTS_DIR = "/results"
RUN_AS = 10001
"""A high UID, as every pod of the stack runs (``components.common.podsec``): the image's files are world-readable."""
SECRETS_DIR = "/var/run/secrets/tritonft-bench"
EGRESS_PORTS = (443, 80, 8000, 8001, 8080)
"""HTTPS and HTTP (ingress), Triton's HTTP and gRPC ports, the gateway's port."""


def parse_secret_headers(specs: Sequence[str]) -> list[tuple[str, str, str]]:
    """``["Authorization=gateway-auth/header"]`` -> ``[("Authorization", "gateway-auth", "header")]``; UserError
    names the fix."""
    out = []
    for spec in specs:
        header, sep, ref = spec.partition("=")
        secret, slash, key = ref.partition("/")
        if not sep or not slash or not header.strip() or not secret.strip() or not key.strip():
            raise UserError(f"--secret-header {spec!r} must look like HEADER=SECRET/KEY")
        out.append((header.strip(), secret.strip(), key.strip()))
    return out


def secret_file(secret: str, key: str) -> str:
    return f"{SECRETS_DIR}/{secret}/{key}"


def bench_job(
    *,
    name: str,
    namespace: str,
    image: str,
    bench_args: Sequence[str],
    secret_headers: Sequence[tuple[str, str, str]] = (),
    active_deadline_s: int = 3 * 3600,
) -> dict[str, Any]:
    """The Job: one non-root pod, read-only root filesystem, no retries, results in an ``emptyDir``; each secret
    header's Secret mounted read-only and read with ``--header-from-file``."""
    labels = dict(LABELS)
    env: list[dict[str, Any]] = [{"name": "HOME", "value": "/tmp"}, {"name": "MPLCONFIGDIR", "value": "/tmp/mpl"}]
    secrets = sorted({secret for _, secret, _ in secret_headers})
    header_args = [
        arg
        for header, secret, key in secret_headers
        for arg in ("--header-from-file", f"{header}={secret_file(secret, key)}")
    ]
    container = {
        "name": "bench",
        "image": image,
        "imagePullPolicy": "Always",
        "args": ["bench", *bench_args, *header_args, "--out", RESULTS_DIR, "--print-results"],
        "env": env,
        "resources": {
            "requests": {"cpu": "2", "memory": "2Gi"},
            "limits": {"cpu": "4", "memory": "4Gi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "results", "mountPath": RESULTS_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
            *(
                {"name": f"secret-{i}", "mountPath": f"{SECRETS_DIR}/{s}", "readOnly": True}
                for i, s in enumerate(secrets)
            ),
        ],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": active_deadline_s,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "results", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
                        *(
                            {"name": f"secret-{i}", "secret": {"secretName": s, "defaultMode": 0o440}}
                            for i, s in enumerate(secrets)
                        ),
                    ],
                },
            },
        },
    }


LABELS = {"app.kubernetes.io/name": "tritonft-bench", "app.kubernetes.io/component": "benchmark"}


def bench_network_policy(*, name: str, namespace: str) -> dict[str, Any]:
    """Nothing may reach the bench pod; it may reach DNS and the endpoints' ports only."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "podSelector": {"matchLabels": dict(LABELS)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [
                {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                {"ports": [{"protocol": "TCP", "port": port} for port in EGRESS_PORTS]},
            ],
        },
    }


FORWARDED = (
    ("--concurrency", "concurrency"),
    ("--request-rate", "request_rate"),
    ("--requests", "requests"),
    ("--duration", "duration"),
    ("--warmup-requests", "warmup_requests"),
    ("--output-tokens", "output_tokens"),
    ("--input-tokens", "input_tokens"),
    ("--timeout", "timeout"),
    ("--goodput", "goodput"),
    ("--tokenizer", "tokenizer"),
    ("--prompt", "prompt"),
    ("--input-name", "input_name"),
    ("--title", "title"),
)
"""The load and input flags the Job's ``tritonft bench`` gets as given (files must exist in the image)."""


def job_bench_args(args: argparse.Namespace, gateway: str | None, triton: Mapping[str, str]) -> list[str]:
    """The Job's ``tritonft bench`` arguments: the resolved endpoints and workloads, the load flags as given."""
    out: list[str] = []
    if gateway:
        out += ["--gateway", gateway]
    for route in ("completions", "chat", "embeddings"):
        for model in getattr(args, route):
            out += [f"--{route}", model]
    kserve_urls = set(triton.values())
    if len(kserve_urls) > 1:
        raise UserError(
            "--in-cluster measures one KServe V2 endpoint per Job: pass --triton URL (e.g. the model's Service, "
            "grpc://<stack>-<model>.<namespace>.svc:8001), or one --kserve model per Job"
        )
    if kserve_urls:
        out += ["--triton", next(iter(kserve_urls))]
    for model in triton:
        out += ["--kserve", model]
    for flag, attr in FORWARDED:
        value = getattr(args, attr)
        if value is not None:
            out += [flag, str(value)]
    for extra in args.perf_analyzer_arg:
        out.append(f"--perf-analyzer-arg={extra}")
    return out


def render(manifests: Sequence[Mapping[str, Any]]) -> str:
    import yaml

    return str(yaml.safe_dump_all([dict(m) for m in manifests], sort_keys=False))


def write_job(args: argparse.Namespace, gateway: str | None, triton: Mapping[str, str], namespace: str | None) -> int:
    """``--in-cluster``: write the Job manifest to ``--job-out`` (or stdout)."""
    problems = []
    if not args.image:
        problems.append("--image: the Job's image (tritonft + AIPerf + perf_analyzer: images/bench/Dockerfile)")
    ns = args.namespace or namespace
    if not ns:
        problems.append("--namespace (or --stack-outputs with a namespace output)")
    if problems:
        raise UserError("--in-cluster needs", problems)
    assert ns is not None
    if args.header_from_env or args.header_from_file:
        raise UserError(
            "--in-cluster: the Job reads headers from Secrets: replace --header-from-env/--header-from-file with "
            "--secret-header NAME=SECRET/KEY"
        )
    manifests = [
        bench_job(
            name=args.job_name,
            namespace=ns,
            image=args.image,
            bench_args=job_bench_args(args, gateway, triton),
            secret_headers=parse_secret_headers(args.secret_header),
        ),
        bench_network_policy(name=args.job_name, namespace=ns),
    ]
    text = render(manifests)
    if args.job_out is None:
        print(text, end="")
    else:
        Path(args.job_out).write_text(text)
        print(f"wrote {args.job_out}: kubectl apply -f {args.job_out}", flush=True)
    return 0


def results_line(payload: Mapping[str, Any]) -> str:
    """The log line that carries the results out of the pod."""
    return RESULTS_MARKER + json.dumps(payload, separators=(",", ":"))


def read_results_line(log: str) -> dict[str, Any]:
    """The results of a Job's log (the last marker line), or of a ``bench.json`` (to plot an earlier sweep again);
    UserError when it has none."""
    try:
        whole = json.loads(log)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("points"), list):
        return whole
    found = [line for line in log.splitlines() if line.startswith(RESULTS_MARKER)]
    if not found:
        raise UserError(
            f"--collect: the log has no {RESULTS_MARKER.strip()} line: the Job has not finished or failed "
            "(its log says why)"
        )
    data = json.loads(found[-1][len(RESULTS_MARKER) :])
    if not isinstance(data, dict) or not isinstance(data.get("points"), list):
        raise UserError(f"--collect: the {RESULTS_MARKER.strip()} line is not a tritonft bench result")
    return data
