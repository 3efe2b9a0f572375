# Types of state_log.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): StateLog becomes an extension type. A row's values arrive as C numbers and are
# written into the pending rows through a typed view of their buffer (`_buffer`, the same
# array as `_flat`), not converted value by value by the array.
cimport cython


cdef class StateLog:
    cdef public object _flat
    cdef double[::1] _buffer
    cdef public Py_ssize_t _rows
    cdef public list _columns
    cdef public Py_ssize_t _size
    cdef public object _grid_s
    cdef public list _last_row
    cdef public list _until_s

    cpdef record(self, tuple row)

    @cython.locals(at=Py_ssize_t, last=Py_ssize_t, grow=Py_ssize_t, base=Py_ssize_t,
                   last_row=list, buffer=cython.double[::1])
    cpdef record_state(self, double time_s, Py_ssize_t replica, double running,
                       double waiting, double cached_tokens, double private_tokens,
                       double query_tokens, double hit_tokens, double evictions,
                       double preemptions)

    cpdef _grow(self)
