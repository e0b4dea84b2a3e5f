"""lmcache (twin)."""
