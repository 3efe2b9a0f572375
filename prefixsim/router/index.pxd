# Types of index.py (Cython's pure-Python mode): the bit-mask observer of a replica's cache,
# called on every page the cache adds or removes, reads the page's id as a C field; a walk's
# replicas are written into prefix_aware's list of bases by position in C.
cimport cython
from cpython.array cimport array as IdArray
cimport prefixsim.cache.id_arrays as _ids
from prefixsim.cache.page cimport Page


cdef class _MaskFeed:
    cdef public dict masks
    cdef public object bit
    cdef public object others

    cpdef added(self, Page page)

    cpdef removed(self, Page page)

    @cython.locals(i=Py_ssize_t, page_id=cython.longlong, masks=dict)
    cpdef added_run(self, IdArray ids, Py_ssize_t start, Py_ssize_t stop, object holder)

    @cython.locals(i=Py_ssize_t, page_id=cython.longlong, masks=dict)
    cpdef removed_run(self, IdArray ids, Py_ssize_t start, Py_ssize_t stop, object holder)

    cpdef moved_run(self, IdArray ids, Py_ssize_t start, Py_ssize_t stop, object holder)


@cython.locals(position=Py_ssize_t)
cpdef _set_positions(list values, tuple positions, Py_ssize_t count, object tokens)
