// Blas.hip (twin): dispatches GEMMs to hipBLASLt.
#include <hip/hip_runtime.h>
__global__ void gemm_f16(const half* a, const half* b, half* c, int m, int n, int k) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < m && col < n) { float acc = 0; for (int i = 0; i < k; ++i) acc += float(a[row * k + i]) * float(b[i * n + col]); c[row * n + col] = half(acc); }
}
