# Types of operator_times.py (Cython's pure-Python mode): OperatorTimes becomes an extension
# type whose per-step methods read C fields and call each other in C. Only figures that are
# floats or ints in every run are typed; the arithmetic is the source's, in its order.
cimport cython

cpdef long long _tiles(long long rows, long long tile) except? -1


cdef class OperatorTimes:
    cdef public object dims
    cdef public object params
    cdef public object weight_bytes
    cdef public object kv_bytes
    cdef public object kv_values
    cdef public double _gemm_flop_s
    cdef public double _gemm_byte_s
    cdef public double _attn_flop_s
    cdef public double _attn_byte_s
    cdef public double _hbm_s
    cdef public object _p  # a Python float: p-norms other than 2 use Python's pow
    cdef public dict _weights
    cdef public long long _gemm_tile
    cdef public double _gemm_floor_s
    cdef public long long _attn_tile
    cdef public double _causal
    cdef public double _elementwise_floor_s
    cdef public long long _num_heads
    cdef public long long _head_dim

    cpdef double blend(self, double compute_s, double memory_s) except? -1

    @cython.locals(terms=tuple, per_row=cython.double, per_token=cython.double,
                   weight=cython.double, rows=cython.longlong)
    cpdef double gemm_s(self, double tokens, long long in_features,
                        long long out_features) except? -1

    cpdef double elementwise_s(self, object kind, double num_bytes) except? -1

    @cython.locals(heads=cython.longlong, head_dim=cython.longlong, rows=cython.longlong,
                   keys=cython.double, flop=cython.double)
    cpdef double prefill_attention_s(self, object new_tokens, object cached_tokens,
                                     object window=*) except? -1
