# Types of protocol.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): CostModelBase becomes an extension type without typed fields, so that the
# roofline models may be extension types too (roofline_base.pxd, roofline.pxd). A cost
# model written in Python subclasses it as before (its attributes in the instance's dict).
cdef class CostModelBase:
    cdef dict __dict__
