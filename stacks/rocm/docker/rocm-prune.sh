#!/bin/sh
# rocm-prune.sh ROCM_DIR ARCHS PROFILE: cut a ROCm SDK down to ARCHS, a
# semicolon-separated list of gfx targets (PYTORCH_ROCM_ARCH).
#   keep-toolchain  drop the kernel files of every other architecture; keep the
#                   compiler, headers and cmake packages (pytorch-base builds on it)
#   minimal         also drop the headers and the HIP cmake package: nothing
#                   can be compiled against the result
set -eu
rocm=$1 archs=$2 profile=$3
case "$profile" in
    keep-toolchain | minimal) ;;
    *) echo "rocm-prune: unknown profile '$profile' (keep-toolchain or minimal)" >&2; exit 2 ;;
esac

# Per-architecture code objects and databases (rocBLAS and hipBLASLt Tensile
# libraries, MIOpen kernel databases...) name their gfx target in the file name.
find "$rocm/lib/" "$rocm/share/" -type f -name '*gfx*' | while IFS= read -r f; do
    for a in $(echo "$archs" | tr ';' ' '); do
        case "${f##*/}" in *"$a"*) continue 2 ;; esac
    done
    rm -f "$f"
done

if [ "$profile" = minimal ]; then
    rm -rf "$rocm/include" "$rocm/lib/cmake/hip" "$rocm/lib/cmake/hip-lang"
fi
