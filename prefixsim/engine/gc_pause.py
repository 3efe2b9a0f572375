"""`paused_gc()`: Python's cyclic garbage collector paused for the length of a replay.

The engines make millions of short-lived objects (pages, heap entries, events, rows), freed
by reference counting; the collector's passes over them find nothing and cost about a tenth
of a run. The few cycles (a timed replica and its simpy process) live as long as the run;
the compressed cache's tree (a segment and its parent) is taken apart when the cache is
cleared or freed (cache/segment_tree.py: SegmentCache.clear), so it never waits for the
collector.
The entry point of a run applies it around the replay (pipeline/timed.py, the cache-only
replays); the previous setting is restored after it, and anything cyclic left is collected
then as usual. Owned here: only the pause; what runs inside it is the caller's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
