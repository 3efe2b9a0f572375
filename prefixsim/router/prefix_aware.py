"""PrefixAware: the longest cached prefix, traded against load.

score(replica) = cached prefix tokens - load_weight x outstanding tokens; the highest score
wins, ties go to the lower load, then the lower index. With load_weight = 1 a cached token is
worth one token of queued work. `staleness_s` > 0 makes the router see each cache as a
snapshot of its page ids refreshed every `staleness_s` simulated seconds (as a router fed by
periodic cache reports would). With `staleness_s` = 0 the router reads the caches through the
engine's PrefixIndex when it binds one (router/index.py: one walk over the prompt's pages,
whatever the number of replicas; `event_delay_s` > 0 delivers the caches' events that late,
as a KV-event-fed router sees them), else live from each replica. Load is always read live:
each replica's load at its last step boundary (docs/architecture.md "Routers"), exactly.

Tiers (`tier_weights`, through the index only): a replica's cached prefix may continue
below its HBM, in its host DRAM tier (docs/cache-semantics.md R15) or in the shared KV pool
(R18), from which admission would load rather than compute it. With the engine's lower
tiers bound (`bind_lower_tiers`) the score is hbm x HBM tokens + host x host-tier tokens
after the HBM run + pool x pool tokens beyond it - load_weight x outstanding tokens. The
weights follow llm-d's KV-cache scorer, which credits a GPU block 1.0 and a CPU block 0.8
(Dynamo likewise weighs host and disk hits below device ones): by default hbm 1.0, pool
0.8, host 0.0 (a host tier credited by default would change the routing of runs that
have host tiers and no pool; set it to 0.8 for llm-d's rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat

from prefixsim.cache import PrefixCache
from prefixsim.router.index import PrefixIndex
from prefixsim.router.protocol import ROUTERS, ReplicaView, prefix_tokens_in
from prefixsim.trace import Request


@ROUTERS.register("prefix_aware")
class PrefixAware:
    """Cache-hit-seeking routing with a load penalty and an optional stale cache view."""

    TIER_WEIGHTS = {"hbm": 1.0, "host": 0.0, "pool": 0.8}

    def __init__(self, load_weight: float = 1.0, staleness_s: float = 0.0,
                 event_delay_s: float = 0.0,
                 tier_weights: dict[str, float] | None = None) -> None:
        if not load_weight >= 0:
            raise ValueError(f"load_weight must be >= 0, got {load_weight}")
        if not staleness_s >= 0:
            raise ValueError(f"staleness_s must be >= 0, got {staleness_s}")
        if not event_delay_s >= 0:
            raise ValueError(f"event_delay_s must be >= 0, got {event_delay_s}")
        weights = dict(self.TIER_WEIGHTS)
        for tier, weight in (tier_weights or {}).items():
            if tier not in weights:
                raise ValueError(f"tier_weights: unknown tier {tier!r} (hbm, host, pool)")
            if not (isinstance(weight, int | float) and 0 <= weight < float("inf")):
                raise ValueError(f"tier_weights.{tier} must be a number >= 0, got {weight!r}")
            weights[tier] = float(weight)
        self.load_weight = load_weight
        self.staleness_s = staleness_s
        self.event_delay_s = event_delay_s
        self.tier_weights = weights
        self._tiered = False  # lower tiers bound (bind_lower_tiers)
        self._index: PrefixIndex | None = None
        self._snapshots: list[set[int]] = []
        self._snapshot_s = -float("inf")

    def bind_caches(self, caches: Sequence[PrefixCache], clock: Callable[[], float]) -> None:
        """Read the caches through one PrefixIndex (unless a stale snapshot is asked for)."""
        if self.staleness_s > 0:
            return
        self._index = PrefixIndex(clock, self.event_delay_s)
        for replica, cache in enumerate(caches):
            self._index.attach(replica, cache)

    @property
    def scores_fall_with_evictions(self) -> bool:
        """Whether an eviction can only lower a replica's score, with `route` free of side
        effects: through the index, its events delivered at once, HBM only (a page evicted
        to a host tier credited by `tier_weights` could raise one). The engine then catches
        up only the chosen replica's deferred evictions (engine/timed.py)."""
        return self._index is not None and self.event_delay_s == 0 and not self._tiered

    def bind_lower_tiers(self, pool: PrefixCache | None, host_tiers: Sequence) -> None:
        """Follow the shared pool's tree and each replica's host tier (None: none) through
        the index, when it reads the caches through one and their weights are not 0."""
        index, weights = self._index, self.tier_weights
        if index is None:
            return
        if pool is not None and weights["pool"] > 0:
            index.attach_pool(pool)
            self._tiered = True
        if weights["host"] > 0:
            for replica, tier in enumerate(host_tiers):
                if tier is not None:
                    index.attach_host(replica, tier)
                    self._tiered = True

    def _route_tiered(self, request: Request, replicas: Sequence[ReplicaView],
                      now: float) -> int:
        """`route` with lower tiers credited (module docstring), ties as `route`'s."""
        found = self._index.prefix_tokens(request, now)
        pool_tokens, host = self._index.lower_runs(request, now, found)
        weights = self.tier_weights
        w_hbm, w_host, w_pool = weights["hbm"], weights["host"], weights["pool"]
        bases = {}
        for position in found.keys() | host.keys():
            hbm = found.get(position, 0)
            bases[position] = (w_hbm * hbm + w_host * host.get(position, 0)
                               + w_pool * max(0, pool_tokens - hbm))
        return self._choose(replicas, bases, w_hbm * 0 + w_pool * pool_tokens, now)

    def _choose(self, replicas: Sequence[ReplicaView], bases: dict[int, float],
                other: float, now: float) -> int:
        """The replica of highest base - load_weight x load (`bases` by position, `other`
        for the rest), ties to the lower load, then the lower position: the choice a scan
        of every replica's exact load makes. When the replicas post their load bounds to a
        board made over this very list (engine/load_board.py, as the engine's replicas do),
        those whose best score falls below the best worst-case score of any replica are
        skipped, first by the load at their decode run's end, then by the least load their
        run's clock allows now (`least_load_at`), so the exact load (a cost-model walk of
        the run's clock) is read only for replicas that can win or tie; views without a
        board are read whole."""
        count = len(replicas)
        return self._choose_values(
            replicas, list(map(bases.get, range(count), repeat(other, count))), now)

    def _choose_values(self, replicas: Sequence[ReplicaView], values: list, now: float) -> int:
        """`_choose` with the bases as a list by position (`values`)."""
        weight = self.load_weight
        board = getattr(replicas[0], "load_board", None) if replicas else None
        if board is None or not board.serves(replicas):
            best, best_score, best_load = 0, -float("inf"), 0
            for position, replica in enumerate(replicas):
                load = replica.outstanding_tokens
                score = values[position] - weight * load
                if score > best_score or (score == best_score and load < best_load):
                    best, best_score, best_load = position, score, load
            return best
        return _best_on_board(values, board.lows, board.highs, weight, replicas, now)

    def _cached(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> list[int]:
        if self.staleness_s == 0:
            return [r.cached_prefix_tokens(request, now) for r in replicas]
        if now - self._snapshot_s >= self.staleness_s or len(self._snapshots) != len(replicas):
            self._snapshots = [set(r.cached_page_ids()) for r in replicas]
            self._snapshot_s = now
        return [prefix_tokens_in(request, snapshot) for snapshot in self._snapshots]

    def route(self, request: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        if self._tiered:
            return self._route_tiered(request, replicas, now)
        weight = self.load_weight
        best, best_score, best_load = 0, -float("inf"), 0
        if self._index is not None:  # one walk over the prompt; replicas absent hold none
            return self._choose_values(
                replicas, self._index.prefix_token_list(request, now, len(replicas)), now)
        cached = self._cached(request, replicas, now)
        for position, replica in enumerate(replicas):
            load = replica.outstanding_tokens
            score = cached[position] - weight * load
            if score > best_score or (score == best_score and load < best_load):
                best, best_score, best_load = position, score, load
        return best


def _best_on_board(values: list, lows: list, highs: list, weight: float,
                   replicas: Sequence[ReplicaView], now: float) -> int:
    """`PrefixAware._choose` over a load board: the position of the highest `values[i]` -
    `weight` x load, ties to the lower load, then the lower position. The floor is the best
    worst-case score (`highs` are loads not exceeded); a replica whose best case (`lows`)
    is below it cannot win or tie and is skipped, and one in a decode run is read exactly
    (`load_at`, written back to `highs` as a bound) only when its run's clock allows a
    score that reaches the floor. Compiled, a loop in C (prefix_aware.pxd): loads are
    token counts (64-bit integers there), bases and scores doubles, and the products and
    differences are the ones Python's floats make (token counts are exact in a double)."""
    count = len(values)
    floor = -float("inf")
    for position in range(count):
        base = values[position]  # each read into a typed local first when compiled
        high = highs[position]
        worst = base - weight * high
        if worst > floor:
            floor = worst
    start = floor  # the skip test below keeps this first floor, as the candidates were
    best, best_score, best_load = 0, -float("inf"), 0
    for position in range(count):
        base = values[position]
        low = lows[position]
        if base - weight * low < start:
            continue  # its best score is below another's worst: it cannot win or tie
        high = highs[position]
        if low != high:  # a decode run in progress: its clock's bound first
            replica = replicas[position]
            least = replica.least_load_at(now)  # a C integer compiled: the score in doubles
            if base - weight * least < floor:
                continue
            exact = replica.load_at(now)
            highs[position] = exact  # exact, and a bound
            high = exact
        score = base - weight * high
        if score > best_score or (score == best_score and high < best_load):
            best, best_score, best_load = position, score, high
            if score > floor:  # a better worst case: the rest must reach it to tie
                floor = score
    return best
