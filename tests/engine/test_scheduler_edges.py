"""`ContinuousBatching.plan` (engine/scheduler.py) on its own: plans worked by hand at the
budget's edges, and random queues against a naive reference planner written from the
module docstring (vLLM V1 order: decodes, running prefills, then admissions)."""

from __future__ import annotations

import math
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.engine.request_state import RequestState
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.trace import Request


def state(prompt: int, computed: int = 0, rid: int = 0) -> RequestState:
    """A request of `prompt` tokens with `computed` of them already computed."""
    pages = tuple(range(rid * 1000, rid * 1000 + math.ceil(prompt / 16)))
    s = RequestState(Request(rid, 0.0, prompt, 4, pages, 16), 0.0)
    s.computed_tokens = computed
    return s


def admit_all(state_: RequestState, budget: int) -> int:
    """Admission with memory for everything: the first chunk is what the budget allows."""
    return min(state_.remaining_prefill_tokens, budget)


def grow_all(_state: RequestState, _tokens: int) -> bool:
    return True


def sizes(plan) -> list[tuple[int, int]]:
    return [(s.request.request_id, n) for s, n in plan.chunks]


@pytest.mark.parametrize(("tokens", "seqs"), [(8192, 0), (4, 8)])
def test_limits_are_checked_one_by_one(tokens, seqs):
    """Either limit alone is an error: no sequence at all, or more sequences than tokens."""
    with pytest.raises(ValueError, match="^need 1 <= max_num_seqs <= max_batched_tokens$"):
        ContinuousBatching(max_batched_tokens=tokens, max_num_seqs=seqs)


def test_decodes_take_one_token_each_from_the_budget():
    """Budget 10, three decodes: the waiting 100-token prompt gets a 7-token chunk."""
    running = [state(5, 5, rid) for rid in range(3)]
    waiting = deque([state(100, rid=9)])
    plan = ContinuousBatching(10, 8).plan(running, waiting, admit_all, grow_all)
    assert len(plan.decodes) == 3 and sizes(plan) == [(9, 7)]


def test_a_running_chunk_leaves_the_rest_of_the_budget_to_admissions():
    """Budget 100: a running prefill with 30 tokens left takes 30, the waiting prompt 70."""
    running = [state(50, 20, rid=1)]
    waiting = deque([state(200, rid=2)])
    plan = ContinuousBatching(100, 8).plan(running, waiting, admit_all, grow_all)
    assert sizes(plan) == [(1, 30), (2, 70)]
    assert running[-1].request.request_id == 2 and not waiting


def test_an_exhausted_budget_gives_no_empty_chunk():
    """Budget 10: the first running prefill takes all 10; the second gets nothing (not a
    0-token chunk) and the queue waits."""
    running = [state(40, 0, rid=1), state(40, 0, rid=2)]
    waiting = deque([state(10, rid=3)])
    plan = ContinuousBatching(10, 8).plan(running, waiting, admit_all, grow_all)
    assert sizes(plan) == [(1, 10)] and len(waiting) == 1


def test_the_last_token_of_the_budget_is_used():
    """Budget 10: a 9-token running chunk leaves 1 token, which the next running prefill
    takes; then a prompt of 10 with a 9-token chunk leaves 1 for the next waiting one."""
    running = [state(9, 0, rid=1), state(40, 0, rid=2)]
    plan = ContinuousBatching(10, 8).plan(running, deque(), admit_all, grow_all)
    assert sizes(plan) == [(1, 9), (2, 1)]
    waiting = deque([state(9, rid=3), state(50, rid=4)])
    plan = ContinuousBatching(10, 8).plan([], waiting, admit_all, grow_all)
    assert sizes(plan) == [(3, 9), (4, 1)]


def test_a_starved_prefill_blocks_the_queue_behind_it():
    """No memory for the running prefill's next chunk: it and every admission wait
    (R10: the first chunk that does not fit blocks the prefills and the queue behind it)."""
    running = [state(40, 8, rid=1), state(40, 8, rid=2)]
    waiting = deque([state(10, rid=3)])
    grown = []

    def grow_none(s: RequestState, tokens: int) -> bool:
        grown.append(s.request.request_id)
        return False

    plan = ContinuousBatching(100, 8).plan(running, waiting, admit_all, grow_none)
    assert sizes(plan) == [] and len(waiting) == 1 and grown == [1]


def test_held_admissions_leave_the_queue_without_a_chunk():
    """An admission that loads its prefix off the batch (negative size) leaves the queue,
    joins no step and costs no budget; the next waiting request is admitted after it."""
    waiting = deque([state(30, rid=1), state(30, rid=2)])

    def admit(s: RequestState, budget: int) -> int:
        return -1 if s.request.request_id == 1 else min(s.remaining_prefill_tokens, budget)

    running: list[RequestState] = []
    plan = ContinuousBatching(40, 8).plan(running, waiting, admit, grow_all)
    assert sizes(plan) == [(2, 30)] and [s.request.request_id for s in running] == [2]
    assert not waiting


def test_whole_prompts_only_admit_a_prompt_that_fills_the_rest_exactly():
    """Chunked prefill off, budget 10 with one decode: a 9-token prompt fits the 9 left
    exactly; a 10-token one waits for a step with room."""
    for prompt, admitted in ((9, True), (10, False)):
        waiting = deque([state(prompt, rid=5)])
        plan = ContinuousBatching(10, 8, chunked_prefill=False).plan(
            [state(3, 3, rid=1)], waiting, admit_all, grow_all)
        assert (sizes(plan) == [(5, prompt)]) is admitted and (not waiting) is admitted


@pytest.mark.parametrize("busy", ["decode", "chunk"])
def test_whole_prompts_only_a_long_prompt_waits_for_an_empty_step(busy):
    """Chunked prefill off, budget 10: a 20-token prompt (longer than any step) is chunked
    alone in an empty step, but waits behind a decode or a running prefill's chunk."""
    waiting = deque([state(20, rid=5)])
    empty = ContinuousBatching(10, 8, chunked_prefill=False).plan([], waiting, admit_all,
                                                                   grow_all)
    assert sizes(empty) == [(5, 10)]
    running = [state(3, 3, rid=1)] if busy == "decode" else [state(30, 25, rid=1)]
    waiting = deque([state(20, rid=5)])
    plan = ContinuousBatching(10, 8, chunked_prefill=False).plan(running, waiting,
                                                                  admit_all, grow_all)
    assert all(rid != 5 for rid, _ in sizes(plan)) and len(waiting) == 1


def test_the_sequence_limit_stops_admissions():
    """max_num_seqs 2 with one running: one admission, the next waits."""
    running = [state(3, 3, rid=1)]
    waiting = deque([state(5, rid=2), state(5, rid=3)])
    plan = ContinuousBatching(100, 2).plan(running, waiting, admit_all, grow_all)
    assert sizes(plan) == [(2, 5)] and len(waiting) == 1


# ----------------------------------------------------------------- naive reference
def reference(limits: tuple[int, int, bool], running, waiting, fits) -> tuple[list, list]:
    """The module docstring, step by step: every decode one token; running prefills in
    order while budget lasts (the first without memory stops prefills and admissions);
    then the queue's head while budget, sequences and memory allow (whole prompts only
    without chunking, unless the step is empty and the prompt longer than any step)."""
    max_tokens, max_seqs, chunked = limits
    decodes = [s for s in running if s.computed_tokens >= s.prompt_tokens]
    budget = max_tokens - len(decodes)
    chunks = []
    for s in running:
        if s.computed_tokens >= s.prompt_tokens:
            continue
        if budget <= 0:
            break
        size = min(s.prompt_tokens - s.computed_tokens, budget)
        if not fits(s, size):
            return decodes, chunks
        chunks.append((s.request.request_id, size))
        budget -= size
    count = len(running)
    for s in list(waiting):
        if budget <= 0 or count >= max_seqs:
            break
        need = s.prompt_tokens - s.computed_tokens
        if not chunked and need > budget and (chunks or decodes or need <= max_tokens):
            break
        size = min(need, budget)
        if not fits(s, size):
            break
        chunks.append((s.request.request_id, size))
        budget -= size
        count += 1
    return decodes, chunks


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_plan_matches_the_naive_reference(data):
    max_seqs = data.draw(st.integers(1, 6))
    max_tokens = data.draw(st.integers(max_seqs, 64))
    chunked = data.draw(st.booleans())
    memory = data.draw(st.integers(0, 200))  # tokens the replica can still reserve
    prompts = data.draw(st.lists(st.integers(1, 90), max_size=8))
    done = [data.draw(st.integers(0, p)) for p in prompts]
    split = data.draw(st.integers(0, len(prompts)))

    def build():
        running = [state(p, d, rid) for rid, (p, d) in enumerate(zip(prompts[:split],
                                                                      done[:split], strict=True))]
        waiting = deque(state(p, 0, rid) for rid, p in enumerate(prompts[split:], split))
        return running, waiting

    def memory_gate():
        left = [memory]

        def fits(_s, tokens):
            if tokens > left[0]:
                return False
            left[0] -= tokens
            return True
        return fits

    running, waiting = build()
    gate = memory_gate()
    plan = ContinuousBatching(max_tokens, max_seqs, chunked).plan(
        running, waiting, lambda s, b: (lambda n: n if gate(s, n) else 0)(
            min(s.remaining_prefill_tokens, b)), gate)
    ref_running, ref_waiting = build()
    decodes, chunks = reference((max_tokens, max_seqs, chunked), ref_running, ref_waiting,
                                memory_gate())
    assert [s.request.request_id for s in plan.decodes] == [
        s.request.request_id for s in decodes]
    assert sizes(plan) == chunks
    if len(decodes) > max_tokens:  # a running set past the limits (split > max_seqs): all
        assert not chunks  # of it decodes (a running request is never dropped), nothing more
    else:
        assert sum(n for _, n in chunks) + len(decodes) <= max_tokens
    assert len(running) <= max(max_seqs, split)
