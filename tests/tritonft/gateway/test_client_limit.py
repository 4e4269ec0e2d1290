"""Each API client's requests in flight at a gateway replica, capped (``--max-in-flight-per-client``, the stack's
``maxConcurrentPerClient``), and each API key refused from its ``expires`` day (``--api-key-expires``): the real
gateway app under uvicorn, in front of a stand-in vLLM engine on real gRPC
that sends a stream's first token at once and its last only when the test lets it, so a stream holds its slot for
as long as the test needs (as a long generation holds one of the edge's for up to 880 s)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import grpc  # type: ignore[import-untyped]  # no types-grpcio in the lock
import httpx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.tritonft.gateway.server import serving_app
from tests.tritonft.gateway.test_deadlines import spec
from tests.tritonft.gateway.test_vllm import response
from tritonft.errors import UserError
from tritonft.gateway.command import key_expiries
from tritonft.gateway.config import GatewayConfig, ServedModel
from tritonft.gateway.limits import ClientSlots, admits, client_of, expired_on

LIMIT = 2
MODEL = ServedModel.from_spec(spec(0.5), base_deadline_s=1.0)  # a deadline of 1 + 64 x 0.5 s: never reached here
CLIENT = "x-tritonft-client"


class HeldEngine(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]  # untyped stubs
    """``ModelStreamInfer`` as the vLLM backend answers it: a first token at once, the last (``length``) once
    :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def ModelStreamInfer(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802  # gRPC's name
        for _ in requests:
            yield self._token(" a", last=False)
            while not self.release.wait(0.05):
                if not context.is_active():
                    return
            yield self._token(" b", last=True)

    @staticmethod
    def _token(text: str, *, last: bool) -> Any:
        outputs: dict[str, tuple[str, list[Any]]] = {
            "text_output": ("BYTES", [text]),
            "finish_reason": ("BYTES", ["length" if last else "None"]),
            "num_input_tokens": ("UINT32", [1]),
            "num_output_tokens": ("UINT32", [1]),
        }
        return service_pb2.ModelStreamInferResponse(infer_response=response(outputs))


@contextmanager
def served(limit: int = LIMIT, expiries: dict[str, date] | None = None) -> Iterator[tuple[str, HeldEngine]]:
    """The stand-in engine and the gateway in front of it with ``--max-in-flight-per-client limit``; yields the
    gateway's base URL and the engine (set its ``release`` to end the streams)."""
    held = HeldEngine()
    engine = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(held, engine)
    triton = f"127.0.0.1:{engine.add_insecure_port('127.0.0.1:0')}"
    engine.start()
    config = GatewayConfig(triton, (MODEL,), key_expiries=expiries or {}, max_in_flight_per_client=limit)
    try:
        with serving_app(config) as (url, _, _):
            try:
                yield url, held
            finally:
                held.release.set()
    finally:
        engine.stop(grace=None)


BODY = {"model": MODEL.name, "prompt": "p", "max_tokens": 2, "temperature": 0, "stream": True}


@dataclass
class Stream:
    """A stream under way: its response, and the iterator its first event was read from (kept, since closing it
    would close the connection, and the gateway would end the stream)."""

    answer: httpx.Response
    chunks: Iterator[bytes]

    def finish(self) -> bytes:
        return b"".join(self.chunks)


held_open: list[Iterator[bytes]] = []
"""The streams :func:`open_streams` holds open: an iterator no one refers to is closed, and its connection with it."""


def open_streams(stack: ExitStack, url: str, key_ids: list[str | None]) -> list[Stream]:
    """One stream per key id (None: no client header), each read up to its first event: in flight, holding a slot."""
    streams = []
    for key_id in key_ids:
        client = stack.enter_context(httpx.Client(timeout=30))
        headers = {CLIENT: key_id} if key_id is not None else {}
        answer = stack.enter_context(client.stream("POST", f"{url}/v1/completions", json=BODY, headers=headers))
        assert answer.status_code == 200, answer.read()
        chunks = answer.iter_raw()
        stack.callback(held_open.remove, chunks)  # open until the stack closes, whether the test keeps it or not
        held_open.append(chunks)
        assert next(chunks).startswith(b"data: "), "the first event, the model's first token"
        streams.append(Stream(answer, chunks))
    return streams


def stream_status(url: str, key_id: str) -> int:
    """The status of a streamed request (answered as soon as the model's first token is out); then it is left."""
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{url}/v1/completions", json=BODY, headers={CLIENT: key_id}) as answer,
    ):
        return answer.status_code


def post(url: str, key_id: str | None) -> httpx.Response:
    headers = {CLIENT: key_id} if key_id is not None else {}
    return httpx.post(f"{url}/v1/completions", json={**BODY, "stream": False}, headers=headers, timeout=30)


def test_a_client_at_its_limit_is_answered_429_with_retry_after_and_an_openai_error_naming_the_limit() -> None:
    with served() as (url, _), ExitStack() as stack:
        open_streams(stack, url, ["webapp"] * LIMIT)
        refused = post(url, "webapp")
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    error = refused.json()["error"]
    assert error["type"] == "requests" and error["code"] == "concurrency_limit_exceeded"
    assert "'webapp'" in error["message"] and f"{LIMIT} requests in flight" in error["message"]
    assert "maxConcurrentPerClient" in error["message"]


def test_another_client_is_served_while_one_is_at_its_limit() -> None:
    with served() as (url, held), ExitStack() as stack:
        open_streams(stack, url, ["webapp"] * LIMIT)
        held.release.set()
        assert post(url, "batch").status_code == 200


def test_a_clients_slot_is_given_back_when_its_stream_ends() -> None:
    with served() as (url, held), ExitStack() as stack:
        streams = open_streams(stack, url, ["webapp"] * LIMIT)
        held.release.set()
        for stream in streams:
            assert stream.finish().endswith(b"data: [DONE]\n\n"), "the stream ran to its end"
        assert post(url, "webapp").status_code == 200


def test_a_clients_slots_are_given_back_when_it_leaves_its_streams_midway() -> None:
    with served() as (url, _):
        with ExitStack() as stack:
            open_streams(stack, url, ["webapp"] * LIMIT)
            assert stream_status(url, "webapp") == 429
        # both connections closed, their streams under way (the engine never ends them): the gateway notices
        deadline = time.monotonic() + 10
        while (status := stream_status(url, "webapp")) == 429 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert status == 200


def test_the_keys_of_one_client_share_its_allowance() -> None:
    with served() as (url, _), ExitStack() as stack:
        open_streams(stack, url, ["webapp", "webapp.k2"])  # the old key and the new during a rotation's overlap
        assert post(url, "webapp.k2").status_code == 429


def test_requests_without_the_client_header_are_not_counted() -> None:
    """The ones that did not pass the API-key edge (an in-cluster caller, a stack without keys)."""
    with served() as (url, held), ExitStack() as stack:
        open_streams(stack, url, [None] * (LIMIT + 1))
        held.release.set()
        assert post(url, None).status_code == 200


def test_no_limit_is_applied_when_none_is_set() -> None:
    with served(limit=0) as (url, held), ExitStack() as stack:
        open_streams(stack, url, ["webapp"] * (LIMIT + 1))
        held.release.set()
        assert post(url, "webapp").status_code == 200


@pytest.mark.parametrize(("in_flight", "limit", "admitted"), [(1, 2, True), (2, 2, False), (99, 0, True)])
def test_admits_below_the_limit_and_always_without_one(in_flight: int, limit: int, admitted: bool) -> None:
    assert admits(in_flight, limit) is admitted


def test_a_key_id_counts_for_its_client() -> None:
    assert client_of("webapp.k2") == client_of("webapp") == "webapp"


def test_the_slots_forget_a_client_with_nothing_in_flight() -> None:
    slots = ClientSlots(2)
    slots.give(slots.take("webapp"))
    assert slots.in_flight == {}


TODAY = datetime.now(UTC).date()


def test_a_key_on_its_expiry_day_is_answered_401_naming_the_key_and_the_day() -> None:
    with served(expiries={"webapp": TODAY}) as (url, _):
        refused = post(url, "webapp")
    assert refused.status_code == 401
    error = refused.json()["error"]
    assert error["code"] == "invalid_api_key"
    assert f"API key 'webapp' expired on {TODAY.isoformat()}" in error["message"]


def test_the_clients_other_key_and_a_key_before_its_day_are_served() -> None:
    with served(expiries={"webapp": TODAY, "batch": TODAY + timedelta(days=1)}) as (url, _):
        assert stream_status(url, "webapp.k2") == 200
        assert stream_status(url, "batch") == 200


@pytest.mark.parametrize(("days", "refused"), [(-1, True), (0, True), (1, False)])
def test_a_key_is_refused_from_its_day_on(days: int, refused: bool) -> None:
    day = TODAY + timedelta(days=days)
    assert (expired_on("webapp", {"webapp": day}, TODAY) == day) is refused


def test_the_expiry_flag_is_read_by_key_id() -> None:
    assert key_expiries(["webapp.k2=2026-12-31"]) == {"webapp.k2": date(2026, 12, 31)}
    with pytest.raises(UserError, match="KEY_ID=YYYY-MM-DD"):
        key_expiries(["webapp=31/12/2026"])
