/* rocm_copy_iface.c (twin UCX): the ROCm transport */
#include <uct/rocm/copy/rocm_copy_iface.h>
