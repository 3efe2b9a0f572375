# Types of ordered_queue.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): OrderedQueue becomes an extension type, its operations C calls from the typed
# caches (tree.pxd, segment_tree.pxd), its run a typed list read by index.
cimport cython

cdef Py_ssize_t _DROP_AFTER


@cython.locals(order=int)
cdef bint _less(tuple a, tuple b) except -1

@cython.locals(u=double, v=double, i=cython.longlong, j=cython.longlong)
cdef int _order(object x, object y) except? -2


cdef class OrderedQueue:
    cdef public list run
    cdef public Py_ssize_t first
    cdef public list heap

    @cython.locals(run=list, first=Py_ssize_t)
    cpdef push(self, tuple entry)

    @cython.locals(run=list, heap=list, first=Py_ssize_t, entry=tuple)
    cpdef tuple pop(self)

    @cython.locals(run=list, heap=list, first=Py_ssize_t)
    cpdef tuple head(self)

    @cython.locals(run=list, heap=list, first=Py_ssize_t, head=tuple)
    cpdef bint first_below(self, double bound) except? -1

    cpdef tuple run_first(self)

    cpdef keep(self, object wanted)
