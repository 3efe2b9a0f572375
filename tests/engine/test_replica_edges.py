"""engine/replica.py at its edges, worked by hand: the capacity check at submission, when an
arrival wakes a decode run (and when it must not), the router's load view mid-run
(`outstanding_tokens`, `load_bounds`, `least_load_at`), deferred evictions caught up at
exactly their due time, and decode runs cut at a step boundary.

Every run uses `Ticks` (each step, prefill or decode, takes 1 s; a run of n decode steps
n s), P = 4, LRU caches and the engine's invariant checks after every step. "t=a->b" is one
step. A probe request (L=4, one page of its own, 1 output) goes to a second replica, so it
only looks at replica 0 through the router.
"""

import pytest
from fakes import Ticks, lru

from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

P = 4


def req(rid, arrival, input_tokens, output_tokens, ids):
    assert len(ids) == -(-input_tokens // P)
    return Request(rid, arrival, input_tokens, output_tokens, tuple(ids), P)


def probes(first_id, times):
    return [req(first_id + i, t, 4, 1, [1000 + i]) for i, t in enumerate(times)]


class Growing(Ticks):
    """`Ticks` promising decode steps that never get shorter (each is 1 s), so the router's
    least load reads the clock's bound past its cursor."""

    decode_steps_never_shorten = True


class Watch:
    """Sends the first `served` requests to replica 0 and the rest to replica 1, and calls
    `look(replica 0, now)` at each arrival, writing down what it returns."""

    def __init__(self, served, look) -> None:
        self.served, self.look = served, look
        self.seen = []

    def route(self, request, replicas, now) -> int:
        self.seen.append((now, self.look(replicas[0])))
        return 0 if request.request_id < self.served else 1


def serve(requests, capacity=100, seqs=256, budget=8192, router=None, replicas=1,
          max_run_steps=None, cost=None):
    caches = [lru(capacity) for _ in range(replicas)]
    result = replay_timed(requests, Fleet(caches, cost or Ticks(),
                                          ContinuousBatching(budget, seqs),
                                          router or ROUTERS.build("round_robin")),
                          Sampling(check_invariants=True, max_run_steps=max_run_steps))
    return result, caches


# ------------------------------------------------------------------ submission
def test_a_request_filling_the_capacity_exactly_is_served_one_more_rejected():
    """Capacity 12, two replicas (round robin). A (t=0, L=8, 4 outputs: 8 + 4 = 12) fits on
    replica 0: prefill t=0->1, decodes t=1->4. B (t=0, L=8, 5 outputs: 13 > 12) is rejected
    by replica 1 at once, though its prompt alone (8) and its prompt less its outputs fit;
    the record names the replica that refused it."""
    result, caches = serve([req(0, 0.0, 8, 4, [1, 2]), req(1, 0.0, 8, 5, [3, 4])],
                           capacity=12, replicas=2)
    a, b = result.records
    assert (a.status, a.replica, a.finish_s, a.output_tokens) == ("completed", 0, 4.0, 4)
    assert (b.status, b.replica) == ("rejected", 1)
    assert [f.num_steps for f in result.replicas] == [2, 0]
    assert caches[1].counters.inserted_pages == 0


# --------------------------------------------------------------------- wake-ups
def test_an_arrival_without_a_free_sequence_slot_does_not_cut_the_run():
    """max_num_seqs 1. A (t=0, L=4, 10 outputs): prefill t=0->1, one decode run t=1->10.
    B (t=3.5) could not join (no free slot), so the run is not woken: B prefills t=10->11.
    3 steps; stepping one by one takes 1 + 9 + 1."""
    requests = [req(0, 0.0, 4, 10, [1]), req(1, 3.5, 4, 1, [2])]
    for steps, num_steps in ((None, 3), (1, 11)):
        result, _ = serve(requests, seqs=1, max_run_steps=steps)
        assert [r.finish_s for r in result.records] == [10.0, 11.0]
        assert result.replicas[0].num_steps == num_steps
        assert result.replicas[0].busy_s == 11.0


def test_an_arrival_behind_a_waiting_head_does_not_cut_the_run():
    """Capacity 20, max_num_seqs 2. A (t=0, L=4, 10 outputs): prefill t=0->1; its decode run
    from t=1 reserves its 9 steps (free 20 - 4 - 9 = 7). B (t=2.5, L=16) wakes it (a free
    slot, an empty queue): the run ends at t=3 after 2 steps (7 unused tokens freed: free
    14), B does not fit (16 + 1 > 14, page 1 locked) and waits; A's next run t=3->10 (7
    steps, waiting: no further than free memory, 14 >= 7). C (t=5.5, L=4) queues behind B:
    no wake-up. A ends at t=10; B and C prefill together t=10->11 (16 + 4 = 20)."""
    requests = [req(0, 0.0, 4, 10, [1]), req(1, 2.5, 16, 1, [2, 3, 4, 5]),
                req(2, 5.5, 4, 1, [6])]
    result, cache = serve(requests, capacity=20, seqs=2)
    assert [r.finish_s for r in result.records] == [10.0, 11.0, 11.0]
    assert [r.queue_ms for r in result.records] == [0.0, 7500.0, 4500.0]
    assert result.replicas[0].num_steps == 4
    assert result.replicas[0].busy_s == 11.0
    assert cache[0].counters.evicted_pages == 1  # page 1, for B and C's 20 tokens


def test_two_arrivals_at_one_instant_wake_the_run_once():
    """A (t=0, L=4, 10 outputs) decodes from t=1. B and C arrive together at t=3.5: B wakes
    the run, C finds it woken already. The run ends at t=4 (3 steps); B and C prefill with
    A's decode t=4->5; A decodes on alone t=5->10."""
    requests = [req(0, 0.0, 4, 10, [1]), req(1, 3.5, 4, 1, [2]), req(2, 3.5, 4, 1, [3])]
    result, _ = serve(requests)
    assert [r.finish_s for r in result.records] == [10.0, 5.0, 5.0]
    assert [r.first_token_s for r in result.records] == [1.0, 5.0, 5.0]
    assert result.replicas[0].num_steps == 4


# ------------------------------------------------------------------- load view
def load_view(replica):
    """The bounds first (they read the clock's cursor as the last exact reading left it),
    then the exact load."""
    return replica.load_bounds(), replica.least_load_at(replica.env.now), replica.outstanding_tokens


@pytest.mark.parametrize(("cost", "least_at_5_5"), [(Ticks(), 0), (Growing(), 8)])
def test_the_load_view_mid_run_by_hand(cost, least_at_5_5):
    """A and B (t=0, L=4, 10 outputs each) prefill together t=0->1 and decode t=1->10 in one
    run of 9 steps of 2 sequences: 18 tokens outstanding at its start, 2 fewer per step.
    Probes at t=0.5 (no run: all three equal, 20 with the prefills' tokens), then mid-run:
      t=2.5: the clock never read: bounds (18 - 18, 18), least = the run's end (0);
             exact 1 step done (16).
      t=2.7: inside the step the clock was read at: bounds (0, 16), least 16, exact 16.
      t=5.5: past the cursor (1 done, the next ending at 2 s into the run): least is the
             run's end (0) unless steps never shorten: min(9, 1 + 2 + (4.5 - 2) // 1) = 5
             steps, 18 - 10 = 8; exact 4 steps (10).
      t=5.7: inside the step read at t=5.5: bounds (0, 10), least 10, exact 10.
      t=10.5: A and B done, nothing outstanding."""
    router = Watch(2, load_view)
    serve([req(0, 0.0, 4, 10, [1]), req(1, 0.0, 4, 10, [2]),
           *probes(2, [0.5, 2.5, 2.7, 5.5, 5.7, 10.5])], router=router, replicas=2, cost=cost)
    assert router.seen[2:] == [
        (0.5, ((28, 28), 28, 28)),
        (2.5, ((0, 18), 0, 16)),
        (2.7, ((0, 16), 16, 16)),
        (5.5, ((0, 16), least_at_5_5, 10)),
        (5.7, ((0, 10), 10, 10)),
        (10.5, ((0, 0), 0, 0)),
    ]


# ------------------------------------------------------------- deferred evictions
def cache_view(replica):
    cache = replica.cache
    return (sorted(replica.cached_page_ids()), cache.counters.evicted_pages,
            cache.reserved_tokens)


def test_deferred_evictions_caught_up_at_exactly_their_due_time():
    """Capacity 20. A (t=0, L=8, pages 1, 2, 1 output): done at t=1, unlocked. B (t=1, L=4,
    page 3, 12 outputs): prefill t=1->2, then one run of 11 decode steps t=2->13 whose free
    8 tokens cover steps 1-8 (reserved at its start); step 9 starts at t=10 and evicts page
    2 (4 tokens: steps 9-11). A router reading replica 0 sees (pages, evictions, reserved):
      t=9.5: [1, 2, 3], 0, 8;  t=10.0: due, caught up first: [1, 3], 1, 9;
      t=10.5: 9;  t=11.0: due: 10;  t=11.5: 10;  t=12.5: the last step's: 11;
      t=13.5: B done, its 11 decode tokens freed: 0.
    Each catch-up that reserves records replica 0's state (the probes' own rows are replica
    1's): (time, resident tokens, private tokens, evictions) at the run's start, each
    catch-up and the run's end."""
    router = Watch(2, cache_view)
    result, caches = serve([req(0, 0.0, 8, 1, [1, 2]), req(1, 1.0, 4, 12, [3]),
                            *probes(2, [9.5, 10.0, 10.5, 11.0, 11.5, 12.5, 13.5])],
                           capacity=20, router=router, replicas=2)
    assert router.seen[2:] == [
        (9.5, ([1, 2, 3], 0, 8)), (10.0, ([1, 3], 1, 9)), (10.5, ([1, 3], 1, 9)),
        (11.0, ([1, 3], 1, 10)), (11.5, ([1, 3], 1, 10)), (12.5, ([1, 3], 1, 11)),
        (13.5, ([1, 3], 1, 0)),
    ]
    assert [r.finish_s for r in result.records][:2] == [1.0, 13.0]
    assert result.replicas[0].num_steps == 3
    states = result.states
    rows = [(t, cached, private, evictions) for t, replica, cached, private, evictions in zip(
        *(states[k].tolist() for k in ("time_s", "replica", "cached_tokens", "private_tokens",
                                       "evictions")), strict=True) if replica == 0 and t >= 2]
    assert rows == [(2.0, 12, 8, 0), (10.0, 8, 9, 1), (11.0, 8, 10, 1), (12.5, 8, 11, 1),
                    (13.0, 8, 0, 1)]


def test_a_load_ending_with_every_sequence_slot_taken_does_not_cut_the_run():
    """Async host loads (one 4-token page: 4,000 B at 1,600 B/s = 2.5 s), max_num_seqs 2.
    B (t=0, L=4, 10 outputs): prefill t=0->1, decode run from t=1. A (t=2.5, L=8, page 1 in
    host) wakes it: cut at t=3, A admitted and loading t=3->5.5 off the batch, B's run goes
    on. C (t=3.5, L=4, 10 outputs) wakes it (a free slot): cut at t=4, C's prefill with B's
    decode t=4->5, then B and C decode t=5->10 (B's last). A's load ends at t=5.5 with both
    slots taken: no wake-up. At t=10 A's chunk with C's decode t=10->11, C on t=11->14.
    7 steps: B's prefill, 2 cut runs, C's step, the run to t=10, A's step, C's last run."""
    from prefixsim.cache.tiers import TierSpec, TierStack

    cache = lru(64)
    tiers = TierStack(cache, [TierSpec("host", 1000, 1600.0)])
    tiers.tiers[0].put(1, P)
    requests = [req(0, 0.0, 4, 10, [9]), req(1, 2.5, 8, 1, [1, 2]), req(2, 3.5, 4, 10, [5])]
    result = replay_timed(requests, Fleet([cache], Ticks(), ContinuousBatching(64, 2),
                                          ROUTERS.build("round_robin"), tiers=[tiers],
                                          kv_bytes_per_token=1000, tier_load="async"),
                          Sampling(check_invariants=True))
    b, a, c = result.records
    assert (b.finish_s, a.finish_s, c.finish_s) == (10.0, 11.0, 14.0)
    assert a.cached_tokens_host == 4
    assert result.replicas[0].num_steps == 7


# ------------------------------------------------------------------ prefill steps
def test_chunks_emit_a_token_only_at_the_prompts_end_and_decodes_carry_their_context():
    """Token budget 8. A (t=0, L=20, 3 outputs) prefills in chunks of 8, 8 and 4 (only the
    last ends the prompt and samples a token), then decodes at context 21 (t=3->4: every
    decode run timed is that one). B (t=3.5, L=4) wakes the run: its prefill joins A's next
    decode, at context 22 (t=4->5)."""
    seen = []
    requests = [req(0, 0.0, 20, 3, [1, 2, 3, 4, 5]), req(1, 3.5, 4, 1, [6])]
    caches = [lru(100)]
    replay_timed(requests, Fleet(caches, Ticks(probe=lambda kind, what: seen.append(
        (kind, what))), ContinuousBatching(8, 4), ROUTERS.build("round_robin")),
        Sampling(check_invariants=True))
    steps = [([(c.new_tokens, c.cached_tokens, c.emits_token) for c in what.prefills],
              list(what.decode_contexts)) for kind, what in seen if kind == "step"]
    assert steps == [([(8, 0, False)], []), ([(8, 8, False)], []), ([(4, 16, True)], []),
                     ([(4, 0, True)], [22])]
    assert {tuple(what) for kind, what in seen if kind == "decode"} == {(21,)}


def test_a_request_preempted_after_its_first_token_counts_its_stall_as_one_gap():
    """Capacity 16. A (pages 1, 2) and B (pages 3, 4), t=0, L=8, 3 outputs each, prefill
    together t=0->1 (free 0, both locked, 1 token each). At t=1 only one can grow: the
    newest, B, is preempted (1 token generated; pages 3, 4 unlocked). A's decode t=1->2
    evicts page 4 for its token; at t=2 B (now 9 tokens: hit page 3, 5 to compute, plus A's
    token > 3 free) still waits; A's last token t=2->3 frees A. B re-prefills its 5 tokens
    t=3->4 (its 2nd token: one gap of 4 - 1 = 3 s) and decodes its 3rd t=4->5. The ITL
    gaps: A's two decode steps, B's stall, B's decode step."""
    result, _ = serve([req(0, 0.0, 8, 3, [1, 2]), req(1, 0.0, 8, 3, [3, 4])], capacity=16)
    a, b = result.records
    assert (a.finish_s, b.finish_s) == (3.0, 5.0)
    assert (b.preemptions, b.recomputed_tokens, b.first_token_s) == (1, 5, 1.0)
    assert sorted(result.itl_segments) == [(1.0, 1), (1.0, 1), (1.0, 1), (3.0, 1)]


# ------------------------------------------------------------------ invariants
def mid_run():
    """A replica driven by hand (capacity 20, max_num_seqs 1): A (L=8, pages 1, 2, 1 output)
    done at t=1 (pages unlocked); B (L=4, page 3, 10 outputs) and C (L=16) submitted at
    t=1.5: B prefills t=1.5->2.5 and decodes (its run reserving 8 steps), C waits for a
    sequence slot. Stopped at t=3, mid-run, where the checks hold."""
    import simpy

    from prefixsim.engine.replica import Replica
    from prefixsim.engine.request_state import RequestState

    env = simpy.Environment()
    fleet = Fleet([lru(20)], Ticks(), ContinuousBatching(8192, 1), ROUTERS.build("round_robin"))
    finished = []
    replica = Replica(0, env, fleet.caches[0], fleet, Sampling(check_invariants=True),
                      finished.append)
    replica.submit(RequestState(req(0, 0.0, 8, 1, [1, 2]), 0.0))
    env.run(until=1.5)
    b = RequestState(req(1, 1.5, 4, 10, [3]), 1.5)
    c = RequestState(req(2, 1.5, 16, 1, [4, 5, 6, 7]), 1.5)
    replica.submit(b)
    replica.submit(c)
    env.run(until=3.0)
    assert [s.request.request_id for s in finished] == [0]
    assert list(replica.running) == [b] and list(replica.waiting) == [c]
    assert (b.private_tokens, replica.cache.reserved_tokens, replica.cache.free_tokens) == (
        8, 8, 0)
    replica.check_invariants()
    return replica, b, c


def test_the_state_row_is_the_replica_now():
    """`mid_run` at t=3: B running, C waiting; A's pages 1, 2 and B's page 3 resident (12
    tokens), B's decode run's 8 tokens reserved; A's and B's 12 query tokens, no hit, no
    eviction, no preemption: the row the state log keeps (engine/state_log.py's columns)."""
    replica, _, _ = mid_run()
    assert replica.state_row() == (3.0, 0, 1, 1, 12, 8, 12, 0, 0, 0)


def failing_line(corrupt):
    """Corrupt a replica mid-run (`corrupt(replica, b, c)`) and return the message of the
    check that fails (each check has its own; a compiled replica.py has no source lines)."""
    replica, b, c = mid_run()
    corrupt(replica, b, c)
    with pytest.raises(AssertionError) as info:
        replica.check_invariants()
    return str(info.value).splitlines()[0]


def test_checks_name_what_went_out_of_step():
    """Each corruption fails its own check, with its own message."""
    def private(replica, b, c):
        b.private_tokens += 1

    def capacity(replica, b, c):
        replica.capacity_tokens = 8  # below the 12 resident + 8 reserved

    def slots(replica, b, c):
        replica.waiting.remove(c)
        replica.running.append(c)  # two running, one slot

    def unlocked_tip(replica, b, c):
        b.tip = replica.cache.get(2)  # A's last page: resident, unlocked

    def outstanding(replica, b, c):
        replica._change_load(1)

    assert failing_line(private) == "private tokens != cache reservation"
    assert failing_line(capacity) == "negative free memory"
    assert failing_line(slots) == "too many sequences"
    assert failing_line(unlocked_tip) == "running path not locked"
    assert failing_line(outstanding) == "outstanding tokens out of step"


def test_a_waiting_request_holds_no_kv_unless_its_prefix_has_loaded():
    """A waiting request with a tip (or private KV) fails the check; with its first chunk
    loaded (loaded_chunk_tokens > 0) it may hold both."""
    def tip(replica, b, c):
        c.tip = replica.cache.get(1)

    assert failing_line(tip) == "a waiting request holds KV before its prefix has loaded"
    replica, b, c = mid_run()
    c.tip = replica.cache.get(1)
    c.loaded_chunk_tokens = 1
    replica.check_invariants()


def test_a_loading_request_holds_at_least_one_token_of_its_first_chunk():
    """The waiting request moved to `loading` by hand: with loaded_chunk_tokens 1 the checks
    hold, with 0 they fail."""
    def loading(chunk):
        def corrupt(replica, b, c):
            replica.waiting.remove(c)
            replica.loading.append(c)
            c.loaded_chunk_tokens = chunk
        return corrupt

    replica, b, c = mid_run()
    loading(1)(replica, b, c)
    replica.check_invariants()
    assert failing_line(loading(0)) == "a loading request without its first chunk"


class Tenths(Ticks):
    """`Ticks` whose decode steps take 0.1 s (a run of n steps n x 0.1 s)."""

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        return num_steps * 0.1


def test_a_due_time_reached_only_by_rounding_waits_for_the_next_arrival():
    """The scenario above with 0.1 s decode steps: B's run starts at t=2 and its 9th step
    (the first uncovered) at 2 + 8 x 0.1 = 2.8, its due time. At an arrival at exactly 2.8,
    2.8 - 2 = 0.7999999999999998 < 0.8: the clock says 7 steps done, so no new step has
    started: nothing is reserved, evicted or recorded, and the due time (2.8 again) waits
    for the next arrival. At 2.85 the 9th step has started: page 2 is evicted, one token
    reserved and the state recorded."""
    start_of_ninth = 2.0 + Tenths().decode_steps_time_s((5,), 8)
    assert start_of_ninth == 2.8 and start_of_ninth - 2.0 < 0.8
    router = Watch(2, cache_view)
    result, _ = serve([req(0, 0.0, 8, 1, [1, 2]), req(1, 1.0, 4, 12, [3]),
                       *probes(2, [start_of_ninth, 2.85])], capacity=20, router=router,
                      replicas=2, cost=Tenths())
    assert router.seen[2:] == [(2.8, ([1, 2, 3], 0, 8)), (2.85, ([1, 3], 1, 9))]
    states = result.states
    times = [t for t, replica in zip(states["time_s"].tolist(), states["replica"].tolist(),
                                     strict=True) if replica == 0 and t >= 2]
    assert times == [2.0, 2.85, 3.1]
    assert result.records[1].finish_s == pytest.approx(3.1)


class Hundredths(Ticks):
    """Every step 0.01 s (a decode run of n steps n x 0.01 s)."""

    def step_time_s(self, batch) -> float:
        return 0.01

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        return num_steps * 0.01


def test_catch_ups_go_by_due_time_within_the_first_second():
    """The scenario above at 0.01 s a step: A's prefill t=0->0.01; B (t=0.012) prefills
    t=0.012->0.022, its run's 9th step (the first uncovered) starts at 0.102, the 10th at
    0.112. Probes at 0.105 and 0.115 each find one more step started: (pages, evictions,
    reserved) = ([1, 3], 1, 9) then ([1, 3], 1, 10). Every due time here is below 1 s,
    fewer than the catch-ups queued so far."""
    router = Watch(2, cache_view)
    serve([req(0, 0.0, 8, 1, [1, 2]), req(1, 0.012, 4, 12, [3]), *probes(2, [0.105, 0.115])],
          capacity=20, router=router, replicas=2, cost=Hundredths())
    assert router.seen[2:] == [(0.105, ([1, 3], 1, 9)), (0.115, ([1, 3], 1, 10))]


def test_a_replica_outside_the_engine_applies_its_deferred_evictions_at_the_runs_end():
    """No arrivals process, so no `CatchUps`: B's run (as above: 11 steps, 8 covered) evicts
    page 2 for its last 3 steps when it ends at t=13."""
    import simpy

    from prefixsim.engine.replica import Replica
    from prefixsim.engine.request_state import RequestState

    env = simpy.Environment()
    fleet = Fleet([lru(20)], Ticks(), ContinuousBatching(8192, 4), ROUTERS.build("round_robin"))
    finished = []
    replica = Replica(0, env, fleet.caches[0], fleet, Sampling(check_invariants=True),
                      finished.append)
    replica.submit(RequestState(req(0, 0.0, 8, 1, [1, 2]), 0.0))
    env.run(until=1.0)
    replica.submit(RequestState(req(1, 1.0, 4, 12, [3]), 1.0))
    env.run(until=12.5)
    assert (replica.cache.counters.evicted_pages, replica.cache.reserved_tokens) == (0, 8)
    env.run(until=14.0)
    assert [(s.request.request_id, s.finish_s) for s in finished] == [(0, 1.0), (1, 13.0)]
    assert replica.cache.counters.evicted_pages == 1
    assert sorted(replica.cached_page_ids()) == [1, 3]
    assert replica.num_steps == 3


def test_the_r13_message_gives_both_accounts(monkeypatch):
    """Mid-run (above): 12 tokens resident (pages 1, 2 evictable, 3 locked), 8 reserved,
    none free. With the cache's locked counter one too high (its own check switched off; its
    evictable figure follows: 12 - 5), the message shows the cache's figures and the ones
    counted from pages and requests."""
    from fakes import unchecked_lru

    monkeypatch.setitem(globals(), "lru", unchecked_lru)  # mid_run's cache

    def locked(replica, b, c):
        replica.cache.locked_tokens += 1

    assert failing_line(locked) == (
        "R13: cache says free/evictable/locked/reserved = (0, 7, 5, 8), "
        "pages and requests say (0, 8, 4, 8)")


# ------------------------------------------------------------ disaggregated serving
def test_a_decode_run_with_a_first_token_counts_only_the_others_as_itl():
    """One prefill and one decode replica; 1,000 KV bytes per token over a 1,000 B/s link
    with 0.5 s latency. A (t=0, L=4, 6 outputs) prefills t=0->1; its 4,000 B cross t=1->5.5;
    its first client token is a step of its own, t=5.5->6.5, then one run of 4 steps
    t=6.5->10.5 (4 ITL tokens of 1 s). B (t=4, L=4, 2 outputs) prefills t=4->5, crosses
    after A, t=5.5->10, and lands mid-step: A's run ends at 10.5. The next step carries B's
    first token (its TTFT, no ITL gap) and A's last (one gap of 1 s, 1 token); B's last
    t=11.5->12.5."""
    from prefixsim.engine.disaggregation import Disaggregation

    caches = [lru(100), lru(100)]
    split = Disaggregation(1, 1, link_bytes_s=1000.0, link_latency_s=0.5)
    result = replay_timed([req(0, 0.0, 4, 6, [1]), req(1, 4.0, 4, 2, [2])],
                          Fleet(caches, Ticks(), ContinuousBatching(64, 8),
                                ROUTERS.build("round_robin"), kv_bytes_per_token=1000,
                                disaggregation=split), Sampling(check_invariants=True))
    a, b = result.records
    assert (a.first_token_s, a.finish_s, b.first_token_s, b.finish_s) == (6.5, 11.5, 11.5, 12.5)
    assert sorted(result.itl_segments) == [(1.0, 1), (1.0, 1), (1.0, 4)]
    assert [f.num_steps for f in result.replicas] == [2, 4]


# ------------------------------------------------------------------ planning
def test_a_loaded_request_waits_behind_the_head_while_something_runs():
    """Capacity 25, max_num_seqs 2, async host loads (2.5 s a page). R (t=0, L=4, page 1,
    12 outputs) prefills t=0->1 and decodes. L (t=1.5, L=8, pages 3, 4; 3 in host) cuts R's
    run at t=2 and is admitted to load t=2->4.5, 8 tokens reserved. P (t=2.5, L=4, page 2,
    10 outputs) cuts it at t=3 and prefills with R's decode t=3->4. L's load ends at 4.5
    with both slots taken: it waits. R and P decode t=4->7 (free 25 - 8 - 8 - 3 = 6: 3
    steps). At t=7 they cannot both grow: P, the newest, is preempted to the queue's head,
    ahead of L, and cannot be readmitted (4 tokens to recompute and R's next > 3 free), so
    L, loaded, waits behind it while R decodes on alone to t=12 (page 2 evicted for R's
    tokens, to the host tier). With nothing running at t=12, P is admitted to reload page 2
    (t=12->14.5) and L, loaded, goes first: t=12->13, 13->14; P re-prefills t=14.5->15.5
    and decodes to t=20.5."""
    from prefixsim.cache.tiers import TierSpec, TierStack

    cache = lru(25)
    tiers = TierStack(cache, [TierSpec("host", 1000, 1600.0)])
    tiers.tiers[0].put(3, P)
    requests = [req(0, 0.0, 4, 12, [1]), req(1, 1.5, 8, 2, [3, 4]), req(2, 2.5, 4, 10, [2])]
    result = replay_timed(requests, Fleet([cache], Ticks(), ContinuousBatching(64, 2),
                                          ROUTERS.build("round_robin"), tiers=[tiers],
                                          kv_bytes_per_token=1000, tier_load="async"),
                          Sampling(check_invariants=True))
    r, loaded, p = result.records
    assert [x.first_token_s for x in result.records] == [1.0, 13.0, 4.0]
    assert [x.finish_s for x in result.records] == [12.0, 14.0, 20.5]
    assert (p.preemptions, loaded.cached_tokens_host, r.preemptions) == (1, 4, 0)
    assert cache.counters.evicted_pages == 1


def test_with_nothing_running_a_loaded_request_goes_before_a_head_that_cannot_fit():
    """Capacity 20, token budget 4, max_num_seqs 1, async host loads (2.5 s a page). L (t=0,
    L=8, pages 1, 2; 1 in host, 1 output) is admitted to load t=0->2.5, its page and first
    chunk reserved (8). X (t=0.25, L=16, pages 3-6, 1 output) takes the slot and prefills in
    chunks of 4 t=0.25->1.25->2.25->3.25 (pages 3, 4, 5 locked). L's load ends at 2.5; the
    slot is taken. At 3.25 X's last chunk cannot grow (free 20 - 8 - 12 = 0): X is
    preempted to the queue's head and cannot be readmitted either (it locks its 3 pages
    again), so with nothing running L, loaded, goes first t=3.25->4.25, which unlocks page
    2: X evicts it and prefills its last 4 tokens (12 hit) t=4.25->5.25."""
    from prefixsim.cache.tiers import TierSpec, TierStack

    cache = lru(20)
    tiers = TierStack(cache, [TierSpec("host", 1000, 1600.0)])
    tiers.tiers[0].put(1, P)
    requests = [req(0, 0.0, 8, 1, [1, 2]), req(1, 0.25, 16, 1, [3, 4, 5, 6])]
    result = replay_timed(requests, Fleet([cache], Ticks(), ContinuousBatching(4, 1),
                                          ROUTERS.build("round_robin"), tiers=[tiers],
                                          kv_bytes_per_token=1000, tier_load="async"),
                          Sampling(check_invariants=True))
    loaded, x = result.records
    assert (loaded.finish_s, loaded.cached_tokens_host) == (4.25, 4)
    assert (x.finish_s, x.preemptions, x.recomputed_tokens) == (5.25, 1, 4)
    assert result.replicas[0].num_steps == 5
    assert sorted(p.page_id for p in cache.pages()) == [1, 3, 4, 5, 6]


def test_with_a_shared_pool_a_run_stops_where_free_memory_ends():
    """The deferred-eviction scenario above (capacity 20; B's 11 decode steps from t=2, 8 in
    free memory) with a shared KV pool (1,000 KV bytes per token, writes at 1,000 B/s after
    0.5 s): evictions are not deferred, since a pool write is timed when its eviction
    happens. B's first run stops at t=10; the next evicts page 2 at t=10 (written back with
    its ancestor: 8,000 B, on the link t=10->18.5) and runs t=10->13. 4 steps."""
    from prefixsim.cache.pool import PoolSpec, SharedPool

    shared = SharedPool(lru(None), PoolSpec(read_bytes_s=1000.0, write_bytes_s=1000.0,
                                            latency_s=0.5), lambda: 0.0)
    cache = lru(20)
    result = replay_timed([req(0, 0.0, 8, 1, [1, 2]), req(1, 1.0, 4, 12, [3])],
                          Fleet([cache], Ticks(), ContinuousBatching(64, 8),
                                ROUTERS.build("round_robin"), pool=shared,
                                kv_bytes_per_token=1000), Sampling(check_invariants=True))
    assert [r.finish_s for r in result.records] == [1.0, 13.0]
    assert result.replicas[0].num_steps == 4
    writes = result.pool_links[0].writes
    assert (writes.bytes, writes.free_s, shared.write_tokens) == (8000, 18.5, 8)


def test_a_preempted_prefill_is_readmitted_in_the_same_planning():
    """One prefill replica (capacity 18, token budget 6) and one decode replica; KV crosses
    at 1,000 B/s after 0.5 s, 1,000 B a token. A (t=0, L=8, 3 outputs) prefills t=0->1->2
    and is handed off: its 8 tokens stay until pulled (landing at 10.5). X (t=2, L=12,
    pages 3-5, 2 outputs) prefills 6 tokens t=2->3 (page 3 and 2 private tokens: free
    18 - 8 - 6 = 4); its next 6 do not fit, so X is preempted (free 6) and readmitted in the
    same planning (page 3 hit: 2 tokens again and 4 new) t=3->4. Its last 2 do not fit
    (free 0): preempted again, it cannot be readmitted (4 to compute > 2 free) and waits for
    A's KV to leave at 10.5; its last 4 (8 hit) t=10.5->11.5; its 12,000 B cross
    t=11.5->24 and its 2 tokens come at 25 and 26."""
    from prefixsim.engine.disaggregation import Disaggregation

    caches = [lru(18), lru(100)]
    split = Disaggregation(1, 1, link_bytes_s=1000.0, link_latency_s=0.5)
    result = replay_timed([req(0, 0.0, 8, 3, [1, 2]), req(1, 2.0, 12, 2, [3, 4, 5])],
                          Fleet(caches, Ticks(), ContinuousBatching(6, 4),
                                ROUTERS.build("round_robin"), kv_bytes_per_token=1000,
                                disaggregation=split), Sampling(check_invariants=True))
    a, x = result.records
    assert (a.first_token_s, a.finish_s) == (11.5, 13.5)
    assert (x.first_token_s, x.finish_s, x.preemptions, x.recomputed_tokens) == (
        25.0, 26.0, 2, 12)
    assert [f.num_steps for f in result.replicas] == [5, 4]


def test_a_mixed_step_reserves_its_decode_tokens():
    """Capacity 12. A (t=0, L=4, page 1, 4 outputs) prefills t=0->1 and decodes. B (t=1.5,
    L=4, page 2, 1 output) cuts A's run at t=2 (1 step: A holds 1 token) and prefills with
    A's decode t=2->3, which reserves A's 2nd token. C (t=2.5, L=6, pages 3, 4) needs 6 + A's
    next token = 7 at t=3 > free 12 - 4 - 2 - 4 = 2 + evictable 4 (B's page 2): it waits
    for A's last token t=3->4 and prefills t=4->5."""
    result, _ = serve([req(0, 0.0, 4, 4, [1]), req(1, 1.5, 4, 1, [2]),
                       req(2, 2.5, 6, 1, [3, 4])], capacity=12)
    assert [r.finish_s for r in result.records] == [4.0, 3.0, 5.0]


def test_a_queue_head_that_can_never_fit_stops_the_replica_by_name():
    """`submit` refuses what could never fit; a head put in the queue past it (L=24 on 20
    tokens) with nothing running, loading or in transit stops the run with the replica's
    index rather than waiting forever."""
    import simpy

    from prefixsim.engine.replica import Replica
    from prefixsim.engine.request_state import RequestState

    env = simpy.Environment()
    fleet = Fleet([lru(20)], Ticks(), ContinuousBatching(8192, 4), ROUTERS.build("round_robin"))
    replica = Replica(3, env, fleet.caches[0], fleet, Sampling(check_invariants=True),
                      lambda state: None)
    env.run(until=1.0)
    replica.waiting.append(RequestState(req(0, 1.0, 24, 1, [1, 2, 3, 4, 5, 6]), 1.0))
    replica._wake.succeed()
    with pytest.raises(RuntimeError, match="^replica 3 cannot admit its queue head$"):
        env.run(until=2.0)


def test_a_replica_logs_the_row_its_state_row_gives():
    """`log_state(log)` hands the state log the values `state_row()` holds (the compiled
    engine passes them as C numbers): the same logged row as `log.record(state_row())`,
    mid-run, with requests running and waiting and a page evicted."""
    import numpy as np
    import simpy

    from prefixsim.engine.replica import Replica
    from prefixsim.engine.request_state import RequestState
    from prefixsim.engine.state_log import StateLog

    env = simpy.Environment()
    fleet = Fleet([lru(20)], Ticks(), ContinuousBatching(8192, 1), ROUTERS.build("round_robin"))
    replica = Replica(2, env, fleet.caches[0], fleet, Sampling(), lambda state: None)
    replica.submit(RequestState(req(0, 0.0, 8, 1, [1, 2]), 0.0))
    replica.submit(RequestState(req(1, 0.0, 16, 3, [3, 4, 5, 6]), 0.0))
    env.run(until=2.5)
    by_call, by_row = StateLog(), StateLog()
    replica.log_state(by_call)
    by_row.record(replica.state_row())
    called, rowed = by_call.columns(), by_row.columns()
    assert replica.state_row()[2:4] != (0, 0)
    assert called.keys() == rowed.keys()
    assert all(np.array_equal(called[k], rowed[k]) for k in called)


def test_simpy_keeps_its_clock_where_the_engine_reads_it():
    """The engine reads simpy's clock as `env._now` (engine/replica.py), the value of its
    `now` property, at the start, after a run and after each step."""
    import simpy

    env = simpy.Environment(initial_time=5.0)
    seen = []

    def ticks():
        for delay in (0.25, 1.5):
            yield env.timeout(delay)
            seen.append((env._now, env.now))

    env.process(ticks())
    assert env._now == env.now == 5.0
    env.run()
    assert seen == [(5.25, 5.25), (6.75, 6.75)] and env._now == env.now == 6.75
