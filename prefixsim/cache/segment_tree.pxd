# Types of segment_tree.py for `prefixsim accelerate` (Cython's pure-Python mode: this file
# augments the Python source, which stays the only implementation; docs/architecture.md
# "Compiled hot modules"). Segment and SegmentCache become extension types with typed
# fields; the methods of one request's replay get C-typed locals. Integers that hold token
# counts, depths and replay positions are 64-bit; times are doubles.
cimport cython
from cpython.array cimport array as IdArray
cimport prefixsim.cache.id_arrays as _ids
from prefixsim.cache.idle_ages cimport age_bin
from prefixsim.cache.cache_types cimport CacheCounters
from prefixsim.cache.ordered_queue cimport OrderedQueue


# Tracked by the cyclic collector like any object with references (a `@cython.no_gc` here
# would be ignored: Cython takes class directives from the source only); the tree's cycles
# (a segment, its parent's child map) are taken apart by the cache itself
# (SegmentCache.clear, on being freed), and replays pause the collector (engine/gc_pause.py).
cdef class Segment:
    cdef public IdArray ids
    cdef public object first
    cdef public object parent
    cdef public dict children
    cdef public long long depth
    cdef public long long page_tokens
    cdef public long long last_tokens
    cdef public long long num_tokens
    cdef public double created_s
    cdef public double last_access_s
    cdef public long long recency
    cdef public double deadline_s
    cdef public long long num_hits
    cdef public object priority
    cdef public long long version
    cdef public bint resident
    cdef public long long inserted
    cdef public double aged_base
    cdef public tuple keys
    cdef public long long deadline_entry
    cdef public long long lock_count
    cdef public list states
    cdef public tuple lost
    cdef public object above
    cdef public object below


cdef class SegmentPage:
    cdef public object page_id
    cdef public long long num_tokens
    cdef public object _node
    cdef public Py_ssize_t _index


@cython.locals(seg=IdArray, size=Py_ssize_t, ids=list, tokens=list, run=list, lost=tuple)
cdef tuple _path_pages(Segment node, Py_ssize_t upto)


@cython.locals(page=SegmentPage)
cdef SegmentPage _segment_page(object page_id, long long num_tokens, object node,
                               Py_ssize_t index)


@cython.locals(node=Segment)
cdef Segment _new_segment(IdArray ids, object first, object parent, long long depth,
                          long long page_tokens, long long last_tokens, double now,
                          long long recency, double deadline_s, object priority=*)

cdef _fill(Segment node, IdArray ids, object first, object parent, long long depth,
           long long page_tokens, long long last_tokens, double now, long long recency,
           double deadline_s, object priority)


cdef double _NO_TIME
cdef double _NEVER
cdef long long _NO_ENTRY


cdef inline bint _live_entry(Segment node, long long entry, bint leaves_only)


cdef object _category(Segment node)


@cython.locals(i=Py_ssize_t)
cdef Py_ssize_t _position(list states, object state) except -1


@cython.locals(above=Segment)
cdef set _path_above(Segment node)


cdef class DeadlineRun:
    cdef public list run
    cdef public Py_ssize_t first
    cdef public long long base
    cdef public double last_s
    cdef public list heap
    cdef public long long count
    cdef public bint leaves_only
    cdef public double floor_s

    @cython.locals(deadline=double, run=list, count=cython.longlong)
    cpdef push(self, Segment node)

    @cython.locals(run=list, first=Py_ssize_t, size=Py_ssize_t, base=cython.longlong,
                   node=Segment, head=Segment, heap=list, entry=tuple,
                   number=cython.longlong, deadline=double)
    cpdef Segment pop_below(self, double now)


cpdef bint _same_prefix(IdArray page_ids, Py_ssize_t pos, IdArray seg, Py_ssize_t length,
                        bint chained) except? -1

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t _match_length(IdArray page_ids, Py_ssize_t pos, IdArray seg, Py_ssize_t size,
                               Py_ssize_t n, bint chained) except? -1


cdef class SegmentCache:
    cdef object _capacity_tokens
    cdef public bint _bounded
    cdef public long long _capacity
    cdef public object policy
    cdef public object ttl
    cdef public object mode
    cdef public bint block
    cdef public CacheCounters counters
    cdef public double _clock
    # the counters' idle-age bins (AgeHistogram.counts, arrays), added to in C
    cdef long long[:] _hit_ages
    cdef long long[:] _evicted_ages
    cdef long long[:] _expired_ages
    cdef public long long resident_tokens
    cdef public long long locked_tokens
    cdef public long long reserved_tokens
    cdef public long long num_segments
    cdef public dict _roots
    cdef public set _ids
    cdef public long long _num_pages
    cdef public OrderedQueue _victims
    cdef public DeadlineRun _deadlines
    cdef public int _key_field
    cdef public long long _until_compact
    cdef public object _key
    cdef public object _aging
    cdef public bint _keyed
    cdef public bint _lazy
    cdef public bint _run_keyed
    cdef public bint _valued
    cdef public bint _stateful
    cdef public bint _sliding
    cdef public bint _any_victim
    cdef public bint _head_first
    cdef public bint _page_entries
    cdef public long long _stamp
    cdef public object _key_of
    cdef public dict _orphans
    cdef public bint _steady_key
    cdef public double _ttl_s
    cdef public object on_demote
    cdef public object observer

    cpdef clear(self)

    @cython.locals(node=Segment, stack=list, children=dict)
    cpdef _take_apart(self)

    @cython.locals(n=Py_ssize_t, pos=Py_ssize_t, end=Py_ssize_t, lo=Py_ssize_t,
                   run_pages=Py_ssize_t, node=Segment, tip=Segment,
                   seg=IdArray, block=IdArray, size=Py_ssize_t, whole=bint, chained=bint,
                   children=dict,
                   last=cython.longlong, run_last=cython.double, refresh=cython.double,
                   sliding=bint, run_keyed=bint,
                   new_tokens=cython.longlong, keys=tuple)
    cpdef long long access(self, object page_ids, double now, long long recency,
                           long long page_tokens, long long input_tokens,
                           Py_ssize_t first=*, Py_ssize_t stop=*) except? -1

    # a first id as one int object: the segment's `first` and its key in the child map
    @cython.locals(prefix=Segment, parent=Segment, keys=tuple, seg=IdArray, key=object)
    cpdef Segment _split(self, Segment node, Py_ssize_t k)

    # the per-request steps (step-by-step replays; a timed replica's, Part B)
    cpdef object match(self, object page_ids, double now)

    @cython.locals(n=Py_ssize_t, pos=Py_ssize_t, end=Py_ssize_t, lo=Py_ssize_t, node=Segment,
                   seg=IdArray, block=IdArray, size=Py_ssize_t, whole=bint, chained=bint,
                   any_victim=bint, tip=Segment, children=dict)
    cpdef list _walk(self, Segment parent, object page_ids, Py_ssize_t start, list path)

    @cython.locals(count=Py_ssize_t, path=object, matched=Py_ssize_t, tokens=list, tip=Segment)
    cpdef long long _access_steps(self, IdArray ids, double now, long long recency,
                                  long long page_tokens, long long input_tokens) except? -1

    @cython.locals(count=Py_ssize_t, stop=Py_ssize_t, fit=Py_ssize_t, first_id=object,
                   before=Py_ssize_t, i=Py_ssize_t)
    cpdef object _insert_adopting(self, list path, Segment tip, IdArray block,
                                  Py_ssize_t placed, long long size, long long last_tokens,
                                  double now, long long recency, double ttl_s, object priority,
                                  tuple keys=*)

    @cython.locals(orphans=dict, node=Segment, i=Py_ssize_t)
    cpdef Py_ssize_t _next_orphan(self, IdArray block, Py_ssize_t lo, Py_ssize_t hi) except -1

    @cython.locals(orphan=Segment, seg=IdArray)
    cpdef Segment _adopt(self, Segment parent, object first_id)

    @cython.locals(queue=DeadlineRun)
    cpdef _raise_deadlines(self, Segment node, double deadline)

    @cython.locals(node=Segment)
    cpdef _queue_unlocked(self, list path)

    @cython.locals(child=Segment, lost=tuple, ids=list, tokens=list, above=tuple)
    cpdef _orphan_children(self, Segment node)

    @cython.locals(n=Py_ssize_t, pos=Py_ssize_t, node=Segment, seg=IdArray, block=IdArray,
                   size=Py_ssize_t, chained=bint, children=dict)
    cpdef Py_ssize_t matched_pages(self, object page_ids, double now) except -1

    @cython.locals(node=Segment, tip=Segment, sliding=bint, refresh=cython.double, path=list,
                   deadline=cython.double, run_keyed=bint)
    cpdef touch(self, object pages, double now, long long recency, object ttl_s=*,
                object priority=*)

    @cython.locals(count=Py_ssize_t, placed=Py_ssize_t, path=list, tip=Segment, block=IdArray,
                   keys=tuple, start=Py_ssize_t, node=Segment)
    cpdef object insert(self, Segment parent, object page_ids, object page_tokens, double now,
                        long long recency, object ttl_s=*, object priority=*)

    cpdef lock(self, Segment node)

    cpdef relock(self, Segment old, Segment node, double now)

    cpdef unlock(self, Segment node, double now)

    cpdef object available_tokens(self)

    cpdef reserve(self, long long num_tokens)

    cpdef release(self, long long num_tokens)

    @cython.locals(total=Py_ssize_t, fit=Py_ssize_t, before=Py_ssize_t, node=Segment,
                   anc=Segment, depth=cython.longlong, tokens=cython.longlong,
                   resident=cython.longlong, free=cython.longlong,
                   counters=CacheCounters, bounded=bint, block=IdArray, run=IdArray,
                   deadline=cython.double, first_id=object)
    cpdef long long insert_run(self, Segment parent, object page_ids, Py_ssize_t start,
                           long long page_tokens, long long last_tokens, double now,
                           long long recency, tuple keys=*, Py_ssize_t stop=*,
                           Py_ssize_t first=*, double ttl_s=*, object priority=*) except? -1

    @cython.locals(need=cython.longlong, node=Segment, size=Py_ssize_t, last=cython.longlong,
                   page=cython.longlong, k=cython.longlong, tokens=cython.longlong,
                   clock=cython.double, queue=OrderedQueue, pages_out=cython.longlong,
                   tokens_out=cython.longlong, counters=CacheCounters,
                   entry=tuple, ages=cython.longlong[:], steady=bint, seg=IdArray,
                   run_keyed=bint, per_page=bint, any_victim=bint, protected=set)
    cpdef bint evict(self, long long num_tokens, Segment protect=*) except? -1

    @cython.locals(node=Segment, size=Py_ssize_t, tokens=cython.longlong, queue=OrderedQueue,
                   counters=CacheCounters, entry=tuple, ages=cython.longlong[:],
                   clock=cython.double, seg=IdArray, states=list)
    cpdef bint _evict_states(self, long long need, Segment protect) except? -1

    @cython.locals(node=Segment, queue=OrderedQueue, counters=CacheCounters,
                   entry=tuple, ages=cython.longlong[:], clock=cython.double, protected=set,
                   skipped=list, size=Py_ssize_t, tokens=cython.longlong, k=Py_ssize_t,
                   page=cython.longlong, seg=IdArray, i=Py_ssize_t)
    cpdef bint _evict_heads(self, long long need, Segment protect) except? -1

    @cython.locals(seg=IdArray)
    cpdef tuple _head_entry(self, Segment node, long long version)

    @cython.locals(node=Segment, queue=OrderedQueue, counters=CacheCounters, entry=tuple,
                   ages=cython.longlong[:], clock=cython.double, protected=set,
                   skipped=list, index=Py_ssize_t, tokens=cython.longlong, stateful=bint,
                   runs=dict, span=tuple, second_chance=object, leave=object,
                   demote=object)
    cpdef bint _evict_pages(self, long long need, Segment protect) except? -1

    @cython.locals(size=Py_ssize_t)
    cpdef _leave_run(self, Segment node, Py_ssize_t first, Py_ssize_t last)

    @cython.locals(i=Py_ssize_t)
    cpdef _push_pages(self, Segment node)

    @cython.locals(stamp=cython.longlong)
    cpdef _push_page(self, Segment node, Py_ssize_t i)

    cpdef object _page_key(self, Segment node, Py_ssize_t i)

    @cython.locals(base=cython.double)
    cpdef tuple _valued_keys(self, Segment node, Segment parent)

    @cython.locals(node=Segment, above=Segment, depth=cython.longlong, seg=IdArray,
                   i=Py_ssize_t)
    cpdef Segment _resolve(self, tuple entry)

    cpdef bint _live_page(self, tuple entry) except? -1

    @cython.locals(seg=IdArray, size=Py_ssize_t)
    cpdef _drop_tail(self, Segment node, Py_ssize_t k, long long tokens)

    @cython.locals(node=Segment)
    cpdef requeue(self, object state)

    @cython.locals(seg=IdArray, states=list, i=Py_ssize_t)
    cpdef _leave_states(self, Segment node, bint evicted)

    @cython.locals(keys=tuple, seg=IdArray, size=Py_ssize_t, taken=Py_ssize_t, i=Py_ssize_t,
                   recency=cython.longlong, depth=cython.longlong, key=object)
    cpdef Py_ssize_t _keyed_run(self, Segment node, Py_ssize_t k, tuple head) except? -1

    cpdef double next_expiry_s(self)

    @cython.locals(node=Segment, parent=Segment, size=Py_ssize_t, freed=Py_ssize_t,
                   queue=DeadlineRun, counters=CacheCounters, ages=cython.longlong[:],
                   age=double, least=double, most=double)
    cpdef long long expire(self, double now) except? -1

    @cython.locals(seg=IdArray, size=Py_ssize_t, i=Py_ssize_t)
    cpdef _demote(self, Segment node, Py_ssize_t k)

    @cython.locals(parent=Segment)
    cpdef _remove(self, Segment node)

    @cython.locals(parent=Segment, children=dict)
    cpdef Segment _unlink(self, Segment node)

    @cython.locals(version=cython.longlong, seg=IdArray, size=Py_ssize_t)
    cpdef _queue(self, Segment node, bint with_deadline=*)

    @cython.locals(field=int)
    cpdef object _victim_key(self, Segment node)
