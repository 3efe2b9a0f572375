# Types of idle_ages.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): `age_bin` becomes a C call from the typed caches (segment_tree.pxd, tree.pxd),
# its bounds C constants.
cimport cython

cdef Py_ssize_t _NUM_EDGES
cdef double _FIRST_EDGE_S, _LAST_EDGE_S, _SCALE
cdef tuple _OCTAVE_OF
cdef long long[:] _OCTAVES
cdef double[:] _EDGES


@cython.locals(low=Py_ssize_t, octave=Py_ssize_t, whole=Py_ssize_t, scaled=double,
               middle=double, quarter=double)
cpdef Py_ssize_t age_bin(double age_s) except? -1
