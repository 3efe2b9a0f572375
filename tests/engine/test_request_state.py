"""`RequestState` and `served_record` (engine/request_state.py): a fresh state and one final
record worked by hand, field by field."""

import math

import pytest

from prefixsim.cache.classes import DEFAULT_RULE
from prefixsim.engine.request_state import WAITING, RequestState, served_record, served_row
from prefixsim.trace import Request


def request(output_tokens=4):
    return Request(request_id=7, arrival_s=1.0, input_tokens=40, output_tokens=output_tokens,
                   page_ids=(1, 2, 3), page_size_tokens=16, session_id="s")


def test_fresh_state():
    state = RequestState(request(), 2.0)
    assert (state.replica, state.status, state.arrival_s) == (0, WAITING, 2.0)
    assert (state.admitted_s, state.first_token_s, state.finish_s) == (None, None, None)
    assert (state.cached_tokens, state.recomputed_tokens, state.preemptions) == (0, 0, 0)
    assert (state.prompt_tokens, state.computed_tokens, state.tree_tokens) == (40, 0, 0)
    assert (state.private_tokens, state.num_tree_pages, state.tip) == (0, 0, None)
    assert (state.generated_tokens, state.target_tokens, state.rule) == (0, 4, DEFAULT_RULE)
    assert (state.cached_tokens_host, state.cached_tokens_disk,
            state.cached_tokens_pool) == (0, 0, 0)
    assert (state.load_s, state.loaded_chunk_tokens, state.last_token_s) == (0.0, 0, 0.0)
    assert (state.decode_replica, state.decode_source, state.gap_pending) == (None, None,
                                                                                False)
    assert state.prefilling and state.remaining_prefill_tokens == 40
    assert state.remaining_decode_tokens == 4 and state.outstanding_tokens == 44
    assert RequestState(request(output_tokens=0), 0.0).target_tokens == 1


def test_progress_properties():
    state = RequestState(request(), 0.0)
    state.prompt_tokens, state.computed_tokens, state.generated_tokens = 43, 30, 3
    assert state.prefilling and state.remaining_prefill_tokens == 13
    assert state.remaining_decode_tokens == 1 and state.outstanding_tokens == 14
    assert state.context_tokens == 43  # the input and the 3 generated
    state.computed_tokens = 43
    assert not state.prefilling and state.outstanding_tokens == 1


def test_served_record_by_hand():
    """Arrived at 2, admitted at 2.5, first token's step at 3, last at 4.5, 4 tokens; 0.25 s
    emission: first 3.25, finish 4.75, queue 500 ms, TTFT 1250, E2E 2750, TPOT 1.5 s / 3."""
    state = RequestState(request(), 2.0)
    state.admitted_s, state.first_token_s, state.finish_s = 2.5, 3.0, 4.5
    state.generated_tokens, state.status, state.replica = 4, "completed", 3
    state.cached_tokens, state.preemptions, state.recomputed_tokens = 32, 1, 16
    state.cached_tokens_host, state.cached_tokens_disk, state.cached_tokens_pool = 5, 6, 7
    state.decode_replica = 2
    record = served_record(state, emission_s=0.25)
    assert record._asdict() == {
        "request_id": 7, "session_id": "s", "status": "completed", "replica": 3,
        "arrival_s": 2.0, "first_token_s": 3.25, "finish_s": 4.75, "input_tokens": 40,
        "cached_tokens": 32, "output_tokens": 4, "queue_ms": 500.0, "ttft_ms": 1250.0,
        "tpot_ms": 500.0, "e2el_ms": 2750.0, "preemptions": 1, "recomputed_tokens": 16,
        "cached_tokens_host": 5, "cached_tokens_disk": 6, "cached_tokens_pool": 7,
        "decode_replica": 2}
    assert served_record(state).first_token_s == 3.0  # no emission by default
    assert served_row(state, emission_s=0.25) == tuple(record)  # the engine's row


@pytest.mark.parametrize("generated", [0, 1])
def test_served_record_without_tpot_or_times(generated):
    state = RequestState(request(), 2.0)
    state.generated_tokens, state.status = generated, "rejected"
    record = served_record(state)
    assert math.isnan(record.tpot_ms) and math.isnan(record.queue_ms)
    assert math.isnan(record.first_token_s) and math.isnan(record.finish_s)
    assert math.isnan(record.ttft_ms) and math.isnan(record.e2el_ms)
    state.admitted_s, state.first_token_s, state.finish_s = 2.0, 3.0, 3.0
    assert math.isnan(served_record(state).tpot_ms)
    assert served_record(state).queue_ms == 0.0


def test_served_record_tpot_of_two_tokens():
    """Two tokens: the one gap between the first (at 3) and the last (at 3.5) is the TPOT."""
    state = RequestState(request(output_tokens=2), 2.0)
    state.admitted_s, state.first_token_s, state.finish_s = 2.0, 3.0, 3.5
    state.generated_tokens, state.status = 2, "completed"
    record = served_record(state)
    assert (record.tpot_ms, record.e2el_ms, record.output_tokens) == (500.0, 1500.0, 2)
