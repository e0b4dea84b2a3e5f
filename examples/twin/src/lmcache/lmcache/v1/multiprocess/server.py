"""MP server (twin): imports cupy at module scope."""
import cupy  # noqa: F401
