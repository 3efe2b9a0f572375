# Types of policy.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): Policy becomes an extension type without fields, so that a compiled policy
# may be one too (s3fifo.pxd). Its subclasses written in Python are unchanged.
cdef class Policy:
    pass
