# build_amd.py (twin): hipify the CUDA sources.
print("hipify: nothing to do, the twin's sources are already HIP")
