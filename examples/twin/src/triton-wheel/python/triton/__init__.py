"""triton (twin)."""
from .language import core  # noqa: F401
