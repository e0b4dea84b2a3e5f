# TwinFlags.cmake (twin): compile flags every torch object is built with.
set(USE_ROCM ON)
set(USE_FLASH_ATTENTION ON)
set(USE_AITER ON)
set(CMAKE_HIP_FLAGS "-O3 -fgpu-rdc")
