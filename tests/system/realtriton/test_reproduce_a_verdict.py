"""The documented way to reproduce a verdict (``docs/judge.md``, "Reproduce a verdict"; the README's copy), run as
written: each of the page's shell blocks marked for this test is run by bash, in order, in the project's directory
with ``tritonft`` on the PATH, on a seeded local checkpoint standing for the revision's original weights (dev's gpt2:
``tests/tritonft/reference/checkpoints.py``'s GPT-2 with a word-level tokenizer over the judge's prompts) and a real
Triton serving the repository they render (tritonserver 2.51.0, the converted files run by the CPU reference of
FasterTransformer's step, as the page says).

The right weights pass; another seed's weights, served with the revision's reference, fail naming the prompt and
both answers. The commands are the plan's: the same sub-commands with the same arguments as the model's Jobs and its
judge Job in ``dev``'s synthesized plan, the paths aside, and ``--engine reference`` the one argument added.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.stackcli.doc_commands import page_blocks
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.test_judge_reference import OTHER_SEED, assert_names_a_prompt_and_both_answers, seeded
from tests.tritonft.reference.checkpoints import word_tokenizer
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.probe.judge_reference import JudgeReference
from tritonft.spec import Family

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
INPUTS, REFERENCE, SERVED, JUDGE = range(4)
"""The page's blocks, in order: the plan's inputs, the reference step, the served model, the judge."""
MODEL = "gpt2"
CHECKPOINT = "gpt2-hf"


def command_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


DOCUMENTED = page_blocks("docs/judge.md", __file__)


def run(block: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One documented block, as a user's shell runs it in ``cwd`` with the project's ``tritonft`` on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-eu", "-c", block],
        cwd=cwd,
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def ran(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def original_weights(directory: Path, seed: int | None = None) -> Path:
    """The seeded GPT-2 (``seed``: another seed's weights of the same shape) with its tokenizer, in ``directory``."""
    variant = seeded(Family.GPT2)
    if seed is not None:
        variant = dataclasses.replace(variant, seed=seed)
    variant.save(directory)
    word_tokenizer(int(variant.model().config["vocab_size"]), Family.GPT2, directory)
    return directory


def checkout(directory: Path) -> Path:
    """``directory`` as a checkout of the project, where the page runs: the files git tracks, as they are here (the
    program reads its stacks and its images' build contexts from there); the steps write beside them."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (REPO / name).is_file():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, directory / name)
    return directory


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's directory holding the revision's files (``gpt2-hf``) after the page's first three steps."""
    project = checkout(tmp_path_factory.mktemp("reproduce") / "project")
    original_weights(project / CHECKPOINT)
    for step in (INPUTS, REFERENCE, SERVED):
        ran(run(DOCUMENTED[step], project))
    return project


def judged(workspace: Path, server: LocalTriton) -> tuple[subprocess.CompletedProcess[str], str]:
    done = run(DOCUMENTED[JUDGE], workspace, ENDPOINT=f"http://{server.http_url}")
    verdict = workspace / "verdict.txt"
    return done, verdict.read_text() if verdict.exists() else ""


def test_the_page_documents_the_four_steps_as_tritonft_commands() -> None:
    words = [shlex.split(line)[:2] for block in DOCUMENTED for line in command_lines(block)]
    assert words == [
        ["tritonft", "synth"],
        ["tritonft", "judge-inputs"],
        ["tritonft", "reference"],
        ["tritonft", "convert"],
        ["tritonft", "repo"],
        ["tritonft", "judge"],
    ]


def test_the_readme_gives_the_pages_commands_verbatim() -> None:
    (readme,) = page_blocks("README.md", __file__)
    assert command_lines(readme) == [line for block in DOCUMENTED for line in command_lines(block)]


def flags(command: str) -> list[str]:
    """The options of a command line (``--x`` words), in order."""
    return [word for word in shlex.split(command.replace("\\\n", " ")) if word.startswith("--")]


def job_commands(plan: Path, kind: str) -> tuple[dict[str, str], str]:
    """(env, script) of the plan's gpt2 Job of ``kind`` (``conversion``: the convert Job; ``reference``)."""
    jobs = [yaml.safe_load(p.read_text()) for p in plan.glob(f"manifests/*/job-{MODEL}-*.yaml")]
    (job,) = [j for j in jobs if ("-ref-" in j["metadata"]["name"]) == (kind == "reference")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or []}
    return env, str(container["command"][-1])


def tritonft_line(script: str, sub_command: str, having: str) -> str:
    """The script's one ``tritonft <sub_command> ...`` line with the option ``having`` (a script may run a
    sub-command for another engine too), its continuations joined."""
    lines = [raw.strip() for raw in script.replace("\\\n", " ").splitlines()]
    (line,) = [x for x in lines if x.startswith(f"tritonft {sub_command} ") and having in flags(x)]
    return line


def test_each_step_is_the_plans_command_with_the_plans_arguments(workspace: Path) -> None:
    plan = workspace / "plan"
    conversion_env, conversion = job_commands(plan, "conversion")
    _, reference = job_commands(plan, "reference")
    (documented_reference,) = command_lines(DOCUMENTED[REFERENCE])
    documented_convert, documented_repo = command_lines(DOCUMENTED[SERVED])

    assert flags(documented_reference) == flags(tritonft_line(reference, "reference", "--work"))
    assert flags(documented_convert) == flags(tritonft_line(conversion, "convert", "--tp"))
    assert f"--tp {conversion_env['TP']} --dtype {conversion_env['DTYPE']}" in documented_convert
    assert flags(documented_repo) == [*flags(tritonft_line(conversion, "repo", "--judge-reference")), "--engine"]
    judge_settings = json.loads((workspace / "inputs/judge.json").read_text())
    assert [m["name"] for m in judge_settings["models"]] == [MODEL] and judge_settings["models"][0]["reference"]


def test_the_right_weights_pass_the_reproduced_judge(
    workspace: Path, serve_triton: ServeTriton, newest_runtime: TritonRuntime
) -> None:
    server = serve_triton(workspace / "repo", runtime=newest_runtime)

    done, verdict = judged(workspace, server)

    assert done.returncode == 0, f"{verdict}\n{done.stderr[-3000:]}"
    assert verdict == f"passed: {MODEL} ok"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])  # the whole report: the Job's log
    assert report["ok"] is True


def test_another_seeds_weights_fail_the_reproduced_judge_naming_the_prompt_and_both_answers(
    workspace: Path, serve_triton: ServeTriton, newest_runtime: TritonRuntime, tmp_path: Path
) -> None:
    # The same plan's inputs and the revision's reference; the files converted and served are another seed's.
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    shutil.copytree(workspace / "inputs", wrong / "inputs")
    original_weights(wrong / CHECKPOINT, seed=OTHER_SEED)
    ran(run(DOCUMENTED[SERVED], wrong))
    server = serve_triton(wrong / "repo", runtime=newest_runtime)

    done, verdict = judged(wrong, server)

    assert done.returncode == 1, "the Job's exit code: failed"
    reference = JudgeReference.from_json((workspace / "inputs/judge-reference.json").read_text())
    assert_names_a_prompt_and_both_answers(verdict, MODEL, reference)
