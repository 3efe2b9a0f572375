# Types of s3fifo.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): S3FIFO and its per-page state become extension types with typed fields, and
# the hooks the tree calls for every page get C-typed locals.
cimport cython
from prefixsim.cache.page cimport Page
from prefixsim.cache.policy cimport Policy


cdef class PageState:
    cdef public long long queue
    cdef public long long position
    cdef public long long frequency


cdef class S3FIFO(Policy):
    cdef public double small_fraction
    cdef public long long _clock
    cdef public dict _state
    cdef public object _small_fifo
    cdef public long long _small_tokens
    cdef public object _ghost
    cdef public long long _ghost_tokens
    cdef public object _cache
    cdef public list _hand
    cdef public list _hand_clock
    cdef public double _small_budget
    cdef public double _ghost_budget

    cpdef long long _tick(self)

    @cython.locals(state=PageState, band=cython.double)
    cpdef double key(self, Page page) except? -1

    @cython.locals(position=cython.longlong)
    cpdef on_insert(self, Page page)

    @cython.locals(state=PageState, page=Page, at=cython.longlong, states=dict)
    cpdef _overflow(self)

    @cython.locals(state=PageState)
    cpdef on_access(self, Page page)

    @cython.locals(state=PageState, frequency=cython.longlong, queue=cython.longlong)
    cpdef bint reconsider(self, Page page) except? -1

    @cython.locals(hand=list, clocks=list)
    cpdef long long _missed_laps(self, long long position, long long frequency) except? -1

    @cython.locals(state=PageState)
    cpdef long long _forget(self, Page page) except? -2

    cpdef on_evict(self, Page page)

    cpdef on_expire(self, Page page)
