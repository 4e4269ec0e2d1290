"""Request coalescing: concurrent non-streaming completions of one model with the same parameters become the rows of
one ModelInfer call, and each request gets its own rows back.

Triton spends about as much CPU on an ensemble call of 8 rows as on one of 1 row (the ensemble scheduler and the
tokenizer steps' Python stubs cost per call, not per row), and so does the gateway's gRPC client: under load,
fewer and fuller calls serve more requests on the same cores.

The rules (the decisions are the pure functions below):

- Only requests whose answer cannot depend on the rows beside them are merged (:func:`merge_key`): greedy ones
  and seeded sampled ones (FasterTransformer seeds each row's generator from that row's ``random_seed``; without
  one, the generator of row ``k`` of a call differs from row 0's). A sampled request whose body has no ``seed``
  carries a seed the gateway drew for it alone and is not merged either. Streaming requests are never merged.
- Merged requests share the model and every parameter tensor (``max_tokens``, sampling, seed, stop phrases,
  beams): the key is the model and the request's parameter tensors.
- A request of a key with fewer than ``calls_in_flight`` calls under way is sent at once, alone: a lone request
  waits for nothing. Otherwise it waits for one of those calls to end, and then goes with every request that
  waited meanwhile, at most the ensemble's ``max_batch_size`` rows per call (:func:`take_batch`).
- Each request keeps its own deadline: it is answered 504 at that instant even if the call carrying it goes on
  for the others. A merged call that fails for a reason that may be one row's (:func:`retry_alone`) is retried
  request by request, so each gets its own answer or error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tritonft.gateway.errors import ApiError, deadline_expired
from tritonft.gateway.mapping import EnsembleRequest

Answer = TypeVar("Answer")
"""What one prompt's row is answered with (the gateway's: :class:`tritonft.gateway.mapping.Row`)."""

Send = Callable[[EnsembleRequest, tuple[str, ...], float], Awaitable[list[Answer]]]
"""One ModelInfer call: (request whose model and parameters to use, its rows' prompts, deadline) -> answers."""


def merge_key(request: EnsembleRequest) -> Hashable | None:
    """What requests must share to be merged, ``None`` when ``request`` must be sent on its own."""
    if request.stream:
        return None
    names = {p.name: p.value for p in request.parameters}
    greedy = names.get("runtime_top_k") == 1
    if not greedy and ("random_seed" not in names or request.drawn_seed):
        return None
    return (request.model.name, request.parameters)


def take_batch(rows: Sequence[int], max_rows: int) -> int:
    """How many of the waiting requests (``rows``: each one's row count, oldest first) the next call carries: the
    oldest ones while they fit in ``max_rows``, and always at least one."""
    total = 0
    for taken, count in enumerate(rows):
        total += count
        if total > max_rows:
            return max(taken, 1)
    return len(rows)


def retry_alone(error: ApiError) -> bool:
    """Whether a merged call's failure may be due to one of its rows (a bad prompt, a model error), rather than
    affecting every row alike (Triton unreachable, the deadline)."""
    return error.code not in ("triton_down", "timeout")


@dataclass(eq=False)
class _Waiting(Generic[Answer]):
    """A request waiting for a call of its key (or carried by one)."""

    prompts: tuple[str, ...]
    deadline: float
    answer: asyncio.Future[list[Answer]]
    timer: asyncio.TimerHandle | None = None

    def resolve(self, answers: list[Answer]) -> None:
        if not self.answer.done():
            self.answer.set_result(answers)
        if self.timer is not None:
            self.timer.cancel()

    def fail(self, error: BaseException) -> None:
        if not self.answer.done():
            self.answer.set_exception(error)
        if self.timer is not None:
            self.timer.cancel()


@dataclass(eq=False)
class _Key(Generic[Answer]):
    template: EnsembleRequest
    """A request of the key: its model and parameters are every member's."""
    in_flight: int = 0
    waiting: list[_Waiting[Answer]] = field(default_factory=list)


class Coalescer(Generic[Answer]):
    """Sends each request's prompts through ``send``, merging requests as the module docstring says."""

    def __init__(self, send: Send[Answer], deadline_s: float, calls_in_flight: int, enabled: bool = True) -> None:
        self.send = send
        self.deadline_s = deadline_s
        self.calls_in_flight = calls_in_flight
        self.enabled = enabled
        self._keys: dict[Hashable, _Key[Answer]] = {}
        self._calls: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    async def answer(self, request: EnsembleRequest, deadline: float) -> list[Answer]:
        """The answers to ``request``'s prompts (one per prompt)."""
        key = merge_key(request) if self.enabled else None
        rows = len(request.prompts)
        if key is None:
            if rows == 1:
                return await self.send(request, request.prompts, deadline)
            answers = await asyncio.gather(*(self.send(request, (p,), deadline) for p in request.prompts))
            return [each[0] for each in answers]
        limit = request.model.max_batch_size
        if rows > limit:
            chunks = [request.prompts[at : at + limit] for at in range(0, rows, limit)]
            answers = await asyncio.gather(*(self.send(request, chunk, deadline) for chunk in chunks))
            return [row for chunk in answers for row in chunk]
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(request)
        if state.in_flight < self.calls_in_flight:
            state.in_flight += 1
            try:
                return await self.send(request, request.prompts, deadline)
            finally:
                self._call_ended(key, state)
        loop = asyncio.get_running_loop()
        waiting: _Waiting[Answer] = _Waiting(request.prompts, deadline, loop.create_future())
        waiting.timer = loop.call_later(max(deadline - time.monotonic(), 0.0), self._expire, waiting)
        state.waiting.append(waiting)
        return await waiting.answer

    def _expire(self, waiting: _Waiting[Answer]) -> None:
        waiting.fail(deadline_expired(self.deadline_s))

    def _call_ended(self, key: Hashable, state: _Key[Answer]) -> None:
        state.in_flight -= 1
        state.waiting = [w for w in state.waiting if not w.answer.done()]
        while state.waiting and state.in_flight < self.calls_in_flight:
            count = take_batch([len(w.prompts) for w in state.waiting], state.template.model.max_batch_size)
            batch, state.waiting = state.waiting[:count], state.waiting[count:]
            state.in_flight += 1
            task = asyncio.get_running_loop().create_task(self._carry(key, state, batch))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)
        if not state.in_flight and not state.waiting:
            del self._keys[key]

    async def _carry(self, key: Hashable, state: _Key[Answer], batch: list[_Waiting[Answer]]) -> None:
        """One call for ``batch``; each member's rows answered from it (or from its own retry)."""
        try:
            prompts = tuple(p for w in batch for p in w.prompts)
            deadline = max(w.deadline for w in batch)
            try:
                answers = await self.send(state.template, prompts, deadline)
            except Exception as exc:
                if isinstance(exc, ApiError) and len(batch) > 1 and retry_alone(exc):
                    await asyncio.gather(*(self._alone(state.template, w) for w in batch))
                else:
                    for w in batch:
                        w.fail(exc)
                return
            at = 0
            for w in batch:
                w.resolve(answers[at : at + len(w.prompts)])
                at += len(w.prompts)
        finally:
            self._call_ended(key, state)

    async def _alone(self, template: EnsembleRequest, waiting: _Waiting[Answer]) -> None:
        if waiting.answer.done():
            return
        try:
            waiting.resolve(await self.send(template, waiting.prompts, waiting.deadline))
        except Exception as exc:
            waiting.fail(exc)
