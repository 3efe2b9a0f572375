# Types of replica_memory.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): ReplicaMemory becomes an extension type. Its counters are C fields, the cache
# an object (a SegmentCache, or in tests the per-page reference: a Python call per step),
# and the methods a step runs are typed, with
# the requests they read as typed RequestStates (request_state.pxd). No instance dict: every
# attribute is a declared field (a Python subclass, DecodeReplica, has a dict of its own), so
# a typed method called on a plain replica skips Cython's look-up for a Python override,
# which an instance dict forces on every call. `admit` and `grow` stay Python methods:
# the scheduler is handed them as bound methods, which for a typed method Cython would bind
# to this class's C function, past a subclass's override.
cimport cython
from prefixsim.engine.request_state cimport RequestState


cdef class ReplicaMemory:
    cdef public object env
    cdef public object cache
    cdef public long long capacity_tokens
    cdef public object cost_model
    cdef public object tiers
    cdef public object kv_bytes_per_token
    cdef public object pool
    cdef public object link
    cdef public object waiting
    cdef public list running
    cdef public bint async_loads
    cdef public list loading
    cdef public double _load_link_free_s
    cdef public long long num_preemptions
    cdef public long long query_tokens
    cdef public long long hit_tokens
    cdef public long long _recency
    cdef public long long _decode_room
    cdef public long long _load_tokens

    cpdef _change_load(self, long long tokens)

    cpdef long long _available(self) except? -1

    cpdef _reserve(self, long long num_tokens)

    @cython.locals(prepaid=cython.longlong, spare=cython.longlong, size=cython.longlong)
    cpdef long long _admit_loaded(self, RequestState state, long long budget) except? -2

    cpdef _release(self, RequestState state)

    cpdef _preempt(self, RequestState state)

    @cython.locals(running=list, room=cython.longlong, s=RequestState)
    cpdef _make_decode_room(self)

    @cython.locals(state=RequestState)
    cpdef _reserve_decode(self, list decodes, long long num_steps)

    @cython.locals(covered=cython.longlong)
    cpdef _advance_prefill(self, RequestState state, long long num_tokens)

    @cython.locals(first=cython.longlong, moved=cython.longlong, placed=object,
                   now=cython.double)
    cpdef _insert_pages(self, RequestState state, long long covered, bint write_through)
