# core.pyx (twin CuPy)
cdef class ndarray:
    cdef readonly object shape
