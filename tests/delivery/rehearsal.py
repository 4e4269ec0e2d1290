"""Run `.github/workflows/deploy.yml` here, job by job and step by step, with its own scripts.

:class:`Rehearsal` copies the checkout to a runner folder, puts the stand-ins of :mod:`tests.delivery.standins`
(`aws`, `docker`, `df`, `pulumi`, `tritonft`) in front of the project's environment on ``PATH``, and runs the
workflow's jobs in the order their ``needs`` give: each ``run:`` step through bash with the step's ``env`` evaluated
from the workflow's expressions (``needs.*.outputs``, ``steps.*.outputs``, ``vars``, ``secrets``, ``github``, ``env``,
``||``, ``&&``, ``==``, ``format()``, the status functions), each ``uses:`` step by what the action does here: checkout
and the setup action are the runner folder and the project's environment; ``configure-aws-credentials`` opens a
stand-in AWS session of its ``role-duration-seconds`` (the action's default: one hour) that the stand-in `up` holds
against the stack's longest `up` after the steps before it (their ``timeout-minutes``); ``pulumi/actions`` with
``command: up`` is the stand-in `pulumi up` (the stack's plan, synthesized with the config the job's steps set; the
policy pack; the builds the plan would run; what would hang or expire, its step's own ``timeout-minutes`` included).
Given a cluster (:meth:`Rehearsal.on_cluster`: the test control plane), the stand-in `up` also applies the stage's
Kubernetes objects to its real API server and waits for the real scheduler (:mod:`tests.delivery.cluster_half`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.delivery.conftest import REPO

BASES = {
    "ghcr.io/astral-sh/uv:0.13.9": "sha256:" + "1" * 64,
    "nvcr.io/nvidia/tritonserver:23.04-py3": "sha256:" + "2" * 64,
    "nvcr.io/nvidia/tritonserver:25.12-py3": "sha256:" + "3" * 64,
    "nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3": "sha256:" + "4" * 64,
    "python:3.11.7-slim-bookworm": "sha256:d11b9bd5e49ea7401753d78f4d3b56f3aec952b85b49bcae88981f0452818e0b",
}
"""The stand-in public registries: each base the Dockerfiles name, with a digest."""
VARS = {"IMAGE_REGISTRY": "123456789012.dkr.ecr.us-west-2.amazonaws.com/triton-ft", "AWS_REGION": "us-west-2"}
SECRETS = {"HF_TOKEN": "hf_rehearsal", "PULUMI_ACCESS_TOKEN": "pul-rehearsal"}
DEFAULT_SESSION_SECONDS = 3600
"""``configure-aws-credentials``' session when ``role-duration-seconds`` is not given."""
_TOKEN = re.compile(r"\s*('(?:[^']|'')*'|\|\||&&|==|!=|\(|\)|,|!|[A-Za-z_][\w.-]*|\d+)")


class StepFailedError(Exception):
    """A step of the workflow failed (as it would fail the job)."""

    def __init__(self, job: str, step: str, output: str) -> None:
        super().__init__(f"job {job}, step {step!r} failed:\n{output}")
        self.job, self.step, self.output = job, step, output


def evaluate(expression: str, lookup: Callable[[str], Any], status: str = "success") -> Any:
    """A GitHub Actions expression (the subset the workflows use) with ``lookup`` for context paths; ``status``
    (``success``, ``failure`` or ``cancelled``) is the job's so far, what ``success()``, ``failure()`` and
    ``cancelled()`` read."""
    tokens = _TOKEN.findall(expression)
    assert "".join(tokens).replace(" ", "") == expression.replace(" ", ""), expression
    python: list[str] = []
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token.startswith("'"):
            python.append(repr(token[1:-1].replace("''", "'")))
        elif token in ("||", "&&", "!"):
            python.append({"||": " or ", "&&": " and ", "!": " not "}[token])
        elif token in ("(", ")", ",", "==", "!=") or token.isdigit():
            python.append(token)
        elif following == "(":
            python.append(f"_fn_{token}")
        else:
            python.append(f"_ctx({token!r})")
    functions = {
        "_ctx": lookup,
        "_fn_format": lambda text, *args: re.sub(r"\{(\d+)\}", lambda m: str(args[int(m.group(1))]), text),
        "_fn_cancelled": lambda: status == "cancelled",
        "_fn_failure": lambda: status == "failure",
        "_fn_success": lambda: status == "success",
        "_fn_always": lambda: True,
    }
    return eval("".join(python), {"__builtins__": {}}, functions)  # our own tokens only, no builtins


def substitute(text: str, lookup: Callable[[str], Any]) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: str(evaluate(m.group(1), lookup) or ""), text)


@dataclass
class JobRun:
    outputs: dict[str, str] = field(default_factory=dict)
    steps: dict[str, dict[str, str]] = field(default_factory=dict)


class Rehearsal:
    """One push to main, rehearsed in ``root`` (a copy of the checkout ``source``)."""

    def __init__(self, root: Path, source: Path = REPO, *, disk_gib: int = 150) -> None:
        self.root, self.state, self.bin = root / "runner", root / "state", root / "bin"
        for folder in (self.state, self.bin):
            folder.mkdir(parents=True)
        files = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=source, capture_output=True, check=True
        ).stdout.decode()
        for name in filter(None, files.split("\0")):
            if (source / name).is_file() and not name.startswith((".tools", ".venv")):
                (self.root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source / name, self.root / name)
        for command in ("aws", "docker", "df", "pulumi", "tritonft"):
            stub = self.bin / command
            stub.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tests.delivery.standins {command} "$@"\n')
            stub.chmod(0o755)
        (self.state / "registry.json").write_text(__import__("json").dumps(BASES))
        self.env = {
            "PATH": f"{self.bin}:{REPO / '.venv' / 'bin'}:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "PYTHONPATH": str(self.root),
            "REHEARSAL_STATE": str(self.state),
            "REHEARSAL_DISK_KB": str(disk_gib * 1024 * 1024),
            "GITHUB_RUN_ID": "4242",
            "GITHUB_RUN_ATTEMPT": "1",
            "CI": "true",
            "REHEARSAL_IMAGE_REGISTRY": VARS["IMAGE_REGISTRY"],
        }
        self.jobs: dict[str, JobRun] = {}
        self.log: list[str] = []

    def on_cluster(self, kubeconfig: Path, prefix: str) -> None:
        """Each `up` applies its stage's Kubernetes half to the API server of ``kubeconfig``, under names starting
        with ``prefix`` (its stage namespaces ``<prefix>-<stage>``, its nodes)."""
        self.env["REHEARSAL_KUBECONFIG"] = str(kubeconfig)
        self.env["REHEARSAL_CLUSTER"] = prefix
        go = shutil.which("go")  # the real CRDs' modules: scripts/setup/gateway_api.sh (cached after its first run)
        if go is not None:
            self.env["PATH"] += f":{Path(go).parent}"

    def edit(self, path: str, old: str, new: str) -> None:
        """Change the runner's copy of ``path`` (a blocker reintroduced); ``old`` must be there."""
        file = self.root / path
        text = file.read_text()
        assert old in text, f"{old!r} not in {path}"
        file.write_text(text.replace(old, new))

    def workflow(self) -> dict[str, Any]:
        data = yaml.safe_load((self.root / ".github/workflows/deploy.yml").read_text())
        assert isinstance(data, dict)
        return data

    def run(self, only: Iterable[str] | None = None) -> None:
        """Run the jobs (all, or ``only`` those) in the order of their ``needs``; raises :class:`StepFailedError`."""
        workflow = self.workflow()
        jobs: dict[str, Any] = workflow["jobs"]
        wanted = set(only) if only is not None else set(jobs)
        done: list[str] = []
        while len(done) < len(jobs):
            ready = [name for name, job in jobs.items() if name not in done and all(n in done for n in _needs(job))]
            assert ready, "the jobs' needs form a cycle"
            for name in ready:
                if name in wanted:
                    self._job(name, workflow)
                done.append(name)

    def _job(self, name: str, workflow: dict[str, Any]) -> None:
        job = workflow["jobs"][name]
        run = self.jobs[name] = JobRun()
        env: dict[str, str] = {}

        def lookup(path: str) -> Any:
            head, _, rest = path.partition(".")
            if head == "needs":
                need, _, output = rest.removeprefix("").partition(".outputs.")
                return self.jobs[need.split(".")[0]].outputs.get(output, "")
            if head == "steps":
                step, _, output = rest.partition(".outputs.")
                return run.steps.get(step, {}).get(output, "")
            if head == "vars":
                return VARS.get(rest, "")
            if head == "secrets":
                return SECRETS.get(rest, "")
            if head == "github":
                return {"run_id": "4242", "run_attempt": "1", "sha": "0" * 40}.get(rest, "")
            if head == "env":
                return env.get(rest, "")
            raise AssertionError(f"context {path} is not rehearsed")

        for scope in (workflow.get("env", {}), job.get("env", {})):
            env.update({k: substitute(str(v), lookup) for k, v in scope.items()})
        session = 0
        before_up, up_reached = 0, False  # the minutes the steps before `up` may take (their timeouts)
        for index, step in enumerate(job["steps"]):
            label = step.get("name") or step.get("uses") or f"step {index}"
            if "if" in step and not evaluate(str(step["if"]).strip("${} "), lookup):
                continue
            with_ = {k: substitute(str(v), lookup) for k, v in (step.get("with") or {}).items()}
            step_env = {**env, **{k: substitute(str(v), lookup) for k, v in (step.get("env") or {}).items()}}
            action = str(step.get("uses", "")).split("@")[0]
            is_up = action == "pulumi/actions" and with_.get("command") == "up"
            up_reached = up_reached or is_up
            if not up_reached:
                before_up += int(step.get("timeout-minutes", 0))
            if action == "aws-actions/configure-aws-credentials":
                session = int(with_.get("role-duration-seconds") or DEFAULT_SESSION_SECONDS)
                continue
            if is_up:
                command = f'pulumi up --yes --stack "{with_["stack-name"]}"'
                if with_.get("policyPacks"):
                    command += f" --policy-pack {with_['policyPacks']}"
                limits = {
                    "REHEARSAL_BEFORE_UP_MINUTES": str(before_up),
                    "REHEARSAL_UP_STEP_MINUTES": str(step.get("timeout-minutes", job.get("timeout-minutes", 360))),
                }
                self._shell(name, label, command, {**step_env, **limits}, session)
                continue
            if "uses" in step:
                continue  # checkout, setup, ECR login, buildx, the CLI's install: the runner folder and environment
            outputs = self._shell(name, label, str(step["run"]), step_env, session)
            if "id" in step:
                run.steps[step["id"]] = outputs
        run.outputs = {k: substitute(str(v), lookup) for k, v in (job.get("outputs") or {}).items()}

    def _shell(self, job: str, label: str, script: str, env: dict[str, str], session: int) -> dict[str, str]:
        github_output = self.state / f"github-output-{job}"
        github_output.write_text("")
        proc = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script],
            cwd=self.root,
            env={
                **self.env,
                **env,
                "GITHUB_OUTPUT": str(github_output),
                "REHEARSAL_AWS_SESSION_SECONDS": str(session),
            },
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
        self.log.append(f"[{job}] {label}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            raise StepFailedError(job, label, proc.stdout + proc.stderr)
        outputs: dict[str, str] = {}
        for line in github_output.read_text().splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
        return outputs

    def read(self, name: str) -> Any:
        """A stand-in's record (``builds.json``, ``registry.json``, ``ups.json``, ``probes.json``, ...)."""
        import json

        path = self.state / name
        return json.loads(path.read_text()) if path.exists() else None


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)
