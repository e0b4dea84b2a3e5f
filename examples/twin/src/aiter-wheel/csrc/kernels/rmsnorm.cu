// rmsnorm.cu (twin AITER)
__global__ void rmsnorm(const void* x, const void* w, void* y, float eps) {}
