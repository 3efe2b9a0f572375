# Types of tree.py (Cython's pure-Python mode).
cimport cython
from prefixsim.cache.idle_ages cimport age_bin
from prefixsim.cache.ordered_queue cimport OrderedQueue
from prefixsim.cache.page cimport Page, new_page


cdef class CacheCounters:
    cdef public long long evicted_pages
    cdef public long long evicted_tokens
    cdef public long long expired_pages
    cdef public long long expired_tokens
    cdef public long long inserted_pages
    cdef public long long inserted_tokens
    cdef public long long peak_tokens
    cdef public object hit_ages
    cdef public object evicted_ages
    cdef public object expired_ages


cpdef bint _is_current(tuple entry, Page page) except? -1

cpdef bint _sorts_first(object key, Page page, tuple entry) except? -1

cpdef bint _is_current_block(tuple entry, Page page) except? -1


cdef class PageFeed:
    cpdef added(self, Page page)

    cpdef removed(self, Page page)


cdef class RadixCache:
    cdef public object capacity_tokens
    cdef public object policy
    cdef public object ttl
    cdef public object mode
    cdef public bint block
    cdef public object _current
    cdef public CacheCounters counters
    cdef public double _clock
    cdef public long long resident_tokens
    cdef public long long locked_tokens
    cdef public long long reserved_tokens
    cdef public dict _pages
    cdef public OrderedQueue _victims
    cdef public OrderedQueue _deadlines
    cdef public long long _until_compact
    cdef public bint _hook_access
    cdef public bint _hook_insert
    cdef public bint _hook_evict
    cdef public object _reconsider
    cdef public object _on_expire
    cdef public PageFeed _feed
    cdef public object _observer
    cdef public int _key_field
    cdef public object on_demote

    @cython.locals(page=Page, parent=Page, pages=list)
    cpdef object match(self, object page_ids, double now)

    @cython.locals(page=Page, tip=Page)
    cpdef object touch(self, object pages, double now, long long recency, object ttl_s=*,
                       long long priority=*)

    @cython.locals(page=Page, first_new=Page, tokens=cython.longlong,
                   resident=cython.longlong, start=cython.longlong, new_pages=cython.longlong,
                   inserted=cython.longlong, last_new=Py_ssize_t, limit=cython.double,
                   deadline=cython.double, placed=list, pages=dict, tip=Page,
                   counters=CacheCounters, feed=PageFeed, count=Py_ssize_t,
                   index=Py_ssize_t)
    cpdef list insert(self, Page parent, object page_ids, object page_tokens, double now,
                      long long recency, object ttl_s=*, long long priority=*)

    @cython.locals(old=Page)
    cpdef bint _adopt(self, Page orphan, Page parent) except? -1

    cpdef object available_tokens(self)

    cpdef reserve(self, long long num_tokens)

    cpdef release(self, long long num_tokens)

    @cython.locals(node=Page)
    cpdef lock(self, Page page)

    @cython.locals(node=Page)
    cpdef relock(self, Page old, Page page, double now)

    @cython.locals(node=Page)
    cpdef unlock(self, Page page, double now)

    @cython.locals(need=cython.longlong)
    cpdef bint evict(self, long long num_tokens, Page protect=*) except? -1

    @cython.locals(page=Page, parent=Page, tokens=cython.longlong, evicted=cython.longlong,
                   evicted_tokens=cython.longlong, ready=bint, clock=cython.double,
                   bucket=Py_ssize_t, queue=OrderedQueue, pages=dict, ttl=bint,
                   reconsider=object, counters=CacheCounters, run_first=tuple,
                   feed=PageFeed)
    cpdef bint _evict_leaves(self, long long need, Page protect) except? -1

    @cython.locals(page=Page, tokens=cython.longlong, clock=cython.double,
                   queue=OrderedQueue, counters=CacheCounters)
    cpdef bint _evict_general(self, long long need, Page protect) except? -1

    @cython.locals(page=Page, freed=cython.longlong, queue=OrderedQueue)
    cpdef long long expire(self, double now) except? -1

    @cython.locals(block=bint)
    cpdef _raise_deadlines(self, Page page, double deadline)

    cpdef _let_go(self, Page page)

    cpdef _queue(self, Page page)

    @cython.locals(version=cython.longlong)
    cpdef object _entry(self, Page page)

    @cython.locals(field=int)
    cpdef object _victim_key(self, Page page)

    @cython.locals(parent=Page)
    cpdef object _remove(self, Page page, bint defer=*, bint expired=*)
