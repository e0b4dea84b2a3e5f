#!/bin/sh
# test_gpu.sh (twin): PyTorch's GPU smoke test. Fails without a GPU, on
# purpose, exactly as the real one exits 1 when torch.cuda.is_available() is
# False: a BuildKit RUN step has no /dev/kfd.
set -eu
pip freeze | grep '^torch==' >/dev/null || { echo "test_gpu: torch is not installed" >&2; exit 1; }
if [ ! -e /dev/kfd ]; then
    echo "test_gpu: /dev/kfd is missing: torch.cuda.is_available() is False (no GPU in a build step)" >&2
    exit 1
fi
echo "test_gpu: GPU present"
