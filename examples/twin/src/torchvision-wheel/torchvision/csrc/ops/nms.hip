// nms.hip (twin torchvision)
__global__ void nms_kernel(const float* boxes, unsigned long long* mask, float iou) {}
