// nixl_bindings.cpp (twin NIXL): pybind11 module; includes torch headers.
#include <torch/extension.h>
