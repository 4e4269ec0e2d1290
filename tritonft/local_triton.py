"""A real Triton Inference Server on this machine (CPU, Python backend) for tests, the quick start and benchmarks.

The server is the one PyPI's ``nvidia-pytriton`` bundles (``pytriton/tritonserver/``: ``tritonserver``, the Python
backend and its stubs; shared libraries in ``nvidia_pytriton.libs/``). Two releases, one runtime per server image
(:data:`RELEASES`):

- :data:`FT_IMAGE_SERVER`, tritonserver **2.33.0** (``nvidia-pytriton==0.2.5``, ``.tools/triton-2.33``): the
  server of NGC Triton 23.04, which the FasterTransformer image is built on. Its one Python-backend stub is built
  for Python 3.8 (and links a bundled ``libpython3.8``), so its models' environment is the image's requirements
  resolved for 3.8 (``tools/triton-2.33-models-requirements.txt``).
- :data:`NEWEST_SERVER`, tritonserver **2.51.0** (``nvidia-pytriton==0.7.0``, ``.tools/triton``), stubs for
  Python 3.8-3.13: the encoders' server, and the one that runs the models on the image's own Python (3.10).

``scripts/setup/triton.sh`` installs both (pinned in ``tools/triton*-requirements.txt``); neither is a project
dependency because their package metadata pins ``numpy<2``, which the project's own environment does not need.

The Python models run in a *stub environment* built from ``images/triton-ft/requirements.txt`` (the server image's
requirements), so the tests load them with exactly what the image has. The stub takes its interpreter and
site-packages from the first ``python3`` on ``PATH``; :class:`LocalTriton` puts the stub environment's ``bin/``
first. Environments and backend directories are cached under ``~/.cache/tritonft`` (``TRITONFT_CACHE``), keyed by
what they are built from.

Usage::

    runtime = prepare_runtime()
    with LocalTriton(runtime, repository, log_path=tmp / "triton.log") as server:
        httpclient.InferenceServerClient(server.http_url)

Importing this module starts nothing. ``python -m tritonft.local_triton prepare`` builds the caches (bootstrap).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "images" / "triton-ft" / "requirements.txt"
"""The Python models' requirements, as the server image installs them."""
TOOL_ENV = ROOT / ".tools" / "triton"
"""Where ``scripts/setup/triton.sh`` installs the newest ``nvidia-pytriton`` (tritonserver 2.51.0)."""
HOST = "127.0.0.1"
STUB = "triton_python_backend_stub"
IMAGE_PYTHON = "3.10"
"""The server image's Python (NGC Triton 23.04's base, Ubuntu 20.04): what its Python models run on."""


RETRYABLE_START_FAILURES = ("Address already in use", "boost::interprocess::lock_exception", "' is not healthy.")
"""Start-up failures a fresh start gets past: a port taken between choosing and binding it, and the Python backend
failing a stub that missed its one-second health handshake on a starved CPU (see :data:`START_AUTOGROUP_NICE`):
2.33.0 aborts on the dead stub's shared-memory mutex, 2.51.0 fails the instance's warmup with "Stub process
'<instance>' is not healthy." A stub that really dies says the same and fails every attempt."""
START_ATTEMPTS = 5
"""Starts tried before a retryable failure is reported."""
START_RETRY_PAUSE_S = 5.0
"""Seconds before the second start, doubled before each next one: a burst of load elsewhere passes."""
START_AUTOGROUP_NICE = -10
"""The scheduling weight of a starting server's session (Linux autogroup nice), back to 0 once it is ready.

The Python backend gives each stub one second to show it is alive (a heartbeat thread every 300 ms) whenever the
server waits on it: 2.33.0 while the instance loads, 2.51.0 also while each warmup sample runs
(``StubLauncher::ReceiveMessageFromStub``, python_backend r23.04/r24.10). A stub that misses it fails the instance:
2.33.0 then aborts on the dead stub's shared-memory mutex (``boost::interprocess::lock_exception``), 2.51.0 fails the
warmup ("Stub process '<instance>' is not healthy."). The server runs in a session of its own (its process group is
stopped as one), and Linux shares the CPU equally between sessions whatever their processes' nice: with ten busy
sessions beside it on this 2-core machine every start of the staging t5-3b repository aborted (5 of 5), and every
start passed (4 of 4) with its session at -10 for the seconds it loads; a fresh run's first minutes (bootstrap, six
lanes and the Go build starting together, load 17) failed 2.51.0's warmup of the FT matrix the same way. Raising the
weight needs CAP_SYS_NICE; without it the start still runs, at the equal share (:data:`START_ATTEMPTS` retries
stay)."""


class TritonError(RuntimeError):
    """The local server cannot be prepared or did not come up; the message carries Triton's own words."""


@dataclass(frozen=True)
class ServerRelease:
    """One ``tritonserver`` release the tests can run, and how it differs in what a local run needs."""

    version: str
    """``tritonserver``'s version, as ``/v2`` reports it."""
    image: str
    """Which server image runs this release (what the tests on it stand for)."""
    tool_env: Path
    """Where ``scripts/setup/triton.sh`` installs the ``nvidia-pytriton`` that bundles it."""
    requirements: Path
    """The Python models' requirements, resolved for :attr:`stub_python` (or the image's Python)."""
    stub_python: str | None
    """The Python of its only stub (``backends/python/``), or ``None``: one stub per Python
    (``python_backend_stubs/<version>/``), the models' interpreter picks."""
    metrics_address: bool
    """Whether it has ``--metrics-address`` (2.33.0 has not: its metrics listen on every address)."""


NEWEST_SERVER = ServerRelease(
    version="2.51.0",
    image="the encoders' server (NGC Triton's newest with a PyPI wheel: nvidia-pytriton 0.7.0)",
    tool_env=TOOL_ENV,
    requirements=REQUIREMENTS,
    stub_python=None,
    metrics_address=True,
)
FT_IMAGE_SERVER = ServerRelease(
    version="2.33.0",
    image="the FasterTransformer image's server (NGC Triton 23.04; nvidia-pytriton 0.2.5)",
    tool_env=ROOT / ".tools" / "triton-2.33",
    requirements=ROOT / "tools" / "triton-2.33-models-requirements.txt",
    stub_python="3.8",
    metrics_address=False,
)
RELEASES = {release.version: release for release in (NEWEST_SERVER, FT_IMAGE_SERVER)}
"""The releases by version."""


def release_named(version: str) -> ServerRelease:
    """The release of ``version`` (``"2.33.0"``); a clear error naming the known ones otherwise."""
    try:
        return RELEASES[version]
    except KeyError:
        raise TritonError(f"no local tritonserver release {version!r}; known: {', '.join(sorted(RELEASES))}") from None


@dataclass(frozen=True)
class ServerDist:
    """An unpacked ``nvidia-pytriton`` server: ``root`` is ``pytriton/tritonserver``, ``libs`` its shared libraries."""

    root: Path
    libs: Path
    release: ServerRelease = NEWEST_SERVER

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    def stub(self, python_version: str) -> Path:
        """The stub for ``python_version``: the release's only one, or the one of its per-Python folder."""
        if self.release.stub_python is not None:
            if python_version != self.release.stub_python:
                raise TritonError(
                    f"tritonserver {self.release.version}'s only Python-backend stub is built for Python "
                    f"{self.release.stub_python}, not {python_version}: run its models on Python "
                    f"{self.release.stub_python} (prepare_runtime(release=...) picks it)"
                )
            return self.root / "backends" / "python" / STUB
        return self.root / "python_backend_stubs" / python_version / STUB


def _site_packages(env: Path) -> list[Path]:
    return sorted(env.glob("lib/python3*/site-packages"))


def find_server(search: Sequence[Path] = (), release: ServerRelease = NEWEST_SERVER) -> ServerDist:
    """The bundled server of ``release``: in ``search`` or its tool environment; the newest one also in
    ``TRITONFT_TRITON_ENV`` or the running interpreter."""
    newest = release is NEWEST_SERVER
    override = [Path(p) for p in (os.environ.get("TRITONFT_TRITON_ENV"),) if p and newest]
    envs = override + list(search) + [release.tool_env]
    candidates = [sp for env in envs for sp in _site_packages(env)] + [Path(p) for p in sys.path if p and newest]
    for site in candidates:
        root, libs = site / "pytriton" / "tritonserver", site / "nvidia_pytriton.libs"
        if (root / "bin" / "tritonserver").is_file() and libs.is_dir():
            return ServerDist(root, libs, release)
    raise TritonError(
        f"no tritonserver {release.version} found (nvidia-pytriton's bundled server); run `bash "
        f"scripts/setup/triton.sh` (installs it into {release.tool_env})"
        + (" or set TRITONFT_TRITON_ENV to an environment that has nvidia-pytriton" if newest else "")
    )


def cache_root() -> Path:
    return Path(os.environ.get("TRITONFT_CACHE") or Path.home() / ".cache" / "tritonft")


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little") + part)
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (other sessions build the same cache entry at the same time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _printed_by(python: Path, code: str) -> str:
    """What ``python -c code`` prints (stripped); raises on failure."""
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _python_version(python: Path) -> str:
    return _printed_by(python, "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")


def base_python() -> Path:
    """The interpreter the stub environment is made from (the base of the running one, not a venv's)."""
    name = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for folder in (Path(sys.base_prefix) / "bin", Path(sys.base_exec_prefix) / "bin"):
        if (folder / name).is_file():
            return folder / name
    return Path(sys.executable)


def find_python(version: str) -> Path:
    """An interpreter of Python ``version`` (``"3.10"``): ``python3.10`` on ``PATH``, else the newest pyenv build.

    Each candidate must run and report that version (a pyenv shim on ``PATH`` may not); the real executable is
    returned. Raises :class:`TritonError` naming the fix when there is none.
    """
    name = f"python{version}"
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    builds = sorted(
        (p for p in pyenv.glob(f"{version}.*/bin/{name}") if p.is_file()),
        key=lambda p: tuple(int(x) if x.isdigit() else -1 for x in p.parents[1].name.split(".")),
        reverse=True,
    )
    on_path = shutil.which(name)
    for candidate in [*([Path(on_path)] if on_path else []), *builds]:
        done = subprocess.run(
            [str(candidate), "-c", "import sys; print(sys.version_info[0], sys.version_info[1], sys.executable)"],
            capture_output=True,
            text=True,
            check=False,
        )
        major, minor, executable = [*done.stdout.split(maxsplit=2), "", "", ""][:3]
        if done.returncode == 0 and f"{major}.{minor}" == version:
            return Path(executable.strip())
    raise TritonError(
        f"no Python {version} interpreter: none named {name} runs from PATH and none is under {pyenv}; install "
        f"one (e.g. `pyenv install {version}`, or Debian/Ubuntu's python{version} package) and run again"
    )


def _library_dir(python: Path) -> Path:
    """Where ``python``'s ``libpython`` lives (the stub links it; a pyenv build keeps it outside the system paths)."""
    return Path(_printed_by(python, "import sysconfig; print(sysconfig.get_config_var('LIBDIR') or '')"))


def stub_environment(requirements: Path = REQUIREMENTS, python: Path | None = None) -> Path:
    """A virtual environment with ``requirements`` installed, cached by the hash of its inputs; built once.

    Uses ``uv`` when it is on ``PATH`` (as bootstrap installs it), else ``venv`` + ``pip``. A half-built
    environment is never used: the ``.complete`` marker is written last, under a lock.
    """
    interpreter = python or base_python()
    version = _python_version(interpreter)
    key = _digest(requirements.read_bytes(), str(interpreter).encode(), version.encode())
    env = cache_root() / "stub-env" / f"py{version}-{key}"
    marker = env / ".complete"
    if marker.is_file():
        return env
    with _locked(env.with_suffix(".lock")):
        if marker.is_file():
            return env
        shutil.rmtree(env, ignore_errors=True)
        uv = shutil.which("uv")
        try:
            if uv:
                subprocess.run([uv, "venv", "--quiet", "--python", str(interpreter), str(env)], check=True)
                subprocess.run(
                    [uv, "pip", "install", "--quiet", "--python", str(env / "bin" / "python"), "-r", str(requirements)],
                    check=True,
                )
            else:
                subprocess.run([str(interpreter), "-m", "venv", str(env)], check=True)
                subprocess.run(
                    [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
                    check=True,
                )
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(env, ignore_errors=True)
            raise TritonError(f"cannot build the Python models' environment from {requirements}: {exc}") from exc
        marker.write_text(requirements.read_text())
    return env


def backend_directory(dist: ServerDist, python_version: str) -> Path:
    """A ``--backend-directory`` whose ``python/`` holds the backend and the stub for ``python_version``."""
    stub = dist.stub(python_version)
    if not stub.is_file():
        raise TritonError(f"the bundled server has no Python backend stub for Python {python_version} ({stub})")
    backend = dist.root / "backends" / "python"
    key = _digest(str(dist.root).encode(), python_version.encode(), str(stub.stat().st_mtime_ns).encode())
    folder = cache_root() / "triton-backends" / f"py{python_version}-{key}"
    marker = folder / ".complete"
    if marker.is_file():
        return folder
    with _locked(folder.with_suffix(".lock")):
        if not marker.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(backend, folder / "python")
            shutil.copy2(stub, folder / "python" / STUB)
            marker.write_text(f"{dist.root}\n")
    return folder


@dataclass(frozen=True)
class TritonRuntime:
    """Everything needed to start ``tritonserver`` here: the server, its backends and the models' environment."""

    dist: ServerDist
    backends: Path
    stub_env: Path
    python_libs: Path | None = None
    """The models' interpreter's ``libpython`` directory, when it is not on the system's library path."""

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        libs = [str(self.dist.libs), *([str(self.python_libs)] if self.python_libs else [])]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (*libs, env.get("LD_LIBRARY_PATH", "")) if p)
        env["PATH"] = os.pathsep.join(p for p in (str(self.stub_env / "bin"), env.get("PATH", "")) if p)
        env.pop("PYTHONHOME", None)
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        return env


def prepare_runtime(
    requirements: Path | None = None,
    search: Sequence[Path] = (),
    python: Path | None = None,
    release: ServerRelease = NEWEST_SERVER,
) -> TritonRuntime:
    """Find ``release``'s server and build (or reuse) the stub environment and backend directory.

    ``requirements`` default to the release's. The models run on ``python`` (default: the release's stub Python
    when it has only one, else this interpreter's base), e.g. ``find_python(IMAGE_PYTHON)`` to load them exactly
    as the server image does.
    """
    dist = find_server(search, release)
    if python is None and release.stub_python is not None:
        python = find_python(release.stub_python)
    stub_env = stub_environment(release.requirements if requirements is None else requirements, python)
    version = _python_version(stub_env / "bin" / "python")
    libs = _library_dir(python) if python is not None else None
    return TritonRuntime(dist, backend_directory(dist, version), stub_env, libs)


def session_weight(pid: int) -> int | None:
    """The Linux autogroup nice of ``pid``'s session; None where autogroup does not schedule it.

    The kernel prints nothing for a process whose CPU cgroup is not the root one (a container's, a systemd unit's):
    there the cgroup shares the CPU, not the session, and a session's weight changes nothing. None too without
    autogroup in the kernel, or once the process is gone."""
    try:
        return autogroup_nice(Path(f"/proc/{pid}/autogroup").read_text())
    except OSError:
        return None


def autogroup_nice(shown: str) -> int | None:
    """The nice in a ``/proc/<pid>/autogroup`` text (``/autogroup-1811 nice -10``); None for the empty text the kernel
    prints where autogroup does not schedule the process."""
    fields = shown.split()
    return int(fields[-1]) if fields else None


def set_session_weight(pid: int, nice: int) -> bool:
    """Set the Linux autogroup nice of ``pid``'s session; ``False`` where it would change nothing or is refused
    (see :func:`session_weight`; no CAP_SYS_NICE)."""
    if session_weight(pid) is None:
        return False
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:
        return False
    return True


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalTriton:
    """``tritonserver`` on free loopback ports, in its own process group; a context manager.

    Starts on ``__enter__`` and waits until ``/v2/health/ready`` answers 200 (every model loaded) or
    ``ready_timeout`` passes; stops the process group by the server's PID on ``__exit__``. A server that exits
    or does not become ready raises :class:`TritonError` with the end of Triton's log.
    ``repositories``: one or more ``--model-repository`` folders. ``extra_args``: more server flags
    (e.g. ``--model-control-mode=explicit``, ``--metrics-interval-ms=500``); they come after the defaults.
    """

    def __init__(
        self,
        runtime: TritonRuntime,
        repositories: Path | Sequence[Path],
        *,
        log_path: Path,
        extra_args: Sequence[str] = (),
        ready_timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.repositories = [repositories] if isinstance(repositories, Path) else list(repositories)
        self.log_path = log_path
        self.shm_prefix = f"tritonft{os.getpid()}{uuid.uuid4().hex[:8]}"
        """Python backend shared-memory regions are named by this prefix: unique, so servers of parallel sessions on
        one machine never share a region (and :meth:`stop` removes exactly this server's)."""
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.http_port = self.grpc_port = self.metrics_port = 0

    @property
    def http_url(self) -> str:
        """``127.0.0.1:PORT``, as ``tritonclient.http.InferenceServerClient`` takes it (no scheme)."""
        return f"{HOST}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``127.0.0.1:PORT``, as ``tritonclient.grpc.InferenceServerClient`` takes it."""
        return f"{HOST}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """The Prometheus endpoint, ``http://127.0.0.1:PORT/metrics``."""
        return f"http://{HOST}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise TritonError("the server is not running")
        return self.process.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def command(self) -> list[str]:
        args = [str(self.runtime.dist.binary)]
        args += [f"--model-repository={repo}" for repo in self.repositories]
        args += [
            f"--backend-directory={self.runtime.backends}",
            f"--http-address={HOST}",
            f"--http-port={self.http_port}",
            f"--grpc-address={HOST}",
            f"--grpc-port={self.grpc_port}",
            *([f"--metrics-address={HOST}"] if self.runtime.dist.release.metrics_address else []),
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            "--strict-readiness=true",
            "--exit-timeout-secs=10",
            # Python backend shared-memory regions are named by this prefix: unique, so servers of parallel
            # sessions on one machine never share a region.
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            *self.extra_args,
        ]
        return args

    def start(self) -> None:
        for attempt in range(START_ATTEMPTS):
            self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("ab") as log:
                env = self.runtime.environment()
                env.update(self.extra_env)
                self.process = subprocess.Popen(
                    self.command(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            try:
                with self._start_priority():
                    self._wait_ready()
                return
            except TritonError:
                log_text = self.log_text()
                self.stop()
                if any(sign in log_text for sign in RETRYABLE_START_FAILURES) and attempt < START_ATTEMPTS - 1:
                    time.sleep(START_RETRY_PAUSE_S * 2**attempt)
                    continue
                raise
            except BaseException:  # a test's timeout or an interrupt while it loads: no server outlives its start
                self.stop()
                raise

    @contextlib.contextmanager
    def _start_priority(self) -> Iterator[None]:
        """The server's session at :data:`START_AUTOGROUP_NICE` while it loads and warms up."""
        assert self.process is not None
        raised = set_session_weight(self.process.pid, START_AUTOGROUP_NICE)
        try:
            yield
        finally:
            if raised:
                set_session_weight(self.process.pid, 0)

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout
        url = f"http://{self.http_url}/v2/health/ready"
        while True:
            code = self.process.poll()
            if code is not None:
                raise TritonError(f"tritonserver exited with status {code} before it was ready:\n{self._tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TritonError(f"tritonserver was not ready within {self.ready_timeout:.0f} s:\n{self._tail()}")
            time.sleep(0.1)

    def _tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def terminate(self) -> None:
        """SIGTERM the server's process group without waiting: many servers stop side by side, then :meth:`stop`
        waits for each (a Triton's graceful exit unloads its models: seconds per server)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the server's process group (the server and its stubs), SIGKILL it after ``timeout``."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        # Stubs outlive a server killed hard; the group is the server's PID.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        # A server killed hard leaves its Python-backend regions in /dev/shm (each up to the shm default size).
        for region in Path("/dev/shm").glob(f"{self.shm_prefix}*"):
            region.unlink(missing_ok=True)

    def __enter__(self) -> LocalTriton:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``prepare [VERSION ...]``: build the caches of the named releases (default: every one in :data:`RELEASES`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "prepare":
        print(f"usage: python -m tritonft.local_triton prepare [{'|'.join(RELEASES)} ...]", file=sys.stderr)
        return 2
    try:
        for release in [release_named(v) for v in args[1:]] or list(RELEASES.values()):
            runtime = prepare_runtime(release=release)
            print(
                f"tritonserver {release.version}: {runtime.dist.binary}\nbackends: {runtime.backends}\n"
                f"models' environment: {runtime.stub_env}"
            )
    except TritonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
