#!/bin/sh
# rocm-prune (twin): cut the SDK down to the architectures being built.
#
#   rocm-prune ROCM_DIR "gfx950;gfx942"
#
# Kernel databases for every other architecture are deleted, as the real
# stack's rocm-prune.sh deletes the other architectures' code objects.
set -eu
root=$1
keep=$2
for k in "$root"/share/kernels/*.kdb; do
    name=${k##*/}
    name=${name%.kdb}
    case ";$keep;" in
        *";$name;"*) echo "keep  $name" ;;
        *) echo "prune $name"; rm -f "$k" ;;
    esac
done
if ! ls "$root"/share/kernels/*.kdb >/dev/null 2>&1; then
    echo "rocm-prune: no kernel database matches PYTORCH_ROCM_ARCH=$keep" >&2
    exit 1
fi
