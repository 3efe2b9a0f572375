"""`FrontendQueue` (engine/frontend.py): known answers worked by hand, and a hypothesis
comparison with a naive first-free-tokenizer reference."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.costmodel import ServingOverheads
from prefixsim.engine.frontend import FrontendQueue


def test_one_tokenizer_by_hand():
    """0.5 s fixed, 0.01 s a token. Sent at 0 with 100 tokens: tokenised 0-1, scheduled 1.5.
    Sent at 0.5 with 50: waits until 1, tokenised 1-1.5, scheduled 2. Sent at 3 with 0:
    tokenizer free since 1.5, scheduled 3.5."""
    queue = FrontendQueue(ServingOverheads(frontend_s=0.5, frontend_s_per_prompt_token=0.01),
                          servers=1)
    assert queue.reaches_scheduler_s(0.0, 100) == pytest.approx(1.5)
    assert queue.reaches_scheduler_s(0.5, 50) == pytest.approx(2.0)
    assert queue.reaches_scheduler_s(3.0, 0) == pytest.approx(3.5)


def test_two_tokenizers_by_hand():
    """1 s a token, no fixed time: sends at 0 (4 tokens), 1 (2), 2 (1). The second takes the
    other tokenizer (done 3); the third waits for the first free, at 3, done 4."""
    queue = FrontendQueue(ServingOverheads(frontend_s_per_prompt_token=1.0), servers=2)
    assert queue.reaches_scheduler_s(0.0, 4) == 4.0
    assert queue.reaches_scheduler_s(1.0, 2) == 3.0
    assert queue.reaches_scheduler_s(2.0, 1) == 4.0


@pytest.mark.parametrize("servers", [0, -3])
def test_no_servers_means_one(servers):
    queue = FrontendQueue(ServingOverheads(frontend_s_per_prompt_token=1.0), servers=servers)
    assert queue.reaches_scheduler_s(0.0, 2) == 2.0
    assert queue.reaches_scheduler_s(0.0, 2) == 4.0


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.floats(0, 2), st.floats(0, 0.1),
       st.lists(st.tuples(st.floats(0, 5), st.integers(0, 100)), max_size=25))
def test_equals_the_naive_queue(servers, fixed, per_token, sends):
    queue = FrontendQueue(ServingOverheads(frontend_s=fixed,
                                           frontend_s_per_prompt_token=per_token), servers)
    free_at = [0.0] * servers
    now = 0.0
    for gap, tokens in sends:
        now += gap
        first = min(range(servers), key=lambda i: free_at[i])
        free_at[first] = max(now, free_at[first]) + per_token * tokens
        assert queue.reaches_scheduler_s(now, tokens) == free_at[first] + fixed
