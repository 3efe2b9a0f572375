# Types of operator_times.py (Cython's pure-Python mode): OperatorTimes becomes an extension
# type whose per-step methods read C fields and call each other in C. Only figures that are
# floats or ints in every run are typed; the arithmetic is the source's, in its order.
cimport cython

cpdef long long _tiles(long long rows, long long tile) except? -1


cdef class GemmTerms:
    cdef public double per_row
    cdef public double per_token
    cdef public double weight


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
    cdef public double _eff_norm
    cdef public double _eff_rope
    cdef public double _eff_activation
    cdef public double _eff_residual
    cdef public double _eff_kv_write
    cdef public double _eff_embedding
    cdef public object _hidden
    cdef public object _qkv_width
    cdef public double _s_per_seq
    cdef public double _prefill_floor_s
    cdef public double _decode_floor_s

    cpdef double blend(self, double compute_s, double memory_s) except? -1

    cpdef double gemm_s(self, double tokens, long long in_features,
                        long long out_features) except? -1

    @cython.locals(terms=GemmTerms)
    cpdef GemmTerms gemm_terms(self, long long in_features, long long out_features)

    @cython.locals(rows=cython.longlong)
    cpdef double gemm_with(self, GemmTerms terms, double tokens) except? -1

    cpdef double elementwise_s(self, object kind, double num_bytes) except? -1

    cpdef double moved_s(self, double num_bytes, double efficiency) except? -1

    @cython.locals(heads=cython.longlong, head_dim=cython.longlong, rows=cython.longlong,
                   keys=cython.double, flop=cython.double)
    cpdef double prefill_attention_s(self, object new_tokens, object cached_tokens,
                                     object window=*) except? -1

    @cython.locals(q_bytes=cython.longlong)
    cpdef double decode_attention_fixed_s(self, long long num_seqs) except? -1

    cpdef double attention_floor_s(self, bint has_prefill) except? -1

    # Python arithmetic on its arguments (exact integer products), kernels in C
    cpdef double layer_elementwise_s(self, object tokens, object routed_rows,
                                     object intermediate) except? -1
