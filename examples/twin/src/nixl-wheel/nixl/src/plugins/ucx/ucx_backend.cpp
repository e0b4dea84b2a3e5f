// ucx_backend.cpp (twin NIXL): the UCX plugin, linked against the UCX stage.
#include "ucx_backend.h"
