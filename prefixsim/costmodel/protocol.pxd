# Types of protocol.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): CostModelBase becomes an extension type without fields, so that the roofline
# models may be extension types too (roofline_base.pxd, roofline.pxd). A cost model written
# in Python subclasses it as before (its attributes in the dict a Python subclass has). The
# base has no instance dict, so the roofline's typed methods, called on a plain Roofline,
# skip Cython's look-up for a Python override.
cdef class CostModelBase:
    pass
