"""The server image builds FT's GEMM tuners as explicit targets and puts them on the PATH the init container uses."""

from __future__ import annotations

import re
from pathlib import Path

from tritonft.engines.fastertransformer.gemm import PROGRAMS

SERVER = Path(__file__).resolve().parents[4] / "images" / "triton-ft" / "Dockerfile"
TUNERS_DIR = "/opt/fastertransformer/bin"


def _stages() -> tuple[str, str]:
    build, runtime = SERVER.read_text().split("AS runtime", 1)
    return build, runtime


def test_the_build_stage_makes_every_tuner_the_stack_runs_as_a_named_target():
    build, _ = _stages()
    (targets,) = re.findall(r'make -O -j"\$\{MAKE_JOBS\}" ((?:\w+_gemm ?)+)', build)
    assert set(targets.split()) == set(PROGRAMS.values())


def test_the_build_stage_installs_exactly_those_tuners_executable():
    build, _ = _stages()
    (installed,) = re.findall(rf"install -D -m 0755 -t {TUNERS_DIR} ((?:bin/\w+ ?)+)", build)
    assert {Path(p).name for p in installed.split()} == set(PROGRAMS.values())


def test_the_runtime_stage_copies_the_tuners_and_puts_them_on_the_path():
    _, runtime = _stages()
    assert f"COPY --from=build {TUNERS_DIR} {TUNERS_DIR}" in runtime
    (path,) = re.findall(r"ENV PATH=(\S+)", runtime)
    assert TUNERS_DIR in path.split(":")
