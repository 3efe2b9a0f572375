"""`generate` (trace/generate/__init__.py) on small hand-made presets: its request budget,
the mix of workloads by share of requests and the request rate, session ids, sub-agents,
progress, arrival rounding, the refusals it names and the shared-prefix presets."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest

from prefixsim.errors import InputError
from prefixsim.trace import generate as generate_package
from prefixsim.trace.fields import MAX_TOKENS
from prefixsim.trace.generate import generate
from prefixsim.trace.generate import model as generate_model
from prefixsim.trace.generate.preset import (
    Arrival,
    Dist,
    Layer,
    Preset,
    SharedPrefixPreset,
    Subagents,
    Turns,
    Workload,
)
from prefixsim.trace.readers import MAX_SPAN_S
from prefixsim.trace.record import Request


def fixed(value: float) -> Dist:
    return Dist(dist="fixed", value=value)


def workload(name: str = "w", **changes) -> Workload:
    base = dict(name=name, prefix_layers=[Layer(variants=1, tokens=fixed(8))],
                first_message=fixed(4), next_message=fixed(2), think_time_s=fixed(1.0),
                output_tokens=fixed(4), decode_tokens_per_s=2.0)
    return Workload(**{**base, **changes})


def preset(*workloads: Workload, rate: float = 2.0) -> Preset:
    return Preset(name="p", page_size_tokens=4, arrival=Arrival(rate_per_s=rate),
                  workloads=list(workloads) or [workload()])


def test_the_request_budget_is_inclusive(monkeypatch):
    monkeypatch.setattr(generate_package, "MAX_GENERATED_REQUESTS", 5)
    assert len(generate(preset(), 5, seed=1)) == 5
    with pytest.raises(InputError) as refused:
        generate(preset(), 6, seed=1)
    assert refused.value.field == "--requests"
    assert refused.value.message == "must be <= 5 (the trace is built in memory), got 6"


def test_no_request_and_one_request():
    assert generate(preset(), 0, seed=1) == []
    one = generate(preset(), 1, seed=1)
    assert len(one) == 1 and one[0].request_id == 0 and one[0].session_id == "s0"


def test_workloads_mix_by_share_of_requests_at_the_preset_rate():
    """Weights 1 and 3 (not summing to 1): a quarter of the requests are the first
    workload's (10-token prompts, one turn), three quarters the second's (prompts of 20 and
    26 tokens: two turns), so sessions start 2 : 3; requests arrive at the preset's 50 per
    second overall."""
    short = workload("short", prefix_layers=[], first_message=fixed(10), weight=1.0)
    long = workload("long", prefix_layers=[], first_message=fixed(20), weight=3.0,
                    turns=Turns(mean=2, min=2, max=2))
    requests = generate(preset(short, long, rate=50.0), 20_000, seed=4)
    shares = Counter(r.input_tokens for r in requests)
    assert shares[10] / len(requests) == pytest.approx(0.25, abs=0.015)
    assert shares[20] == pytest.approx(shares[26], abs=2)
    assert (shares[20] + shares[26]) / len(requests) == pytest.approx(0.75, abs=0.015)
    span = requests[-1].arrival_s - requests[0].arrival_s
    assert len(requests) / span == pytest.approx(50.0, rel=0.05)


def test_two_workloads_never_share_their_shared_content():
    """Each workload has its own corpus: the same layer (variant 0 of layer 0, 8 tokens)
    in two workloads is two contents, so their sessions share no page."""
    requests = generate(preset(workload("a"), workload("b")), 400, seed=2)
    first_pages = {r.page_ids[:2] for r in requests}
    assert len(first_pages) == 2


def test_session_ids_count_the_sessions_from_zero():
    """Without sub-agents, sessions are s0, s1, ... in the order they start."""
    requests = generate(preset(workload(turns=Turns(mean=2, min=1, max=4))), 300, seed=3)
    firsts = {}
    for r in requests:
        firsts.setdefault(r.session_id, r.arrival_s)
    numbers = [int(s[1:]) for s in sorted(firsts, key=firsts.get)]
    assert numbers == list(range(len(numbers)))


def test_sub_agents_share_their_parents_prefix_and_get_their_own_ids():
    """probability 1: every turn of a parent starts a sub-agent (`sN/aK`, K from 0) that
    shares the parent's layer variant; a number goes to each sub-agent too, so parents and
    sub-agents never share an id, and each id's prompts grow turn by turn."""
    agent = workload(prefix_layers=[Layer(variants=5, zipf_s=0.0,
                                          tokens=Dist(dist="uniform", low=8, high=40))],
                     turns=Turns(mean=2, min=2, max=2),
                     subagents=Subagents(probability=1.0, turns=Turns(mean=1, min=1, max=1)))
    requests = generate(preset(agent), 600, seed=5)
    sessions = defaultdict(list)
    for r in requests:
        sessions[r.session_id].append(r)
    subs = [s for s in sessions if "/" in s]
    assert subs and all(re.fullmatch(r"s\d+/a[01]", s) for s in subs)
    parents = [s for s in sessions if "/" not in s]
    assert all(re.fullmatch(r"s\d+", s) for s in parents)
    for sub in subs:
        parent = sub.split("/")[0]
        assert parent in sessions  # the parent's first request came first
        assert sessions[sub][0].page_ids[0] == sessions[parent][0].page_ids[0]
    for rows in sessions.values():
        tokens = [r.input_tokens for r in rows]
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    numbers = sorted(int(s[1:]) for s in parents)
    assert numbers[:2] == [0, 3]  # s0 and its two sub-agents take 0, 1, 2


def test_progress_adds_up_to_the_requests():
    told: list[int] = []
    requests = generate(preset(workload(turns=Turns(mean=3, min=1, max=6))), 500, seed=6,
                        on_progress=told.append)
    assert sum(told) <= len(requests) == 500 and all(n >= 0 for n in told)
    assert sum(told) > 450  # all but the last session's


def test_arrivals_keep_milliseconds():
    requests = generate(preset(rate=7.3), 300, seed=8)
    assert all(r.arrival_s == round(r.arrival_s, 3) for r in requests)
    assert any(r.arrival_s != round(r.arrival_s) for r in requests)
    assert any(r.arrival_s != round(r.arrival_s, 2) for r in requests)


def test_an_output_of_max_tokens_is_taken_and_one_more_is_refused():
    assert generate(preset(workload(output_tokens=fixed(MAX_TOKENS))), 2, seed=1)
    with pytest.raises(InputError) as refused:
        generate(preset(workload(output_tokens=fixed(MAX_TOKENS + 1))), 2, seed=1,
                 source="p.yaml")
    assert (refused.value.file, refused.value.field) == ("p.yaml", "workloads.0.output_tokens")


def test_a_workload_that_never_fits_is_refused_after_its_thousandth_session(monkeypatch):
    """UNFIT_SESSIONS sessions in a row of one workload with no request made: refused
    after exactly that many (here 3), naming the workload's key."""
    made = []
    real = generate_package.session_rows
    monkeypatch.setattr(generate_package, "UNFIT_SESSIONS", 3)
    monkeypatch.setattr(generate_package, "session_rows",
                        lambda *a, **k: made.append(1) or real(*a, **k))
    never = workload(first_message=fixed(100), max_context_tokens=50)
    with pytest.raises(InputError) as refused:
        generate(preset(never), 5, seed=1, source="p.yaml")
    assert len(made) == 3
    assert refused.value.field == "workloads.0.max_context_tokens"
    assert refused.value.message.startswith("the first prompt of 3 sessions of workload 'w'")


def test_a_span_of_exactly_the_most_a_trace_may_is_taken():
    check = generate_package._within_span
    edge = [Request(0, 0.0, 4, 1, (1,), 4), Request(1, MAX_SPAN_S, 4, 1, (2,), 4)]
    assert check(edge, "--rate", None) == edge
    over = [edge[0], Request(1, MAX_SPAN_S * 1.001, 4, 1, (2,), 4)]
    with pytest.raises(InputError):
        check(over, "--rate", None)
    assert check([], "--rate", None) == []


def shared(**changes) -> SharedPrefixPreset:
    return SharedPrefixPreset(**{**dict(kind="shared_prefix", name="sp", num_groups=2,
                                        prompts_per_group=2, system_prompt_tokens=20,
                                        question_tokens=10, output_tokens=5,
                                        page_size_tokens=8, rate_per_s=4.0), **changes})


def test_a_shared_prefix_preset_with_and_without_its_warmup():
    """The warm-up sends the 4 prompts first (sessions `warmup/gN`), then the requests
    asked for; pages are the preset's size."""
    warm = generate(shared(warmup=True), 10, seed=2)
    assert len(warm) == 4 + 10
    assert [r.session_id.split("/")[0] for r in warm] == ["warmup"] * 4 + ["stage0"] * 10
    cold = generate(shared(), 10, seed=2)
    assert len(cold) == 10 and {r.session_id.split("/")[0] for r in cold} == {"stage0"}
    assert {r.page_size_tokens for r in warm + cold} == {8}
    assert all(len(r.page_ids) == 4 for r in cold)  # 30 tokens in 8-token pages


def test_a_shared_prefix_preset_too_slow_names_its_rate_key():
    with pytest.raises(InputError) as refused:
        generate(shared(rate_per_s=1e-300), 2, seed=2, source="sp.yaml")
    assert (refused.value.file, refused.value.field) == ("sp.yaml", "rate_per_s")
    with pytest.raises(InputError) as refused:
        generate(shared(), 2, seed=2, rate_per_s=1e-300, source="sp.yaml")
    assert (refused.value.file, refused.value.field) == (None, "--rate")
    with pytest.raises(InputError) as refused:
        generate(preset(rate=1e-300), 2, seed=2, source="p.yaml")
    assert (refused.value.file, refused.value.field) == ("p.yaml", "arrival.rate_per_s")


def test_the_model_module_is_the_one_generate_uses():
    assert generate_package.session_rows is generate_model.session_rows


def test_a_sub_agents_output_over_the_limit_names_the_workload():
    """A parent and its sub-agent draw from one output distribution (4 or MAX_TOKENS + 1
    tokens, even odds): whichever draws the huge one first, the error names the workload's
    key in the preset's file."""
    agent = workload(prefix_layers=[], output_tokens=Dist(
        dist="choice", values=[4, MAX_TOKENS + 1], weights=[1, 1]),
        subagents=Subagents(probability=1.0, turns=Turns(mean=1, min=1, max=1)))
    fields = set()
    for seed in range(12):
        try:
            generate(preset(agent), 30, seed=seed, source="p.yaml")
        except InputError as refused:
            fields.add((refused.file, refused.field))
    assert fields == {("p.yaml", "workloads.0.output_tokens")}
