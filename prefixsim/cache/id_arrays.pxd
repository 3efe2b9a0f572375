# The C bodies of id_arrays.py's functions, for the compiled modules that cimport this file
# (`cimport prefixsim.cache.id_arrays as _ids`): each is the Python function's operation on
# the array's buffer, inline, unchecked (callers pass arrays of typecode "q" and positions in
# range, as id_arrays.py says). id_arrays.py itself is never compiled; the pure path runs it.
from cpython.array cimport array, clone, resize_smart
from libc.string cimport memcmp, memcpy, memmove


cdef inline bint is_id_array(object ids) noexcept:
    return type(ids) is array and (<array>ids).ob_descr.typecode == b"q"


cdef inline Py_ssize_t id_count(array ids) noexcept:
    return ids.ob_size


cdef inline long long id_at(array ids, Py_ssize_t i) noexcept:
    return ids.data.as_longlongs[i]


cdef inline array id_run(array ids, Py_ssize_t start, Py_ssize_t stop):
    cdef array out = clone(ids, stop - start, False)
    memcpy(out.data.as_longlongs, ids.data.as_longlongs + start,
           <size_t>(stop - start) * sizeof(long long))
    return out


cdef inline bint same_ids(array ids, Py_ssize_t start, array other,
                          Py_ssize_t length) noexcept:
    return memcmp(ids.data.as_longlongs + start, other.data.as_longlongs,
                  <size_t>length * sizeof(long long)) == 0


cdef inline int drop_first(array ids, Py_ssize_t k) except -1:
    cdef Py_ssize_t n = ids.ob_size
    memmove(ids.data.as_longlongs, ids.data.as_longlongs + k,
            <size_t>(n - k) * sizeof(long long))
    return resize_smart(ids, n - k)


cdef inline int drop_last(array ids, Py_ssize_t k) except -1:
    return resize_smart(ids, ids.ob_size - k)
