"""aiter (twin): imports triton for its Triton kernels."""
import triton  # noqa: F401
