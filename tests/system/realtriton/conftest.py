"""Real-Triton fixtures: the bundled ``tritonserver`` (``tritonft.local_triton``) serving rendered repositories.

Each server image's tests run that image's server version (``tritonft.local_triton.RELEASES``):
``triton_runtime`` (session) is the FasterTransformer image's, tritonserver 2.33.0 (NGC Triton 23.04) with its
Python 3.8 stub and the image's requirements resolved for 3.8; it serves every FT-path repository (ensembles,
probe, streaming, gateway, Prometheus). ``newest_runtime`` is tritonserver 2.51.0 (the encoders' server, the
newest a wheel gives), with the models on this interpreter; ``image_python_runtime`` is 2.51.0 with the models on
the image's own Python 3.10 and its exact requirements. ``serve_triton`` (session) is a factory:
``serve_triton(repo_dir, ...)`` returns a running :class:`LocalTriton`; the same arguments return the same server,
so tests share one server per repository set. A server is stopped once the tests that need it are done
(:mod:`tests.lifetime`): a named server fixture's after the last test that uses it, any other after the last test of
the module that started it; whatever is left, by PID at the end of the session. The log of every running server is
attached to each failing test of this folder.
"""

from __future__ import annotations

import re
import shutil
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests import lifetime
from tests.failure_logs import attach_on_failure, tail
from tests.system.realtriton import vllm_server
from tests.system.realtriton.prometheus import RUNNING as PROMETHEUS_SERVERS
from tests.system.realtriton.repos import (
    MATRIX,
    PROBE_MODEL,
    matrix_spec,
    render_with_cli,
    serve_ready_repository,
    stack_specs,
)
from tests.tritonft.encoder.conftest import encoder_checkpoint, encoder_converted, minilm_dir  # noqa: F401  (encoders)
from tests.tritonft.reference.conftest import checkpoint, converted  # noqa: F401  (golden checkpoints, converted once)
from tests.tritonft.repo.conftest import train_gpt_tokenizer, train_t5_tokenizer
from tritonft.encoder.repo import EncoderServing, OnnxEngine, write_encoder_repository
from tritonft.local_triton import (
    FT_IMAGE_SERVER,
    IMAGE_PYTHON,
    LocalTriton,
    TritonError,
    TritonRuntime,
    find_python,
    prepare_runtime,
)
from tritonft.spec import Family
from tritonft.standin import standin_all

LOG_TAIL_LINES = 200
_RUNNING: list[LocalTriton] = []
_STOPS: weakref.WeakKeyDictionary[LocalTriton, lifetime.Stop] = weakref.WeakKeyDictionary()


def release(server: LocalTriton) -> lifetime.Stop:
    """The one stop of ``server`` handed to :mod:`tests.lifetime`: it stops the server and forgets it."""

    def stop() -> None:
        server.stop()
        if server in _RUNNING:
            _RUNNING.remove(server)

    return _STOPS.setdefault(server, stop)


def keep_for_fixture(request: pytest.FixtureRequest, server: LocalTriton) -> LocalTriton:
    """``server``, stopped after the last test that uses ``request``'s fixture (not with the module that started it)."""
    lifetime.stop_after_last_use(request, release(server))
    return server


ServeTriton = Callable[..., LocalTriton]


@pytest.fixture(scope="session")
def triton_runtime() -> TritonRuntime:
    """The FasterTransformer image's server: tritonserver 2.33.0 (NGC Triton 23.04), the default of ``serve_triton``."""
    try:
        return prepare_runtime(release=FT_IMAGE_SERVER)
    except TritonError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def newest_runtime() -> TritonRuntime:
    """tritonserver 2.51.0, the models on this interpreter: the encoders' server."""
    try:
        return prepare_runtime()
    except TritonError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def image_python_runtime() -> TritonRuntime:
    """The models' environment on the server image's Python (3.10), from the same requirements file."""
    try:
        return prepare_runtime(python=find_python(IMAGE_PYTHON))
    except TritonError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def serve_triton(triton_runtime: TritonRuntime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeTriton]:
    """``serve_triton(repositories, *, extra_args=(), env=None, shared=True, runtime=None) -> LocalTriton`` (running).

    ``runtime`` defaults to ``triton_runtime``. With ``shared`` (default) a server already started with the same
    arguments is returned; pass
    ``shared=False`` for a server of one's own (still stopped at the end of the session, or by the caller).
    A server that does not come up fails with :class:`TritonError` carrying Triton's log.
    """
    servers: dict[tuple[object, ...], LocalTriton] = {}

    def serve(
        repositories: Path | Sequence[Path],
        *,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        shared: bool = True,
        runtime: TritonRuntime | None = None,
    ) -> LocalTriton:
        repos = (repositories,) if isinstance(repositories, Path) else tuple(repositories)
        runtime = runtime or triton_runtime
        key = (repos, tuple(extra_args), tuple(sorted((env or {}).items())), runtime)
        if shared and key in servers and servers[key].process is not None:
            return servers[key]
        log = tmp_path_factory.mktemp("triton-log") / "tritonserver.log"
        server = LocalTriton(runtime, repos, log_path=log, extra_args=extra_args, env=env)
        server.start()
        _RUNNING.append(server)
        lifetime.stop_after_this_module(release(server))
        if shared:
            servers[key] = server
        return server

    try:
        yield serve
    finally:
        for server in _RUNNING:
            server.terminate()
        while _RUNNING:
            _RUNNING.pop().stop()


@pytest.fixture(scope="session")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[Family, Path]:
    """A trained tokenizer per family (GPT-2 and GPT-J share the byte-level BPE one)."""
    gpt = train_gpt_tokenizer(tmp_path_factory.mktemp("gpt-tokenizer"))
    return {Family.T5: train_t5_tokenizer(tmp_path_factory.mktemp("t5-tokenizer")), Family.GPT2: gpt, Family.GPTJ: gpt}


@pytest.fixture(scope="session")
def dev_repository(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> Path:
    """The ``dev`` stack's models rendered into one repository, FT steps stood in for."""
    return serve_ready_repository(stack_specs("dev"), tmp_path_factory.mktemp("dev-repo"), tokenizers)


@pytest.fixture(scope="session")
def dev_triton(serve_triton: ServeTriton, dev_repository: Path, request: pytest.FixtureRequest) -> LocalTriton:
    return keep_for_fixture(request, serve_triton(dev_repository))


@pytest.fixture(scope="session")
def matrix_repository(tmp_path_factory: pytest.TempPathFactory, tokenizers: dict[Family, Path]) -> Path:
    """T5, GPT-2 and GPT-J at TP 1 and 2 plus a streaming GPT-2, rendered by ``tritonft repo``, FT stood in for."""
    out = tmp_path_factory.mktemp("matrix-repo")
    specs = tmp_path_factory.mktemp("matrix-specs")
    for spec in MATRIX:
        render_with_cli(spec, out, tokenizers[spec.family], specs)
    standin_all(out)
    return out


@pytest.fixture(scope="session")
def matrix_triton(serve_triton: ServeTriton, matrix_repository: Path, request: pytest.FixtureRequest) -> LocalTriton:
    return keep_for_fixture(request, serve_triton(matrix_repository))


@pytest.fixture(scope="session")
def probe_triton(
    serve_triton: ServeTriton,
    tmp_path_factory: pytest.TempPathFactory,
    tokenizers: dict[Family, Path],
    request: pytest.FixtureRequest,
) -> LocalTriton:
    """:data:`PROBE_MODEL` only; its stand-in answers the prompt's tokens reversed: a continuation that is not an
    echo, which the probe's GPT check requires."""
    repository = tmp_path_factory.mktemp("probe-repo")
    spec = matrix_spec(PROBE_MODEL)
    render_with_cli(spec, repository, tokenizers[Family.GPT2], tmp_path_factory.mktemp("scratch"))
    standin_all(repository, generation="reverse")
    return keep_for_fixture(request, serve_triton(repository))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that meets the shared vLLM server (:func:`vllm_triton`) keeps its time limit for its own call only:
    the first of them starts the server in its setup, which the server's own ready timeout bounds
    (``tritonft.engines.vllm.local.READY_TIMEOUT_S``, 900 s: each model's stub imports vLLM, minutes on a loaded
    fresh machine); a fresh run lost every vLLM test to the 300 s limit of the one that happened to start it."""
    for item in items:
        if "vllm_triton" not in getattr(item, "fixturenames", ()):
            continue
        marker = item.get_closest_marker("timeout")
        seconds = item.config.getini("timeout")
        if marker is not None:
            seconds = marker.kwargs.get("timeout", marker.args[0] if marker.args else seconds)
        item.add_marker(pytest.mark.timeout(float(seconds), func_only=True))


@pytest.fixture(scope="session")
def vllm_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The checkpoints of the shared vLLM server (:mod:`tests.system.realtriton.vllm_server`)."""
    return vllm_server.write_checkpoints(tmp_path_factory.mktemp("vllm-checkpoints"))


@pytest.fixture(scope="session")
def vllm_triton(
    vllm_checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[LocalTriton]:
    """The real Triton with the real vLLM engine, one for the session: the tests of the engine and of the gateway
    share it (:mod:`tests.system.realtriton.vllm_server`) and it stops after the last of them; its log is attached
    to a failing test like the others'."""
    server = vllm_server.server(vllm_checkpoints, tmp_path_factory.mktemp("vllm-triton"))
    server.start()
    _RUNNING.append(server)
    try:
        yield keep_for_fixture(request, server)
    finally:
        release(server)()


def server_sections(item: pytest.Item) -> list[tuple[str, str]]:
    """The tail of every running Triton's and Prometheus' log (servers are shared across tests)."""
    return [tail(f"tritonserver log ({s.log_path})", s.log_text(), LOG_TAIL_LINES) for s in _RUNNING] + [
        tail(f"prometheus log ({p.log_path})", p.log_text(), LOG_TAIL_LINES) for p in PROMETHEUS_SERVERS
    ]


pytest_runtest_makereport = attach_on_failure(server_sections)


EMBEDDER = "minilm"
"""The real all-MiniLM-L6-v2, served by the encoder repository."""
CLASSIFIER = "sentiment"
"""The seeded BERT classifier (tests.tritonft.encoder.checkpoints), served by the encoder repository."""
OPTIMIZED_EMBEDDER = "minilm-fused"
"""all-MiniLM-L6-v2 converted with ``--optimize`` (ONNX Runtime's fused Attention, SkipLayerNorm, BiasGelu)."""
RANDOM_EMBEDDER = "random-bert"
"""A seeded random-weight BERT embedder (``bert-mean-normalized``): unit vectors, but no sense of meaning (the
probe's similarity order fails on it)."""


@pytest.fixture(scope="session")
def encoder_repository(
    tmp_path_factory: pytest.TempPathFactory,
    encoder_converted: Callable[..., Path],  # noqa: F811
    encoder_checkpoint: Callable[[str], Path],  # noqa: F811
) -> Path:
    out = tmp_path_factory.mktemp("encoder-repo")
    served_as = (
        (EMBEDDER, "all-minilm-l6-v2"),
        (CLASSIFIER, "bert-classifier"),
        (RANDOM_EMBEDDER, "bert-mean-normalized"),
    )
    for served, name in served_as:
        serving = EncoderServing(served, max_batch_size=16, engine=OnnxEngine.PYTHON)
        write_encoder_repository(serving, encoder_converted(name), encoder_checkpoint(name), out)
    optimized = encoder_converted("all-minilm-l6-v2", "fp32", "--optimize")
    serving = EncoderServing(OPTIMIZED_EMBEDDER, max_batch_size=16, engine=OnnxEngine.PYTHON)
    write_encoder_repository(serving, optimized, encoder_checkpoint("all-minilm-l6-v2"), out)
    return out


@pytest.fixture(scope="session")
def embedder_repository(encoder_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedder's own repository, as the stack's store holds it: its ensemble and the models it is made of."""
    ensemble = (encoder_repository / EMBEDDER / "config.pbtxt").read_text()
    members = {EMBEDDER, *re.findall(r'model_name:\s*"([^"]+)"', ensemble)}
    out = tmp_path_factory.mktemp("embedder-repo")
    for name in members:
        shutil.copytree(encoder_repository / name, out / name)
    return out


@pytest.fixture(scope="session")
def encoder_triton(
    serve_triton: ServeTriton, newest_runtime: TritonRuntime, encoder_repository: Path, request: pytest.FixtureRequest
) -> LocalTriton:
    """The encoders on the newest server (their ONNX Runtime stand-in needs onnxruntime, which the 2.33.0 server's
    Python 3.8 cannot have at the image's pin)."""
    return keep_for_fixture(request, serve_triton(encoder_repository, runtime=newest_runtime))
