"""The Dockerfiles: hadolint-clean, multi-stage, non-root, pinned to the same commits the component passes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.components.platform.aws.helpers import REPO_ROOT
from tritonft.engines.fastertransformer.versions import FT_BACKEND_COMMIT, FT_COMMIT

SERVER = REPO_ROOT / "images" / "triton-ft" / "Dockerfile"
TOOLS = REPO_ROOT / "images" / "tools" / "Dockerfile"
BENCH = REPO_ROOT / "images" / "bench" / "Dockerfile"
VLLM_SERVER = REPO_ROOT / "images" / "triton-vllm" / "Dockerfile"
ONNX_SERVER = REPO_ROOT / "images" / "triton-onnx" / "Dockerfile"
HADOLINT = Path(__import__("sys").executable).parent / "hadolint"


@pytest.mark.parametrize(
    "dockerfile",
    [SERVER, TOOLS, BENCH, VLLM_SERVER, ONNX_SERVER],
    ids=["triton-ft", "tools", "bench", "triton-vllm", "triton-onnx"],
)
def test_hadolint_reports_nothing_at_warning_level(dockerfile: Path) -> None:
    result = subprocess.run(
        [str(HADOLINT), "--failure-threshold", "warning", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_every_ignored_hadolint_rule_is_explained_just_above() -> None:
    for dockerfile in (SERVER, TOOLS, BENCH, ONNX_SERVER):
        lines = dockerfile.read_text().splitlines()
        for i, line in enumerate(lines):
            if match := re.match(r"# hadolint ignore=(\S+)", line):
                assert all(rule in lines[i - 2] + lines[i - 1] for rule in match.group(1).split(","))


def test_server_defaults_match_the_commits_the_component_builds() -> None:
    text = SERVER.read_text()
    assert f"ARG FT_BACKEND_COMMIT={FT_BACKEND_COMMIT}" in text
    assert f"ARG FT_COMMIT={FT_COMMIT}" in text
    assert "ARG TRITON_VERSION=23.04" in text
    assert "-D FT_DIR=/workspace/FasterTransformer" in text
    assert '-D SM="${CUDA_ARCHS}"' in text


def test_server_runtime_stage_copies_only_the_backend_and_tuners_and_runs_non_root() -> None:
    runtime = SERVER.read_text().split("AS runtime", 1)[1]
    copies = re.findall(r"^COPY --from=build (\S+)", runtime, flags=re.M)
    assert copies == ["/opt/tritonserver/backends/fastertransformer", "/opt/fastertransformer/bin"]
    assert "apt-get" not in runtime
    assert re.search(r"^USER 1000:1000$", runtime, flags=re.M)
    assert "HEALTHCHECK" in runtime and "/v2/health/live" in runtime


def test_server_runtime_stage_installs_the_python_models_requirements_with_hashes_as_root() -> None:
    runtime = SERVER.read_text().split("AS runtime", 1)[1]
    copy = "COPY requirements.txt /opt/tritonft/requirements.txt"
    install = "RUN pip3 install --no-cache-dir --require-hashes -r /opt/tritonft/requirements.txt"
    assert copy in runtime and install in runtime
    assert runtime.index(copy) < runtime.index(install) < runtime.index("USER 1000:1000")


def test_server_requirements_pin_numpy_1_and_the_tokenizer_libraries() -> None:
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", (SERVER.parent / "requirements.txt").read_text(), flags=re.M))
    assert pins["numpy"].startswith("1.")
    assert {"tokenizers", "sentencepiece"} <= set(pins)


def test_tools_image_installs_the_locked_dependencies_and_runs_tritonft_as_non_root() -> None:
    text = TOOLS.read_text()
    assert "ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm" in text
    assert "uv sync --frozen --no-dev --no-install-project" in text
    runtime = text.split("AS runtime", 1)[1]
    assert re.search(r"^USER 1000:1000$", runtime, flags=re.M)
    assert 'ENTRYPOINT ["tritonft"]' in runtime


def test_the_bench_image_installs_the_pinned_tools_files_as_its_own_user() -> None:
    text = BENCH.read_text()
    for path in ("tools/aiperf-requirements.txt", "tools/perf-analyzer-requirements.txt"):
        assert path in text
    assert re.search(r"^USER 1000:1000$", text.split("rm /usr/local/bin/uv", 1)[1], flags=re.M)
