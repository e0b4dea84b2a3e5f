"""torch (twin)."""
from torch._C import _cuda_isDriverSufficient  # noqa: F401

__version__ = "see version.txt"


def cuda_is_available():
    import os

    return os.path.exists("/dev/kfd")
