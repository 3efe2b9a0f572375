"""The generator's session model (trace/generate/model.py) by known answers worked by hand
and, for the page chainer, a property against a token-by-token reference: two pages get the
same id iff they sit at the same position and every token up to their end is the same
shared content (docs/input-rules.md I7 bounds the ids it hands out)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.errors import InputError
from prefixsim.trace.generate import model as generate_model
from prefixsim.trace.generate.model import (
    PRIVATE,
    SHARED,
    Corpus,
    Pager,
    session_rows,
    zipf_weights,
)
from prefixsim.trace.generate.preset import Dist, Documents, Layer, Subagents, Workload

# ------------------------------------------------------------------ the page chainer


def _tokens(segments):
    return [(key, offset) for key, length in segments for offset in range(length)]


def _shared_through(tokens, end):
    return all(key[0] == SHARED for key, _ in tokens[:end])


@st.composite
def _prompts(draw):
    size = draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4))  # shared contents
    private = iter(range(10**6))

    def segment():
        if draw(st.booleans()):
            v = draw(st.integers(0, len(lengths) - 1))
            return ((SHARED, 0, 0, v), lengths[v])
        return ((PRIVATE, next(private), 0), draw(st.integers(1, 9)))

    prompts = [[segment() for _ in range(draw(st.integers(1, 4)))]
               for _ in range(draw(st.integers(1, 5)))]
    return size, prompts


@settings(max_examples=300, deadline=None)
@given(_prompts())
def test_page_ids_are_equal_exactly_where_the_shared_content_is(case):
    size, prompts = case
    pager = Pager(size)
    calls = [(_tokens(p), pager.pages(p)) for p in prompts]
    assert pager.handed_out == sum(len(ids) for _, ids in calls)
    for a, (tokens_a, ids_a) in enumerate(calls):
        assert len(ids_a) == -(-len(tokens_a) // size)
        for b, (tokens_b, ids_b) in enumerate(calls):
            for j, id_a in enumerate(ids_a):
                end_a = min((j + 1) * size, len(tokens_a))
                for k, id_b in enumerate(ids_b):
                    end_b = min((k + 1) * size, len(tokens_b))
                    same = j == k and (a == b or (
                        tokens_a[:end_a] == tokens_b[:end_b]
                        and _shared_through(tokens_a, end_a)))
                    assert (id_a == id_b) == same, (a, j, b, k)


@settings(max_examples=200, deadline=None)
@given(_prompts())
def test_a_grown_prompt_keeps_its_full_pages_and_chains_the_rest(case):
    """`history: append`: the next prompt is the last one plus more; its first full pages
    keep their ids, the pages after them are the shared ones any prompt of that content
    gets, or new ids."""
    size, prompts = case
    first, more = prompts[0], [s for p in prompts[1:] for s in p] or prompts[0]
    grown = first + more
    pager = Pager(size)
    before = pager.pages(first)
    keep = len(_tokens(first)) // size
    ids = pager.pages(grown, before[:keep], keep * size)
    seen = set(before)
    plain = pager.pages(grown)  # the same content without a kept prefix
    tokens = _tokens(grown)
    assert ids[:keep] == before[:keep]
    assert len(ids) == -(-len(tokens) // size)
    assert pager.handed_out == len(before) + len(ids) + len(plain)
    for j in range(keep, len(ids)):
        if _shared_through(tokens, min((j + 1) * size, len(tokens))):
            assert ids[j] == plain[j]
        else:
            assert ids[j] not in seen and ids[j] != plain[j]
        seen.add(ids[j])


# ------------------------------------------------------------------ corpus and sessions


def fixed(value: float) -> Dist:
    return Dist(dist="fixed", value=value)


def workload(**changes) -> Workload:
    """One shared 8-token layer, a 4-token first message, 2-token next messages, 4-token
    answers at 2 tokens/s and 1 s of thinking: a turn every 3 s."""
    base = dict(name="w", prefix_layers=[Layer(variants=1, tokens=fixed(8))],
                first_message=fixed(4), next_message=fixed(2), think_time_s=fixed(1.0),
                output_tokens=fixed(4), decode_tokens_per_s=2.0)
    return Workload(**{**base, **changes})


def rows_of(w: Workload, turns: int = 3, spawn=None, size: int = 4, pager=None):
    rng = np.random.default_rng(0)
    pager = pager or Pager(size)
    corpus = Corpus(0, w, rng)
    return session_rows(corpus, pager, rng, 7, "s7", 10.0, turns, spawn=spawn), pager


def test_zipf_weights_by_hand():
    assert zipf_weights(3, 1.0) == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert zipf_weights(2, 0.0) == pytest.approx([0.5, 0.5])
    assert zipf_weights(2, 2.0) == pytest.approx([0.8, 0.2])


def test_an_appending_session_by_hand():
    """4-token pages. Turn 0: layer 8 + message 4 = 12 tokens, pages (0, 1) shared and 2
    private. Turn 1 at 13 s: + answer 4 + message 2 = 18: the 3 full pages kept, then the
    answer (3) and the message's partial page (4). Turn 2 at 16 s: + 4 + 2 = 24: the 4 full
    pages kept, then (5) = the 2-token message + half the answer, (6) = the rest + the new
    message."""
    rows, pager = rows_of(workload())
    assert [(r.arrival_s, r.session, r.input_tokens, r.output_tokens) for r in rows] == [
        (10.0, "s7", 12, 4), (13.0, "s7", 18, 4), (16.0, "s7", 24, 4)]
    assert [r.page_ids for r in rows] == [(0, 1, 2), (0, 1, 2, 3, 4), (0, 1, 2, 3, 5, 6)]
    assert pager.handed_out == 3 + 5 + 6


def test_a_rebuilding_session_by_hand():
    """`history: rebuild`: every prompt is built again (no page kept), so only the shared
    layer's pages keep their ids; the session's own content gets new ones each turn."""
    rows, _ = rows_of(workload(history="rebuild"))
    assert [r.input_tokens for r in rows] == [12, 18, 24]
    assert [r.page_ids for r in rows] == [(0, 1, 2), (0, 1, 3, 4, 5), (0, 1, 6, 7, 8, 9)]


def test_a_session_stops_at_its_context_limit():
    """max_context_tokens 18: the 18-token turn is sent, the 24-token one is not."""
    rows, _ = rows_of(workload(max_context_tokens=18))
    assert [r.input_tokens for r in rows] == [12, 18]
    rows, _ = rows_of(workload(max_context_tokens=17))
    assert [r.input_tokens for r in rows] == [12]
    rows, _ = rows_of(workload(max_context_tokens=11))
    assert rows == []


def test_sub_agents_start_after_every_turn_at_probability_one():
    spawn: list = []
    rows_of(workload(subagents=Subagents(probability=1.0)), spawn=spawn)
    assert spawn == [(13.0, [0]), (16.0, [0]), (19.0, [0])]
    spawn = []
    rows_of(workload(), spawn=spawn)
    assert spawn == []


def test_a_layer_without_variants_is_private_to_each_request():
    """`variants: 0`: unique content. Appending keeps the first prompt's (its pages are
    kept); rebuilding draws it again for each turn, so no page is shared at all."""
    unique = [Layer(variants=0, tokens=fixed(8))]
    rows, _ = rows_of(workload(prefix_layers=unique))
    assert [r.page_ids for r in rows] == [(0, 1, 2), (0, 1, 2, 3, 4), (0, 1, 2, 3, 5, 6)]
    rows, _ = rows_of(workload(prefix_layers=unique, history="rebuild"))
    assert [r.page_ids for r in rows] == [(0, 1, 2), (3, 4, 5, 6, 7), (8, 9, 10, 11, 12, 13)]


def test_two_sessions_share_the_layer_and_not_their_messages():
    pager = Pager(4)
    first, _ = rows_of(workload(), turns=1, pager=pager)
    second, _ = rows_of(workload(), turns=1, pager=pager)
    assert first[0].page_ids == (0, 1, 2) and second[0].page_ids == (0, 1, 3)


def documents(**changes) -> Documents:
    return Documents(**{**dict(corpus=3, zipf_s=1.0, tokens=fixed(5), per_request=fixed(2),
                               shuffle=False), **changes})


def test_documents_by_hand():
    """A corpus of 3 five-token documents, Zipf(1) weights 6/11, 3/11, 2/11; a request
    takes `per_request` distinct ones (at most the corpus), in corpus order unless
    shuffled, as shared segments keyed by their number."""
    rng = np.random.default_rng(3)
    corpus = Corpus(2, workload(documents=documents()), rng)
    assert corpus.doc_tokens == [5, 5, 5]
    assert corpus.doc_weights == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    for _ in range(20):
        picked = corpus.documents(rng)
        numbers = [key[3] for key, _ in picked]
        assert len(set(numbers)) == 2 and numbers == sorted(numbers)
        assert all(key[:3] == (SHARED, 2, -1) and tokens == 5 for key, tokens in picked)
    everything = Corpus(2, workload(documents=documents(per_request=fixed(7))), rng)
    assert [key[3] for key, _ in everything.documents(rng)] == [0, 1, 2]
    none = Corpus(2, workload(documents=documents(per_request=fixed(0))), rng)
    assert none.documents(rng) == []
    assert Corpus(2, workload(), rng).documents(rng) == []
    shuffled = Corpus(2, workload(documents=documents(per_request=fixed(3), shuffle=True)),
                      rng)
    orders = {tuple(key[3] for key, _ in shuffled.documents(rng)) for _ in range(40)}
    assert all(sorted(order) == [0, 1, 2] for order in orders) and len(orders) > 1


def test_documents_follow_the_layers_and_are_shared_across_sessions():
    """One document in the corpus: after the 8-token layer, its 5 tokens; two sessions
    share the layer's pages and the document's first full page (tokens 8-11), not the page
    where the document ends and the message starts."""
    w = workload(documents=documents(corpus=1, per_request=fixed(1)))
    pager = Pager(4)
    first, _ = rows_of(w, turns=1, pager=pager)
    second, _ = rows_of(w, turns=1, pager=pager)
    assert first[0].input_tokens == 8 + 5 + 4
    assert first[0].page_ids[:3] == second[0].page_ids[:3] == (0, 1, 2)
    assert first[0].page_ids[3:] != second[0].page_ids[3:]


def test_layer_variants_are_picked_by_popularity_and_kept_for_the_session():
    """Two variants of 4 and 8 tokens with Zipf(0): even odds; a session keeps its pick
    for every turn (its prompts stay extensions of each other)."""
    w = workload(prefix_layers=[Layer(variants=2, zipf_s=0.0,
                                      tokens=Dist(dist="uniform", low=4, high=8.01))])
    rng = np.random.default_rng(1)
    corpus = Corpus(0, w, rng)
    lengths = corpus.layers[0][0]
    assert len(lengths) == 2 and corpus.layers[0][1] == pytest.approx([0.5, 0.5])
    picks = [corpus.prefix(rng, None, 0)[1][0] for _ in range(200)]
    assert 60 < picks.count(0) < 140
    segments, chosen = corpus.prefix(rng, [1], 5)
    assert chosen == [1] and segments == [((SHARED, 0, 0, 1), lengths[1])]


def _two_variants(**changes) -> Workload:
    """A layer of two variants with different lengths (drawn once per corpus), even odds."""
    return workload(prefix_layers=[Layer(variants=2, zipf_s=0.0,
                                         tokens=Dist(dist="uniform", low=4, high=40))],
                    **changes)


def _session(w: Workload, seed: int, picks=None, turns: int = 3):
    rng = np.random.default_rng(seed)
    corpus = Corpus(0, w, rng)
    return corpus, session_rows(corpus, Pager(4), rng, 7, "s7", 0.0, turns, picks=picks)


def test_a_session_given_its_picks_keeps_them_on_every_turn():
    """A sub-agent is started with its parent's layer picks: every turn of it, appended or
    rebuilt, starts with that variant (its prompt = variant + 4, + 6 a turn)."""
    for seed in range(8):
        for history in ("append", "rebuild"):
            corpus, rows = _session(_two_variants(history=history), seed, picks=[1])
            lengths = corpus.layers[0][0]
            assert [r.input_tokens for r in rows] == [lengths[1] + 4 + 6 * t
                                                      for t in range(3)]


def test_a_rebuilt_session_keeps_the_variant_it_drew_first():
    for seed in range(8):
        corpus, rows = _session(_two_variants(history="rebuild"), seed)
        first = rows[0].input_tokens - 4
        assert first in corpus.layers[0][0]
        assert [r.input_tokens for r in rows] == [first + 4 + 6 * t for t in range(3)]


def test_a_private_layer_before_a_shared_one_keeps_both():
    w = workload(prefix_layers=[Layer(variants=0, tokens=fixed(3)),
                                Layer(variants=1, tokens=fixed(5))])
    segments, chosen = Corpus(0, w, np.random.default_rng(0)).prefix(
        np.random.default_rng(0), None, 9)
    assert segments == [((PRIVATE, 9, 0), 3), ((SHARED, 0, 1, 0), 5)] and chosen == [-1, 0]


def _docs_workload(history: str) -> Workload:
    """Three documents of different lengths, one a request, even odds."""
    return workload(history=history, documents=documents(
        zipf_s=0.0, per_request=fixed(1), tokens=Dist(dist="uniform", low=5, high=60)))


def _doc_lengths(rows) -> list[int]:
    """Each prompt's document length: prompt - layer 8 - first message 4 - 6 a turn (the
    history grows by an answer of 4 and a message of 2, the next message replacing the
    first)."""
    return [r.input_tokens - 12 - 6 * t for t, r in enumerate(rows)]


def test_an_appended_session_keeps_its_documents():
    """`history: append`: the next prompt extends the last, documents included."""
    for seed in range(8):
        corpus, rows = _session(_docs_workload("append"), seed, turns=4)
        lengths = _doc_lengths(rows)
        assert lengths[0] in corpus.doc_tokens and len(set(lengths)) == 1


def test_a_rebuilt_session_draws_its_documents_again_every_turn():
    """`history: rebuild`: each turn retrieves again (from turn 1 on), so over a few
    sessions the documents change at turn 1 and at turn 2."""
    changed_at = set()
    for seed in range(8):
        corpus, rows = _session(_docs_workload("rebuild"), seed, turns=3)
        lengths = _doc_lengths(rows)
        assert set(lengths) <= set(corpus.doc_tokens)
        changed_at |= {t for t in (1, 2) if lengths[t] != lengths[t - 1]}
    assert changed_at == {1, 2}


def test_documents_are_picked_by_their_zipf_popularity():
    """Zipf(1) over 3 documents, one a request: the first is taken 6/11 of the time."""
    rng = np.random.default_rng(2)
    corpus = Corpus(0, workload(documents=documents(per_request=fixed(1))), rng)
    picks = [corpus.documents(rng)[0][0][3] for _ in range(3000)]
    assert picks.count(0) / len(picks) == pytest.approx(6 / 11, abs=0.03)
    assert picks.count(2) / len(picks) == pytest.approx(2 / 11, abs=0.03)


def test_the_page_id_budget_is_inclusive(monkeypatch):
    """MAX_GENERATED_PAGES ids may be handed out, not one more."""
    monkeypatch.setattr(generate_model, "MAX_GENERATED_PAGES", 5)
    pager = Pager(4)
    pager.pages([((SHARED, 0, 0, 0), 12)])
    pager.pages([((SHARED, 0, 0, 1), 8)])
    assert pager.handed_out == 5
    with pytest.raises(InputError, match="more than 5 page ids") as refused:
        pager.pages([((SHARED, 0, 0, 2), 1)])
    assert refused.value.field == "--requests"
