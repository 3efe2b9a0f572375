"""Continuous batching with chunked prefill: what one engine step of a replica computes.

A pure decision over the replica's running and waiting requests (vLLM V1 order): every
decoding request gets one token; prefilling requests continue in admission order with chunks
under the token budget; then waiting requests are admitted first-come first-served while the
budget, `max_num_seqs` and memory allow (the replica's `admit` and `grow` callbacks reserve
each chunk's KV as it is scheduled, docs/cache-semantics.md R10; the first chunk that does
not fit blocks the prefills and the queue behind it). It never
yields, sleeps or records. With `chunked_prefill` off (vLLM's --no-enable-chunked-prefill) a
waiting prompt is admitted only into a step with budget for all of it (one longer than the
whole budget is still chunked, alone, rather than never served). Priorities, SLO-aware
ordering and disaggregated prefill are not here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from prefixsim.engine.request_state import RequestState

_set_field = object.__setattr__  # how a frozen dataclass's own __init__ sets its fields


@dataclass(frozen=True, slots=True, init=False)
class StepPlan:
    """One step: the decoding requests and (request, new tokens) prefill chunks."""

    decodes: list[RequestState]
    chunks: list[tuple[RequestState, int]]

    def __init__(self, decodes: list[RequestState],
                 chunks: list[tuple[RequestState, int]]) -> None:
        # the dataclass's own __init__, written out: compiled it runs as C, where the
        # generated one stays interpreted (docs/architecture.md "Compiled hot modules")
        _set_field(self, "decodes", decodes)
        _set_field(self, "chunks", chunks)

    @property
    def is_decode_only(self) -> bool:
        return not self.chunks


@dataclass(frozen=True, slots=True)
class ContinuousBatching:
    """The vLLM-style step planner with a token budget and a sequence limit."""

    max_batched_tokens: int = 8192
    max_num_seqs: int = 256
    chunked_prefill: bool = True  # False: a prompt is prefilled in one step (vLLM's
    # --no-enable-chunked-prefill), or waits until a step has the budget for all of it
    max_model_len: int | None = None  # the longest prompt + output a replica accepts (vLLM's
    # --max-model-len: longer requests are rejected on arrival); None: no limit but memory

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_batched_tokens < self.max_num_seqs:
            raise ValueError("need 1 <= max_num_seqs <= max_batched_tokens")

    def plan(
        self,
        running: list[RequestState],
        waiting: deque[RequestState],
        admit: Callable[[RequestState, int], int],
        grow: Callable[[RequestState, int], bool],
    ) -> StepPlan:
        """Plan the next step; admitted requests move from `waiting` to `running`.
        `admit(state, budget)` reserves a waiting request's first chunk of at most `budget`
        tokens and returns its size (0: it does not fit; negative: admitted, its cached prefix
        loading before it joins a step, which takes it off the queue and costs this step
        nothing, as vLLM v1's WAITING_FOR_REMOTE_KVS); `grow(state, tokens)` reserves a
        running request's next chunk (False: it does not fit)."""
        return plan_step(self.max_batched_tokens, self.max_num_seqs, self.chunked_prefill,
                         running, waiting, admit, grow)


def plan_step(max_batched_tokens: int, max_num_seqs: int, chunked_prefill: bool,
              running: list[RequestState], waiting: deque[RequestState],
              admit: Callable[[RequestState, int], int],
              grow: Callable[[RequestState, int], bool]) -> StepPlan:
    """`ContinuousBatching.plan` with its settings handed in (a function, so that the
    compiled module types its locals: scheduler.pxd)."""
    budget = max_batched_tokens
    # `prefilling` and `remaining_prefill_tokens` written out (the hot path)
    decodes = [s for s in running if s.computed_tokens >= s.prompt_tokens]
    budget -= len(decodes)
    chunks: list[tuple[RequestState, int]] = []
    starved = False
    for state in running if len(decodes) < len(running) else ():
        if budget <= 0:
            break
        if state.computed_tokens < state.prompt_tokens:
            size = min(state.prompt_tokens - state.computed_tokens, budget)
            if not grow(state, size):
                starved = True  # no memory for it: later prefills and admissions wait
                break
            chunks.append((state, size))
            budget -= size
    while not starved and waiting and budget > 0 and len(running) < max_num_seqs:
        state = waiting[0]
        if not chunked_prefill and state.remaining_prefill_tokens > budget \
                and (chunks or decodes or state.remaining_prefill_tokens
                     <= max_batched_tokens):
            break  # whole prompts only: it waits for a step with room for all of it
        size = admit(state, budget)
        if not size:
            break
        waiting.popleft()
        if size < 0:  # HELD: it waits off the batch while its prefix loads
            continue
        running.append(state)
        chunks.append((state, size))
        budget -= size
    return StepPlan(decodes, chunks)
