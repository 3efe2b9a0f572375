"""The workload generator: determinism, session structure, presets, the page chainer."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.errors import InputError
from prefixsim.trace import read_trace
from prefixsim.trace.generate import PRESETS, generate, load_preset
from prefixsim.trace.generate.model import PRIVATE, SHARED, Pager
from prefixsim.trace.generate.preset import PRESET_DIR, Turns


@pytest.mark.parametrize("name", PRESETS)
def test_presets_are_deterministic_and_well_formed(name):
    preset = load_preset(name)
    first = generate(preset, 300, seed=11)
    assert first == generate(preset, 300, seed=11)
    assert first != generate(preset, 300, seed=12)
    assert len(first) == 300
    assert [r.request_id for r in first] == list(range(300))
    arrivals = [r.arrival_s for r in first]
    assert arrivals == sorted(arrivals) and arrivals[0] >= 0
    for r in first:
        assert r.num_pages == -(-r.input_tokens // preset.page_size_tokens)
        assert r.session_id is not None and r.output_tokens >= 1


@pytest.mark.parametrize("name", ["chat", "agent"])
def test_append_sessions_grow_and_keep_their_pages(name):
    """next prompt = previous prompt + answer + message: longer, and every full page of the
    previous prompt is a prefix of the next one's pages."""
    requests = generate(load_preset(name), 400, seed=5)
    sessions = defaultdict(list)
    for r in requests:
        sessions[r.session_id].append(r)
    follow_ups = 0
    for turns in sessions.values():
        for before, after in zip(turns, turns[1:], strict=False):
            full = before.input_tokens // before.page_size_tokens
            assert after.input_tokens >= before.input_tokens + before.output_tokens + 1
            assert after.page_ids[:full] == before.page_ids[:full]
            follow_ups += 1
    assert follow_ups > 0


def test_rate_option_sets_the_request_rate():
    """Half the requests arrive by about half the nominal span (N / rate)."""
    slow = generate(load_preset("chat"), 3000, seed=1, rate_per_s=2.0)
    fast = generate(load_preset("chat"), 3000, seed=1, rate_per_s=8.0)
    assert 1500 / slow[1500].arrival_s == pytest.approx(2.0, rel=0.2)
    assert 3.0 < slow[1500].arrival_s / fast[1500].arrival_s < 5.0


def test_shared_prefix_layers_are_shared_across_sessions():
    """In `rag`, every prompt starts with the same 512-token chunk: page 0 is one id."""
    requests = generate(load_preset("rag"), 200, seed=2)
    assert len({r.page_ids[0] for r in requests}) == 1
    assert len({r.session_id for r in requests}) > 50


def test_pager_known_answer():
    """4-token pages. Shared segment A (6 tokens) then private m (3): page 0 = A[0:4] is
    shared (interned), page 1 = A[4:6] + m[0:2] and page 2 = m[2:3] are fresh. A second
    prompt with A then private n gets the same page 0 and new ids after it; keeping the first
    full page of the first prompt reuses it."""
    pager = Pager(4)
    a = ((SHARED, 0, 0, 0), 6)
    first = pager.pages([a, ((PRIVATE, 1, 0), 3)])
    second = pager.pages([a, ((PRIVATE, 2, 0), 3)])
    assert first == (0, 1, 2)
    assert second == (0, 3, 4)
    extended = pager.pages([a, ((PRIVATE, 1, 0), 3), ((PRIVATE, 1, 1), 5)], first[:2], 8)
    assert extended[:2] == (0, 1) and len(extended) == 4


def test_turns_expected_matches_sampling():
    turns = Turns(mean=3.0, max=5)
    rng = np.random.default_rng(0)
    samples = [turns.sample(rng) for _ in range(20000)]
    assert np.mean(samples) == pytest.approx(turns.expected(), rel=0.02)
    assert max(samples) == 5


def test_bad_preset_names_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(__file__).parents[2].joinpath("traces", "chat.yaml").read_text()
                   .replace("dist: fixed, value: 700", "dist: fixed"))
    with pytest.raises(InputError, match="value") as caught:
        load_preset(str(bad))
    assert caught.value.field == "workloads.0.prefix_layers.0.tokens"
    with pytest.raises(InputError, match="no preset"):
        load_preset("nonesuch")


def test_cli_generate_is_byte_identical(tmp_path):
    outs = []
    for name in ("a.jsonl", "b.jsonl"):
        out = tmp_path / name
        result = CliRunner().invoke(app, ["trace", "generate", "--preset", "chat",
                                          "--requests", "150", "--seed", "9", "-o", str(out)])
        assert result.exit_code == 0, result.output
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    data = read_trace(tmp_path / "a.jsonl")
    assert data.format == "mooncake" and len(data.requests) == 150
    assert all(r.session_id for r in data.requests)
    result = CliRunner().invoke(app, ["trace", "generate", "--preset", "chat", "--requests",
                                      "0", "-o", str(tmp_path / "c.jsonl")])
    assert result.exit_code == 2 and "--requests" in result.output


@pytest.mark.parametrize("name", ["chat", "shared-prefix"])
def test_a_rate_too_low_for_a_trace_is_refused(name):
    """The readers refuse a trace spanning over MAX_SPAN_S (1e9 s): the generator refuses the
    rate that would write one (nothing is written), and takes one just inside it."""
    preset = load_preset(name)
    with pytest.raises(InputError, match=r"^--rate: the workload would span 1\.\d+e\+1[01] s, "
                       r"over the 1e\+09 s a trace may \(~31 years\): raise the rate$"):
        generate(preset, 20, seed=3, rate_per_s=1e-9)
    requests = generate(preset, 3, seed=3, rate_per_s=1e-7)
    assert 1e6 < requests[-1].arrival_s - requests[0].arrival_s < 1e9


CHAT = Path(__file__).resolve().parents[2] / "traces" / "chat.yaml"


def chat_preset(tmp_path: Path, *changes: str) -> Path:
    """traces/chat.yaml with each old text of `changes` (old, new, old, new...) replaced."""
    text = CHAT.read_text()
    for old, new in zip(changes[::2], changes[1::2], strict=True):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


FIRST = "first_message: {dist: lognormal, median: 5200, sigma: 1.1, min: 20, max: 120000}"
OUTPUT = "output_tokens: {dist: lognormal, median: 330, sigma: 0.45, min: 1, max: 2048}"
ARRIVAL = "arrival: {process: poisson, rate_per_s: 3.4}"


@pytest.mark.parametrize(("old", "new", "message"), [
    (FIRST, "first_message: {dist: fixed, value: .inf}",
     "workloads.0.first_message.value: Input should be a finite number (got inf)"),
    (FIRST, "first_message: {dist: fixed, value: .nan}",
     "workloads.0.first_message.value: Input should be a finite number (got nan)"),
    (ARRIVAL, "arrival: {process: gamma, rate_per_s: 3.4, cv: 0.0001}",
     "arrival.cv: must be >= 0.001, got 0.0001"),
    (ARRIVAL, "arrival: {process: gamma, rate_per_s: 3.4, cv: 2000.0}",
     "arrival.cv: must be <= 1000, got 2000.0"),
    ("max_context_tokens: 131072", "max_context_tokens: 16777217",
     "workloads.0.max_context_tokens: must be <= 16777216, got 16777217"),
    ("page_size_tokens: 512\n", "page_size_tokens: 8\n",
     "workloads.0.max_context_tokens: a prompt of 16,777,216 tokens in 8-token pages has "
     "2,097,152 pages, more than 1,048,576 a request may"),
])
def test_presets_that_would_break_the_generator_are_refused(tmp_path, old, new, message):
    """Infinite lengths (a traceback converting them to tokens), a gamma's shape that is not
    a number, prompts or pages a trace may not hold: refused naming the key."""
    changes = (old, new)
    if "8-token" in message:
        changes += ("max_context_tokens: 131072", "max_context_tokens: 16777216")
    path = chat_preset(tmp_path, *changes)
    with pytest.raises(InputError) as error:
        load_preset(str(path))
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+: {re.escape(message)}", str(error.value))


def test_what_generating_finds_is_named_in_the_preset(tmp_path):
    # a first prompt over max_context_tokens in every session: no request would ever be
    # made (the generator looped for ever); an output over what a request may have; a
    # preset's own rate so low that the trace would span over 1e9 s
    never = chat_preset(tmp_path, FIRST, "first_message: {dist: fixed, value: 200000}")
    with pytest.raises(InputError) as error:
        generate(load_preset(str(never)), 5, seed=1, source=str(never))
    assert str(error.value) == (
        f"{never}: workloads.0.max_context_tokens: the first prompt of 1,000 sessions of "
        "workload 'chat' in a row was longer than 131,072 tokens: no request would ever be "
        "made; raise it or shorten the prompts")
    huge = chat_preset(tmp_path, OUTPUT, "output_tokens: {dist: fixed, value: 16777217}")
    with pytest.raises(InputError) as error:
        generate(load_preset(str(huge)), 5, seed=1, source=str(huge))
    assert str(error.value) == (
        f"{huge}: workloads.0.output_tokens: drew an output of 16,777,217 tokens, over the "
        "16,777,216 a request may have: give the distribution a max")
    slow = chat_preset(tmp_path, ARRIVAL, "arrival: {process: poisson, rate_per_s: 1.0e-9}")
    with pytest.raises(InputError) as error:
        generate(load_preset(str(slow)), 20, seed=1, source=str(slow))
    assert str(error.value).startswith(f"{slow}: arrival.rate_per_s: the workload would span ")


def test_the_page_ids_held_are_bounded(monkeypatch):
    import prefixsim.trace.generate.model as model

    monkeypatch.setattr(model, "MAX_GENERATED_PAGES", 100)
    with pytest.raises(InputError) as error:
        generate(load_preset("chat"), 1000, seed=1)
    assert str(error.value) == (
        "--requests: the workload needs more than 100 page ids, held in memory: ask for fewer "
        "requests or larger pages (page_size_tokens)")


def test_shared_prefix_presets_that_a_trace_could_not_hold(tmp_path):
    def refused(text: str) -> str:
        path = tmp_path / "sp.yaml"
        path.write_text("kind: shared_prefix\nname: sp\n" + text)
        with pytest.raises(InputError) as error:
            load_preset(str(path))
        return re.sub(rf"^{re.escape(str(path))}:\d+: ", "", str(error.value))  # with a line

    assert refused("system_prompt_tokens: 16777200\nquestion_tokens: 64\n") == (
        "question_tokens: a prompt of system_prompt_tokens + question_tokens = 16,777,264 is "
        "over the 16,777,216 a request may have")
    assert refused("page_size_tokens: 1\nsystem_prompt_tokens: 2000000\n") == (
        "page_size_tokens: a prompt of 2,000,064 tokens in 1-token pages has 2,000,064 pages, "
        "more than 1,048,576 a request may")
    assert refused("num_groups: 10000\nprompts_per_group: 101\n") == (
        "prompts_per_group: num_groups x prompts_per_group = 1,010,000 prompts, more than "
        "1,000,000 (each is held in memory)")
    assert refused("output_tokens: 16777217\n") == "output_tokens: must be <= 16777216, got " \
        "16777217"


def test_presets_whose_shared_contents_or_lengths_a_run_could_not_hold(tmp_path):
    """`variants: 1000000000` in chat.yaml made `--requests 5` draw a billion lengths (590 MB
    at 30 s and growing); `value: -700` was clipped to a 1-token prefix without a word."""
    chat = (PRESET_DIR / "chat.yaml").read_text()
    rag = (PRESET_DIR / "rag.yaml").read_text()

    def refused(text: str) -> str:
        path = tmp_path / "p.yaml"
        path.write_text(text)
        with pytest.raises(InputError) as error:
            load_preset(str(path))
        return re.sub(rf"^{re.escape(str(path))}:\d+: ", "", str(error.value))  # with a line

    assert refused(chat.replace("variants: 40,", "variants: 1000000000,")) == (
        "workloads.0.prefix_layers.1.variants: 1,000,000,000 brings the preset's layer "
        "variants and corpus documents to 1,000,000,001, more than 1,000,000 (each is made "
        "and held in memory before the first request)")
    assert refused(rag.replace("corpus: 3235", "corpus: 999000")).startswith(
        "workloads.0.documents.corpus: 999,000 brings the preset's layer variants and corpus "
        "documents to 1,000,401, more than 1,000,000")
    assert refused(chat.replace("value: 700", "value: -700")) == \
        "workloads.0.prefix_layers.0.tokens.value: must be >= 0, got -700"
    choice = "first_message: {dist: choice, values: [5, -1], weights: [1, 1]}"
    assert refused(re.sub(r"first_message: \{[^}]*\}", choice, chat)) == \
        "workloads.0.first_message.values.1: must be >= 0, got -1"
    assert refused(chat.replace("think_time_s: {dist: lognormal, median: 45, sigma: 1.0,",
                                "think_time_s: {dist: uniform, low: -5, high: 5,")) == \
        "workloads.0.think_time_s.low: must be >= 0, got -5"
    at_budget = tmp_path / "edge.yaml"
    at_budget.write_text(chat.replace("variants: 40,", "variants: 999999,"))
    assert load_preset(str(at_budget)).workloads[0].prefix_layers[1].variants == 999_999
