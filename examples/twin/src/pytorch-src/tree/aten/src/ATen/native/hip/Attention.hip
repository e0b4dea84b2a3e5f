// Attention.hip (twin): flash attention forward.
#include <hip/hip_runtime.h>
__global__ void attn_fwd(const half* q, const half* k, const half* v, half* o, int seq, int dim) {
  // tiled online softmax; the twin only needs the text to hash
}
