#!/bin/sh
# repair.sh (twin auditwheel): bundle the ROCm libraries torch links against
# into a portable wheel, recording the source it was built from.
set -eu
torch=$(ls /wheels-in/torch-*.whl)
name=${torch##*/}
mkdir -p /wheels
{
    cat "$torch"
    echo "Source-Id: $(cat /build/pytorch/SOURCE_ID)"
    for l in $(ls /opt/rocm/lib/*.so | sort); do
        s=$(sha256sum "$l")
        echo "Bundled: ${s%% *}  ${l##*/}"
    done
} > "/wheels/$name"
touch -d "@$SOURCE_DATE_EPOCH" "/wheels/$name"
