# Types of request_state.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): RequestState becomes an extension type whose token counts and times are C
# fields, read as such by the replica's typed methods (replica_memory.pxd, replica.pxd) and
# the scheduler. Times that may be None (not reached yet) stay objects.
cimport cython


cdef class RequestState:
    cdef public object request
    cdef public object replica
    cdef public object status
    cdef public double arrival_s
    cdef public object admitted_s
    cdef public object first_token_s
    cdef public object finish_s
    cdef public long long cached_tokens
    cdef public long long recomputed_tokens
    cdef public long long preemptions
    cdef public long long prompt_tokens
    cdef public long long computed_tokens
    cdef public long long tree_tokens
    cdef public long long private_tokens
    cdef public long long num_tree_pages
    cdef public object tip
    cdef public long long generated_tokens
    cdef public long long target_tokens
    cdef public object rule
    cdef public long long cached_tokens_host
    cdef public long long cached_tokens_disk
    cdef public long long cached_tokens_pool
    cdef public double load_s
    cdef public double last_token_s
    cdef public object decode_replica
    cdef public object decode_source
    cdef public bint gap_pending
    cdef public long long loaded_chunk_tokens


@cython.locals(arrival=cython.double, first=cython.double, finish=cython.double,
               admitted=cython.double, generated=cython.longlong, tpot=cython.double)
cpdef tuple served_row(RequestState state, double emission_s=*)
