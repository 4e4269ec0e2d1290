"""The gateway against OpenAI's own published API schema, both ways, on every route, in front of the real Triton
(matrix repository, FT step stood in for; the real all-MiniLM-L6-v2 for embeddings), over raw HTTP (no SDK to
smooth anything over).

Requests: generated from OpenAI's request schemas (``tests.tritonft.gateway.openai_requests``: every field of
``CreateCompletionRequest``, ``CreateChatCompletionRequest`` and ``CreateEmbeddingRequest`` through the values its
schema names or bounds), each sent unstreamed, streamed, and streamed with ``stream_options.include_usage``, to
each model of its route. Answers: every JSON body and every stream chunk validates against OpenAI's schema for it
(``nullable`` read as "or null"; ``finish_reason: null`` in a completion chunk and a base64 embedding as a string,
as OpenAI's own API sends them); a refused field is a 400 naming it; nothing is a 5xx.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.system.realtriton.conftest import EMBEDDER
from tests.system.realtriton.repos import MATRIX
from tests.tritonft.gateway.openai_requests import (
    CHUNK_SCHEMAS,
    REQUEST_SCHEMAS,
    RESPONSE_SCHEMAS,
    Case,
    cases,
    names_the_field,
    refused,
    streamed,
)
from tests.tritonft.gateway.openai_schema import Schemas, load, violations
from tests.tritonft.gateway.server import GatewayProcess, started
from tritonft.gateway.parameters import CHAT, COMPLETIONS, EMBEDDINGS, PARAMETERS, PATHS
from tritonft.local_triton import LocalTriton

pytestmark = pytest.mark.slow

MODELS = {
    COMPLETIONS: ("gpt2-tp1", "gpt2-stream", "t5-tp1"),
    CHAT: ("gpt2-tp1", "gpt2-stream"),
    EMBEDDINGS: (EMBEDDER,),
}
"""Each route's models: a generator answering in one piece, one rendered streaming (decoupled), T5 (no chat
template), and the real all-MiniLM-L6-v2."""
ASKS_NOTHING = {"parallel_tool_calls"}
"""Refused fields each of whose values asks for nothing here (both of ``parallel_tool_calls``' without tools)."""
TOO_LONG = " ".join(["hello world"] * 80)
"""Over the matrix models' max_input_len (64 tokens)."""


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return load()


@pytest.fixture(scope="module")
def gateway(
    matrix_triton: LocalTriton,
    encoder_triton: LocalTriton,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[GatewayProcess]:
    extra = ["--triton-url", f"{EMBEDDER}={encoder_triton.grpc_url}", "--embedding-model", f"{EMBEDDER}:4"]
    # The answers' shapes are judged here, not their time (the deadline's 504 has its own tests): a loaded machine
    # answered one of 2,073 requests past the default 60 s.
    extra += ["--deadline", "240"]
    process = GatewayProcess(matrix_triton.grpc_url, MATRIX, tmp_path_factory.mktemp("gw-conformance"), extra)
    with started(process, request) as running:
        yield running


def call(gateway: GatewayProcess, method: str, path: str, data: bytes | None) -> tuple[int, str, bytes]:
    """Status, content type and body of one raw HTTP request (an error status is an answer here)."""
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(f"{gateway.url}{path}", data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, answer.headers.get("content-type", ""), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read()


def sse_payloads(raw: bytes) -> tuple[list[Any], list[str]]:
    """The JSON payloads of an event stream, and what is wrong with its framing (``[DONE]`` last, nothing else)."""
    frames = [frame for frame in raw.split(b"\n\n") if frame]
    problems = [] if frames and frames[-1] == b"data: [DONE]" else ["the stream does not end with data: [DONE]"]
    payloads = []
    for frame in frames[:-1]:
        if not frame.startswith(b"data: "):
            problems.append(f"not a data event: {frame[:80]!r}")
            continue
        payloads.append(json.loads(frame.removeprefix(b"data: ")))
    return payloads, problems


@dataclass
class Outcome:
    """What one request was answered, and every way its answer breaks OpenAI's schema or the gateway's table."""

    route: str
    model: str
    mode: str
    case: Case
    status: int
    bodies: int = 0
    """JSON bodies validated: the answer, or each chunk and error event of a stream."""
    param: Any = None
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        sent = json.dumps(self.case.body)[:300]
        return f"{PATHS[self.route]} {self.model} {self.mode} {self.case.field}: {self.status} {sent}"


def judged(schemas: Schemas, gateway: GatewayProcess, case: Case, model: str, mode: str) -> Outcome:
    """Send ``case``; validate the answer's every body against OpenAI's schema for it."""
    status, kind, raw = call(gateway, "POST", PATHS[case.route], json.dumps(case.body).encode())
    outcome = Outcome(case.route, model, mode, case, status)
    if status >= 400:
        body = json.loads(raw)
        outcome.param = body.get("error", {}).get("param") if isinstance(body, dict) else None
        outcome.problems += violations(schemas.validator("ErrorResponse"), body)
        outcome.bodies = 1
    elif case.streamed:
        if not kind.startswith("text/event-stream"):
            outcome.problems.append(f"a stream answered as {kind}")
        payloads, framing = sse_payloads(raw)
        outcome.problems += framing
        chunk = schemas.chunk_validator(CHUNK_SCHEMAS[case.route])
        for payload in payloads:
            validator = schemas.validator("ErrorResponse") if "error" in payload else chunk
            outcome.problems += violations(validator, payload)
        outcome.bodies = len(payloads)
        outcome.problems += stream_usage_problems(case, payloads)
    else:
        base64 = case.route == EMBEDDINGS and case.body.get("encoding_format") == "base64"
        outcome.problems += violations(schemas.validator(RESPONSE_SCHEMAS[case.route], base64=base64), json.loads(raw))
        outcome.bodies = 1
    outcome.problems += verdict_problems(outcome)
    return outcome


def stream_usage_problems(case: Case, payloads: list[Any]) -> list[str]:
    """A stream asked for usage ends with a usage chunk without choices; one not asked for has no usage."""
    asked = isinstance(case.body.get("stream_options"), dict) and case.body["stream_options"].get("include_usage")
    chunks = [p for p in payloads if "error" not in p]
    with_usage = [p for p in chunks if p.get("usage") is not None]
    if asked and (not chunks or with_usage != chunks[-1:] or chunks[-1]["choices"] != []):
        return ["include_usage: the last chunk is not the only one with usage, or it has choices"]
    if not asked and with_usage:
        return ["a chunk has usage although the stream did not ask for it"]
    return []


def verdict_problems(outcome: Outcome) -> list[str]:
    """Never a 5xx; a refusal names the field the request varies; a field the table refuses is never served."""
    if outcome.status >= 500:
        return [f"answered {outcome.status}"]
    if outcome.status >= 400 and not names_the_field(outcome.case, outcome.param):
        return [f"refused naming {outcome.param!r}, not {outcome.case.field}"]
    if refused(outcome.case) and outcome.status < 400:
        return [f"{outcome.case.field} is refused in the table but was served: silently ignored"]
    return []


@dataclass(frozen=True)
class Run:
    outcomes: tuple[Outcome, ...]

    def summary(self) -> str:
        """Per route and mode: requests, bodies validated (answers, chunks, error events), 200s, 4xx, violations."""
        lines = [f"{'route':<12} {'mode':<13} {'requests':>8} {'bodies':>7} {'200':>5} {'4xx':>5} {'violations':>10}"]
        for route in MODELS:
            for mode in ("plain", "stream", "stream+usage"):
                mine = [o for o in self.outcomes if o.route == route and o.mode == mode]
                if not mine:
                    continue
                ok = sum(o.status == 200 for o in mine)
                lines.append(
                    f"{route:<12} {mode:<13} {len(mine):>8} {sum(o.bodies for o in mine):>7} {ok:>5} "
                    f"{sum(400 <= o.status < 500 for o in mine):>5} {sum(len(o.problems) for o in mine):>10}"
                )
        return "\n".join(lines)

    def verdicts(self) -> str:
        """Each request field: the table's verdict, and how often it was answered 200 / 4xx here."""
        lines = []
        for route in MODELS:
            for parameter in (p for p in PARAMETERS if route in p.routes):
                mine = [o for o in self.outcomes if o.route == route and o.case.field == parameter.name]
                ok = sum(o.status == 200 for o in mine)
                verdict = "honoured" if parameter.supported else "refused"
                lines.append(f"{route:<11} {parameter.name:<22} {verdict:<8} 200: {ok:>3}  4xx: {len(mine) - ok:>3}")
        return "\n".join(lines)


@pytest.fixture(scope="module")
def run(schemas: Schemas, gateway: GatewayProcess) -> Run:
    """Every generated request sent to every model of its route, unstreamed, streamed, and streamed with usage."""
    outcomes: list[Outcome] = []
    for route, models in MODELS.items():
        for model in models:
            for case in cases(schemas, route, model):
                outcomes.append(judged(schemas, gateway, case, model, "plain"))
                for mode, usage in (("stream", False), ("stream+usage", True)):
                    variant = streamed(case, usage)
                    if variant is not None:
                        outcomes.append(judged(schemas, gateway, variant, model, mode))
    result = Run(tuple(outcomes))
    print(f"\nOpenAI conformance against the real Triton:\n{result.summary()}\n\n{result.verdicts()}")
    return result


def test_every_field_of_every_request_schema_was_sent_to_every_model_of_its_route(run: Run, schemas: Schemas) -> None:
    for route, models in MODELS.items():
        for model in models:
            sent = {o.case.field for o in run.outcomes if o.route == route and o.model == model}
            assert sent == set(schemas.properties(REQUEST_SCHEMAS[route])), (route, model)


def test_every_body_and_chunk_validates_and_every_verdict_holds(run: Run) -> None:
    broken = [o for o in run.outcomes if o.problems]
    kinds = Counter(f"{PATHS[o.route]} {o.mode}: {problem}" for o in broken for problem in dict.fromkeys(o.problems))
    assert broken == [], (
        f"{len(broken)} of {len(run.outcomes)} answers break the schema or the table; by kind:\n"
        + "\n".join(f"{n:>5} x {kind}" for kind, n in kinds.most_common())
        + "\nfirst ones:\n"
        + "\n".join(f"{o.describe()}\n    " + "\n    ".join(o.problems) for o in broken[:10])
    )


def test_each_route_served_streams_with_and_without_usage_and_refused_by_name(run: Run) -> None:
    for route in (COMPLETIONS, CHAT):
        served = Counter(o.mode for o in run.outcomes if o.route == route and o.status == 200 and o.bodies)
        assert min(served[mode] for mode in ("plain", "stream", "stream+usage")) > 0, (route, served)
    statuses = Counter((o.route, o.status) for o in run.outcomes)
    assert all(statuses[(route, 200)] > 0 and statuses[(route, 400)] > 0 for route in MODELS), statuses


def test_every_refused_field_was_sent_at_a_value_it_refuses(run: Run) -> None:
    refusals = {(o.route, o.case.field) for o in run.outcomes if refused(o.case) and o.status == 400}
    asks_for_something = [p for p in PARAMETERS if not p.supported and p.name not in ASKS_NOTHING]
    assert refusals == {(route, p.name) for p in asks_for_something for route in p.routes}


def test_a_text_part_conversation_is_served_and_an_image_part_refused_by_name(run: Run) -> None:
    def part_type(o: Outcome) -> str | None:
        content = o.case.body["messages"][0].get("content")
        return content[0]["type"] if isinstance(content, list) and len(content[0]) == 2 else None

    by_type = {(part_type(o), o.status) for o in run.outcomes if o.route == CHAT and o.case.field == "messages"}
    assert ("text", 200) in by_type and ("image_url", 400) in by_type and ("image_url", 200) not in by_type


def raw_error(gateway: GatewayProcess, method: str, path: str, data: bytes | None) -> tuple[int, Any]:
    status, _, raw = call(gateway, method, path, data)
    return status, json.loads(raw)


@pytest.mark.parametrize(
    "scenario",
    [
        ("GET", "/v1/nothing", None, 404),
        ("GET", "/v1/completions", None, 405),
        ("POST", "/v1/chat/completions", b"{not json", 400),
        ("POST", "/v1/embeddings", b'{"model": "gpt2-tp1", "input": "hi"}', 400),
        ("POST", "/v1/completions", b'{"model": "gpt-4o", "prompt": "hi"}', 404),
        ("POST", "/v1/completions", b'{"model": "gpt2-tp1", "prompt": "' + TOO_LONG.encode() + b'"}', 400),
    ],
    ids=["unknown-path", "wrong-method", "not-json", "not-an-embedder", "unknown-model", "too-long"],
)
def test_an_error_answer_conforms(
    gateway: GatewayProcess, schemas: Schemas, scenario: tuple[str, str, bytes | None, int]
) -> None:
    method, path, data, status = scenario
    answered, body = raw_error(gateway, method, path, data)
    assert answered == status
    assert violations(schemas.validator("ErrorResponse"), body) == []


def test_a_body_over_the_limit_is_answered_a_conforming_413_before_it_is_sent(
    gateway: GatewayProcess, schemas: Schemas
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    try:
        connection.putrequest("POST", PATHS[COMPLETIONS])
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(2 << 20))
        connection.endheaders()
        answer = connection.getresponse()
        status, body = answer.status, json.loads(answer.read())
    finally:
        connection.close()
    assert status == 413
    assert violations(schemas.validator("ErrorResponse"), body) == []


@pytest.mark.parametrize("model", ["gpt2-tp1", "gpt2-stream"])
def test_an_error_event_in_a_stream_conforms(gateway: GatewayProcess, schemas: Schemas, model: str) -> None:
    body = {"model": model, "prompt": ["hello world", TOO_LONG], "max_tokens": 4, "stream": True}
    status, _, raw = call(gateway, "POST", PATHS[COMPLETIONS], json.dumps(body).encode())
    payloads, framing = sse_payloads(raw)
    assert (status, framing) == (200, [])
    errors = [p for p in payloads if "error" in p]
    assert [e["error"]["code"] for e in errors] == ["context_length_exceeded"]
    assert violations(schemas.validator("ErrorResponse"), errors[0]) == []
    chunk = schemas.chunk_validator(CHUNK_SCHEMAS[COMPLETIONS])
    assert [violations(chunk, p) for p in payloads if "error" not in p] == [[]] * (len(payloads) - 1)


def test_the_model_list_conforms(gateway: GatewayProcess, schemas: Schemas) -> None:
    status, _, raw = call(gateway, "GET", "/v1/models", None)
    body = json.loads(raw)
    assert status == 200
    assert {m["id"] for m in body["data"]} == {spec.name for spec in MATRIX} | {EMBEDDER}
    assert violations(schemas.validator("ListModelsResponse"), body) == []
