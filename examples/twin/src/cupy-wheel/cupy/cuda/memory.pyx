# memory.pyx (twin CuPy): the pinned-memory pool LMCache's MP server uses.
cdef class MemoryPool:
    pass
