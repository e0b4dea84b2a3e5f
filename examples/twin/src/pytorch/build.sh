#!/bin/sh
# build.sh (twin): PyTorch's build, run in pytorch's discarded build stage.
#   1. apply patches/ to the checkout from pytorch-src (the patch checksums are
#      appended to the sources, so a changed patch changes every object),
#   2. compile the C++/HIP sources for PYTORCH_ROCM_ARCH with hipcc,
#   3. pack the torch wheel against the Triton wheel it was built with,
#   4. install triton and torch into /opt/venv and stamp /etc/twin/pytorch.txt.
set -eu
: "${PYTORCH_VERSION:?}" "${PYTORCH_ROCM_ARCH:?}"
src=/build/pytorch
[ "$(cat "$src/version.txt")" = "$PYTORCH_VERSION" ] || {
    echo "build.sh: pytorch-src is $(cat "$src/version.txt"), PYTORCH_VERSION is $PYTORCH_VERSION" >&2
    exit 1
}
for p in $(ls /build/patches/*.patch | sort); do
    echo "applying ${p##*/}"
    s=$(sha256sum "$p")
    for f in $(find "$src/aten" "$src/c10" -type f | sort); do
        echo "// patched: ${p##*/} ${s%% *}" >> "$f"
    done
done
triton=$(ls /in/triton/triton-*.whl)
twin-build compile /build/obj "$src/aten" "$PYTORCH_ROCM_ARCH"
twin-build compile /build/obj-c10 "$src/c10" noarch
cp /build/obj-c10/* /build/obj/
hipcc -o /build/obj/TwinFlags.cmake.noarch.o /build/cmake/TwinFlags.cmake
REQUIRES=triton twin-build wheel /wheels torch "$PYTORCH_VERSION" "$PYTORCH_ROCM_ARCH" /build/obj \
    "$src/SOURCE_ID" "$triton"
pip install "$triton" /wheels/torch-*.whl
twin-build stamp pytorch "$PYTORCH_VERSION" /wheels/torch-*.whl "$triton"
