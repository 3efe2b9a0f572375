"""One serving replica: its queue, the simpy loop that runs its steps, the router's view.

Memory (admission, preemption, prefill inserts; docs/cache-semantics.md Part B) is
replica_memory.py's `ReplicaMemory`, which `Replica` extends. Time moves per batch change: a
step with prefill chunks is one timeout; a decode-only batch runs until its first
completion, or until free and evictable memory run out, in one timeout, cut short at the
next step boundary when an arrival could join the batch. A step of the run past the free
memory evicts for itself at its boundary; the run applies those evictions when something
next looks at the cache (`catch_up`, called by the arrivals process before routing) or
when it ends, with the victims and counts that stepping one by one gives. While a request
waits, a run goes no further than the free memory, and ends after its first step when that
step evicts or the cache has a TTL: the queue's head is re-tried wherever stepping one by one
could find it fitting. A router reading
the load mid-run sees the steps completed by then. With a `StateLog` (state_log.py) the
replica records its state at the start of each step and when it goes idle (the arrivals
process records arrivals).
The clock is read as `env._now`, the value simpy's `now` property returns, without the
property's call (a Python frame, ~400 instructions; read a few hundred thousand times a
run): tests/engine/test_replica_edges.py holds simpy to it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from heapq import heappop, heappush
from itertools import count
from typing import TYPE_CHECKING, Protocol

import simpy
from simpy.events import PENDING

from prefixsim.cache import PrefixCache
from prefixsim.cache.page import INFINITY
from prefixsim.cache.pool import PoolLink
from prefixsim.costmodel import PrefillChunk, StepBatch
from prefixsim.engine.decode_run import plan_decode_run
from prefixsim.engine.decode_steps import BOUNDARY_TIE_S, RunClock, steps_reaching
from prefixsim.engine.itl import ItlSegments
from prefixsim.engine.load_board import LoadBoard
from prefixsim.engine.replica_memory import ReplicaMemory
from prefixsim.engine.request_state import COMPLETED, REJECTED, RUNNING, RequestState
from prefixsim.engine.scheduler import StepPlan
from prefixsim.engine.state_log import StateLog
from prefixsim.trace import Request

if TYPE_CHECKING:  # fleet.py imports disaggregation.py, which builds on this module
    from prefixsim.engine.fleet import Fleet, Sampling

FinishCallback = Callable[[RequestState], None]


def _trigger_once(event: simpy.Event, _cause: simpy.Event) -> None:
    """Trigger `event` unless it already is (an event's callback: `_cause` fired)."""
    if event._value is PENDING:
        event.succeed()


def _first_of(env: simpy.Environment, *events: simpy.Event) -> simpy.Event:
    """An event triggered when the first of `events` fires: what env.any_of would do, with
    the same hops through the event queue (the first to fire triggers it, which resumes the
    waiting process), without building a Condition."""
    over = env.event()
    for event in events:
        event.callbacks.append(partial(_trigger_once, over))
    return over


class CatchUps:
    """The replicas whose decode run has evictions due (`Replica.catch_up`), by due time:
    the arrivals process catches up the ones due by an arrival without looking at every
    replica. An entry is stale once its replica's `due_s` has moved on."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Replica]] = []
        self._order = count()

    def push(self, replica: Replica, due_s: float) -> None:
        heappush(self._heap, (due_s, next(self._order), replica))

    def run_until(self, now: float) -> None:
        """Catch up every replica due by `now` (each once: a due time it sets again at or
        before `now`, by rounding, waits for the next call)."""
        heap = self._heap
        ready = []
        while heap and heap[0][0] <= now:
            ready.append(heappop(heap))
        for due_s, _, replica in ready:
            if replica.due_s == due_s:
                replica.catch_up()


class HandOff(Protocol):
    """Where a prefill replica of disaggregated serving sends its prefilled requests
    (engine/disaggregation.py's KVTransfer)."""

    def hand_off(self, state: RequestState, source: Replica) -> None:
        ...


class Replica(ReplicaMemory):
    """A model instance on `tp` GPUs with its own prefix cache (a router's ReplicaView)."""

    DEFERS_EVICTION = True  # decode runs may outlast free memory (see `catch_up`)

    def __init__(self, index: int, env: simpy.Environment, cache: PrefixCache, fleet: Fleet,
                 sampling: Sampling, on_finish: FinishCallback,
                 state_log: StateLog | None = None, *, link: PoolLink | None = None,
                 transfer: HandOff | None = None) -> None:
        pool = fleet.pool
        self.load_board: LoadBoard | None = None  # the router's view of its load bounds
        self.load_slot = 0  # this replica's entry on it
        self._board_lows: list[int] | None = None  # the board's two lists (`_post_load`)
        self._board_highs: list[int] | None = None
        # the decode run in progress (its start and clock; None between runs): `_set_run`
        self._run_state: tuple[float, RunClock] | None = None
        super().__init__(env, cache, fleet.cost_model, fleet.tier_stack(index),
                         fleet.kv_bytes_per_token, pool=pool, link=link,
                         async_loads=fleet.tier_load == "async")
        self.transfer = transfer  # set on prefill replicas of disaggregated serving
        self.handing_off: list[RequestState] = []  # prefilled, KV still here until pulled
        self.index = index
        self.scheduler = fleet.scheduler
        self.on_finish = on_finish
        self.check = sampling.check_invariants
        self.max_run_steps = sampling.max_run_steps  # None: whole runs (1: step by step)
        self.state_log = state_log
        self.num_steps = 0
        self.busy_s = 0.0
        self.itl_segments = ItlSegments()  # (gap seconds, tokens produced)
        self._wake: simpy.Event | None = None
        # Deferred evictions (`catch_up`): a decode run may go on past the free memory, each
        # later step evicting for itself at its own boundary, as stepping one by one does.
        # Not with a shared pool (its writes are timed when the eviction happens) or in
        # disaggregated serving (a pull reserves memory mid-run).
        self._defers = self.DEFERS_EVICTION and pool is None and transfer is None
        self._run_decodes: list[RequestState] = []
        self._covered = 0  # steps of the run in progress whose KV is reserved
        self.due_s = INFINITY  # when the run's next uncovered step starts (catch_up due)
        self.catch_ups: CatchUps | None = None  # told of each due time (the engine's)
        self._idle_wakeup_s = 0.0  # added to the next step: the replica stood idle
        if state_log is not None:
            self.log_state(state_log)  # the state at t = 0
        self.process = env.process(self._loop())

    # ------------------------------------------------------------ router's view
    def _change_load(self, tokens: int) -> None:
        """Add `tokens` to `_outstanding` and post the change to the load board."""
        self._load_tokens += tokens
        if self.load_board is not None:
            self._post_load()

    def _set_run(self, run: tuple[float, RunClock] | None) -> None:
        """Set `_run_state` (the decode run in progress, None between runs) and post the
        change to the load board."""
        self._run_state = run
        if self.load_board is not None:
            self._post_load()

    def attach_load_board(self, board: LoadBoard, slot: int) -> None:
        """Post this replica's load bounds to `board`'s entry `slot` from now on."""
        self.load_board, self.load_slot = board, slot
        self._board_lows, self._board_highs = board.lows, board.highs
        self._post_load()

    def _post_load(self) -> None:
        """Write `load_bounds()` to the board (engine/load_board.py): into its two lists,
        held here (a board keeps its lists). Written out (no tuple made, and compiled, one
        int object per bound: the run's clock is typed), as it is posted at every change."""
        outstanding = self._load_tokens
        slot = self.load_slot
        run = self._run_state
        if run is None:
            self._board_lows[slot] = self._board_highs[slot] = outstanding
            return
        clock = run[1]
        self._board_lows[slot] = outstanding - clock.num_seqs * clock.steps
        self._board_highs[slot] = outstanding - clock.num_seqs * clock.done

    @property
    def outstanding_tokens(self) -> int:
        return self.load_at(self.env._now)

    def load_at(self, now: float) -> int:
        """`outstanding_tokens` at `now` (the engine's clock, handed in by a router that has
        it): the counter minus the tokens of the decode run generated by then."""
        run = self._run_state
        if run is None:
            return self._load_tokens
        start, clock = run
        elapsed = now - start
        done = clock.done if clock.done_s <= elapsed < clock.next_s else clock.steps_done(elapsed)
        return self._load_tokens - clock.num_seqs * done

    def load_bounds(self) -> tuple[int, int]:
        """Bounds on `outstanding_tokens` now from maintained counters alone (no cost-model
        call, no clock arithmetic): equal when no decode run is in progress; else the load
        at the run's end and at the last step the run's clock has been asked about."""
        run = self._run_state
        outstanding = self._load_tokens
        if run is None:
            return outstanding, outstanding
        clock = run[1]
        return (outstanding - clock.num_seqs * clock.steps,
                outstanding - clock.num_seqs * clock.done)

    def least_load_at(self, now: float) -> int:
        """A lower bound on `load_at(now)`, tighter than `load_bounds`' and still without a
        cost-model call: the load after the most decode steps that can have ended by `now`
        (`RunClock.steps_done_at_most`; exact inside the step last asked about)."""
        run = self._run_state
        if run is None:
            return self._load_tokens
        start, clock = run
        return self._load_tokens - clock.num_seqs * clock.steps_done_at_most(now - start)

    def state_row(self) -> tuple:
        """This replica's state now, as a row of the state log (engine/state_log.py's
        `STATE_COLUMNS`)."""
        cache = self.cache
        return (self.env._now, self.index, len(self.running),
                len(self.waiting) + len(self.loading),  # waiting: with those loading (R15)
                cache.resident_tokens, cache.reserved_tokens, self.query_tokens,
                self.hit_tokens, cache.counters.evicted_pages, self.num_preemptions)

    def log_state(self, log: StateLog) -> None:
        """`log.record(self.state_row())`, the values handed over as they are (compiled: C
        numbers, no row built, none converted from a Python int)."""
        cache = self.cache
        log.record_state(self.env._now, self.index, len(self.running),
                         len(self.waiting) + len(self.loading), cache.resident_tokens,
                         cache.reserved_tokens, self.query_tokens, self.hit_tokens,
                         cache.counters.evicted_pages, self.num_preemptions)

    def cached_page_ids(self) -> set[int]:
        return self.cache.page_ids()

    def cached_prefix_tokens(self, request: Request, now: float) -> int:
        """Tokens admission would find cached now (the page-aligned cap of R3)."""
        matchable = request.page_ids[:request.matchable_pages(request.input_tokens)]
        return request.prefix_tokens(self.cache.match(matchable, now).num_pages)

    # ------------------------------------------------------------------ arrival
    def submit(self, state: RequestState) -> None:
        """A routed request joins the queue, or is rejected if it could never fit its KV
        pool or is longer than the model's context (the scheduler's `max_model_len`: vLLM
        refuses a prompt plus its requested output over --max-model-len on arrival)."""
        state.replica = self.index
        tokens = state.prompt_tokens + state.target_tokens
        limit = self.scheduler.max_model_len
        if tokens > self.capacity_tokens or (limit is not None and tokens > limit):
            state.status = REJECTED
            self.on_finish(state)
            return
        was_empty = not self.waiting
        self.waiting.append(state)
        self._change_load(state.outstanding_tokens)
        wake = self._wake
        if wake is not None and not wake.triggered and (
            not self.running or (was_empty and len(self.running) < self.scheduler.max_num_seqs)
        ):
            wake.succeed()

    def _load_done(self, state: RequestState, event: simpy.Event) -> None:
        """An async load ended (R15): its request rejoins the queue's head, waking the
        replica idle or cutting its decode run at the step in progress when it has a free
        sequence slot (the load's end is a step boundary's news in vLLM v1)."""
        super()._load_done(state, event)
        wake = self._wake
        if wake is not None and not wake.triggered and (
                len(self.running) < self.scheduler.max_num_seqs):
            wake.succeed()

    def _finish(self, state: RequestState) -> None:
        self._release(state)
        self.running.remove(state)
        state.status = COMPLETED
        state.finish_s = self.env._now
        self.on_finish(state)

    def _finish_done(self) -> None:
        for state in [s for s in self.running if s.generated_tokens >= s.target_tokens]:
            self._finish(state)  # (remaining_decode_tokens <= 0, written out)

    # ------------------------------------------------------ disaggregated serving
    def _hand_off(self, state: RequestState) -> None:
        """A prefill replica's request sampled its first token: a decode replica takes it
        (engine/disaggregation.py); its KV stays here until pulled."""
        self.running.remove(state)
        self.handing_off.append(state)
        self._change_load(-state.outstanding_tokens)
        state.last_token_s = self.env._now
        self.transfer.hand_off(state, self)

    def release_handed_off(self, state: RequestState) -> None:
        """`state`'s KV has reached its decode replica: free it here, unlock its prefix."""
        self.handing_off.remove(state)
        self._release(state)
        wake = self._wake
        if wake is not None and not wake.triggered and self.waiting:
            wake.succeed()

    def _memory_in_transit(self) -> bool:
        """Whether KV of requests not running here holds memory (handed off, awaiting their
        pull; decode replicas: pulls in flight), so the queue head may fit once it moves."""
        return bool(self.handing_off)

    def _after_step(self) -> None:
        """Called after every step's completions (decode replicas pull queued KV here)."""

    def _held_private_tokens(self) -> int:
        """Reserved KV of requests not running here (handed off, awaiting their pull)."""
        return sum(s.private_tokens for s in self.handing_off)

    def _queued_outstanding(self) -> int:
        """Outstanding tokens of requests held outside `waiting` and `running`."""
        return 0

    # --------------------------------------------------------------------- loop
    def _loop(self):
        while True:
            if not self.running and not self.waiting and not self.loading:
                if self.state_log is not None:
                    self.log_state(self.state_log)
                yield from self._sleep()
                self._idle_wakeup_s = self.cost_model.serving_overheads.idle_wakeup_s
                continue
            plan = self._plan()
            if plan.chunks:
                yield from self._prefill_step(plan)
            elif plan.decodes:
                yield from self._decode_run(plan.decodes)
            elif self.loading or self._memory_in_transit():  # KV moving in or out: wait
                yield from self._sleep()
                continue
            else:
                raise RuntimeError(f"replica {self.index} cannot admit its queue head")
            self._finish_done()
            self._after_step()
            if self.check:
                self.check_invariants()

    def _sleep(self):
        """Wait until `submit` (or a landing or a released hand-off) wakes the replica."""
        self._wake = self.env.event()
        yield self._wake
        self._wake = None

    def _plan(self) -> StepPlan:
        """The next step's plan; when every running request prefills and none has room for
        its next chunk, the newest is preempted until something can run."""
        self._make_decode_room()
        plan = self.scheduler.plan(self.running, self.waiting, self.admit, self.grow)
        while not plan.chunks and not plan.decodes and self.running:
            self._preempt(self.running[-1])
            plan = self.scheduler.plan(self.running, self.waiting, self.admit, self.grow)
        if not plan.chunks and not plan.decodes and not self.running:
            # a request whose KV is in and whose chunk is reserved goes first, rather than
            # hold memory the head waits for
            for loaded in self.waiting:
                if loaded.loaded_chunk_tokens:
                    self.waiting.remove(loaded)
                    self.waiting.appendleft(loaded)
                    plan = self.scheduler.plan(self.running, self.waiting, self.admit,
                                               self.grow)
                    break
        return plan

    def _prefill_step(self, plan: StepPlan):
        """One step with prefill chunks (and the plan's decodes), one timeout."""
        step_s = self._start_prefill_step(plan)
        yield self.env.timeout(step_s)
        self._end_prefill_step(plan, step_s)

    def _start_prefill_step(self, plan: StepPlan) -> float:
        """Reserve the KV of the plan's decodes and log the state: the step's time, with
        the blocking loads of its chunks (a typed method: the loops read requests in C)."""
        decodes = plan.decodes
        self._reserve_decode(decodes, 1)
        batch = StepBatch(
            tuple([PrefillChunk(n, s.computed_tokens, s.computed_tokens + n >= s.prompt_tokens)
                   for s, n in plan.chunks]),
            tuple([s.request.input_tokens + s.generated_tokens  # context_tokens
                   for s in decodes]),
        )
        step_s = self.cost_model.step_time_s(batch) + self._idle_wakeup_s
        self._idle_wakeup_s = 0.0
        loads = [state.load_s for state, _ in plan.chunks]
        for state, _ in plan.chunks:
            state.load_s = 0.0
        # blocking loads before the chunks (async ones ended before admission): lower tiers
        # copy one after another (R15); pool reads are booked on the link already, so the
        # step waits for the last (R18)
        step_s += max(loads) if self.link is not None else sum(loads)
        if self.state_log is not None:
            self.log_state(self.state_log)
        return step_s

    def _end_prefill_step(self, plan: StepPlan, step_s: float) -> None:
        """A prefill step's tokens, chunks and ITL gaps, once it has run."""
        now = self.env._now
        self.num_steps += 1
        self.busy_s += step_s
        decodes = plan.decodes
        for state in decodes:
            state.generated_tokens += 1
        self._change_load(-len(decodes))
        for state, num_tokens in plan.chunks:
            resumed = state.generated_tokens > 0  # re-prefilled after a preemption
            self._advance_prefill(state, num_tokens)
            if resumed and not state.prefilling:  # its next token, after the stall
                self.itl_segments.append((now - state.last_token_s, 1))
            if (self.transfer is not None and not state.prefilling
                    and state.remaining_decode_tokens > 0):
                self._hand_off(state)
        if decodes:
            self.itl_segments.append((step_s, len(decodes)))

    def _decode_run(self, decodes: list[RequestState]):
        """Decode-only steps until the first completion, in one timeout (or fewer if woken);
        how many: decode_run.py."""
        env, cost = self.env, self.cost_model
        gaps, steps, contexts, start, total_s, wake = self._start_decode_run(decodes)
        yield _first_of(env, env.timeout(total_s), wake)
        self._wake = None
        self.due_s = INFINITY
        done = steps
        cut = wake.triggered and env._now - start < total_s
        if cut:
            done = steps_reaching(cost, contexts, steps, env._now - start - BOUNDARY_TIE_S)
        covered = self._covered  # raised by catch_up during the run
        if done > covered:  # the evictions of the steps started since the last catch_up
            self._reserve_decode(decodes, done - covered)
            covered = done
            if cut and self.state_log is not None:  # changed now, before the step's end
                self.log_state(self.state_log)
        self._run_decodes = []
        if cut:  # to the end of the step in progress; the router still reads the run's clock
            done_s = cost.decode_steps_time_s(contexts, done)
            if done_s > env._now - start:
                yield env.timeout(done_s - (env._now - start))
            total_s = done_s
        self._set_run(None)
        self._end_decode_run(decodes, done, covered, total_s, gaps)

    def _start_decode_run(self, decodes: list[RequestState]) -> tuple:
        """Plan a decode run (decode_run.py), reserve the KV its steps cover, start its
        clock and log the state: (the requests whose next token is their first, the run's
        steps, their contexts, its start, its time, the event that cuts it short)."""
        env, cost = self.env, self.cost_model
        gaps = [s for s in decodes if s.gap_pending]
        remaining = min([s.target_tokens - s.generated_tokens for s in decodes])
        steps, covered = plan_decode_run(self.cache, len(decodes), remaining, bool(self.waiting),
                                         self._defers, self.max_run_steps, bool(gaps))
        self._reserve_decode(decodes, covered)
        contexts = tuple([s.request.input_tokens + s.generated_tokens  # context_tokens
                          for s in decodes])
        total_s = cost.decode_steps_time_s(contexts, steps)
        start = env._now
        self._wake = wake = env.event()
        self._set_run((start, RunClock(cost, contexts, steps, total_s)))
        self._run_decodes, self._covered = decodes, covered
        if covered < steps:
            self._due(start + cost.decode_steps_time_s(contexts, covered))
        if self.state_log is not None:
            self.log_state(self.state_log)
        return gaps, steps, contexts, start, total_s, wake

    def _end_decode_run(self, decodes: list[RequestState], done: int, covered: int,
                        total_s: float, gaps: list[RequestState]) -> None:
        """A decode run's `done` steps (of `covered` reserved), taking `total_s`: memory
        reserved for steps it no longer takes, tokens, counts and ITL gaps."""
        num = len(decodes)
        if covered > done:  # reserved for steps the run no longer takes
            unused = covered - done
            self.cache.release(unused * num)
            for state in decodes:
                state.private_tokens -= unused
        if done:  # a run woken before its first step ends ran no step
            self.num_steps += 1
        self.busy_s += total_s
        for state in decodes:
            state.generated_tokens += done
        self._change_load(-done * num)
        if done and gaps:  # handed-off requests' first tokens (engine/disaggregation.py)
            now = self.env._now
            for state in gaps:
                state.gap_pending = False
                state.first_token_s = now
            if num > len(gaps):
                self.itl_segments.append((total_s, num - len(gaps)))
        elif done:
            self.itl_segments.append((total_s / done, done * num))

    def catch_up(self, tie_s: float = 0.0) -> None:
        """Evict and reserve for the steps of the decode run in progress that have started
        by now (`due_s` <= now): what stepping one by one would have done at their
        boundaries. Called before anything reads or changes the cache mid-run (the arrivals
        process, before routing), and by the run itself when it ends. The victims are the
        same: nothing else touches this cache during the run, and evicting for k steps at
        once frees the shortest run of victims that k evictions of one step each free.
        `tie_s`: a step starting less than this before now has not started
        (decode_steps.BOUNDARY_TIE_S, for a landing)."""
        start, clock = self._run_state  # due_s is finite only while a run is in progress
        target = min(clock.steps, clock.steps_done(self.env._now - start - tie_s) + 1)
        covered = self._covered
        if target > covered:
            self._reserve_decode(self._run_decodes, target - covered)
            self._covered = covered = target
            if self.state_log is not None:  # its state changed (the log is after every change)
                self.log_state(self.state_log)
        if covered >= clock.steps:
            self.due_s = INFINITY
        elif covered == target:  # the clock's cursor: target - 1 steps done, next ends next_s
            self._due(start + clock.next_s)
        else:
            self._due(start + self.cost_model.decode_steps_time_s(clock.contexts, covered))

    def _due(self, due_s: float) -> None:
        self.due_s = due_s
        if self.catch_ups is not None:
            self.catch_ups.push(self, due_s)

    # --------------------------------------------------------------- invariants
    def check_invariants(self) -> None:
        """R13 and the replica's own accounting (called after every step in debug mode)."""
        cache = self.cache
        cache.check_invariants()
        if self.pool is not None:  # the shared pool's own accounting (R13 over its tree)
            self.pool.cache.check_invariants()
        private = sum(s.private_tokens for group in (self.running, self.loading, self.waiting)
                      for s in group) + self._held_private_tokens()
        assert private == cache.reserved_tokens, "private tokens != cache reservation"
        # R13 against sums made here, not from the cache's own counters (whose four terms
        # add up to the capacity by construction): resident from the pages, locked from the
        # pages with a lock, reserved from the running requests' private KV.
        resident = locked = 0
        for page in cache.pages():
            resident += page.num_tokens
            if page.lock_count > 0:
                locked += page.num_tokens
        free = self.capacity_tokens - resident - private
        assert free >= 0, "negative free memory"
        accounts = (cache.free_tokens, cache.evictable_tokens, cache.locked_tokens,
                    cache.reserved_tokens)
        assert accounts == (free, resident - locked, locked, private), (
            f"R13: cache says free/evictable/locked/reserved = {accounts}, "
            f"pages and requests say {(free, resident - locked, locked, private)}")
        assert len(self.running) <= self.scheduler.max_num_seqs, "too many sequences"
        for state in self.running:
            assert state.status == RUNNING
            assert state.tip is None or state.tip.lock_count > 0, "running path not locked"
            assert state.tree_tokens + state.private_tokens >= state.computed_tokens
        for state in self.waiting:  # only a request whose prefix has loaded holds KV there
            assert state.loaded_chunk_tokens or (state.private_tokens == 0 and state.tip is None), (
                "a waiting request holds KV before its prefix has loaded")
        for state in self.loading:  # its loaded prefix and first chunk reserved (R15)
            assert state.loaded_chunk_tokens > 0, "a loading request without its first chunk"
            assert state.tree_tokens + state.private_tokens >= state.computed_tokens
        assert self._outstanding == sum(
            s.outstanding_tokens for group in (self.running, self.waiting, self.loading)
            for s in group
        ) + self._queued_outstanding(), "outstanding tokens out of step"
        board = self.load_board
        if board is not None:  # the router's bounds bracket the load (engine/load_board.py)
            slot = self.load_slot
            assert board.lows[slot] == self.load_bounds()[0], "load board's low stale"
            assert board.highs[slot] >= self.outstanding_tokens, "load board's high too low"
