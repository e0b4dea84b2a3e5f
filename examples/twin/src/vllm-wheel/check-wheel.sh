#!/bin/sh
# check-wheel.sh (twin): the vllm wheel must require everything it was built with.
set -eu
for w in "$@"; do
    for r in torch triton aiter nixl lmcache torchvision; do
        grep -q "^Requires: $r\$" "$w" || { echo "check-wheel: $w lacks Requires: $r" >&2; exit 1; }
    done
    s=$(sha256sum "$w")
    echo "${s%% *}  ${w##*/}"
done
