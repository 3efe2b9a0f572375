# Types of roofline.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): Roofline becomes an extension type whose parts are C fields (the operator
# times typed, operator_times.pxd) and whose pieces (a layer's GEMMs, the LM head, a decode
# step, the CPU time) are typed methods called in C. Arguments stay Python objects where
# the source's arithmetic on them must stay Python's (exact integers, the same floats).
from prefixsim.costmodel.operator_times cimport GemmTerms, OperatorTimes
from prefixsim.costmodel.roofline_base cimport RooflineBase


cdef class Roofline(RooflineBase):
    cdef public object serving_overheads
    cdef public object engine
    cdef public object expert_parallel
    cdef public object operator_params
    cdef public object params
    cdef public object dims
    cdef public object kinds
    cdef public OperatorTimes ops
    cdef public object allreduce
    cdef public object _vocab_per_gpu
    cdef public tuple _layer_caches
    cdef public dict _decode_step_cache
    cdef public object _s_per_context
    cdef public object _s_per_window_token
    cdef public GemmTerms _qkv
    cdef public GemmTerms _o
    cdef public GemmTerms _lm_head
    cdef public GemmTerms _gate_up
    cdef public GemmTerms _down
    cdef public bint _all_reduces
    cdef public bint _plain
    cdef public bint _windowed
    cdef public object _num_layers

    cpdef object _mlp_s(self, object tokens)

    cpdef object layer_s(self, object tokens, object decode_only=*)

    cpdef object _head_s(self, object tokens, object sampled)

    cpdef object cpu_s(self, object num_seqs, object num_tokens)

    cpdef object _decode_fixed_s(self, object num_seqs)

    cpdef tuple _decode_step(self, object num_seqs)

    cpdef object _with_cpu(self, object gpu_s, object num_seqs, object num_tokens)

    cpdef object decode_run_time_s(self, object num_seqs, object context_sum, object num_steps)
