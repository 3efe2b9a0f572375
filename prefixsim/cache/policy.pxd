# Types of policy.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): Policy becomes an extension type without fields whose per-page hooks are
# cpdef, so that the compiled tree calls a compiled policy's hooks (s3fifo.pxd) as C
# functions. Its subclasses written in Python override them as before.
from prefixsim.cache.page cimport Page


cdef class Policy:
    cpdef object key(self, object page)
    cpdef object on_insert(self, Page page)
    cpdef object on_access(self, Page page)
    cpdef object on_evict(self, Page page)
    cpdef object on_expire(self, Page page)
    cpdef object reconsider(self, Page page)
