"""The Python models on the server image's Python (3.10, NGC Triton 23.04) and numpy 1.x, in the real Triton.

The models' environment is built from ``images/triton-ft/requirements.txt`` on a Python 3.10 interpreter
(``tritonft.local_triton.find_python``), and Triton starts its 3.10 stub: what the stub processes have loaded
(``/proc/<pid>/maps``) shows the interpreter and numpy they run, and every family answers through its ensemble.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.system.realtriton.client import PROTOCOLS, ask
from tests.system.realtriton.conftest import ServeTriton
from tests.system.realtriton.repos import MATRIX, serve_ready_repository
from tritonft.local_triton import LocalTriton, TritonRuntime
from tritonft.spec import Family

SERVED = ("t5-tp2", "gpt2-tp1", "gptj-tp2", "gpt2-stream")
PROMPTS = ["hello world", "the quick brown fox jumps over the lazy dog", "once upon a time"]


@pytest.fixture(scope="module")
def image_python_triton(
    serve_triton: ServeTriton,
    image_python_runtime: TritonRuntime,
    tokenizers: dict[Family, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> LocalTriton:
    specs = [spec for spec in MATRIX if spec.name in SERVED]
    repository = serve_ready_repository(specs, tmp_path_factory.mktemp("py310-repo"), tokenizers)
    return serve_triton(repository, runtime=image_python_runtime)


def stub_mappings(server: LocalTriton) -> dict[int, str]:
    """The memory maps of the server's Python-backend stub processes, by PID."""
    maps = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
            if int(fields[1]) == server.pid and b"triton_python_backend_stub" in cmdline:
                maps[int(stat.parent.name)] = (stat.parent / "maps").read_text()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return maps


def test_every_python_model_runs_on_python_3_10_with_numpy_1(image_python_triton: LocalTriton) -> None:
    maps = stub_mappings(image_python_triton)
    python_models = 2 * len(SERVED) + len(SERVED)  # pre/postprocessing and the FT stand-in of each model
    assert len(maps) == python_models, f"{len(maps)} stub processes for {python_models} Python models"
    for pid, text in maps.items():
        assert set(re.findall(r"libpython3\.\d+", text)) == {"libpython3.10"}, pid
        numpy_core = set(re.findall(r"numpy/(_?core)/_multiarray_umath\.cpython-(\d+)", text))
        assert numpy_core == {("core", "310")}, f"stub {pid}: numpy 1.x keeps numpy/core (2.x: numpy/_core)"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["t5-tp2", "gpt2-tp1", "gptj-tp2"])
def test_each_family_answers_a_batch_of_different_lengths(
    image_python_triton: LocalTriton, model: str, protocol: str
) -> None:
    assert ask(image_python_triton, model, PROMPTS, protocol) == [[p] for p in PROMPTS]


def test_non_ascii_text_round_trips(image_python_triton: LocalTriton) -> None:
    text = "Grüße aus Köln, 世界 🌍"
    room = {"max_output_len": ("UINT32", [64])}  # a tiny byte-level vocabulary spends a token per byte
    assert ask(image_python_triton, "gpt2-tp1", [text], "grpc", **room) == [[text]]


def test_bad_and_stop_words_are_applied(image_python_triton: LocalTriton) -> None:
    prompt = "once upon a time, there was a little lamb"
    words = {"bad_words": ("BYTES", ['"upon a"']), "stop_words": ("BYTES", ["little"])}
    assert ask(image_python_triton, "gpt2-tp1", [prompt], "grpc", **words) == [["once time, there was a little"]]


def test_a_prompt_over_max_input_len_is_refused_and_the_stub_survives(image_python_triton: LocalTriton) -> None:
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException, match=r"at most 64"):
        ask(image_python_triton, "gpt2-tp1", [" ".join(["hello world"] * 80)])
    assert ask(image_python_triton, "gpt2-tp1", ["hello world"]) == [["hello world"]]
    assert "not healthy" not in image_python_triton.log_text()
