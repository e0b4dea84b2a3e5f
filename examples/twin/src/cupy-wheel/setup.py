# setup.py (twin CuPy): no torch dependency, so cupy builds from the base.
NAME = "cupy"
