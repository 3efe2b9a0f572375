# Types of cache_samples.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): the replay loops' sampling calls become C calls (cache_only_fast.pxd).
cimport cython
from prefixsim.cache.cache_types cimport CacheCounters


cdef double _K_MAX


@cython.locals(k=cython.longlong, quotient=double)
cpdef double next_sample(double now, double interval_s) except? -1.0

@cython.locals(soonest=double, point=double)
cpdef double gap_rows(object cache, list states, double upcoming, double now,
                      double interval_s) except? -1.0

cpdef tuple state_row(double upcoming, object cache)

cpdef tuple row_of(double upcoming, long long resident_tokens, CacheCounters counters)
