// custom_all_reduce.cu (twin vLLM)
__global__ void cross_device_reduce_1stage(void* out, int rank, int world) {}
