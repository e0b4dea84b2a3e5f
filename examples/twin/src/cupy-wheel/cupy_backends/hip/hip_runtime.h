// hip_runtime.h (twin CuPy): the CUDA-to-HIP shim.
#define cudaMalloc hipMalloc
#define cudaFree hipFree
