"""Namespaces (docs/cache-semantics.md R2): same ids in two namespaces never name the same page.

A cache key is (namespace, content). Rather than carry the namespace through every cache,
router and curve, a trace that sets any namespace has each distinct (namespace, page id)
pair renumbered to its own id (dense, in arrival order; requests without a namespace form
one namespace of their own). Chaining survives, since the mapping is one-to-one: equal new
ids still mean equal prefixes within a namespace, and pages of different namespaces can no
longer match, in the cache-only replay, the timed engine and the routers alike. A trace with
no namespace is returned unchanged (its ids are kept as read).
"""

from __future__ import annotations

from dataclasses import replace

from prefixsim.trace.record import Request


def separate_namespaces(requests: list[Request]) -> list[Request]:
    """`requests` with page ids made distinct per namespace (the same list when none is set)."""
    if all(request.namespace is None for request in requests):
        return requests
    ids: dict[tuple[str | None, int], int] = {}
    out = []
    for request in requests:
        namespace = request.namespace
        pages = tuple(ids.setdefault((namespace, page_id), len(ids))
                      for page_id in request.page_ids)
        out.append(replace(request, page_ids=pages))
    return out
