"""lmcache.utils (twin): what vLLM's LMCache connector imports."""
