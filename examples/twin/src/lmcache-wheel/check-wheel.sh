#!/bin/sh
# check-wheel.sh (twin): refuse a wheel that lost what vLLM needs from it.
set -eu
for w in "$@"; do
    grep -q '^Name: lmcache$' "$w" || { echo "check-wheel: $w is not lmcache" >&2; exit 1; }
    grep -q '^Requires: torch$' "$w" || { echo "check-wheel: $w lacks Requires: torch" >&2; exit 1; }
    s=$(sha256sum "$w")
    echo "${s%% *}  ${w##*/}"
done
