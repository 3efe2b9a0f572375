# Types of cache_only_fast.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): the chunk replay's loop counts requests and block offsets in C and calls the
# typed SegmentCache's `access` directly (segment_tree.pxd), without a Python call.
cimport cython
from prefixsim.cache.segment_tree cimport SegmentCache
from prefixsim.engine.cache_samples cimport gap_rows, state_row


@cython.locals(position=Py_ssize_t, block=Py_ssize_t, last=Py_ssize_t, base=Py_ssize_t,
               i=Py_ssize_t, count=Py_ssize_t, now=cython.double, upcoming=cython.double,
               arrivals=double[:], inputs=cython.longlong[:], sizes=cython.longlong[:],
               starts=cython.longlong[:], matched=cython.longlong[:])
cpdef Py_ssize_t _replay_chunks(object chunks, SegmentCache cache, object on_chunk,
                                object on_progress, Py_ssize_t progress_every,
                                object sample_interval_s, list states) except? -1
