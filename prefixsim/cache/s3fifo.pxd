# Types of s3fifo.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): S3FIFO and its per-page state become extension types with typed fields, and
# the hooks the tree calls for every page get C-typed locals.
cimport cython
from prefixsim.cache.page cimport Page
from prefixsim.cache.policy cimport Policy


cdef long long DUE, MAIN, SMALL, GONE, MAX_FREQUENCY, GHOST_SHIFT, GHOST_TOKENS


cdef class PageState:
    cdef public long long queue
    cdef public long long position
    cdef public long long frequency
    cdef public long long tokens
    cdef public object holder


cdef class S3FIFO(Policy):
    cdef public double small_fraction
    cdef public long long _clock
    cdef public long long _tracked
    cdef public list _small_states
    cdef public Py_ssize_t _small_head
    cdef public long long _small_tokens
    cdef public dict _ghost
    cdef public list _ghost_order
    cdef public Py_ssize_t _ghost_head
    cdef public long long _ghost_base
    cdef public long long _ghost_tokens
    cdef public object _requeue
    cdef public bint _by_state
    cdef public list _hand
    cdef public list _hand_clock
    cdef public double _small_budget
    cdef public double _ghost_budget

    @cython.locals(position=cython.longlong)
    cpdef long long _tick(self)

    cpdef double key(self, Page page) except? -1

    @cython.locals(band=cython.double)
    cpdef double key_of(self, PageState state) except? -1

    cpdef on_insert(self, Page page)

    @cython.locals(states=list, i=Py_ssize_t)
    cpdef list enter_run(self, object page_ids, Py_ssize_t start, Py_ssize_t count,
                         long long page_tokens, long long last_tokens, object holder)

    @cython.locals(position=cython.longlong, ghost=object, held=cython.longlong,
                   state=PageState)
    cpdef PageState _enter(self, object page_id, long long tokens, object holder)

    @cython.locals(state=PageState, states=list, head=Py_ssize_t)
    cpdef _overflow(self)

    cpdef on_access(self, Page page)

    @cython.locals(state=PageState)
    cpdef hit_run(self, list states)

    cpdef _hit(self, PageState state)

    cpdef bint reconsider(self, Page page) except? -1

    @cython.locals(frequency=cython.longlong, queue=cython.longlong)
    cpdef bint second_chance(self, PageState state) except? -1

    @cython.locals(hand=list, clocks=list)
    cpdef long long _missed_laps(self, long long position, long long frequency) except? -1

    @cython.locals(queue=cython.longlong)
    cpdef long long _drop(self, PageState state) except? -2

    @cython.locals(queue=cython.longlong)
    cpdef long long _forget(self, Page page) except? -2

    cpdef on_evict(self, Page page)

    cpdef on_expire(self, Page page)

    @cython.locals(tokens=cython.longlong)
    cpdef leave(self, PageState state, object page_id, bint evicted)

    @cython.locals(ghost=dict, order=list, found=object, held=cython.longlong,
                   number=cython.longlong, head=Py_ssize_t, kept=Py_ssize_t)
    cpdef _to_ghost(self, object page_id, long long tokens)


cpdef Py_ssize_t _consumed(list fifo, Py_ssize_t head) except? -1
