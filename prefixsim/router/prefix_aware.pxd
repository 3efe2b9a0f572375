# Types of prefix_aware.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): the scan of a load board, once per request over every replica, in C: loads
# (token counts, Python ints: a float there is refused) as 64-bit integers, scores as doubles;
# `now` stays the caller's float object, handed on to the replicas' load reads unboxed.
cimport cython


@cython.locals(count=Py_ssize_t, position=Py_ssize_t, best=Py_ssize_t, floor=cython.double,
               start=cython.double, worst=cython.double, base=cython.double,
               high=cython.longlong, low=cython.longlong, exact=cython.longlong,
               least=cython.longlong,
               score=cython.double, best_score=cython.double, best_load=cython.longlong)
cpdef Py_ssize_t _best_on_board(list values, list lows, list highs, double weight,
                                object replicas, object now) except? -1
