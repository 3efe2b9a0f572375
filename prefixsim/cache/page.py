"""A resident page of the prefix cache: one node of the radix tree.

A page is the unit of storage and matching (docs/cache-semantics.md R1). The tree owns every field
but `policy_state`; eviction policies read them to compute a victim key and never write them.
`policy_state` is the policy's own: where a policy that keeps state per page (S3-FIFO's
queue and frequency) keeps it, so that reading it is a field, not a look-up by page id
(a SegmentCache keeps such states per segment position instead: cache/segment_tree.py).
"""

from __future__ import annotations

INFINITY = float("inf")


class Page:
    """One resident page (tree node) and the statistics policies may read.

    Fields:
      page_id        chained id of the prefix ending with this page
      parent         the page before it in the prefix (None for a first page, and for a
                     page the tree removed in radix mode: cache/tree.py `_let_go`)
      num_tokens     tokens this page holds (charged against capacity)
      depth          0 for a first page
      num_children   resident children (0 = a leaf)
      lock_count     running requests whose locked path includes this page (R8)
      created_s      simulated time of insertion
      last_access_s  simulated time of the last hit or insert
      recency        logical order of the last access (the replay position of the request)
      deadline_s     TTL deadline (inf without TTL); never earlier than any child's (R12)
      num_hits       matches that reused this page (R5)
      priority       highest priority of a request that touched it (R16)
      version        bumped whenever a queued victim entry of this page goes stale
      inserted       the cache's count of pages inserted before this one (its insertion
                     order: FIFO's key; a page inserted again after leaving comes last)
      policy_state   the eviction policy's record of this page (None until it sets one;
                     the tree never reads it)
    """

    __slots__ = (
        "page_id",
        "parent",
        "num_tokens",
        "depth",
        "num_children",
        "lock_count",
        "created_s",
        "last_access_s",
        "recency",
        "deadline_s",
        "num_hits",
        "priority",
        "version",
        "resident",
        "inserted",
        "policy_state",
    )

    def __init__(
        self,
        page_id: int,
        parent: Page | None,
        num_tokens: int,
        now: float,
        recency: int,
        deadline_s: float = INFINITY,
        priority: int = 0,
        inserted: int = 0,
    ) -> None:
        self._fill(page_id, parent, num_tokens, now, recency, deadline_s, priority, inserted)

    def _fill(self, page_id: int, parent: Page | None, num_tokens: int, now: float,
              recency: int, deadline_s: float, priority: int, inserted: int) -> None:
        """A new page's fields (see the class): no children, locks or hits yet."""
        self.page_id = page_id
        self.parent = parent
        self.num_tokens = num_tokens
        # (through the field: compiled, a typed Page's depth is read in C)
        self.depth = 0 if parent is None else self.parent.depth + 1
        self.num_children = 0
        self.lock_count = 0
        self.created_s = now
        self.last_access_s = now
        self.recency = recency
        self.deadline_s = deadline_s
        self.num_hits = 0
        self.priority = priority
        self.version = 0
        self.resident = True
        self.inserted = inserted
        self.policy_state = None

    @property
    def is_leaf(self) -> bool:
        return self.num_children == 0

    def path(self) -> list[Page]:
        """Pages from the first page of the prefix down to this one."""
        pages: list[Page] = []
        node: Page | None = self
        while node is not None:
            pages.append(node)
            node = node.parent
        pages.reverse()
        return pages

    def chain(self) -> tuple[list[int], list[int]]:
        """The ids and tokens of `path()`'s pages (what a shared pool's write-back writes)."""
        pages = self.path()
        return [p.page_id for p in pages], [p.num_tokens for p in pages]

    def __repr__(self) -> str:
        return (
            f"Page(id={self.page_id}, tokens={self.num_tokens}, depth={self.depth}, "
            f"children={self.num_children}, locks={self.lock_count}, recency={self.recency})"
        )


def new_page(page_id: int, parent: Page | None, num_tokens: int, now: float, recency: int,
             deadline_s: float, priority: int, inserted: int) -> Page:
    """`Page(...)` as the tree makes them: compiled, a C call (page.pxd), no arguments
    packed for `__init__`."""
    page = Page.__new__(Page)
    page._fill(page_id, parent, num_tokens, now, recency, deadline_s, priority, inserted)
    return page
