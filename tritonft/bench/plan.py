"""What ``tritonft bench`` measures and the exact command lines of the standard tools that measure it (pure).

A sweep is a list of :class:`Workload` (one route of one model on one endpoint) times a list of load levels
(concurrencies or request rates). Each point is one run of the tool that owns the route:

- AIPerf (``aiperf profile``) for the gateway's OpenAI routes: ``completions``, ``chat`` (streamed, so AIPerf
  measures time to first token and inter-token latency) and ``embeddings``; always ``--use-server-token-count``,
  so token counts are the gateway's ``usage`` (for a stream: its last chunk, asked with
  ``stream_options.include_usage``), not a local re-tokenization;
- perf_analyzer for a Triton model's KServe V2 endpoint (HTTP or gRPC), fed one prompt through ``--input-data``.

Secrets never reach a command line: AIPerf is started through a launcher that adds the headers from its
environment (:func:`aiperf_launcher`; AIPerf redacts them in everything it writes), and perf_analyzer, which takes
headers only as ``-H`` arguments, is refused headers that name a credential (:func:`perf_analyzer_headers`) rather
than have them shown in the process list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from tritonft.probe.endpoint import Endpoint, Protocol


class Route(StrEnum):
    """What a workload calls."""

    COMPLETIONS = "completions"
    CHAT = "chat"
    EMBEDDINGS = "embeddings"
    KSERVE = "kserve"

    @property
    def tool(self) -> str:
        return "perf_analyzer" if self is Route.KSERVE else "aiperf"

    @property
    def streaming(self) -> bool:
        """Chat is measured streamed: what a chat UI does, and the only way to see TTFT and inter-token latency."""
        return self is Route.CHAT


class LoadMode(StrEnum):
    CONCURRENCY = "concurrency"
    REQUEST_RATE = "request-rate"


@dataclass(frozen=True)
class Workload:
    """One route of one model: ``base_url`` is the gateway's base URL without ``/v1`` (AIPerf appends the route)
    for the OpenAI routes, the Triton endpoint for ``kserve``."""

    route: Route
    model: str
    base_url: str
    decoupled: bool = False
    """``kserve``: the model streams (decoupled); perf_analyzer then measures it over a gRPC stream."""

    @property
    def label(self) -> str:
        return f"{self.route.value}:{self.model}"


@dataclass(frozen=True)
class SweepSettings:
    """How each point is loaded and for how long."""

    mode: LoadMode
    levels: tuple[float, ...]
    requests: int | None = None
    """AIPerf: requests per point (``--request-count``); with ``duration_s`` unset."""
    duration_s: float | None = None
    """AIPerf: ``--benchmark-duration``; perf_analyzer: its measurement window (``--measurement-interval``)."""
    warmup_requests: int = 2
    output_tokens: int = 16
    input_tokens: int = 32
    """AIPerf's synthetic prompts' mean length (``--synthetic-input-tokens-mean``) when no prompt file is given."""
    timeout_s: float = 60.0
    goodput: tuple[tuple[str, float], ...] = ()
    """AIPerf's SLOs (``--goodput``): metric tag -> threshold (ms for latencies)."""
    perf_analyzer_args: tuple[str, ...] = ()
    """Extra perf_analyzer arguments, as given (e.g. ``--stability-percentage=1000``)."""


@dataclass(frozen=True)
class Point:
    """One run: a workload at one level."""

    workload: Workload
    level: float

    @property
    def slug(self) -> str:
        level = f"{self.level:g}".replace(".", "p")
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in self.workload.model)
        return f"{self.workload.route.value}-{safe}-{level}"


def points(workloads: Sequence[Workload], levels: Sequence[float]) -> list[Point]:
    """Every workload at every level, workload by workload (one tool warmed on one route at a time)."""
    return [Point(w, level) for w in workloads for level in levels]


def parse_levels(flag: str, text: str, integers: bool) -> tuple[float, ...]:
    """``"1,2,4"`` -> ``(1.0, 2.0, 4.0)``: positive, no duplicates, in order; ``ValueError`` naming ``flag``."""
    levels: list[float] = []
    for part in text.split(","):
        item = part.strip()
        try:
            value = float(item)
        except ValueError:
            value = -1.0
        if value <= 0 or (integers and not item.isdigit()) or value > 4096:
            kind = "integer" if integers else "number"
            raise ValueError(f"{flag} {text!r}: {item!r} is not a positive {kind} (at most 4096); use e.g. 1,2,4,8")
        if value in levels:
            raise ValueError(f"{flag} {text!r}: level {item} is listed twice")
        levels.append(value)
    return tuple(levels)


def parse_goodput(text: str) -> tuple[tuple[str, float], ...]:
    """AIPerf's ``--goodput`` syntax, ``"time_to_first_token:200 request_latency:500"`` (space or comma separated)."""
    out: list[tuple[str, float]] = []
    for item in text.replace(",", " ").split():
        name, sep, value = item.partition(":")
        try:
            threshold = float(value)
        except ValueError:
            threshold = -1.0
        if not sep or not name or threshold <= 0:
            raise ValueError(
                f"--goodput {text!r}: {item!r} must be METRIC:THRESHOLD with a positive threshold, e.g. "
                "time_to_first_token:200 request_latency:500 (milliseconds)"
            )
        out.append((name, threshold))
    return tuple(out)


def gateway_base(url: str) -> str:
    """The gateway's base URL as AIPerf wants it: ``https://host/v1`` (the ``openaiBaseUrl`` output) -> ``https://host``.

    ``ValueError`` for anything but an http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"gateway URL {url!r} is not an http(s) URL; pass e.g. https://host/v1 or http://127.0.0.1:8080"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True)
class AiperfInputs:
    """Local files AIPerf needs: the tokenizer directory and an optional prompt file (one JSON ``{"text": ...}`` per
    line, AIPerf's ``single_turn`` dataset)."""

    tokenizer: str
    """A local tokenizer directory or ``builtin`` (AIPerf's network-free tokenizer)."""
    prompts: Path | None = None


def aiperf_command(
    point: Point,
    settings: SweepSettings,
    inputs: AiperfInputs,
    artifacts: Path,
) -> list[str]:
    """The ``aiperf profile`` arguments of one point (after the program: see :func:`aiperf_launcher`). Never a
    header value: the launcher adds the headers from its environment."""
    w = point.workload
    endpoint_type = {Route.COMPLETIONS: "completions", Route.CHAT: "chat", Route.EMBEDDINGS: "embeddings"}[w.route]
    argv = ["profile", "--model", w.model, "--url", w.base_url, "--endpoint-type", endpoint_type]
    if w.route.streaming:
        argv.append("--streaming")
    argv += ["--tokenizer", inputs.tokenizer, "--use-server-token-count"]
    if inputs.prompts is not None:
        argv += ["--input-file", str(inputs.prompts), "--custom-dataset-type", "single_turn"]
    else:
        argv += ["--synthetic-input-tokens-mean", str(settings.input_tokens)]
    if w.route is not Route.EMBEDDINGS:
        # AIPerf sends max_completion_tokens by default; the gateway implements the completions API's max_tokens
        argv += ["--output-tokens-mean", str(settings.output_tokens), "--use-legacy-max-tokens"]
    if settings.mode is LoadMode.CONCURRENCY:
        argv += ["--concurrency", f"{point.level:g}"]
    else:
        argv += ["--request-rate", f"{point.level:g}"]
    if settings.duration_s is not None:
        argv += ["--benchmark-duration", f"{settings.duration_s:g}"]
    else:
        argv += ["--request-count", str(settings.requests)]
    argv += ["--warmup-request-count", str(settings.warmup_requests)]
    argv += ["--request-timeout-seconds", f"{settings.timeout_s:g}"]
    if settings.goodput:
        argv += ["--goodput", " ".join(f"{name}:{value:g}" for name, value in settings.goodput)]
    argv += ["--artifact-dir", str(artifacts), "--ui", "none", "--no-server-metrics", "--no-gpu-telemetry"]
    argv += ["--no-auto-plot", "--random-seed", "0"]
    return argv


@dataclass(frozen=True)
class PerfAnalyzerInputs:
    """The prompt perf_analyzer sends (``--input-data``) into the model's text input."""

    data: Path
    input_name: str = "text_input"


def perf_analyzer_data(prompt: str, input_name: str = "text_input") -> str:
    """perf_analyzer's ``--input-data`` JSON: one prompt for the model's BYTES text input."""
    return json.dumps({"data": [{input_name: [prompt]}]})


CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})


def perf_analyzer_headers(headers: Mapping[str, str]) -> list[str]:
    """perf_analyzer's ``-H`` arguments; ``ValueError`` for a credential (perf_analyzer takes headers only on its
    command line, where every local user's ``ps`` shows them)."""
    secret = sorted(name for name in headers if name.lower() in CREDENTIAL_HEADERS)
    if secret:
        raise ValueError(
            f"perf_analyzer takes headers only on its command line, visible in the process list; not sending "
            f"{', '.join(secret)}: measure the KServe V2 route from inside the cluster (--in-cluster, against the "
            "Service, which needs no ingress credentials) or through an authenticated port-forward"
        )
    return [arg for name, value in headers.items() for arg in ("-H", f"{name}:{value}")]


def perf_analyzer_command(
    binary: Path,
    point: Point,
    settings: SweepSettings,
    *,
    inputs: PerfAnalyzerInputs,
    report: Path,
    headers: Mapping[str, str],
    ca_file: Path | None = None,
) -> list[str]:
    """The perf_analyzer command line of one point (its CSV report to ``report``)."""
    from tritonft.probe.endpoint import parse_endpoint

    endpoint: Endpoint = parse_endpoint(point.workload.base_url)
    argv = [str(binary), "-m", point.workload.model, "-u", endpoint.address, "-i", endpoint.protocol.value]
    argv += ["--input-data", str(inputs.data), f"--shape={inputs.input_name}:1"]
    if point.workload.decoupled:
        if endpoint.protocol is not Protocol.GRPC:
            raise ValueError(
                f"{point.workload.model} streams (decoupled): perf_analyzer measures it over gRPC only; pass its "
                "gRPC endpoint (--triton grpc(s)://host:port)"
            )
        argv.append("--streaming")
    level = f"{point.level:g}"
    if settings.mode is LoadMode.CONCURRENCY:
        argv += ["--concurrency-range", f"{level}:{level}"]
    else:
        argv += ["--request-rate-range", f"{level}:{level}"]
    if settings.duration_s is not None:
        argv += ["--measurement-interval", str(max(1, round(settings.duration_s * 1000)))]
    else:
        argv += ["--measurement-mode", "count_windows", "--measurement-request-count", str(settings.requests)]
    if endpoint.ssl:
        if endpoint.protocol is Protocol.GRPC:
            argv.append("--ssl-grpc-use-ssl")
            if ca_file is not None:
                argv += ["--ssl-grpc-root-certifications-file", str(ca_file)]
        else:
            argv += ["--ssl-https-verify-peer", "1", "--ssl-https-verify-host", "2"]
            if ca_file is not None:
                argv += ["--ssl-https-ca-certificates-file", str(ca_file)]
    argv += perf_analyzer_headers(headers)
    argv += ["-f", str(report), *settings.perf_analyzer_args]
    return argv


HEADERS_ENV = "TRITONFT_BENCH_HEADERS"
"""The environment variable that carries the headers (JSON object) into :data:`AIPERF_LAUNCH`."""

AIPERF_LAUNCH = (
    "import json, os, sys\n"
    "from aiperf.cli import app\n"
    f"headers = json.loads(os.environ.pop({HEADERS_ENV!r}, '{{}}'))\n"
    "sys.argv = ['aiperf', *sys.argv[1:]] + [a for n, v in headers.items() for a in ('--header', f'{n}:{v}')]\n"
    "sys.exit(app())\n"
)
"""AIPerf's own entry point (``aiperf.cli.app``), its headers read from the environment: ``ps`` shows the program and
the arguments of :func:`aiperf_command`, never a header value."""


def aiperf_launcher(python: Path) -> list[str]:
    """The command that runs AIPerf in the interpreter of its tool environment; append :func:`aiperf_command`."""
    return [str(python), "-c", AIPERF_LAUNCH]


def headers_environment(headers: Mapping[str, str]) -> dict[str, str]:
    """The environment entries that hand ``headers`` to :data:`AIPERF_LAUNCH`."""
    return {HEADERS_ENV: json.dumps(dict(headers))} if headers else {}
