# The runnable twin of the ROCm reference stack (stacks/rocm/docker-bake.hcl).
#
# Same sixteen target names, same three groups, same 27 edges, same input
# wiring (target: named context + a build arg naming it, PUBLISHED_INPUTS
# switch, pytorch-run's docker-image:// exception). The payloads are tiny: every
# Dockerfile (docker/Dockerfile.<target>) builds on kiln/busybox:latest in a
# second or two, "compiles" by hashing its sources in a loop and produces
# "wheels" (text files) that record the checksums of every input they consumed.
#
# Paths are bake paths: `context = "."` is the directory bake (or kiln) runs in.
# Run from examples/twin/, or from anywhere with BUILDX_BAKE_FILE_RELATIVE_PATHS=1
# and `-f .../examples/twin/docker-bake.hcl`. See README.md.

# ---------------------------------------------------------------------------
# Versions and refs (a subset of the reference's, same defaults)
# ---------------------------------------------------------------------------

variable "PYTORCH_VERSION" {
  type        = string
  default     = "2.15.0"
  description = "PyTorch release to build."
}

variable "ROCM_VERSION" {
  type        = string
  default     = "10.1.0-full"
  description = "ROCm release stamped into rocm-runtime and every torch-family tag."
}

variable "TRITON_VERSION" {
  type        = string
  default     = "3.9.0"
  description = "Triton version, used in the triton-wheel tag and wheel name."
}

variable "TRITON_REF" {
  type        = string
  default     = "aad2a60d958f945420c5c40936b37d411fb02e89"
  description = "Triton commit the wheel records."
}

variable "AITER_REF" {
  type        = string
  default     = "v0.1.29"
  description = "AITER release tag."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", AITER_REF))
    error_message = "AITER_REF must be a release tag (v*), not a branch."
  }
}

variable "TORCHVISION_REF" {
  type        = string
  default     = "v0.29.2"
  description = "torchvision release tag."
}

variable "NIXL_REF" {
  type        = string
  default     = "v1.5.2"
  description = "NIXL release tag."
}

variable "UCX_REF" {
  type        = string
  default     = "v1.22.0"
  description = "UCX release tag; nixl-wheel builds UCX in its own discarded stage."
}

variable "CUPY_REF" {
  type        = string
  default     = "v14.2.0"
  description = "CuPy release tag."
}

variable "LMCACHE_REF" {
  type        = string
  default     = "v0.5.7"
  description = "LMCache release tag."
}

variable "VLLM_REF" {
  type        = string
  default     = "v0.33.0"
  description = "vLLM release tag."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", VLLM_REF))
    error_message = "VLLM_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

variable "KILN_REGISTRY" {
  type        = string
  default     = "127.0.0.1:5000"
  description = "The registry scripts/dev-env started (it prints KILN_REGISTRY=host:port; exported, the twin follows it when port 5000 was taken)."
}

variable "REGISTRY" {
  type        = string
  default     = KILN_REGISTRY
  description = "Registry host[:port] the twin pushes to; the dev environment's by default."
}

variable "REGISTRY_NAME" {
  type        = string
  default     = "twin"
  description = "Namespace within REGISTRY."
}

# ---------------------------------------------------------------------------
# Build shape
# ---------------------------------------------------------------------------

variable "PYTORCH_ROCM_ARCH" {
  type        = string
  default     = "gfx950"
  description = "Semicolon-separated GPU architectures; rocm-runtime keeps only these, compiled targets build one object per architecture."
  validation {
    condition     = can(regex("^gfx[0-9a-z]+(;gfx[0-9a-z]+)*$", PYTORCH_ROCM_ARCH))
    error_message = "PYTORCH_ROCM_ARCH must be a semicolon-separated list of gfx targets, e.g. gfx950 or gfx942;gfx950."
  }
}

variable "MAX_JOBS" {
  type        = string
  default     = ""
  description = "Parallel compile jobs. Empty derives it inside the build step from MemAvailable (2 GB per job), so it never reaches a cache key."
  validation {
    condition     = can(regex("^([1-9][0-9]*)?$", MAX_JOBS))
    error_message = "MAX_JOBS must be empty or a positive integer."
  }
}

# ---------------------------------------------------------------------------
# Reproducibility and run identity
# ---------------------------------------------------------------------------

variable "SDE_EPOCH" {
  type        = string
  default     = "1700000000"
  description = "SOURCE_DATE_EPOCH pinned into every image; the Dockerfiles stamp it onto every file they produce."
  validation {
    condition     = can(regex("^[0-9]+$", SDE_EPOCH))
    error_message = "SDE_EPOCH must be a Unix timestamp in seconds."
  }
}

variable "VCS_REF" {
  type        = string
  default     = ""
  description = "Commit the images are built from (-dirty for an unclean tree); a label only, never a layer input."
}

variable "BUILD_DATE" {
  type        = string
  default     = ""
  description = "The commit's own timestamp (RFC 3339); a label only."
}

variable "RUN_ID" {
  type        = string
  default     = "dev"
  description = "Stamped into every BuildKit history record name: kiln-twin/<target>/<arch>/<RUN_ID>."
}

variable "PUBLISHED_INPUTS" {
  type        = string
  default     = ""
  description = "1 resolves sibling inputs from the registry (the PUB_* references) instead of target: contexts, for one bake invocation per target."
  validation {
    condition     = contains(["", "1"], PUBLISHED_INPUTS)
    error_message = "PUBLISHED_INPUTS must be empty or 1."
  }
}

# ---------------------------------------------------------------------------
# Derived values
# ---------------------------------------------------------------------------

USE_PUB = PUBLISHED_INPUTS != ""

# The architecture as it appears in tags and names; ";" cannot appear in a tag.
ARCH_TAG = replace(PYTORCH_ROCM_ARCH, ";", "_")

# Every torch-family image is tagged <pytorch>-<rocm>-<arch>.
STACK_VERSION = "${PYTORCH_VERSION}-${ROCM_VERSION}"

HISTORY_PREFIX = "kiln-twin"

# Registry references of the targets others consume, used when
# PUBLISHED_INPUTS=1. Each reads the first tag of the target it mirrors.
PUB_ROCM          = target.rocm-runtime.tags[0]
PUB_SRC           = target.pytorch-src.tags[0]
PUB_BASE          = target.pytorch-base.tags[0]
PUB_TRITON        = target.triton-wheel.tags[0]
PUB_CUPY          = target.cupy-wheel.tags[0]
PUB_PYTORCH       = target.pytorch.tags[0]
PUB_AITER         = target.aiter-wheel.tags[0]
PUB_TORCHVISION   = target.torchvision-wheel.tags[0]
PUB_NIXL          = target.nixl-wheel.tags[0]
PUB_LMCACHE       = target.lmcache.tags[0]
PUB_LMCACHE_WHEEL = target.lmcache-wheel.tags[0]
PUB_VLLM          = target.vllm.tags[0]

# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------

function "image" {
  params = [name, version]
  result = "${REGISTRY}/${REGISTRY_NAME}/${name}:${version}"
}

# A tag with the architecture appended; every target but triton-wheel uses it.
function "tag" {
  params = [name, version]
  result = image(name, "${version}-${ARCH_TAG}")
}

function "ver" {
  params = [ref]
  result = trimprefix(ref, "v")
}

function "build_name" {
  params = [name]
  result = "${HISTORY_PREFIX}/${name}/${ARCH_TAG}/${RUN_ID}"
}

# ---------------------------------------------------------------------------
# Groups: the reference's, member for member.
# ---------------------------------------------------------------------------

group "default" {
  description = "Everything but pytorch-test and pytorch-run."
  targets = [
    "rocm-runtime",
    "pytorch-src",
    "pytorch-base",
    "pytorch",
    "pytorch-wheel",
    "triton-wheel",
    "aiter-wheel",
    "torchvision-wheel",
    "cupy-wheel",
    "nixl-wheel",
    "vllm",
    "vllm-wheel",
    "lmcache",
    "lmcache-wheel",
  ]
}

group "wheels" {
  description = "The wheel artifacts."
  targets = [
    "pytorch-wheel",
    "triton-wheel",
    "aiter-wheel",
    "nixl-wheel",
    "torchvision-wheel",
    "cupy-wheel",
    "vllm-wheel",
    "lmcache-wheel",
  ]
}

group "serving" {
  description = "The serving stack: vLLM, LMCache and what they need beyond PyTorch."
  targets = [
    "torchvision-wheel",
    "cupy-wheel",
    "nixl-wheel",
    "vllm",
    "vllm-wheel",
    "lmcache",
    "lmcache-wheel",
  ]
}

# ---------------------------------------------------------------------------
# Shared settings
# ---------------------------------------------------------------------------

# No cache-from/cache-to here on purpose: kiln applies the layer-cache policy
# itself, per driver (the local docker engine supports only inline cache).
target "_common" {
  context   = "."
  platforms = ["linux/amd64"]
  # RUN steps on this machine's dockerd (started with --bridge=none) need the
  # host network namespace; nothing in a RUN step uses the network.
  network = "host"
  args = {
    SOURCE_DATE_EPOCH = SDE_EPOCH
  }
  labels = {
    "org.opencontainers.image.source"   = "https://github.com/kiln-build/kiln"
    "org.opencontainers.image.revision" = VCS_REF != "" ? VCS_REF : null
    "org.opencontainers.image.created"  = BUILD_DATE != "" ? BUILD_DATE : null
  }
}

# Targets that compile. MAX_JOBS is passed only when pinned.
target "_compile" {
  args = {
    MAX_JOBS          = MAX_JOBS != "" ? MAX_JOBS : null
    PYTORCH_ROCM_ARCH = PYTORCH_ROCM_ARCH
  }
}

# ---------------------------------------------------------------------------
# Targets. Inputs: a named context plus an arg naming it, exactly as in the
# reference. Every Dockerfile starts with one stage per input,
#     ARG BASE_IMAGE=base-img
#     FROM ${BASE_IMAGE} AS base-img
# so bake's named context replaces the stage (the context name equals the
# stage name), a registry reference (PUBLISHED_INPUTS=1) or a local image tag
# (docker build --build-arg BASE_IMAGE=...) is used as its base otherwise.
# ---------------------------------------------------------------------------

target "rocm-runtime" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.rocm-runtime"
  tags       = [tag("rocm-runtime", ROCM_VERSION)]
  args = {
    ROCM_VERSION        = ROCM_VERSION
    BUILDKIT_BUILD_NAME = build_name("rocm-runtime")
  }
}

target "pytorch-src" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-src"
  tags       = [tag("pytorch-src", PYTORCH_VERSION)]
  args = {
    PYTORCH_VERSION     = PYTORCH_VERSION
    BUILDKIT_BUILD_NAME = build_name("pytorch-src")
  }
}

target "pytorch-base" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-base"
  tags       = [tag("pytorch-base", STACK_VERSION)]
  contexts = USE_PUB ? {} : {
    rocm-img = "target:rocm-runtime"
  }
  args = {
    ROCM_IMAGE          = USE_PUB ? PUB_ROCM : "rocm-img"
    BUILDKIT_BUILD_NAME = build_name("pytorch-base")
  }
}

# Builds from the base, not from pytorch, and is the only noarch tag.
target "triton-wheel" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.triton-wheel"
  tags       = [image("triton-wheel", "${TRITON_VERSION}-${ROCM_VERSION}")]
  contexts = USE_PUB ? {} : {
    base-img = "target:pytorch-base"
  }
  args = {
    BASE_IMAGE          = USE_PUB ? PUB_BASE : "base-img"
    TRITON_VERSION      = TRITON_VERSION
    TRITON_REF          = TRITON_REF
    BUILDKIT_BUILD_NAME = build_name("triton-wheel")
  }
}

# Hangs off the base too. The one target with a BuildKit secret: its "private
# index" token is mounted for one RUN step and never reaches the image.
target "cupy-wheel" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.cupy-wheel"
  tags       = [tag("cupy-wheel", "${ver(CUPY_REF)}-${ROCM_VERSION}")]
  contexts = USE_PUB ? {} : {
    base-img = "target:pytorch-base"
  }
  args = {
    BASE_IMAGE          = USE_PUB ? PUB_BASE : "base-img"
    CUPY_REF            = CUPY_REF
    BUILDKIT_BUILD_NAME = build_name("cupy-wheel")
  }
  secret = ["id=pip_token,env=PIP_TOKEN"]
}

target "pytorch" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.pytorch"
  tags       = [tag("pytorch", STACK_VERSION)]
  contexts = USE_PUB ? {} : {
    pytorch-source = "target:pytorch-src"
    base-img       = "target:pytorch-base"
    triton-wheels  = "target:triton-wheel"
  }
  args = {
    PYTORCH_SRC_IMAGE   = USE_PUB ? PUB_SRC : "pytorch-source"
    BASE_IMAGE          = USE_PUB ? PUB_BASE : "base-img"
    TRITON_WHEEL_IMAGE  = USE_PUB ? PUB_TRITON : "triton-wheels"
    PYTORCH_VERSION     = PYTORCH_VERSION
    BUILDKIT_BUILD_NAME = build_name("pytorch")
  }
}

target "pytorch-wheel" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-wheel"
  tags       = [tag("pytorch-wheel", STACK_VERSION)]
  contexts = USE_PUB ? {} : {
    pytorch-source = "target:pytorch-src"
    pytorch-img    = "target:pytorch"
  }
  args = {
    PYTORCH_SRC_IMAGE   = USE_PUB ? PUB_SRC : "pytorch-source"
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    PYTORCH_VERSION     = PYTORCH_VERSION
    PYTORCH_ROCM_ARCH   = PYTORCH_ROCM_ARCH
    BUILDKIT_BUILD_NAME = build_name("pytorch-wheel")
  }
}

# The exception to the input pattern, as in the reference: the input from
# pytorch is a docker-image:// context on pytorch's first tag in both modes
# (pytorch must have been pushed). Outside default.
target "pytorch-run" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-run"
  tags       = [tag("pytorch-run", STACK_VERSION)]
  contexts = USE_PUB ? {
    pytorch-img = "docker-image://${PUB_PYTORCH}"
  } : {
    rocm-img    = "target:rocm-runtime"
    pytorch-img = "docker-image://${PUB_PYTORCH}"
  }
  args = {
    ROCM_IMAGE          = USE_PUB ? PUB_ROCM : "rocm-img"
    PYTORCH_IMAGE       = "pytorch-img"
    BUILDKIT_BUILD_NAME = build_name("pytorch-run")
  }
}

# Outside default, and deliberately unbuildable here: its RUN step exits 1
# when /dev/kfd is absent, and a BuildKit RUN step never has /dev/kfd.
target "pytorch-test" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-test"
  tags       = [tag("pytorch-test", STACK_VERSION)]
  contexts = USE_PUB ? {} : {
    pytorch-img = "target:pytorch"
  }
  args = {
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    BUILDKIT_BUILD_NAME = build_name("pytorch-test")
  }
}

target "aiter-wheel" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.aiter-wheel"
  tags       = [tag("aiter-wheel", "${ver(AITER_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    pytorch-img   = "target:pytorch"
    triton-wheels = "target:triton-wheel"
  }
  args = {
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    TRITON_WHEEL_IMAGE  = USE_PUB ? PUB_TRITON : "triton-wheels"
    AITER_REF           = AITER_REF
    BUILDKIT_BUILD_NAME = build_name("aiter-wheel")
  }
}

target "torchvision-wheel" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.torchvision-wheel"
  tags       = [tag("torchvision-wheel", "${ver(TORCHVISION_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    pytorch-img = "target:pytorch"
  }
  args = {
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    TORCHVISION_REF     = TORCHVISION_REF
    BUILDKIT_BUILD_NAME = build_name("torchvision-wheel")
  }
}

# NIXL, with UCX built in its own stage that does not depend on pytorch.
target "nixl-wheel" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.nixl-wheel"
  tags       = [tag("nixl-wheel", "${ver(NIXL_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    pytorch-img = "target:pytorch"
  }
  args = {
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    NIXL_REF            = NIXL_REF
    UCX_REF             = UCX_REF
    BUILDKIT_BUILD_NAME = build_name("nixl-wheel")
  }
}

# No AITER context, as in the reference; cupy-wheel is a real input.
target "lmcache" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.lmcache"
  tags       = [tag("lmcache", "${ver(LMCACHE_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    pytorch-img   = "target:pytorch"
    triton-wheels = "target:triton-wheel"
    nixl-wheels   = "target:nixl-wheel"
    cupy-wheels   = "target:cupy-wheel"
  }
  args = {
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    TRITON_WHEEL_IMAGE  = USE_PUB ? PUB_TRITON : "triton-wheels"
    NIXL_WHEEL_IMAGE    = USE_PUB ? PUB_NIXL : "nixl-wheels"
    CUPY_WHEEL_IMAGE    = USE_PUB ? PUB_CUPY : "cupy-wheels"
    LMCACHE_REF         = LMCACHE_REF
    BUILDKIT_BUILD_NAME = build_name("lmcache")
  }
}

target "lmcache-wheel" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.lmcache-wheel"
  tags       = [tag("lmcache-wheel", "${ver(LMCACHE_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    lmcache-img = "target:lmcache"
  }
  args = {
    LMCACHE_IMAGE       = USE_PUB ? PUB_LMCACHE : "lmcache-img"
    LMCACHE_REF         = LMCACHE_REF
    BUILDKIT_BUILD_NAME = build_name("lmcache-wheel")
  }
}

target "vllm" {
  inherits   = ["_common", "_compile"]
  dockerfile = "docker/Dockerfile.vllm"
  tags       = [tag("vllm", "${ver(VLLM_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    pytorch-img        = "target:pytorch"
    triton-wheels      = "target:triton-wheel"
    aiter-wheels       = "target:aiter-wheel"
    nixl-wheels        = "target:nixl-wheel"
    lmcache-wheels     = "target:lmcache-wheel"
    torchvision-wheels = "target:torchvision-wheel"
  }
  args = {
    PYTORCH_IMAGE           = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    TRITON_WHEEL_IMAGE      = USE_PUB ? PUB_TRITON : "triton-wheels"
    AITER_WHEEL_IMAGE       = USE_PUB ? PUB_AITER : "aiter-wheels"
    NIXL_WHEEL_IMAGE        = USE_PUB ? PUB_NIXL : "nixl-wheels"
    LMCACHE_WHEEL_IMAGE     = USE_PUB ? PUB_LMCACHE_WHEEL : "lmcache-wheels"
    TORCHVISION_WHEEL_IMAGE = USE_PUB ? PUB_TORCHVISION : "torchvision-wheels"
    VLLM_REF                = VLLM_REF
    BUILDKIT_BUILD_NAME     = build_name("vllm")
  }
}

target "vllm-wheel" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.vllm-wheel"
  tags       = [tag("vllm-wheel", "${ver(VLLM_REF)}-${STACK_VERSION}")]
  contexts = USE_PUB ? {} : {
    vllm-img = "target:vllm"
  }
  args = {
    VLLM_IMAGE          = USE_PUB ? PUB_VLLM : "vllm-img"
    VLLM_REF            = VLLM_REF
    BUILDKIT_BUILD_NAME = build_name("vllm-wheel")
  }
}
