"""Lower memory tiers below HBM: host DRAM and disk (docs/cache-semantics.md R15), write-back.

HBM is the radix tree; each lower tier is a flat, LRU, token-bounded store of pages keyed by
chained page id (a flat store needs no parent resident in the same tier, since a chain may
continue from HBM into host memory). Pages evicted from HBM demote to the first lower
tier; pages a full tier pushes out demote to the next; the last tier drops them. Expired
pages do not demote. A request's match continues below HBM page by page: each following
page found in a lower tier is a hit of that tier and is *taken* out of it (exclusive
tiers: the loaded copy lives in HBM again, which demotes it on its next eviction).

Load time = bytes / link bandwidth per tier (`load_time_s`, or the cost model's
`transfer_time_s`); the timed engine adds it to the step that runs the request's first
prefill chunk (a blocking copy, not overlapped with compute). Runs shorter than
`min_load_tokens` are not loaded (recomputed instead, R15). Not here: copy-in-flight
locking (C14), per-tier TTL.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prefixsim.cache.protocol import PrefixCache
from prefixsim.cache.segment_tree import SegmentPage

TransferTime = Callable[[int, float], float]


@dataclass(frozen=True, slots=True)
class TierSpec:
    """One lower tier: its name, capacity in tokens and link bandwidth (bytes/s)."""

    name: str
    capacity_tokens: int
    bandwidth_bytes_s: float

    def __post_init__(self) -> None:
        if self.capacity_tokens < 0:
            raise ValueError(f"{self.name} capacity must be >= 0, got {self.capacity_tokens}")
        if not self.bandwidth_bytes_s > 0:
            raise ValueError(f"{self.name} bandwidth must be > 0, got {self.bandwidth_bytes_s}")


class FlatTier:
    """An LRU store of page id -> tokens with a token capacity."""

    def __init__(self, spec: TierSpec) -> None:
        self.spec = spec
        self.resident_tokens = 0
        self.demoted_tokens = 0
        self._pages: OrderedDict[int, int] = OrderedDict()
        # told `added(page_id)` / `removed(page_id)` (a router's index, router/index.py)
        self.observer = None

    def __contains__(self, page_id: int) -> bool:
        return page_id in self._pages

    def put(self, page_id: int, num_tokens: int) -> list[tuple[int, int]]:
        """Store a page as most recent; returns the (id, tokens) pushed out to make room."""
        pushed: list[tuple[int, int]] = []
        if num_tokens > self.spec.capacity_tokens:
            return [(page_id, num_tokens)]
        old = self._pages.pop(page_id, None)
        if old is not None:
            self.resident_tokens -= old
        while self.resident_tokens + num_tokens > self.spec.capacity_tokens:
            victim, tokens = self._pages.popitem(last=False)
            self.resident_tokens -= tokens
            pushed.append((victim, tokens))
        self._pages[page_id] = num_tokens
        self.resident_tokens += num_tokens
        self.demoted_tokens += num_tokens
        observer = self.observer
        if observer is not None:
            for victim, _ in pushed:
                observer.removed(victim)
            observer.added(page_id)
        return pushed

    def tokens_of(self, page_id: int) -> int | None:
        """Tokens of a stored page, or None when it is not here."""
        return self._pages.get(page_id)

    def take(self, page_id: int) -> int:
        """Remove a page (it is being loaded back into HBM); returns its tokens."""
        tokens = self._pages.pop(page_id)
        self.resident_tokens -= tokens
        if self.observer is not None:
            self.observer.removed(page_id)
        return tokens


@dataclass(frozen=True, slots=True)
class LowerHit:
    """Pages of a request found below HBM: tier index (0 = host) per page, in order."""

    tiers: tuple[int, ...]
    tokens: tuple[int, ...]
    page_ids: tuple[int, ...] = ()

    @property
    def num_pages(self) -> int:
        return len(self.tiers)


class TierStack:
    """HBM (the prefix cache) above lower tiers; wires demotion into the cache's evictions."""

    def __init__(
        self, hbm: PrefixCache, specs: Sequence[TierSpec], min_load_tokens: int = 0
    ) -> None:
        if min_load_tokens < 0:
            raise ValueError(f"min_load_tokens must be >= 0, got {min_load_tokens}")
        self.hbm = hbm
        self.tiers = [FlatTier(spec) for spec in specs]
        self.min_load_tokens = min_load_tokens
        hbm.on_demote = self._demote

    @property
    def names(self) -> list[str]:
        return [tier.spec.name for tier in self.tiers]

    def _demote(self, page: SegmentPage) -> None:
        self._put_from(0, page.page_id, page.num_tokens)

    def _put_from(self, first_tier: int, page_id: int, num_tokens: int) -> None:
        """Store a page in tier `first_tier`; what a full tier pushes out goes to the next,
        and the last tier drops it (R15)."""
        pending = [(page_id, num_tokens)]
        for tier in self.tiers[first_tier:]:
            pushed: list[tuple[int, int]] = []
            for pending_id, pending_tokens in pending:
                pushed.extend(tier.put(pending_id, pending_tokens))
            pending = pushed
            if not pending:
                return

    def peek_run(self, page_ids: Sequence[int]) -> LowerHit:
        """The run of `page_ids` (those after the HBM match) found in lower tiers, in order,
        stopping at the first page found nowhere, or at an id the run has found already
        (ids that are not chained: a tier holds a page once, so it cannot be loaded twice;
        HBM's insert then reports the conflict); empty when the run holds fewer than
        `min_load_tokens` (too short to be worth loading: recomputed, R15). Changes nothing
        (see `take`)."""
        found_tiers: list[int] = []
        found_tokens: list[int] = []
        found_ids: list[int] = []
        seen: set[int] = set()
        for page_id in page_ids:
            if page_id in seen:
                break
            seen.add(page_id)
            for index, tier in enumerate(self.tiers):
                tokens = tier.tokens_of(page_id)
                if tokens is not None:
                    found_tiers.append(index)
                    found_tokens.append(tokens)
                    found_ids.append(page_id)
                    break
            else:
                break
        if sum(found_tokens) < self.min_load_tokens:
            return LowerHit((), (), ())
        return LowerHit(tuple(found_tiers), tuple(found_tokens), tuple(found_ids))

    def take(self, hit: LowerHit) -> None:
        """Take the pages of a `peek_run` out of their tiers: they are being loaded."""
        for index, page_id in zip(hit.tiers, hit.page_ids, strict=True):
            self.tiers[index].take(page_id)

    def put_back(self, hit: LowerHit, from_page: int) -> None:
        """Return the pages of a taken `hit` from position `from_page` on to the tiers they
        were taken from (HBM could not keep them), pushing out to lower tiers as a demotion
        does: a page loaded but not kept is never lost from every tier."""
        for index, page_id, tokens in zip(hit.tiers[from_page:], hit.page_ids[from_page:],
                                          hit.tokens[from_page:], strict=True):
            self._put_from(index, page_id, tokens)

    def take_run(self, page_ids: Sequence[int]) -> LowerHit:
        """`peek_run` then `take`: the run found below HBM, taken out to be loaded."""
        hit = self.peek_run(page_ids)
        self.take(hit)
        return hit

    def load_time_s(
        self,
        hit: LowerHit,
        kv_bytes_per_token: int,
        transfer_time_s: TransferTime = lambda num_bytes, bandwidth: num_bytes / bandwidth,
    ) -> float:
        """Seconds to copy `hit` back to HBM, tier by tier over each tier's link
        (`transfer_time_s(bytes, bandwidth_bytes_s)`: pass a cost model's to use its rule)."""
        total = 0.0
        for index in range(len(self.tiers)):
            tokens = sum(t for i, t in zip(hit.tiers, hit.tokens, strict=True) if i == index)
            if tokens:
                bandwidth = self.tiers[index].spec.bandwidth_bytes_s
                total += transfer_time_s(tokens * kv_bytes_per_token, bandwidth)
        return total


def build_tier_stack(
    hbm: PrefixCache,
    host_capacity_tokens: int | None,
    host_bandwidth_gb_s: float,
    disk_capacity_tokens: int | None = None,
    disk_bandwidth_gb_s: float = 5.0,
    min_load_tokens: int = 0,
) -> TierStack | None:
    """Host DRAM and disk tiers under `hbm` (each only when its capacity is given)."""
    specs = [
        TierSpec(name, capacity, bandwidth_gb_s * 1e9)
        for name, capacity, bandwidth_gb_s in (
            ("host", host_capacity_tokens, host_bandwidth_gb_s),
            ("disk", disk_capacity_tokens, disk_bandwidth_gb_s),
        )
        if capacity is not None
    ]
    return TierStack(hbm, specs, min_load_tokens) if specs else None
