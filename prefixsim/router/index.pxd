# Types of index.py (Cython's pure-Python mode): the bit-mask observer of a replica's cache,
# called on every page the cache adds or removes, reads the page's id as a C field.
from prefixsim.cache.page cimport Page
from prefixsim.cache.tree cimport PageFeed


cdef class _MaskFeed(PageFeed):
    cdef public dict masks
    cdef public object bit

    cpdef added(self, Page page)

    cpdef removed(self, Page page)
