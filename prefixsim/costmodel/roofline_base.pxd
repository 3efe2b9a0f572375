# Types of roofline_base.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): RooflineBase becomes an extension type, so that Roofline's (roofline.pxd)
# pieces call each other in C. Its decode run time is a typed method the subclasses
# override (StepRoofline in Python).
from prefixsim.costmodel.protocol cimport CostModelBase


cdef class RooflineBase(CostModelBase):
    cdef public object model
    cdef public object gpu
    cdef public object tp
    cdef public object _linear_flops_per_token
    cdef public object _logit_flops_per_seq
    cdef public object _attn_flops_per_pair

    cpdef object decode_run_time_s(self, object num_seqs, object context_sum, object num_steps)
