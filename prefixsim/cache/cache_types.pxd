# Types of cache_types.py (Cython's pure-Python mode): the counters are an extension type
# with 64-bit counts, which the segment tree and the samplers cimport and add to in C.


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
