"""The LMCache MP connector (twin): imports lmcache.utils."""
from lmcache import utils  # noqa: F401
