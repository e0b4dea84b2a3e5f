// TensorImpl.h (twin)
#pragma once
namespace c10 {
struct TensorImpl { void* data; long numel; int device_index; };
}  // namespace c10
