"""Timed-engine known answers for docs/cache-semantics.md edge cases 1, 2, 4, 5, 9, 12 and 13.

Every run uses a constant cost model (`Ticks`: each step, prefill or decode, takes 1 s), P = 4
unless said otherwise, LRU, one replica, `max_run_steps=1` (each decode step is its own
timeout) and the engine's invariant checks after every step. `Ticks` also calls a probe
before each step it times, so a test can look at the cache in the middle of a run: the probe
runs after the step was planned (admissions done) and before the step's time passes.
Timelines are worked by hand in each docstring; "t=a->b" is one step.
"""

from fakes import Ticks, lru

from prefixsim.cache.ttl import TTLRule
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.replica import Replica
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

P = 4


def req(rid, arrival, input_tokens, output_tokens, ids, page=P):
    assert len(ids) == -(-input_tokens // page)
    return Request(rid, arrival, input_tokens, output_tokens, tuple(ids), page)


def run(requests, cache, probe=None, budget=8192, seqs=256):
    return replay_timed(requests, Fleet([cache], Ticks(probe=probe),
                        ContinuousBatching(budget, seqs), ROUTERS.build("round_robin")),
                        Sampling(check_invariants=True, max_run_steps=1))


def snapshot(cache):
    return {
        "resident": sorted(p.page_id for p in cache.pages()),
        "locked": sorted(p.page_id for p in cache.pages() if p.lock_count > 0),
        "reserved": cache.reserved_tokens,
        "evicted": cache.counters.evicted_pages,
        "expired": cache.counters.expired_pages,
        "hits": {p.page_id: p.num_hits for p in cache.pages()},
    }


def ttl_run(ttl_s):
    """One request A: L=8 (pages 1, 2), 5 output tokens, at t=0, TTL `ttl_s` (sliding).
    t=0->1 prefill (pages inserted at t=1: deadline 1 + ttl), t=1->2 .. 4->5 four decode
    steps, finish (unlock) at t=5. The probe sweeps expiry at each step's start
    (t = 0, 1, 2, 3, 4), as an eager sweep (R12) would."""
    cache = lru(100, TTLRule(ttl_s))
    seen = []

    def probe(kind, _):
        cache.expire(float(len(seen)))
        seen.append(snapshot(cache))

    result = run([req(0, 0.0, 8, 5, [1, 2])], cache, probe)
    return result, cache, seen


def test_c1_ttl_runs_out_while_held_then_freed_at_unlock():
    """TTL 2.5 s: the deadline is 3.5, passed by the sweep at t=4 while A still runs, yet
    both pages stay (locked, R8/R12). A unlocks at t=5 with no refresh: both are freed then,
    counted as 2 expirations (8 tokens), not evictions."""
    result, cache, seen = ttl_run(2.5)
    assert result.records[0].finish_s == 5.0
    assert len(seen) == 5
    assert seen[4]["resident"] == [1, 2] and seen[4]["locked"] == [1, 2]
    assert seen[4]["expired"] == 0
    assert cache.pages() == []
    assert cache.counters.expired_pages == 2 and cache.counters.expired_tokens == 8
    assert cache.counters.evicted_pages == 0


def test_c1_control_pages_outliving_the_holder_stay():
    """TTL 10 s: deadline 11 > 5, so the unlock at t=5 frees nothing."""
    _, cache, _ = ttl_run(10.0)
    assert sorted(p.page_id for p in cache.pages()) == [1, 2]
    assert cache.counters.expired_pages == 0


def test_c2_c9_parent_exposed_in_the_same_pass_never_under_a_lock():
    """Capacity 20.
    Z t=0: L=12 pages 1-2-3, 1 output: t=0->1 prefill, done at t=1 (tree 1-2-3 unlocked,
      free 8).
    A t=2: L=12 pages 1,2,4, 3 outputs: hits 1,2 (8 tokens; page 4 ends at 12 > L - 1),
      locks them, reserves 4 (free 4, no eviction). t=2->3 prefill inserts 4 under 2
      (free 4); decodes t=3->4, 4->5 reserve 1 each (free 3, 2); finish at t=5.
    C t=2.5: L=16 pages 5-8, 1 output. At t=3: needs 16 + A's decode token 1 = 17 >
      free 4 + evictable 4 (only page 3: 1, 2 and 4 are locked) = 8: refused, nothing
      evicted (C9). At t=4: 17 > 3 + 4: refused again.
    At t=5 A finishes (its 2 private tokens freed, free 4): C needs 16, evicts 12:
      leaf 3 (LRU, Z's) then leaf 4; that exposes 2, evicted in the same pass (C2); 1 stays.
    """
    cache = lru(20)
    seen = []
    result = run([req(0, 0.0, 12, 1, [1, 2, 3]), req(1, 2.0, 12, 3, [1, 2, 4]),
                  req(2, 2.5, 16, 1, [5, 6, 7, 8])], cache,
                 lambda kind, _: seen.append((kind, snapshot(cache))))
    z, a, c = result.records
    assert a.cached_tokens == 8 and a.finish_s == 5.0
    decodes = [s for kind, s in seen if kind == "decode"]
    assert decodes, "A's decode steps were probed"
    for s in decodes:  # t=3 and t=4 (and any re-timing of them)
        assert s["evicted"] == 0
        assert s["resident"] == [1, 2, 3, 4] and s["locked"] == [1, 2, 4]
    assert c.status == "completed" and c.queue_ms == 2500.0 and c.first_token_s == 6.0
    assert cache.counters.evicted_pages == 3 and cache.counters.evicted_tokens == 12
    assert sorted(p.page_id for p in cache.pages()) == [1, 5, 6, 7, 8]


def test_c9_no_eviction_when_admission_fails():
    """Capacity 20.
    A t=0: L=8 pages 1,2, 1 output: done at t=1 (8 cached, unlocked).
    B t=2: L=8 pages 3,4, 3 outputs: reserves 8 from free 12; t=2->3 prefill (16 resident,
      free 4); decode t=3->4 (reserves 1), t=4->5 (1 more); finish at t=5.
    C t=3.5: L=12 pages 5,6,7, 1 output: at t=4 needs 12 + 1 (B's decode) = 13 > free 3
      + evictable 8 (pages 1, 2) = 11: refused, and pages 1, 2 are NOT evicted for it.
    t=5: B done (free 20 - 16 = 4, evictable 16): C evicts 8: leaf 2 (oldest) then its
      parent 1; 3, 4 stay. C: prefill t=5->6."""
    cache = lru(20)
    seen = []
    result = run([req(0, 0.0, 8, 1, [1, 2]), req(1, 2.0, 8, 3, [3, 4]),
                  req(2, 3.5, 12, 1, [5, 6, 7])], cache,
                 lambda kind, _: seen.append((kind, snapshot(cache))))
    c = result.records[2]
    for kind, s in seen:
        if kind == "decode":
            assert s["evicted"] == 0 and s["resident"] == [1, 2, 3, 4]
    assert c.queue_ms == 1500.0 and c.finish_s == 6.0
    assert cache.counters.evicted_pages == 2
    assert sorted(p.page_id for p in cache.pages()) == [3, 4, 5, 6, 7]


def test_c5_concurrent_misses_charged_twice_first_insert_wins():
    """Capacity 100. A and B at t=0, both L=8 pages 1,2, 2 outputs. Both miss (nothing is
    resident yet) and are admitted into the same step, each reserving 8: 16 tokens charged
    while both run (C5). At t=1 A inserts 1, 2 (new); B's insert finds them resident under
    the same parent and reuses them, its 8 private tokens freed (R7): 8 resident, 2 pages
    inserted, both requests locking page 2. Decode t=1->2 reserves 1 each."""
    cache = lru(100)
    seen = []
    result = run([req(0, 0.0, 8, 2, [1, 2]), req(1, 0.0, 8, 2, [1, 2])], cache,
                 lambda kind, batch: seen.append((kind, batch, snapshot(cache),
                                                  cache.get(2).lock_count if cache.get(2)
                                                  else 0)))
    kind, batch, first, _ = seen[0]
    assert kind == "step" and [c.new_tokens for c in batch.prefills] == [8, 8]
    assert [c.cached_tokens for c in batch.prefills] == [0, 0]
    assert first["reserved"] == 16 and first["resident"] == []
    kind, _, second, locks = seen[1]
    assert kind == "decode" and second["reserved"] == 2 and second["resident"] == [1, 2]
    assert locks == 2
    assert cache.counters.inserted_pages == 2 and cache.counters.inserted_tokens == 8
    assert [r.cached_tokens for r in result.records] == [0, 0]
    assert [r.finish_s for r in result.records] == [2.0, 2.0]


def test_c12_resumed_request_rehits_its_own_pages_counted_apart():
    """Capacity 18. A (pages 1,2) and B (pages 3,4) at t=0, L=8 each; A 3 outputs, B 4.
    t=0->1: both prefill (16 reserved, then inserted and locked; each has 1 token).
    t=1->2: decode, 1 token each (free 2 -> 0).
    t=2: no room for two more decode tokens (free 0, nothing evictable): the newest, B, is
      preempted (its 1 private token freed, pages 3, 4 unlocked). B's prompt is now
      8 + 2 generated = 10; readmission would need 10 - 8 (hit 3, 4) = 2 + A's decode 1 = 3
      > free 1 (3, 4 are locked by the attempt): B waits. t=2->3 A decodes its 3rd token and
      finishes (frees 2).
    t=3: B resumes: re-hits its own pages 3, 4 (8 tokens), recomputes the 2 generated
      tokens (t=3->4, yielding token 3), decodes token 4 at t=4->5.
    The re-hit is not a first-time hit (C12/R14): B's cached_tokens stays 0 (its first
    admission), recomputed_tokens = 2, and the replica's hit_tokens stay 0 of 16 queried."""
    cache = lru(18)
    result = run([req(0, 0.0, 8, 3, [1, 2]), req(1, 0.0, 8, 4, [3, 4])], cache)
    a, b = result.records
    assert a.finish_s == 3.0 and a.preemptions == 0
    assert b.preemptions == 1 and b.cached_tokens == 0 and b.recomputed_tokens == 2
    assert b.first_token_s == 1.0 and b.finish_s == 5.0 and b.output_tokens == 4
    figures = result.replicas[0]
    assert figures.preemptions == 1
    assert figures.query_tokens == 16 and figures.hit_tokens == 0
    assert cache.get(3).num_hits == 1  # the resume did match them (refresh and lock)


def test_c13_earlier_chunks_locked_and_never_hits():
    """Token budget 8: A at t=0, L=20 (pages 1-5), 1 output, prefills in chunks 8, 8, 4 at
    t=0->1, 1->2, 2->3. After chunk 1 pages 1, 2 are in the tree and locked; after chunk 2
    pages 3, 4 too. The later chunks use them as context (cached_tokens 8 and 16 in the
    batch) but they are not hits: their hit counts stay 0, A's cached_tokens is 0, and the
    replica's hit_tokens 0."""
    cache = lru(100)
    seen = []
    result = run([req(0, 0.0, 20, 1, [1, 2, 3, 4, 5])], cache,
                 lambda kind, batch: seen.append((batch, snapshot(cache))), budget=8, seqs=1)
    assert [[(c.new_tokens, c.cached_tokens) for c in b.prefills] for b, _ in seen] == [
        [(8, 0)], [(8, 8)], [(4, 16)]]
    assert [s["locked"] for _, s in seen] == [[], [1, 2], [1, 2, 3, 4]]
    assert all(hits == 0 for _, s in seen for hits in s["hits"].values())
    rec = result.records[0]
    assert rec.cached_tokens == 0 and rec.first_token_s == 3.0
    assert result.replicas[0].hit_tokens == 0
    assert all(p.num_hits == 0 for p in cache.pages())


def test_c4_partial_tail_private_never_cached():
    """P=16, capacity 1000, pages 1-7 (7 would hold the 4-token tail of L=100).
    A at t=0, 2 outputs: t=0->1 prefill inserts pages 1-6 (96 tokens); the tail's 4 tokens
    stay private (R1, edge case 4): at the decode step t=1->2, 96 resident and 4 + 1 (the
    decode token) reserved; at A's finish (t=2) they are freed: 96 resident, 0 reserved.
    B at t=5, the same 100 tokens, 1 output: the match is capped at L - 1 = 99,
    page-aligned (R3): 6 pages = 96 tokens hit, 4 computed again as private KV (reserved 4 in
    its step t=5->6), freed at its finish. At most 96 tokens of the prompt are ever cached."""
    cache = lru(1000)
    seen = []
    ids = [1, 2, 3, 4, 5, 6, 7]
    result = run([req(0, 0.0, 100, 2, ids, 16), req(1, 5.0, 100, 1, ids, 16)], cache,
                 lambda kind, batch: seen.append((kind, batch, snapshot(cache))))
    a, b = result.records
    assert a.cached_tokens == 0 and b.cached_tokens == 96
    assert a.finish_s == 2.0 and b.finish_s == 6.0
    kinds = [kind for kind, _, _ in seen]
    assert kinds == ["step", "decode", "step"]
    _, _, decode = seen[1]
    assert decode["resident"] == [1, 2, 3, 4, 5, 6] and decode["reserved"] == 5
    _, batch, state = seen[2]
    assert [(c.new_tokens, c.cached_tokens) for c in batch.prefills] == [(4, 96)]
    assert state["locked"] == [1, 2, 3, 4, 5, 6] and state["reserved"] == 4
    assert state["resident"] == [1, 2, 3, 4, 5, 6]
    assert cache.counters.inserted_pages == 6 and cache.counters.inserted_tokens == 96
    assert cache.reserved_tokens == 0 and cache.get(7) is None


def test_c4_cap_holds_when_the_tail_id_is_cached_as_a_full_page():
    """Traces may use one id for a prompt's partial last page and another prompt's full page.
    P=16, capacity 1000: A at t=0, L=112, pages 1-7 all full, 1 output: all 7 cached at t=1.
    B at t=5, L=100 with the same ids: page 7 is resident, but it ends past token L - 1 = 99,
    so B matches 6 pages: hit 96 (not 99), page 7 not refreshed (hit count 0)."""
    cache = lru(1000)
    ids = [1, 2, 3, 4, 5, 6, 7]
    result = run([req(0, 0.0, 112, 1, ids, 16), req(1, 5.0, 100, 1, ids, 16)], cache)
    assert [r.cached_tokens for r in result.records] == [0, 96]
    assert cache.get(7).num_hits == 0 and cache.get(6).num_hits == 1


def test_router_estimate_uses_the_admission_cap():
    """The prefix-aware router's view of a replica (`cached_prefix_tokens`) must be what
    admission would hit: with A's 7 full pages cached (as above), B (L=100, same ids) would hit
    96 tokens, not 99 (the unaligned L - 1 cap) and not 100."""
    cache = lru(1000)
    ids = [1, 2, 3, 4, 5, 6, 7]
    run([req(0, 0.0, 112, 1, ids, 16)], cache)
    replica = Replica.__new__(Replica)
    replica.cache = cache
    assert replica.cached_prefix_tokens(req(1, 5.0, 100, 1, ids, 16), 5.0) == 96
    assert replica.cached_prefix_tokens(req(2, 5.0, 112, 1, ids, 16), 5.0) == 96
    assert replica.cached_prefix_tokens(req(3, 5.0, 113, 1, ids + [8], 16), 5.0) == 112
