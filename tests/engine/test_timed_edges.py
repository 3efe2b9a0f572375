"""Edges of engine/timed.py worked by hand with `Ticks` (every step 1 s, so a request of n
output tokens alone takes n s: a prefill step, then n - 1 decode steps): the open loop's
clock stretch and frontend time from t = 0, the closed loop's releases through the
frontend and its tokenizer, `call_at` after t = 0, progress reports, and a RequestColumns
read a block at a time.

More known answers: test_timed_known_answers.py, test_serving_overheads.py,
test_closed_loop.py.
"""

import numpy as np
import pytest
from fakes import Ticks, lru

from prefixsim.costmodel import NO_OVERHEADS, ServingOverheads
from prefixsim.engine import timed
from prefixsim.engine.clients import Concurrency
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns, as_columns


def req(rid, arrival, output_tokens=1, input_tokens=4):
    return Request(rid, arrival, input_tokens, output_tokens, (rid + 1,), 4)


def serve(requests, overheads=NO_OVERHEADS, replicas=1, clients=None, time_scale=1.0,
          **sampling):
    fleet = Fleet([lru(1000) for _ in range(replicas)], Ticks(overheads),
                  ContinuousBatching(8192, 256), ROUTERS.build("round_robin"),
                  time_scale=time_scale, clients=clients)
    return replay_timed(requests, fleet, Sampling(check_invariants=True, **sampling))


def times(result):
    """(arrival, finish) of every record, in request-id order."""
    return [(r.arrival_s, r.finish_s) for r in result.records]


# ------------------------------------------------------------------ the open loop


def test_open_loop_arrivals_are_stretched_by_the_time_scale():
    """time_scale 2: arrivals 0, 1, 3 become 0, 2, 6; each request alone takes 1 s."""
    result = serve([req(0, 0.0), req(1, 1.0), req(2, 3.0)], time_scale=2.0)
    assert times(result) == [(0.0, 1.0), (2.0, 3.0), (6.0, 7.0)]
    assert result.duration_s == 7.0


def test_open_loop_frontend_time_from_the_start():
    """Frontend 0.25 s: A sent at 0 reaches the scheduler at 0.25, done at 1.25; B sent at
    0.5 reaches it at 0.75, during A's step (0.25 -> 1.25), and prefills 1.25 -> 2.25.
    Arrivals stay the sends."""
    overheads = ServingOverheads(frontend_s=0.25)
    result = serve([req(0, 0.0), req(1, 0.5)], overheads)
    assert times(result) == [(0.0, 1.25), (0.5, 2.25)]
    assert [r.queue_ms for r in result.records] == [250.0, 750.0]


def test_open_loop_tokenizers_on_the_stretched_clock():
    """One tokenizer at 0.125 s a prompt token, frontend 0.25 s, time_scale 2. A (8 tokens)
    sent at 0 -> tokenised 0 -> 1, scheduler 1.25, done 2.25. B (8 tokens) sent at
    1 x 2 = 2: tokenised 2 -> 3, scheduler 3.25, done 4.25. C (8 tokens) sent at 1.5 x 2
    = 3, while B still tokenises: 3 -> 4, scheduler 4.25, done 5.25."""
    overheads = ServingOverheads(frontend_s=0.25, frontend_s_per_prompt_token=0.125)
    result = serve([req(0, 0.0, input_tokens=8), req(1, 1.0, input_tokens=8),
                    req(2, 1.5, input_tokens=8)], overheads, time_scale=2.0)
    assert times(result) == [(0.0, 2.25), (2.0, 4.25), (3.0, 5.25)]


# ------------------------------------------------------------------ the closed loop


def test_closed_loop_release_goes_through_the_frontend_time():
    """One user, frontend 0.25 s: A released at 0, scheduled 0.25, done 1.25 (seen then);
    B released at 1.25, scheduled 1.5, done 2.5."""
    overheads = ServingOverheads(frontend_s=0.25)
    result = serve([req(0, 5.0), req(1, 5.0)], overheads, clients=Concurrency(1))
    assert times(result) == [(0.0, 1.25), (1.25, 2.5)]
    assert [r.queue_ms for r in result.records] == [250.0, 250.0]


def test_closed_loop_release_goes_through_the_tokenizer():
    """One user, one tokenizer at 0.01 s a prompt token, frontend 0.25 s: A (100 tokens)
    released at 0, tokenised 0 -> 1, scheduled 1.25, done 2.25; B (50 tokens) released at
    2.25, tokenised 2.25 -> 2.75, scheduled 3.0, done 4.0."""
    overheads = ServingOverheads(frontend_s=0.25, frontend_s_per_prompt_token=0.01)
    result = serve([req(0, 0.0, input_tokens=100), req(1, 0.0, input_tokens=50)], overheads,
                   clients=Concurrency(1))
    got = times(result)
    assert got[0] == (0.0, pytest.approx(2.25))
    assert got[1][0] == pytest.approx(2.25) and got[1][1] == pytest.approx(4.0)
    assert [r.queue_ms for r in result.records] == [pytest.approx(1250), pytest.approx(750)]


class LaterCall:
    """A closed loop that releases A at 0 and, when A is seen finished at t, asks for
    B's release through `call_at(t + delay)` (a ClientRun used after t = 0)."""

    def __init__(self, delay_s):
        self.delay_s = delay_s

    def start(self, run, requests):
        self.run = run
        self.requests = list(requests)
        run.release(self.requests[0], 0.0)

    def finished(self, state, seen_s):
        run = self.run
        if state.request.request_id == 0:
            run.call_at(seen_s + self.delay_s,
                        lambda: run.release(self.requests[1], run.now))
        else:
            run.arrivals_over()


def test_call_at_after_the_start_runs_at_its_time():
    """A (2 tokens) done at 2; B asked for at 2 + 3 = 5, done at 6."""
    result = serve([req(0, 0.0, 2), req(1, 0.0)], clients=LaterCall(3.0))
    assert times(result) == [(0.0, 2.0), (5.0, 6.0)]
    assert result.duration_s == 6.0


# ------------------------------------------------------------------ progress and blocks


@pytest.mark.parametrize("count, told", [(5, [2, 2, 1]), (4, [2, 2, 0]), (1, [1])])
def test_progress_every_two_then_the_rest(count, told):
    progress = []
    serve([req(k, float(k)) for k in range(count)], on_progress=progress.append,
          progress_every=2)
    assert progress == told


class CountingColumns(RequestColumns):
    """Columns that note the indices of every `take`."""

    def __init__(self, columns, takes):
        super().__init__(columns.request_ids, columns.arrival_s, columns.input_tokens,
                         columns.output_tokens, columns.page_size_tokens, columns.page_start,
                         columns.page_ids)
        self.takes = takes

    def take(self, indices):
        self.takes.append(np.asarray(indices).tolist())
        return super().take(indices)


TRACE = [req(k, 0.5 * k, 1 + k % 3) for k in range(5)]


@pytest.mark.parametrize("closed", [False, True])
def test_columns_are_read_a_block_at_a_time(monkeypatch, closed):
    """Blocks of 2: five requests as columns are taken as [0, 1], [2, 3], [4]; the run is
    the same as from the list. Two requests (one block's worth) are read whole."""
    expected = serve(TRACE, clients=Concurrency(2) if closed else None)
    monkeypatch.setattr(timed, "BLOCK_REQUESTS", 2)
    takes = []
    result = serve(CountingColumns(as_columns(TRACE), takes),
                   clients=Concurrency(2) if closed else None)
    assert takes == [[0, 1], [2, 3], [4]]
    assert times(result) == times(expected)
    takes.clear()
    short = serve(CountingColumns(as_columns(TRACE[:2]), takes),
                  clients=Concurrency(2) if closed else None)
    assert takes == []
    assert times(short) == times(serve(TRACE[:2], clients=Concurrency(2) if closed else None))


def test_a_long_list_is_read_as_it_is(monkeypatch):
    """A plain sequence longer than a block has no `take`: it is iterated."""
    monkeypatch.setattr(timed, "BLOCK_REQUESTS", 2)
    result = serve(TRACE)
    assert [r.request_id for r in result.records] == [0, 1, 2, 3, 4]
    result = serve(iter(TRACE))
    assert len(result.records) == 5


# ------------------------------------------------------------------ same-time sends


class First:
    """A router that sends every request to the first replica."""

    def route(self, request, replicas, now):
        return 0


def test_requests_sent_together_share_a_step():
    """A and B both sent at 1 (no frontend) reach the idle replica at once: one prefill
    step 1 -> 2 for both. With a frontend of 0.25 s, both at 1.25, done at 2.25."""
    assert times(serve([req(0, 1.0), req(1, 1.0)])) == [(1.0, 2.0), (1.0, 2.0)]
    overheads = ServingOverheads(frontend_s=0.25)
    assert times(serve([req(0, 1.0), req(1, 1.0)], overheads)) == [(1.0, 2.25)] * 2


def test_requests_tokenised_together_share_a_step():
    """Two replicas, so two tokenizers; both requests go to replica 0. A and B (8 tokens
    at 0.125 s each) sent at 0 are tokenised side by side, 0 -> 1, both reach the scheduler
    at 1.25 and share a step: done at 2.25."""
    overheads = ServingOverheads(frontend_s=0.25, frontend_s_per_prompt_token=0.125)
    fleet = Fleet([lru(1000), lru(1000)], Ticks(overheads), ContinuousBatching(8192, 256),
                  First())
    result = replay_timed([req(0, 0.0, input_tokens=8), req(1, 0.0, input_tokens=8)], fleet,
                          Sampling(check_invariants=True))
    assert times(result) == [(0.0, 2.25), (0.0, 2.25)]
    assert [r.replica for r in result.records] == [0, 0]


# ------------------------------------------------------------------ what the client sees


def test_closed_loop_client_sees_a_completion_after_the_emission_time():
    """Emission 0.5 s: A's token at 1 reaches the client at 1.5 (its record's finish), when
    B is released; B's token at 2.5 is seen at 3."""
    overheads = ServingOverheads(emission_s=0.5)
    result = serve([req(0, 0.0), req(1, 0.0)], overheads, clients=Concurrency(1))
    assert times(result) == [(0.0, 1.5), (1.5, 3.0)]


def test_closed_loop_client_sees_a_refusal_at_once():
    """Emission 0.5 s, capacity 1,000 tokens: A (2,000 tokens) is refused on arrival at 0,
    seen at 0 (no token to emit), so B is released at 0 and done at 1, seen at 1.5."""
    overheads = ServingOverheads(emission_s=0.5)
    big = Request(0, 0.0, 2000, 1, tuple(range(1, 501)), 4)
    result = serve([big, req(1, 0.0), req(2, 0.0)], overheads, clients=Concurrency(1))
    assert [r.status for r in result.records] == ["rejected", "completed", "completed"]
    assert [r.arrival_s for r in result.records] == [0.0, 0.0, 1.5]


# ------------------------------------------------------------------ the result


def test_records_in_request_id_order_and_replica_figures():
    """One replica of 1,000 tokens. A (pages 1, 2: 8 tokens, 3 out) at 0: prefill 0 -> 1,
    decode 1 -> 3 (one run). B (pages 1, 2, 3: 12 tokens, 1 out) at 0.5 joins at 1, hitting
    A's 8 tokens, and finishes first, at 2; records stay in id order. Queried 8 + 12 = 20
    tokens, hit 8; no preemption, nothing evicted."""
    a = Request(0, 0.0, 8, 3, (1, 2), 4)
    b = Request(1, 0.5, 12, 1, (1, 2, 3), 4)
    result = serve([a, b])
    assert [r.request_id for r in result.records] == [0, 1]
    assert result.records[1].finish_s < result.records[0].finish_s
    (figures,) = result.replicas
    assert (figures.replica, figures.capacity_tokens) == (0, 1000)
    assert (figures.query_tokens, figures.hit_tokens, figures.preemptions) == (20, 8, 0)
    assert figures.num_steps >= 2 and figures.busy_s == result.duration_s == 3.0
    assert figures.counters.evicted_pages == 0
    assert result.num_events == figures.num_steps + 2
    assert result.pool_links == [] and result.transfer_links == []
    assert result.num_prefill_replicas is None
    assert sorted(result.itl_segments) == [(1.0, 1), (1.0, 1)]


def test_states_only_when_recorded():
    assert serve([req(0, 0.0)], record_state=False).states is None
    states = serve([req(0, 0.0)]).states
    assert states["time_s"].tolist()[0] == 0.0 and set(states["replica"].tolist()) == {0}


def rows_at(result, time_s):
    """The replicas with a state row at `time_s`."""
    states = result.states
    return sorted({int(r) for t, r in zip(states["time_s"], states["replica"], strict=True)
                   if t == time_s})


@pytest.mark.parametrize("router, ttl, at_send", [
    ("round_robin", None, [1]), ("round_robin", 30.0, [0, 1]), ("prefix_aware", 30.0, [0])])
def test_a_send_records_every_replica_only_for_a_live_router_over_ttls(router, ttl, at_send):
    """Two replicas; A at 0, B at 10.5 (nothing else happens then but B's send and its
    replica's step). A router reading TTL caches live (round robin: no index) may expire
    pages on every replica it looks at, so the send records both; prefix_aware follows
    the caches through its index, and without TTLs nothing changes elsewhere: only the
    chosen replica (round robin: 1; prefix_aware: 0, both idle and empty for B)."""
    from prefixsim.cache import TTLRule

    rule = None if ttl is None else TTLRule(ttl)
    fleet = Fleet([lru(1000, rule), lru(1000, rule)], Ticks(), ContinuousBatching(8192, 256),
                  ROUTERS.build(router))
    result = replay_timed([req(0, 0.0), req(1, 10.5)], fleet, Sampling(check_invariants=True))
    assert rows_at(result, 10.5) == at_send


def test_disaggregation_needs_one_cache_per_replica():
    from prefixsim.engine.disaggregation import Disaggregation

    fleet = Fleet([lru(100)] * 3, Ticks(), ContinuousBatching(64, 8),
                  ROUTERS.build("round_robin"), kv_bytes_per_token=1,
                  disaggregation=Disaggregation(1, 1))
    with pytest.raises(ValueError, match="^disaggregation needs one cache per prefill and "
                                         "decode replica$"):
        replay_timed([req(0, 0.0)], fleet)


def test_disaggregated_tokenizers_are_the_prefill_replicas():
    """One prefill and one decode replica: one tokenizer (the prefill replica's API
    server). A and B (100 tokens at 0.01 s each) sent at 0: A tokenised 0 -> 1, at the
    scheduler 1.25; B waits, 1 -> 2, at 2.25, after A's prefill step 1.25 -> 2.25 began:
    B's queue time is 2.25 s (two tokenizers would have had both there at 1.25)."""
    from prefixsim.engine.disaggregation import Disaggregation

    overheads = ServingOverheads(frontend_s=0.25, frontend_s_per_prompt_token=0.01)
    fleet = Fleet([lru(1000), lru(1000)], Ticks(overheads), ContinuousBatching(8192, 256),
                  ROUTERS.build("round_robin"), kv_bytes_per_token=1,
                  disaggregation=Disaggregation(1, 1, link_bytes_s=1e6, link_latency_s=0.0))
    result = replay_timed([req(0, 0.0, 2, input_tokens=100), req(1, 0.0, 2, input_tokens=100)],
                          fleet, Sampling(check_invariants=True))
    assert [r.queue_ms for r in result.records] == [pytest.approx(1250), pytest.approx(2250)]
    assert result.num_prefill_replicas == 1
    assert [r.replica for r in result.records] == [0, 0]


# ------------------------------------------------------------------ lower tiers for the router


def test_prefix_aware_follows_each_replicas_host_tier():
    """Two replicas of 16 tokens, each over a host tier; prefix_aware with load weight 4.
    D (pages 21, 22) at 0 goes to replica 0 (a tie), so A (pages 1, 2) at 0.5 goes to the
    idle replica 1; C (pages 1, 5, 6, 4 out) at 3 follows page 1 to replica 1, where it
    pushes page 2 down to the host tier. B (pages 1, 2, 3) at 5: replica 1 holds page 1 in
    HBM and page 2 in its host tier, but C still decodes there. With the host tier not
    credited, 4 tokens do not outweigh 4 x C's load: B goes to the idle replica 0; credited
    5 to 1, replica 1 wins and B loads its 4 host tokens."""
    from prefixsim.cache.tiers import TierSpec, TierStack

    def route_b(host_weight):
        caches = [lru(16), lru(16)]
        tiers = [TierStack(cache, [TierSpec("host", 1000, 1e6)]) for cache in caches]
        router = ROUTERS.build("prefix_aware", tier_weights={"host": host_weight},
                               load_weight=4.0)
        requests = [Request(0, 0.0, 8, 2, (21, 22), 4), Request(1, 0.5, 8, 1, (1, 2), 4),
                    Request(2, 3.0, 12, 4, (1, 5, 6), 4), Request(3, 5.0, 12, 1, (1, 2, 3), 4)]
        result = replay_timed(requests, Fleet(caches, Ticks(), ContinuousBatching(64, 8),
                                              router, tiers=tiers, kv_bytes_per_token=1),
                              Sampling(check_invariants=True))
        assert [r.replica for r in result.records][:3] == [0, 1, 1]
        return result.records[3]

    plain = route_b(0.0)
    assert (plain.replica, plain.cached_tokens_host) == (0, 0)
    credited = route_b(5.0)
    assert (credited.replica, credited.cached_tokens, credited.cached_tokens_host) == (1, 8, 4)


@pytest.mark.parametrize(("pool_weight", "chosen"), [(0.8, 1), (0.0, 0)])
def test_prefix_aware_follows_the_pool(pool_weight, chosen):
    """Two replicas, a write-through pool. A (pages 1-4, 15 out) goes to replica 0, which
    writes its pages to the pool; B (pages 1-5) at 4.5: replica 0 holds 16 tokens but A
    still has 11 to generate (16 - 11 = 5); replica 1 holds none, the pool 16 (credited
    0.8: 12.8 > 5, replica 1; not credited: replica 0)."""
    from prefixsim.cache.pool import PoolSpec, SharedPool

    pool = SharedPool(lru(None), PoolSpec(1000.0, 1000.0, write_through=True), lambda: 0.0)
    router = ROUTERS.build("prefix_aware", tier_weights={"pool": pool_weight})
    result = replay_timed([Request(0, 0.0, 16, 15, (1, 2, 3, 4), 4),
                           Request(1, 4.5, 20, 1, (1, 2, 3, 4, 5), 4)],
                          Fleet([lru(100), lru(100)], Ticks(), ContinuousBatching(64, 8),
                                router, pool=pool, kv_bytes_per_token=1),
                          Sampling(check_invariants=True, max_run_steps=1))
    assert [r.replica for r in result.records] == [0, chosen]
    assert len(result.pool_links) == 2 and result.pool_links[0].writes.bytes >= 16
    assert result.pool_links[1].reads.bytes == (16 if chosen else 0)


def test_a_later_release_sent_earlier_is_tokenised_first():
    """Sessions a (turns at 0 and 2 in the trace: think 2 s) and b (one turn at 50); one
    tokenizer at 0.01 s a prompt token, 100-token prompts. At the start b's turn is
    released for 50 (tokenised 50 -> 51, first token 52). a's first turn, tokenised
    0 -> 1, has its token at 2; its second turn is released then for 2 + 2 = 4, before
    b's send: tokenised 4 -> 5, first token at 6 (the queue takes requests in the order
    they are sent, not released: it does not wait behind b's tokenising)."""
    from prefixsim.engine.clients import SessionClients
    from prefixsim.trace.sessions import infer_sessions

    requests = [Request(0, 0.0, 100, 1, (1,), 100, "a"), Request(1, 50.0, 100, 1, (2,), 100, "b"),
                Request(2, 2.0, 100, 1, (3,), 100, "a")]
    overheads = ServingOverheads(frontend_s_per_prompt_token=0.01)
    result = serve(requests, overheads, clients=SessionClients(requests, infer_sessions(requests)))
    assert [r.arrival_s for r in result.records] == [0.0, 50.0, 4.0]
    assert [r.first_token_s for r in result.records] == pytest.approx([2.0, 52.0, 6.0])
    assert [r.queue_ms for r in result.records] == pytest.approx([1000.0] * 3)


@pytest.mark.parametrize("per_token_s", [0.0, 0.01])
def test_an_empty_trace_ends_at_once(per_token_s):
    """No request, with or without tokenizers: the run ends at 0 with nothing in it."""
    overheads = ServingOverheads(frontend_s=0.25, frontend_s_per_prompt_token=per_token_s)
    result = serve([], overheads)
    assert (len(result.records), result.duration_s, result.num_events) == (0, 0.0, 0)


def test_tokenizers_take_in_by_the_stretched_arrival():
    """Two replicas, so two tokenizers, at 0.1 s a prompt token; time_scale 0.5. A (100
    tokens) sent at 0 is tokenised 0 -> 10. B (5 tokens) at 6 x 0.5 = 3, before A's
    hand-over, takes the other tokenizer, 3 -> 3.5, and is sent first (to replica 0 by
    round robin): prefill 3.5 -> 4.5. A goes to replica 1 at 10, done at 11."""
    overheads = ServingOverheads(frontend_s_per_prompt_token=0.1)
    result = serve([Request(0, 0.0, 100, 1, (1,), 100), Request(1, 6.0, 5, 1, (2,), 5)],
                   overheads, replicas=2, time_scale=0.5)
    assert [(r.replica, r.arrival_s, r.finish_s) for r in result.records] == [
        (1, 0.0, 11.0), (0, 3.0, 4.5)]


@pytest.mark.parametrize(("rules", "cached"), [
    (None, [0, 8, 12]), ({"min_cacheable_tokens": 10}, [0, 0, 12]), ({"enabled": False}, [0] * 3)])
def test_each_request_gets_its_cache_rule(rules, cached):
    """Pages 1-2, 1-3, 1-4 (8, 12, 16 tokens) at 0, 5 and 10 on one replica: each hits
    the one before. A minimum of 10 cacheable tokens leaves the first out of the cache
    (the second misses, the third hits the second); caching off, none hits."""
    from prefixsim.cache.classes import CacheRules

    requests = [Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 5.0, 12, 1, (1, 2, 3), 4),
                Request(2, 10.0, 16, 1, (1, 2, 3, 4), 4)]
    fleet = Fleet([lru(100)], Ticks(), ContinuousBatching(64, 8), ROUTERS.build("round_robin"),
                  rules=None if rules is None else CacheRules(**rules))
    result = replay_timed(requests, fleet, Sampling(check_invariants=True))
    assert [r.cached_tokens for r in result.records] == cached


@pytest.mark.parametrize(("ttl", "local"), [(100.0, True), (10.0, False)])
def test_selective_disaggregation_reads_the_decode_cache_at_the_send(ttl, local):
    """1P1D, prompts whose uncached part is at most 4 tokens prefill on the decode replica;
    TTL caches. A (pages 1, 2; 8 tokens) at 0 prefills on replica 0 and its KV lands on the
    decode replica 1 (last used at 11.5). B (pages 1, 2, 3) at 50: with a TTL of 100 s,
    replica 1 still holds 8 of its 12 tokens, so B prefills there (8 cached); with 10 s
    those pages expired at 21.5: B goes to the prefill replica, nothing cached."""
    from prefixsim.cache import TTLRule
    from prefixsim.engine.disaggregation import Disaggregation

    split = Disaggregation(1, 1, link_bytes_s=1000.0, link_latency_s=0.5,
                           local_prefill_max_tokens=4)
    fleet = Fleet([lru(100, TTLRule(ttl)) for _ in range(2)], Ticks(),
                  ContinuousBatching(64, 8), ROUTERS.build("round_robin"),
                  kv_bytes_per_token=1000, disaggregation=split)
    result = replay_timed([Request(0, 0.0, 8, 2, (1, 2), 4),
                           Request(1, 50.0, 12, 1, (1, 2, 3), 4)], fleet,
                          Sampling(check_invariants=True, max_run_steps=1))
    a, b = result.records
    assert (a.replica, a.decode_replica, a.finish_s) == (0, 1, 11.5)
    assert (b.replica, b.cached_tokens) == ((1, 8) if local else (0, 0))


# ------------------------------------------------------------------ what the routers are bound to


@pytest.mark.parametrize(("delay_s", "chosen"), [(0.0, 1), (1000.0, 0)])
def test_prefix_aware_index_runs_on_the_engine_clock(delay_s, chosen):
    """Two replicas. Z (10 out) at 0 goes to replica 0, so A (pages 1, 2) at 0.5 goes to
    the idle replica 1. B (pages 1, 2, 3) at 20, both idle: replica 1 holds 8 of its
    tokens and wins; with the caches' events reaching the router 1,000 s late (stamped by
    the engine's clock), it has seen none of them: a tie, replica 0."""
    router = ROUTERS.build("prefix_aware", event_delay_s=delay_s)
    fleet = Fleet([lru(100), lru(100)], Ticks(), ContinuousBatching(64, 8), router)
    result = replay_timed([Request(0, 0.0, 4, 10, (9,), 4), Request(1, 0.5, 8, 1, (1, 2), 4),
                           Request(2, 20.0, 12, 1, (1, 2, 3), 4)], fleet,
                          Sampling(check_invariants=True))
    assert [r.replica for r in result.records] == [0, 1, chosen]


@pytest.mark.parametrize(("delay_s", "chosen"), [(0.0, 2), (1000.0, 1)])
def test_the_decode_router_index_follows_the_decode_caches(delay_s, chosen):
    """1P2D, decode router prefix_aware, KV links of 1,000 B/s (1 byte a token). Z (6 out)
    decodes on replica 1, so A (pages 1, 2) decodes on the idle replica 2, which then
    holds A's pages. B (pages 1, 2, 3) at 20, both decode replicas idle: replica 2 holds
    8 of its tokens and wins; with a feed 1,000 s late the router has seen nothing: a
    tie, replica 1."""
    from prefixsim.engine.disaggregation import Disaggregation

    split = Disaggregation(1, 2, link_bytes_s=1000.0, link_latency_s=0.0)
    fleet = Fleet([lru(100) for _ in range(3)], Ticks(), ContinuousBatching(64, 8),
                  ROUTERS.build("round_robin"), kv_bytes_per_token=1, disaggregation=split,
                  decode_router=ROUTERS.build("prefix_aware", event_delay_s=delay_s))
    result = replay_timed([Request(0, 0.0, 8, 6, (21, 22), 4), Request(1, 0.5, 8, 2, (1, 2), 4),
                           Request(2, 20.0, 12, 2, (1, 2, 3), 4)], fleet,
                          Sampling(check_invariants=True, max_run_steps=1))
    assert [r.decode_replica for r in result.records] == [1, 2, chosen]


class IndexOnly:
    """An indexed router with no lower tiers to follow: it counts its bindings and sends
    every request to the first replica."""

    def __init__(self):
        self.bound = []

    def bind_caches(self, caches, clock):
        self.bound.append((len(caches), clock()))

    def route(self, request, replicas, now):
        return 0


def test_an_indexed_router_without_lower_tiers_is_bound_to_the_caches():
    router = IndexOnly()
    fleet = Fleet([lru(100), lru(100)], Ticks(), ContinuousBatching(64, 8), router)
    result = replay_timed([req(0, 0.0), req(1, 1.5)], fleet, Sampling(check_invariants=True))
    assert router.bound == [(2, 0.0)]
    assert [r.replica for r in result.records] == [0, 0]


class SlowLinks(Ticks):
    """Ticks whose transfers take twice bytes / bandwidth."""

    def transfer_time_s(self, num_bytes, bandwidth_bytes_s):
        return 2 * num_bytes / bandwidth_bytes_s


def test_kv_transfers_are_timed_by_the_cost_model():
    """1P1D, link 1,000 B/s and 0.5 s latency, 1,000 B a token: A (8 tokens, 3 out)
    prefills 0 -> 1; its 8,000 B take 0.5 + 2 x 8 = 16.5 s by the cost model's rule,
    landing at 17.5; tokens at 18.5, 19.5, 20.5."""
    from prefixsim.engine.disaggregation import Disaggregation

    split = Disaggregation(1, 1, link_bytes_s=1000.0, link_latency_s=0.5)
    fleet = Fleet([lru(100), lru(100)], SlowLinks(), ContinuousBatching(64, 8),
                  ROUTERS.build("round_robin"), kv_bytes_per_token=1000, disaggregation=split)
    result = replay_timed([Request(0, 0.0, 8, 3, (1, 2), 4)], fleet,
                          Sampling(check_invariants=True, max_run_steps=1))
    (a,) = result.records
    assert (a.ttft_ms, a.e2el_ms) == (18500.0, 20500.0)


def test_pool_pages_are_served_by_their_writer():
    """Two replicas, round robin, a write-through pool. A (pages 1, 2) on replica 0, B
    (pages 5, 6) on replica 1: each writes its pages, as their holder. C (pages 5, 6, 7)
    at 10 on replica 0 reads B's 8 tokens from the pool: served by replica 1's link."""
    from prefixsim.cache.pool import PoolSpec, SharedPool

    pool = SharedPool(lru(None), PoolSpec(1000.0, 1000.0, write_through=True), lambda: 0.0)
    fleet = Fleet([lru(100), lru(100)], Ticks(), ContinuousBatching(64, 8),
                  ROUTERS.build("round_robin"), pool=pool, kv_bytes_per_token=1)
    result = replay_timed([Request(0, 0.0, 8, 1, (1, 2), 4), Request(1, 0.0, 8, 1, (5, 6), 4),
                           Request(2, 10.0, 12, 1, (5, 6, 7), 4)], fleet,
                          Sampling(check_invariants=True))
    c = result.records[2]
    assert (c.replica, c.cached_tokens_pool) == (0, 8)
    assert [link.serves.bytes for link in result.pool_links] == [0, 8]


def test_a_run_ends_with_its_last_request_not_a_later_stage():
    """Stages (1 user, 10 s) twice, two 1-token requests: released at 0 and 1; at 2 the
    trace is spent. The run ends at 2, though the second stage's start was due at 10."""
    result = serve([req(0, 0.0), req(1, 0.0)],
                   clients=Concurrency(1, stages=[(1, 10.0), (1, 10.0)]))
    assert times(result) == [(0.0, 1.0), (1.0, 2.0)]
    assert result.duration_s == 2.0
