"""How many steps a replica's decode-only run takes, and how many of them its memory covers
when it starts (docs/cache-semantics.md Part B; replica.py runs the run).

A run goes until its first completion in one timeout. It evicts only what its first step
needs (whole pages, so usually several steps' worth); each later step past the free memory
evicts for itself when it starts (`Replica.catch_up`), so evictions happen at the same step
boundaries as when stepping one by one. Stepping one by one re-tries the queue's head at
every step boundary: memory only shrinks during the run, but the head's match may expire
pages (TTL) or lose pages to the step's evictions (then it locks less), so it may fit at a
later boundary; with a request waiting the run stops after each step that could change that,
and otherwise goes no further than the free memory. Owned here: that arithmetic. Left out:
timing the run, reserving the memory, waking up (replica.py).
"""

from __future__ import annotations

from prefixsim.cache import PrefixCache


def plan_decode_run(cache: PrefixCache, num_seqs: int, remaining: int, waiting: bool,
                    defers: bool, max_run_steps: int | None,
                    gap_pending: bool) -> tuple[int, int]:
    """(steps, covered) of a run of `num_seqs` sequences whose nearest completion is
    `remaining` steps away: `covered` (<= steps) steps fit in free memory after evicting for
    the first one (done here). `waiting`: a request waits in the queue. `defers`: later steps
    may evict for themselves (`Replica.catch_up`). `max_run_steps` caps the run (1: step by
    step). `gap_pending`: a sequence's next token is its first on a decode replica (its TTFT), timed
    on its own (one step)."""
    free = cache.free_tokens  # (a property: read again only after an eviction)
    evicts = free < num_seqs
    if evicts:
        cache.evict(num_seqs)
        free = cache.free_tokens
    covered = max(1, min(remaining, free // num_seqs))  # by free memory
    if waiting:
        steps = 1 if evicts or cache.ttl is not None else covered
    elif defers and covered < remaining:  # later steps evict when they start (catch_up)
        evictable = free + cache.evictable_tokens
        steps = max(covered, min(remaining, evictable // num_seqs))
    else:
        steps = covered
    if max_run_steps is not None:
        steps = min(steps, max_run_steps)
    if gap_pending:
        steps = 1
    return steps, min(covered, steps)
