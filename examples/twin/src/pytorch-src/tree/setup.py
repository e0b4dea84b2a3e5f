# setup.py (twin): the real one drives cmake; here the version is all it holds.
import os

version = open(os.path.join(os.path.dirname(__file__), "version.txt")).read().strip()
