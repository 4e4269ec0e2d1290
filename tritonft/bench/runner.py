"""Runs the sweep: a reachability check of every target, then each point by its tool, progress on stderr.

Each tool writes into ``OUT/raw/<point>/`` (AIPerf's artifact directory, perf_analyzer's CSV report, the tool's
console output as ``console.log``); the figures are read back from those files (:mod:`tritonft.bench.results`).
A tool that fails, or a run in which requests failed, stops the sweep with a :class:`BenchError` that names the
point and quotes the server's answer.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonft.bench.plan import (
    AiperfInputs,
    PerfAnalyzerInputs,
    Point,
    Route,
    SweepSettings,
    aiperf_command,
    aiperf_launcher,
    headers_environment,
    perf_analyzer_command,
)
from tritonft.bench.results import SweepPoint, from_aiperf, from_perf_analyzer, read_perf_analyzer_csv
from tritonft.probe.endpoint import Protocol, parse_endpoint

ROOT = Path(__file__).resolve().parents[2]
TOOL_TIMEOUT_S = 1800.0
"""A bound on one tool run (a hung tool must not hang the sweep)."""


class BenchError(RuntimeError):
    """A target that cannot be measured, or a measurement with failed requests: the message says which and why.
    ``measured`` holds the points measured before the failure."""

    def __init__(self, message: str, measured: Sequence[SweepPoint] = ()) -> None:
        super().__init__(message)
        self.measured = list(measured)


@dataclass(frozen=True)
class Tools:
    """Where the tools are: AIPerf's interpreter (its tool environment's Python) and perf_analyzer with the
    library path it needs (``libcudart.so.12`` from the ``nvidia-cuda-runtime-cu12`` wheel, when installed so)."""

    aiperf_python: Path | None
    perf_analyzer: Path | None
    perf_analyzer_env: Mapping[str, str]


def _interpreter_of(script: Path) -> Path:
    """The Python of a console script (its ``#!`` line), e.g. ``.tools/aiperf/bin/aiperf`` -> its venv's python."""
    first = script.read_bytes().split(b"\n", 1)[0].decode(errors="replace")
    if not first.startswith("#!") or "python" not in first:
        raise BenchError(f"{script} is not a Python console script; pass --aiperf the `aiperf` command of its venv")
    return Path(first[2:].strip().split()[0])


def find_tools(aiperf: Path | None, perf_analyzer: Path | None) -> Tools:
    """The given paths, else the project's tool environments (``.tools/aiperf``, ``.tools/perf``), else ``PATH``."""
    from shutil import which

    def locate(given: Path | None, local: Path, name: str) -> Path | None:
        if given is not None:
            return given
        if local.exists():
            return local
        found = which(name)
        return Path(found) if found else None

    aiperf_script = locate(aiperf, ROOT / ".tools" / "aiperf" / "bin" / "aiperf", "aiperf")
    analyzer = locate(perf_analyzer, ROOT / ".tools" / "perf" / "bin" / "perf_analyzer", "perf_analyzer")
    env: dict[str, str] = {}
    if analyzer is not None:
        libs = sorted(analyzer.resolve().parent.parent.glob("lib/python3*/site-packages/nvidia/cuda_runtime/lib"))
        if libs:
            env["LD_LIBRARY_PATH"] = os.pathsep.join([str(libs[0]), os.environ.get("LD_LIBRARY_PATH", "")])
    return Tools(
        aiperf_python=_interpreter_of(aiperf_script) if aiperf_script is not None else None,
        perf_analyzer=analyzer,
        perf_analyzer_env=env,
    )


def _ssl_context(ca_file: Path | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)


def _get(url: str, headers: Mapping[str, str], ca_file: Path | None, timeout_s: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=dict(headers))
    context = _ssl_context(ca_file) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def check_gateway(base_url: str, models: Sequence[str], headers: Mapping[str, str], ca_file: Path | None) -> None:
    """``GET <base>/v1/models`` answers and lists every model; else a :class:`BenchError` saying what is wrong."""
    url = f"{base_url}/v1/models"
    try:
        status, body = _get(url, headers, ca_file, timeout_s=15)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BenchError(
            f"the gateway at {base_url} cannot be reached ({reason}); check --gateway / the stack output "
            "openaiBaseUrl and that the gateway is up"
        ) from exc
    if status != 200:
        hint = " (pass credentials with --header-from-env)" if status in (401, 403) else ""
        raise BenchError(
            f"the gateway at {base_url} answered GET /v1/models with HTTP {status}{hint}: "
            f"{body[:300].decode(errors='replace')}"
        )
    served = {m.get("id") for m in json.loads(body).get("data", []) if isinstance(m, dict)}
    missing = [m for m in models if m not in served]
    if missing:
        raise BenchError(
            f"the gateway at {base_url} does not serve {', '.join(missing)}; it serves "
            f"{', '.join(sorted(str(s) for s in served)) or 'nothing'}"
        )


def check_triton(url: str, model: str, headers: Mapping[str, str], ca_file: Path | None) -> bool:
    """The model is ready on the KServe V2 endpoint (HTTP: ``/v2/models/<m>/ready``; gRPC: ``ModelReady``);
    returns whether it streams (its configuration's decoupled transaction policy)."""
    endpoint = parse_endpoint(url)
    if endpoint.protocol is Protocol.HTTP:
        scheme = "https" if endpoint.ssl else "http"
        base = f"{scheme}://{endpoint.address}/v2/models/{model}"
        try:
            status, body = _get(f"{base}/ready", headers, ca_file, 15)
            if status == 200:
                status, body = _get(f"{base}/config", headers, ca_file, 15)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BenchError(
                f"Triton at {url} cannot be reached ({reason}); check --triton / the stack output endpoints"
            ) from exc
        if status != 200:
            raise BenchError(
                f"Triton at {url}: model {model!r} is not ready (HTTP {status}) "
                f"{body[:300].decode(errors='replace')}".rstrip()
            )
        policy = json.loads(body).get("model_transaction_policy") or {}
        return bool(policy.get("decoupled", False))
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    roots = str(ca_file) if ca_file is not None else None
    try:
        client = grpcclient.InferenceServerClient(endpoint.address, ssl=endpoint.ssl, root_certificates=roots)
        ready = client.is_model_ready(model, headers=dict(headers), client_timeout=15)
        if not ready:
            raise BenchError(f"Triton at {url}: model {model!r} is not ready")
        config = client.get_model_config(model, headers=dict(headers), client_timeout=15)
    except InferenceServerException as exc:
        raise BenchError(f"Triton at {url} cannot be reached or refused the call: {exc}") from exc
    return bool(config.config.model_transaction_policy.decoupled)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def first_aiperf_error(artifacts: Path) -> str | None:
    """The first failed request's error in AIPerf's per-request export (``profile_export.jsonl``)."""
    records = artifacts / "profile_export.jsonl"
    if not records.is_file():
        return None
    for line in records.read_text(errors="replace").splitlines():
        try:
            record: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            continue
        error = record.get("error")
        if isinstance(error, dict):
            return f"{error.get('code', '')} {error.get('type', '')}: {error.get('message', '')}".strip()
    return None


@dataclass(frozen=True)
class RunContext:
    """What every point of a sweep shares."""

    tools: Tools
    settings: SweepSettings
    out: Path
    headers: Mapping[str, str]
    aiperf_inputs: AiperfInputs | None
    perf_inputs: PerfAnalyzerInputs | None
    ca_file: Path | None = None


def _run(argv: list[str], env: Mapping[str, str], log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        try:
            done = subprocess.run(
                argv,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                timeout=TOOL_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"{Path(argv[0]).name} did not finish within {TOOL_TIMEOUT_S:g} s (log: {log})") from exc
    return done.returncode


def run_point(point: Point, ctx: RunContext) -> SweepPoint:
    raw = ctx.out / "raw" / point.slug
    mode = ctx.settings.mode.value
    if point.workload.route is Route.KSERVE:
        if ctx.tools.perf_analyzer is None or ctx.perf_inputs is None:
            raise BenchError(
                "perf_analyzer is not installed: run scripts/setup/perf_analyzer.sh or pass --perf-analyzer PATH"
            )
        report = raw / "perf_analyzer.csv"
        try:
            argv = perf_analyzer_command(
                ctx.tools.perf_analyzer,
                point,
                ctx.settings,
                inputs=ctx.perf_inputs,
                report=report,
                headers=ctx.headers,
                ca_file=ctx.ca_file,
            )
        except ValueError as exc:
            raise BenchError(str(exc)) from exc
        code = _run(argv, ctx.tools.perf_analyzer_env, raw / "console.log")
        if code != 0 or not report.is_file():
            raise BenchError(
                f"perf_analyzer failed on {point.workload.label} at {mode} {point.level:g} (exit {code}):\n"
                f"{_tail((raw / 'console.log').read_text(errors='replace'))}"
            )
        return from_perf_analyzer(point, mode, read_perf_analyzer_csv(report.read_text()))
    if ctx.tools.aiperf_python is None or ctx.aiperf_inputs is None:
        raise BenchError("AIPerf is not installed: run scripts/setup/aiperf.sh or pass --aiperf PATH")
    argv = [
        *aiperf_launcher(ctx.tools.aiperf_python),
        *aiperf_command(point, ctx.settings, ctx.aiperf_inputs, raw / "aiperf"),
    ]
    env = headers_environment(ctx.headers)
    if ctx.ca_file is not None:
        env["SSL_CERT_FILE"] = str(ctx.ca_file)
    code = _run(argv, env, raw / "console.log")
    export = raw / "aiperf" / "profile_export_aiperf.json"
    if code != 0 or not export.is_file():
        cause = first_aiperf_error(raw / "aiperf")
        detail = f"the server answered {cause}" if cause else _tail((raw / "console.log").read_text(errors="replace"))
        raise BenchError(f"AIPerf failed on {point.workload.label} at {mode} {point.level:g} (exit {code}): {detail}")
    result = from_aiperf(point, mode, json.loads(export.read_text()))
    if result.errors:
        cause = first_aiperf_error(raw / "aiperf")
        raise BenchError(
            f"{result.errors:g} of the requests of {point.workload.label} at {mode} {point.level:g} "
            f"failed; first: {cause}"
        )
    return result


def run_sweep(
    points: Sequence[Point], ctx: RunContext, progress: Callable[[str], None] = lambda _m: None
) -> list[SweepPoint]:
    """Every point in order; progress before and after each. Stops at the first failing point (BenchError)."""
    results: list[SweepPoint] = []
    for index, point in enumerate(points, start=1):
        started = time.monotonic()
        progress(
            f"[{index}/{len(points)}] {point.workload.route.tool} {point.workload.label} "
            f"{ctx.settings.mode.value} {point.level:g} ..."
        )
        try:
            result = run_point(point, ctx)
        except BenchError as exc:
            raise BenchError(str(exc), results) from exc
        results.append(result)
        p95 = "-" if result.latency_p95_ms is None else f"{result.latency_p95_ms:.1f} ms"
        progress(
            f"[{index}/{len(points)}] done in {time.monotonic() - started:.0f} s: "
            f"{result.throughput_rps or 0:.2f} req/s, p95 {p95}"
        )
    return results


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
