"""What a timed run serves with (`Fleet`) and what it records and checks while it runs
(`Sampling`): the two arguments of `replay_timed` besides the requests (engine/timed.py).

A `Fleet` is the replicas' pieces (one cache and lower-tier stack per replica, the cost
model, the step planner), the router, the KV pool they share (docs/cache-semantics.md R18),
prefill/decode disaggregation, the clock (`time_scale` stretches the trace's arrival
times) and, for a closed loop, the clients who send the requests (engine/clients.py).
pipeline/build.py builds one from a config; tests build them by hand. Owned here: the
grouping and its defaults. Left out: building caches or cost models (pipeline/build.py) and
running anything (engine/timed.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from prefixsim.cache import PrefixCache
from prefixsim.cache.classes import CacheRules
from prefixsim.cache.pool import SharedPool
from prefixsim.cache.tiers import TierStack
from prefixsim.costmodel import CostModel
from prefixsim.engine.cache_only import ProgressCallback
from prefixsim.engine.clients import Clients
from prefixsim.engine.disaggregation import Disaggregation
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.router import Router

TierLoad = Literal["async", "blocking"]


@dataclass(frozen=True, slots=True)
class Fleet:
    """The replicas of a timed run and what they share. `caches[i]` (and `tiers[i]`, None:
    no lower tiers) belong to replica i. `rules` gives each request its cache class (TTL,
    priority, cacheable). `kv_bytes_per_token` times lower-tier, pool and disaggregated
    transfers (per GPU). `pool`: the KV pool every replica shares over a link of its own.
    `disaggregation`: the first replicas prefill, the rest decode (engine/disaggregation.py).
    `clients`: a closed loop that releases the requests as earlier ones finish
    (engine/clients.py); None: the requests arrive at their own times (open loop).
    `decode_router`: chooses each handed-off request's decode replica among the decode
    replicas (None: the fewest outstanding tokens, ties to the lower index). `tier_load`:
    `async`, a request loading its prefix from a lower tier or the pool waits off the batch
    until its copy ends; `blocking`, the copy is added to its first chunk's step
    (docs/cache-semantics.md R15).
    """

    caches: Sequence[PrefixCache]
    cost_model: CostModel
    scheduler: ContinuousBatching
    router: Router
    time_scale: float = 1.0
    rules: CacheRules | None = None
    tiers: Sequence[TierStack | None] | None = None
    kv_bytes_per_token: int = 0
    pool: SharedPool | None = None
    disaggregation: Disaggregation | None = None
    clients: Clients | None = None
    decode_router: Router | None = None  # disaggregated: picks the decode replica
    tier_load: TierLoad = "async"  # lower-tier and pool loads: async or blocking (R15)

    def tier_stack(self, replica: int) -> TierStack | None:
        """The lower tiers under replica `replica`'s cache, or None."""
        return None if self.tiers is None else self.tiers[replica]


@dataclass(frozen=True, slots=True)
class Sampling:
    """What a timed run records and checks. `record_state`: the replicas' state after every
    change (state_log.py; timeseries.parquet is derived from it). `check_invariants`: R13
    and the replicas' accounting after every step (slow; tests and debugging).
    `on_progress(n)`: told every `progress_every` finished requests (and the rest at the
    end). `max_run_steps` caps decode-only runs (1: one timeout per step, the naive
    reference the tests and bench/engine_speed.py compare the fast path against).
    `sample_interval_s`: the grid the recorded states will be sampled on (a whole multiple
    of it, metrics/timeseries.py): the state log then keeps only the rows a sample reads
    (state_log.py), and the engine may leave replicas' deferred evictions for later
    between grid points (engine/timed.py); None: not known (every row kept, and with a
    state log every due replica caught up at every arrival)."""

    record_state: bool = True
    check_invariants: bool = False
    on_progress: ProgressCallback | None = None
    progress_every: int = 500
    max_run_steps: int | None = None
    sample_interval_s: float | None = None
