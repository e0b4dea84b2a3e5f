#!/usr/bin/env bash
# Builds the twin target by target with the docker CLI's own BuildKit client,
# in dependency order: what `kiln build -f examples/twin/docker-bake.hcl` does,
# spelled out by hand.
#
#   eval "$(scripts/dev-env env)"          # DOCKER_HOST of the private dockerd
#   examples/twin/build-by-hand.sh          # default group + pytorch-run
#   examples/twin/build-by-hand.sh vllm     # given targets, dependencies first
#
# dockerd 20.10's BuildKit has no named contexts, so each sibling input is
# handed over through the *_IMAGE build arg that names it in the bake file,
# set to the local tag twin-local/<target> of the dependency. Every Dockerfile
# starts `ARG X_IMAGE=<context>` / `FROM ${X_IMAGE} AS <context>`, so the same
# file works under bake (the named context replaces the stage) and here.
#
# TWIN_NO_CACHE=1 passes --no-cache (a cold build that leaves the cache alone).
# pytorch-test is built last and is expected to fail (no /dev/kfd in a build
# step); pass it explicitly to see that. PIP_TOKEN defaults to a dummy value.
set -euo pipefail
cd "$(dirname "$0")"

DOCKER=${DOCKER:-/usr/bin/docker}
if [ -z "${DOCKER_HOST:-}" ] && [ -x ../../scripts/dev-env ]; then
    eval "$(../../scripts/dev-env env)"
fi
: "${DOCKER_HOST:?set DOCKER_HOST first: eval \"\$(scripts/dev-env env)\"}"
export DOCKER_HOST
export DOCKER_BUILDKIT=1
export PIP_TOKEN=${PIP_TOKEN:-twin-dummy-token}
PREFIX=${TWIN_PREFIX:-twin-local}

# The bake file's variable defaults; like bake, the environment overrides them.
PYTORCH_VERSION=${PYTORCH_VERSION:-2.15.0}
ROCM_VERSION=${ROCM_VERSION:-10.1.0-full}
TRITON_VERSION=${TRITON_VERSION:-3.9.0}
TRITON_REF=${TRITON_REF:-aad2a60d958f945420c5c40936b37d411fb02e89}
AITER_REF=${AITER_REF:-v0.1.29}
TORCHVISION_REF=${TORCHVISION_REF:-v0.29.2}
NIXL_REF=${NIXL_REF:-v1.5.2}
UCX_REF=${UCX_REF:-v1.22.0}
CUPY_REF=${CUPY_REF:-v14.2.0}
LMCACHE_REF=${LMCACHE_REF:-v0.5.7}
VLLM_REF=${VLLM_REF:-v0.33.0}
SDE_EPOCH=${SDE_EPOCH:-1700000000}
ARCH=${PYTORCH_ROCM_ARCH:-gfx950}

# Dependency order (a topological order of edges.txt).
ORDER=(rocm-runtime pytorch-src pytorch-base triton-wheel cupy-wheel pytorch
    pytorch-wheel aiter-wheel torchvision-wheel nixl-wheel lmcache lmcache-wheel
    vllm vllm-wheel pytorch-run pytorch-test)

img() { echo "$PREFIX/$1"; }

# The build args of one target: its bake args, with every input named by the
# local tag of the target behind it.
args() {
    local a=(--build-arg "SOURCE_DATE_EPOCH=$SDE_EPOCH")
    local compile=(--build-arg "PYTORCH_ROCM_ARCH=$ARCH")
    [ -z "${MAX_JOBS:-}" ] || compile+=(--build-arg "MAX_JOBS=$MAX_JOBS")
    case $1 in
    rocm-runtime) a+=("${compile[@]}" --build-arg "ROCM_VERSION=$ROCM_VERSION") ;;
    pytorch-src) a+=(--build-arg "PYTORCH_VERSION=$PYTORCH_VERSION") ;;
    pytorch-base) a+=(--build-arg "ROCM_IMAGE=$(img rocm-runtime)") ;;
    triton-wheel)
        a+=("${compile[@]}" --build-arg "BASE_IMAGE=$(img pytorch-base)"
            --build-arg "TRITON_VERSION=$TRITON_VERSION" --build-arg "TRITON_REF=$TRITON_REF") ;;
    cupy-wheel)
        a+=("${compile[@]}" --build-arg "BASE_IMAGE=$(img pytorch-base)"
            --build-arg "CUPY_REF=$CUPY_REF" --secret id=pip_token,env=PIP_TOKEN) ;;
    pytorch)
        a+=("${compile[@]}" --build-arg "PYTORCH_SRC_IMAGE=$(img pytorch-src)"
            --build-arg "BASE_IMAGE=$(img pytorch-base)"
            --build-arg "TRITON_WHEEL_IMAGE=$(img triton-wheel)"
            --build-arg "PYTORCH_VERSION=$PYTORCH_VERSION") ;;
    pytorch-wheel)
        a+=(--build-arg "PYTORCH_SRC_IMAGE=$(img pytorch-src)" --build-arg "PYTORCH_IMAGE=$(img pytorch)"
            --build-arg "PYTORCH_VERSION=$PYTORCH_VERSION" --build-arg "PYTORCH_ROCM_ARCH=$ARCH") ;;
    pytorch-run)
        a+=(--build-arg "ROCM_IMAGE=$(img rocm-runtime)" --build-arg "PYTORCH_IMAGE=$(img pytorch)") ;;
    pytorch-test) a+=(--build-arg "PYTORCH_IMAGE=$(img pytorch)") ;;
    aiter-wheel)
        a+=("${compile[@]}" --build-arg "PYTORCH_IMAGE=$(img pytorch)"
            --build-arg "TRITON_WHEEL_IMAGE=$(img triton-wheel)" --build-arg "AITER_REF=$AITER_REF") ;;
    torchvision-wheel)
        a+=("${compile[@]}" --build-arg "PYTORCH_IMAGE=$(img pytorch)"
            --build-arg "TORCHVISION_REF=$TORCHVISION_REF") ;;
    nixl-wheel)
        a+=("${compile[@]}" --build-arg "PYTORCH_IMAGE=$(img pytorch)"
            --build-arg "NIXL_REF=$NIXL_REF" --build-arg "UCX_REF=$UCX_REF") ;;
    lmcache)
        a+=("${compile[@]}" --build-arg "PYTORCH_IMAGE=$(img pytorch)"
            --build-arg "TRITON_WHEEL_IMAGE=$(img triton-wheel)"
            --build-arg "NIXL_WHEEL_IMAGE=$(img nixl-wheel)"
            --build-arg "CUPY_WHEEL_IMAGE=$(img cupy-wheel)" --build-arg "LMCACHE_REF=$LMCACHE_REF") ;;
    lmcache-wheel)
        a+=(--build-arg "LMCACHE_IMAGE=$(img lmcache)" --build-arg "LMCACHE_REF=$LMCACHE_REF") ;;
    vllm)
        a+=("${compile[@]}" --build-arg "PYTORCH_IMAGE=$(img pytorch)"
            --build-arg "TRITON_WHEEL_IMAGE=$(img triton-wheel)"
            --build-arg "AITER_WHEEL_IMAGE=$(img aiter-wheel)"
            --build-arg "NIXL_WHEEL_IMAGE=$(img nixl-wheel)"
            --build-arg "LMCACHE_WHEEL_IMAGE=$(img lmcache-wheel)"
            --build-arg "TORCHVISION_WHEEL_IMAGE=$(img torchvision-wheel)"
            --build-arg "VLLM_REF=$VLLM_REF") ;;
    vllm-wheel) a+=(--build-arg "VLLM_IMAGE=$(img vllm)" --build-arg "VLLM_REF=$VLLM_REF") ;;
    *) echo "unknown target $1" >&2; return 2 ;;
    esac
    printf '%s\n' "${a[@]}"
}

# The dependencies of each target (edges.txt).
deps() {
    case $1 in
    pytorch-base) echo rocm-runtime ;;
    triton-wheel | cupy-wheel) echo pytorch-base ;;
    pytorch) echo pytorch-src pytorch-base triton-wheel ;;
    pytorch-wheel) echo pytorch-src pytorch ;;
    pytorch-run) echo rocm-runtime pytorch ;;
    pytorch-test | torchvision-wheel | nixl-wheel) echo pytorch ;;
    aiter-wheel) echo pytorch triton-wheel ;;
    lmcache) echo pytorch triton-wheel nixl-wheel cupy-wheel ;;
    lmcache-wheel) echo lmcache ;;
    vllm) echo pytorch triton-wheel aiter-wheel nixl-wheel lmcache-wheel torchvision-wheel ;;
    vllm-wheel) echo vllm ;;
    esac
}

declare -A want=()
close() {
    [ -z "${want[$1]:-}" ] || return 0
    want[$1]=1
    local d
    for d in $(deps "$1"); do close "$d"; done
}
[ $# -gt 0 ] || set -- default pytorch-run
DEFAULT=(rocm-runtime pytorch-src pytorch-base pytorch pytorch-wheel triton-wheel aiter-wheel
    torchvision-wheel cupy-wheel nixl-wheel vllm vllm-wheel lmcache lmcache-wheel)
WHEELS=(pytorch-wheel triton-wheel aiter-wheel nixl-wheel torchvision-wheel cupy-wheel
    vllm-wheel lmcache-wheel)
SERVING=(torchvision-wheel cupy-wheel nixl-wheel vllm vllm-wheel lmcache lmcache-wheel)
for t in "$@"; do
    case $t in
    default) for g in "${DEFAULT[@]}"; do close "$g"; done ;;
    wheels) for g in "${WHEELS[@]}"; do close "$g"; done ;;
    serving) for g in "${SERVING[@]}"; do close "$g"; done ;;
    *)
        args "$t" >/dev/null || exit 2
        close "$t"
        ;;
    esac
done

LOG=${TWIN_LOG_DIR:-/tmp/twin-build-logs}
mkdir -p "$LOG"
status=0
for t in "${ORDER[@]}"; do
    [ -n "${want[$t]:-}" ] || continue
    mapfile -t a < <(args "$t")
    start=$(date +%s.%N)
    set +e
    "$DOCKER" build --progress=plain --network host ${TWIN_NO_CACHE:+--no-cache} \
        --label org.opencontainers.image.source=https://github.com/kiln-build/kiln \
        -f "docker/Dockerfile.$t" -t "$(img "$t")" "${a[@]}" . >"$LOG/$t.log" 2>&1
    rc=$?
    set -e
    end=$(date +%s.%N)
    # Steps (COPY/RUN, not FROM or [internal]) and how many of them were CACHED.
    cached=$(awk '
        /^#[0-9]+ \[/ && !/\[internal\]/ && !/ FROM / { step[$1] = 1 }
        /^#[0-9]+ CACHED/ { hit[$1] = 1 }
        END { n = 0; c = 0; for (s in step) { n++; if (s in hit) c++ }; print c "/" n }
    ' "$LOG/$t.log")
    printf '%-18s rc=%d %6.2fs  steps cached %-6s (%s)\n' "$t" "$rc" \
        "$(awk "BEGIN { print $end - $start }")" "$cached" "$LOG/$t.log"
    if [ "$rc" -ne 0 ]; then
        if [ "$t" = pytorch-test ]; then
            echo "  pytorch-test failed as designed: $(grep -o 'test_gpu: /dev/kfd is missing[^"]*' "$LOG/$t.log" | head -1)"
        else
            tail -20 "$LOG/$t.log" >&2
            status=1
            break
        fi
    fi
done
exit $status
