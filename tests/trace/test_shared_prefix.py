"""The shared-prefix generator (trace/generate/shared_prefix.py), by hand."""

import numpy as np
import pytest

from prefixsim.trace.generate import generate, load_preset
from prefixsim.trace.generate.shared_prefix import (
    SharedPrefix,
    Stage,
    shared_prefix_requests,
    stage_arrivals,
)

SPEC = SharedPrefix(num_groups=2, prompts_per_group=2, system_prompt_tokens=20,
                    question_tokens=10, output_tokens=5, page_size_tokens=8)


def test_prompt_pages_share_whole_system_pages_only():
    """30-token prompts in 8-token pages: pages 0-1 hold system tokens only (shared by the
    group), page 2 holds 4 system + 4 question tokens (the prompt's own), page 3 the last
    6 question tokens. Groups share nothing."""
    pages = SPEC.prompt_pages()
    assert [len(p) for p in pages] == [4, 4, 4, 4]
    g0q0, g0q1, g1q0, g1q1 = pages
    assert g0q0[:2] == g0q1[:2] and g0q0[2] != g0q1[2]
    assert g1q0[:2] == g1q1[:2] and not set(g0q0) & set(g1q0)
    assert len({p for prompt in pages for p in prompt}) == 2 * 2 + 4 * 2


def test_prompts_recur_round_robin_after_the_warmup():
    """Warm-up: every prompt once, 10 ms apart; then a stage of 2 req/s for 6 s = 12
    requests, request i using prompt order[i mod 4], so request i and i + 4 are the same
    prompt; sessions name the stage and the group."""
    requests = shared_prefix_requests(SPEC, [Stage(2.0, 6.0)], seed=3)
    warm, stage = requests[:4], requests[4:]
    assert len(stage) == 12
    assert sorted(r.page_ids for r in warm) == sorted(SPEC.prompt_pages())
    assert [r.arrival_s for r in warm] == [0.0, 0.01, 0.02, 0.03]
    assert all(stage[i].page_ids == stage[i + 4].page_ids for i in range(8))
    assert stage[0].page_ids == warm[0].page_ids  # one shuffled list for all
    assert {r.session_id.split("/")[0] for r in stage} == {"stage0"}
    assert all(r.input_tokens == 30 and r.output_tokens == 5 for r in requests)
    times = [r.arrival_s for r in stage]
    assert times == sorted(times) and 10.04 <= times[0] and times[-1] < 16.04


def test_stage_arrivals_fill_the_stage():
    times = stage_arrivals(Stage(100.0, 60.0), 5.0, np.random.default_rng(1))
    assert len(times) == 6000 and 5.0 < times[0] and times[-1] < 65.0
    assert np.all(np.diff(times) > 0)
    assert 0.0099 < np.mean(np.diff(times)) < 0.0101


def test_preset_generates_deterministically():
    preset = load_preset("shared-prefix")
    a = generate(preset, 250, seed=7, rate_per_s=50.0)
    b = generate(preset, 250, seed=7, rate_per_s=50.0)
    assert a == b and len(a) == 250
    assert all(r.input_tokens == 192 and r.output_tokens == 64 for r in a)
    assert a[0].page_size_tokens == 16


def test_bad_spec_is_named():
    with pytest.raises(ValueError, match="question_tokens"):
        SharedPrefix(question_tokens=0)
    with pytest.raises(ValueError, match="stage"):
        Stage(0.0, 1.0)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_every_size_is_an_integer_of_at_least_one(value):
    with pytest.raises(ValueError, match=f"num_groups must be an integer >= 1, got {value!r}"):
        SharedPrefix(num_groups=value)


def test_the_smallest_spec_is_one_prompt_of_one_page():
    spec = SharedPrefix(num_groups=1, prompts_per_group=1, system_prompt_tokens=1,
                        question_tokens=1, output_tokens=1, page_size_tokens=1)
    assert spec.num_prompts == 1 and spec.input_tokens == 2
    assert spec.prompt_pages() == [(0, 1)]


@pytest.mark.parametrize(("rate", "duration"), [
    (float("inf"), 1.0), (1.0, float("inf")), (1.0, 0.0), (-1.0, 1.0), (1.0, -2.0),
    (float("nan"), 1.0)])
def test_a_stage_needs_a_finite_positive_rate_and_duration(rate, duration):
    with pytest.raises(ValueError, match="finite rate and duration > 0"):
        Stage(rate, duration)


def test_a_short_stage_still_sends_one_request():
    """0.5 s at 1 req/s rounds to 0 requests: one is sent."""
    assert Stage(1.0, 0.5).num_requests == 1
    assert Stage(3.0, 0.5).num_requests == 2


def test_stages_run_back_to_back_after_the_warmup_with_sessions_by_group():
    """Warm-up: 4 prompts 10 ms apart, then 10 s of gap: stage 0 (2 s) fills [10.04,
    12.04), stage 1 (3 s) starts a 10 s gap later, [22.04, 25.04). Without the warm-up the
    first stage starts at 0. Arrivals keep 6 decimals (microseconds); sessions name the
    stage and the group, g0 for prompts 0-1 and g1 for 2-3."""
    requests = shared_prefix_requests(SPEC, [Stage(4.0, 2.0), Stage(2.0, 3.0)], seed=5)
    by_stage = {}
    for r in requests:
        stage, group = r.session_id.split("/")
        by_stage.setdefault(stage, []).append(r.arrival_s)
        assert group == f"g{SPEC.prompt_pages().index(r.page_ids) // 2}"
        assert r.arrival_s == round(r.arrival_s, 6)
    assert sorted(by_stage) == ["stage0", "stage1", "warmup"]
    assert len(by_stage["stage0"]) == 8 and len(by_stage["stage1"]) == 6
    assert 10.04 < min(by_stage["stage0"]) and max(by_stage["stage0"]) < 12.04
    assert 22.04 < min(by_stage["stage1"]) and max(by_stage["stage1"]) < 25.04
    cold = shared_prefix_requests(SPEC, [Stage(4.0, 2.0), Stage(2.0, 3.0)], seed=5,
                                  warmup=False, gap_s=1.0)
    times = [r.arrival_s for r in cold]
    assert len(cold) == 14 and 0.0 < times[0] and times[7] < 2.0
    assert 3.0 < times[8] and times[-1] < 6.0
