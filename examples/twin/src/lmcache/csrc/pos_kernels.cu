// pos_kernels.cu (twin LMCache)
__global__ void rotary_embedding_k_fused(void* k, const long* pos) {}
