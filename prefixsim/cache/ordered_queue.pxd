# Types of ordered_queue.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): OrderedQueue becomes an extension type, its operations C calls from the typed
# caches (tree.pxd, segment_tree.pxd).
cdef class OrderedQueue:
    cdef public object run
    cdef public list heap

    cpdef push(self, tuple entry)

    cpdef tuple pop(self)

    cpdef tuple head(self)

    cpdef keep(self, object wanted)
