# Types of decode_steps.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): RunClock becomes an extension type, its cursor C fields, so that a replica's
# load (read by the router at every arrival, posted to the load board at every change) is
# C arithmetic on them (replica.pxd).
cimport cython


cdef class RunClock:
    cdef public object cost_model
    cdef public tuple contexts
    cdef public Py_ssize_t num_seqs
    cdef public long long steps
    cdef public double total_s
    cdef public object time_of
    cdef public bint steps_grow
    cdef public long long done
    cdef public double done_s
    cdef public double next_s

    cpdef long long steps_done(self, double elapsed_s) except? -1

    @cython.locals(next_s=cython.double, done_s=cython.double, step_s=cython.double)
    cpdef long long steps_done_at_most(self, double elapsed_s) except? -1

    cpdef _advance(self, long long done)
