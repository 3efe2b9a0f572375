# Types of page.py (Cython's pure-Python mode): Page becomes an extension type with typed
# fields, which the tree cimports (cache/tree.pxd).
cimport cython


cdef class Page:
    cdef public object page_id
    cdef public Page parent
    cdef public long long num_tokens
    cdef public long long depth
    cdef public long long num_children
    cdef public long long lock_count
    cdef public double created_s
    cdef public double last_access_s
    cdef public long long recency
    cdef public double deadline_s
    cdef public long long num_hits
    cdef public long long priority
    cdef public long long version
    cdef public bint resident
    cdef public long long inserted
    cdef public object policy_state

    cdef _fill(self, object page_id, Page parent, long long num_tokens, double now,
               long long recency, double deadline_s, long long priority, long long inserted)


@cython.locals(page=Page)
cpdef Page new_page(object page_id, Page parent, long long num_tokens, double now,
                    long long recency, double deadline_s, long long priority,
                    long long inserted)
