"""Fakes and builders shared by several test files: a cost model whose steps all take 1 s
(so hand-worked answers stay exact binary fractions), an LRU radix cache, the matching step
of the brute-force reference caches, the steps that random prefix-tree traces share, and
random Part A traces with what a replay of them gives (the compressed tree's differential
tests against RadixCache), why a Cython build cannot run here (`cannot_compile`), and the
one-line text of the InputError a call raises (`refusal`).

Owns only what several test files need; a fake used by one file stays in that file.
"""

import importlib.util
import random
import shutil
import sysconfig
from collections.abc import Callable, Collection, Sequence
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, CacheMode, TTLMode, TTLRule
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.costmodel import NO_OVERHEADS, CostModelBase, ServingOverheads
from prefixsim.engine import replay_cache_only
from prefixsim.errors import InputError
from prefixsim.metrics.timeseries import sample_cache_states
from prefixsim.trace import Request

# the package's cache and the tests' per-page reference, for tests that hold for both
CACHE_CLASSES = {"segments": SegmentCache, "reference": RadixCache}


class Ticks(CostModelBase):
    """A cost model (docs/architecture.md "Cost models") where every step takes 1 s, a run of
    n identical decode steps n s, and a transfer bytes / bandwidth. `probe(kind, what)`, when
    given, hears every step time asked for: ("step", batch) or ("decode", contexts)."""

    name = "ticks"

    def __init__(self, serving_overheads: ServingOverheads = NO_OVERHEADS,
                 *, probe: Callable[[str, object], None] | None = None) -> None:
        self.serving_overheads = serving_overheads
        self.probe = probe

    def step_time_s(self, batch) -> float:
        if self.probe is not None:
            self.probe("step", batch)
        return 1.0

    def decode_steps_time_s(self, contexts, num_steps) -> float:
        if self.probe is not None:
            self.probe("decode", contexts)
        return float(num_steps)

    def transfer_time_s(self, num_bytes, bandwidth_bytes_s) -> float:
        return num_bytes / bandwidth_bytes_s


class BoardView:
    """A replica view with a load known to the test, for a router reading a load board
    (engine/load_board.py): `low` and `high` go on the board, `least` is its clock's bound
    now and `exact` its load now; reads are counted and the times asked kept (`asked`)."""

    def __init__(self, index: int, exact: int, low: int | None = None,
                 high: int | None = None, least: int | None = None) -> None:
        self.index, self.exact = index, exact
        self.low = exact if low is None else low
        self.high = exact if high is None else high
        self.least = self.low if least is None else least
        self.least_reads = self.exact_reads = 0
        self.asked: list[float] = []

    def attach_load_board(self, board, slot: int) -> None:
        self.load_board = board
        board.lows[slot], board.highs[slot] = self.low, self.high

    def least_load_at(self, now: float) -> int:
        self.least_reads += 1
        self.asked.append(now)
        return self.least

    def load_at(self, now: float) -> int:
        self.exact_reads += 1
        self.asked.append(now)
        return self.exact

    @property
    def outstanding_tokens(self) -> int:
        return self.load_at(0.0)


def without_segment_cache(monkeypatch) -> None:
    """Runs built from a config (pipeline/build.py: cache-only and timed, HBM and the shared
    pool) get the per-page reference, RadixCache, where they would get the SegmentCache."""
    from prefixsim.pipeline import build

    def reference(capacity_tokens, policy, ttl=None, mode=CacheMode.RADIX, **_how):
        return RadixCache(capacity_tokens, policy, ttl, CacheMode(mode))

    monkeypatch.setattr(build, "replay_cache", reference)


def lru(capacity: int | None, ttl=None) -> RadixCache:
    """A radix cache of `capacity` tokens under LRU, with an optional TTL rule."""
    return RadixCache(capacity, POLICIES.build("lru"), ttl)


class UncheckedCache(RadixCache):
    """A RadixCache whose own `check_invariants` passes, for a test that corrupts its
    counters to see another check catch it (a subclass: the compiled RadixCache is an
    extension type, whose methods cannot be patched)."""

    def check_invariants(self) -> None:
        return None


def unchecked_lru(capacity: int | None, ttl=None) -> RadixCache:
    """`lru`, without the cache's own invariant check."""
    return UncheckedCache(capacity, POLICIES.build("lru"), ttl)


def resident(cache) -> set[int]:
    """The ids of the pages either cache holds (no page object kept)."""
    return {page.page_id for page in cache.pages()}


def page_of(cache, page_id: int) -> SimpleNamespace | None:
    """Page `page_id`'s tokens and statistics, or None if it is not resident: the
    reference's page, or on a SegmentCache the segment holding it (whose statistics are
    each of its pages')."""
    for page in cache.pages():
        if page.page_id == page_id:
            stats = page if isinstance(cache, RadixCache) else page._node
            return SimpleNamespace(
                num_tokens=page.num_tokens, recency=stats.recency,
                deadline_s=stats.deadline_s, last_access_s=stats.last_access_s,
                num_hits=stats.num_hits, created_s=stats.created_s, priority=stats.priority)
    return None


def resident_prefix(ids: Sequence[int], resident: Collection[int]) -> int:
    """How many of `ids`, from the first, are in `resident`: the match of a reference cache
    (docs/cache-semantics.md Part A) that keeps its pages in a plain dict."""
    matched = 0
    while matched < len(ids) and ids[matched] in resident:
        matched += 1
    return matched


def pick_session(rng: random.Random, sessions: list[list[int]], roots: list[list[int]],
                 p_continue: float) -> list[int]:
    """The page path the next request extends: with probability `p_continue` an earlier
    session (the list itself, to grow in place), else a new session copied from a root."""
    if sessions and rng.random() < p_continue:
        return rng.choice(sessions)
    path = list(rng.choice(roots))
    sessions.append(path)
    return path


def draw_arrival_and_base(draw, now: float, prompts: list[tuple[int, ...]]
                          ) -> tuple[float, tuple[int, ...]]:
    """For a hypothesis trace: the next arrival (often equal to `now`, else up to 4 s later)
    and the prefix of an earlier prompt it builds on (often empty)."""
    now += draw(st.sampled_from([0.0, 0.0, 0.0, 0.5, 1.0, 2.0, 4.0]))
    base: tuple[int, ...] = ()
    if prompts and draw(st.integers(0, 3)):
        base = draw(st.sampled_from(prompts))
        base = base[: draw(st.integers(0, len(base)))]
    return now, base


def run_demo_sweep(name: str, root, report: bool = False):
    """The bundled sweep traces/sweeps/NAME.yaml run into root/NAME (one process), with its
    report when `report`; returns the folder."""
    from click.testing import CliRunner

    from prefixsim.cli import app
    from prefixsim.sweep import ExecutorOptions, load_spec, run_sweep

    out = root / name
    run_sweep(load_spec(f"traces/sweeps/{name}.yaml"), out, ExecutorOptions(n_jobs=1),
              command=f"prefixsim sweep traces/sweeps/{name}.yaml -o {out}")
    if report:
        assert CliRunner().invoke(app, ["report", str(out), "--quiet"]).exit_code == 0
    return out


# Pages of 4 tokens. r10 (L=8: pages 1, 2) misses; r11 (L=10: 1, 2, 3) matches 2 pages,
# 8 tokens (under its cap of 9); r12 (L=8: 1, 2) matches both, capped at L - 1 = 7; r13
# (L=6: 4, 5) misses; r14 (L=9: 1, 6, 7) matches page 1, 4 tokens. Resident: 8 tokens after
# r10, 10 after r11, 10 + 6 after r13, + 5 (pages 6, 7) after r14.
# A replay worked by hand (tests/engine/test_cache_only*_edges.py).
HAND_TRACE = [
    Request(10, 0.0, 8, 3, (1, 2), 4, "a"),
    Request(11, 0.5, 10, 2, (1, 2, 3), 4),
    Request(12, 2.5, 8, 1, (1, 2), 4, "b"),
    Request(13, 2.5, 6, 1, (4, 5), 4),
    Request(14, 3.0, 9, 5, (1, 6, 7), 4),
]


# ---------------------------------------------- Part A replays: random traces, results
@st.composite
def prefix_traces(draw, chained: bool = True):
    """Requests over a random tree of prefixes: a prompt takes a prefix of an earlier prompt
    (or nothing) and appends fresh pages; a partial last page may be extended by a later
    prompt (its id then stands for a full page there). Unchained: ids drawn from a small
    range, so the same id comes back after different prefixes."""
    page = draw(st.sampled_from([1, 2, 4, 16]))
    num_requests = draw(st.integers(1, 40))
    prompts: list[tuple[int, ...]] = []
    next_id, now = 1, 0.0
    requests = []
    for position in range(num_requests):
        now, base = draw_arrival_and_base(draw, now, prompts)
        num_new = draw(st.integers(0 if base else 1, 5))
        new = []
        for _ in range(num_new):
            if chained:
                new.append(next_id)
                next_id += 1
            else:
                new.append(draw(st.integers(1, 8)))
        ids = base + tuple(new)
        last = draw(st.integers(1, page))
        length = (len(ids) - 1) * page + last
        requests.append(Request(position, now, length, 1, ids, page))
        prompts.append(ids)
    return requests


def replay_part_a(cache, requests, interval=1.0):
    """(hits per request, counters, sorted resident page ids, state rows, timeseries as
    lists with NaN as -1) or the InputError message."""
    try:
        result = replay_cache_only(requests, cache, sample_interval_s=interval)
    except InputError as exc:
        return str(exc)
    if isinstance(cache, SegmentCache):
        cache.check_invariants()
        resident = sorted(pid for node in cache.segments() for pid in node.ids)
    else:
        resident = sorted(page.page_id for page in cache.pages())
    hits = [r.cached_tokens for r in result.records]
    series = sample_cache_states(
        result.states, np.array([r.arrival_s for r in requests]),
        np.array([r.input_tokens for r in requests]), np.array(hits), cache.capacity_tokens,
        interval, requests[-1].arrival_s)
    return hits, result.counters, resident, result.states, series.fillna(-1).to_dict("list")


CAPACITIES = st.one_of(st.none(), st.integers(0, 12), st.integers(12, 200))
TTLS = st.one_of(
    st.none(),
    st.builds(TTLRule, st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0]),
              st.sampled_from(list(TTLMode))),
)


def cannot_compile() -> str | None:
    """Why a Cython build cannot run here (no Cython, no C compiler), or None."""
    if importlib.util.find_spec("Cython") is None:
        return "Cython is not installed"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    return None


class LosingExecutor:
    """Stand-in executor (registered by a test under a name of its own): the worker of item
    `lost_index` of every map dies (a ConnectionError as its result); with `crash`, the pool
    breaks after it. The others run here, in order."""

    crash = False
    lost_index = 1

    def __init__(self, n_jobs=None, address=None):
        pass

    def open(self):
        pass

    def close(self):
        pass

    def map_unordered(self, fn, items):
        for index, item in enumerate(items):
            if index == self.lost_index:
                if self.crash:
                    raise RuntimeError("pool broke")
                yield index, ConnectionError("worker died")
            else:
                yield index, fn(item)


def refusal(call: Callable, *args, **kwargs) -> str:
    """The one-line text (file, line and field included) of the InputError that
    `call(*args, **kwargs)` raises; fails the test when it raises none."""
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)
