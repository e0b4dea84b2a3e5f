# The ROCm -> PyTorch -> Triton/AITER -> vLLM reference stack (seeds 003 and 004).
#
# A plain `docker buildx bake` file: kiln reads it unchanged. Sixteen targets, three
# groups, and every variable the stack reads, with the defaults seed 004 lists.
#
# The build graph is stated once, by the contexts below: every input a target takes
# from a sibling is a `target:` named context plus a build arg naming that context
# (see "Inputs" further down). edges.txt beside this file lists the 27 edges.
#
# Dockerfiles live in docker/Dockerfile.<target>.

# ---------------------------------------------------------------------------
# Versions and refs
# ---------------------------------------------------------------------------

variable "PYTORCH_VERSION" {
  type        = string
  default     = "2.15.0"
  description = "PyTorch release to build."
}

variable "ROCM_VERSION" {
  type        = string
  default     = "10.1.0-full"
  description = "ROCm release; selects the rocm/dev-ubuntu-26.04 image rocm-runtime starts from."
}

variable "PYTHON_VERSION" {
  type        = string
  default     = "3.14"
  description = "Python interpreter for every image and wheel."
}

variable "TRITON_VERSION" {
  type        = string
  default     = "3.9.0"
  description = "Triton version, used in the triton-wheel tag."
}

variable "TRITON_REF" {
  type        = string
  default     = "aad2a60d958f945420c5c40936b37d411fb02e89"
  description = "Triton commit to build."
}

variable "AITER_REF" {
  type        = string
  default     = "v0.1.29"
  description = "AITER release tag."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", AITER_REF))
    error_message = "AITER_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "TORCHVISION_REF" {
  type        = string
  default     = "v0.29.2"
  description = "torchvision release tag (serving stack)."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", TORCHVISION_REF))
    error_message = "TORCHVISION_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "ATOM_REF" {
  type        = string
  default     = "v0.1.9"
  description = "ATOM release tag; must be a tag on the repository ATOM_REPO names. No target among the sixteen consumes it yet (docker/Dockerfile.atom)."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", ATOM_REF))
    error_message = "ATOM_REF must be a release tag (v*) on ATOM_REPO, never a branch: the clone is layer-cached on the ref string, so a branch builds once and then silently stops updating."
  }
}

variable "ATOM_REPO" {
  type        = string
  default     = "https://github.com/ROCm/ATOM.git"
  description = "ATOM repository to clone, so a fork can be built without editing docker/Dockerfile.atom. Pair it with an ATOM_REF that is a tag on that fork."
}

variable "NIXL_REF" {
  type        = string
  default     = "v1.5.2"
  description = "NIXL release tag (serving stack)."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", NIXL_REF))
    error_message = "NIXL_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "UCX_REF" {
  type        = string
  default     = "v1.22.0"
  description = "UCX release tag; nixl-wheel builds UCX from source."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", UCX_REF))
    error_message = "UCX_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "VLLM_REF" {
  type        = string
  default     = "v0.33.0"
  description = "vLLM release tag (serving stack)."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", VLLM_REF))
    error_message = "VLLM_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "CUPY_REF" {
  type        = string
  default     = "v14.2.0"
  description = "CuPy release tag (serving stack)."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", CUPY_REF))
    error_message = "CUPY_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "LMCACHE_REF" {
  type        = string
  default     = "v0.5.7"
  description = "LMCache release tag (serving stack)."
  validation {
    condition     = can(regex("^v[0-9]+([.][0-9]+){1,3}(-?rc[0-9]+)?$", LMCACHE_REF))
    error_message = "LMCACHE_REF must be a release tag (v*), not a branch: a moving ref is served from the layer cache forever."
  }
}

variable "RUST_VERSION" {
  type        = string
  default     = "1.95"
  description = "Rust toolchain for vllm/vllm-rs; tracks the channel in vLLM's rust-toolchain.toml."
}

variable "GIT_REF" {
  type        = string
  default     = ""
  description = "A specific PyTorch ref to build; empty builds the PYTORCH_VERSION release."
}

# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

variable "REGISTRY" {
  type        = string
  default     = "snoc-strix.fold-leaffish.ts.net:8080"
  description = "Registry host[:port] every image and cache ref lives under."
}

variable "REGISTRY_NAME" {
  type        = string
  default     = "rocm-pytorch"
  description = "Namespace within REGISTRY."
}

variable "REGISTRY_INSECURE" {
  type        = bool
  default     = true
  description = "Plain-HTTP registry (the fleet's Zot on the tailnet). Set false for any registry with TLS and auth: it reaches registry.insecure= of every cache-from and cache-to."
}

variable "SOURCE_URL" {
  type        = string
  default     = "https://github.com/sbates130272/rocm-pytorch-build"
  description = "Repository URL stamped into org.opencontainers.image.source."
}

# ---------------------------------------------------------------------------
# Architecture and build shape
# ---------------------------------------------------------------------------

variable "PYTORCH_ROCM_ARCH" {
  type        = string
  default     = "gfx950"
  description = "Semicolon-separated GPU architectures; a list produces one fat binary."
  validation {
    condition     = can(regex("^gfx[0-9a-z]+(;gfx[0-9a-z]+)*$", PYTORCH_ROCM_ARCH))
    error_message = "PYTORCH_ROCM_ARCH must be a semicolon-separated list of gfx targets, e.g. gfx950 or gfx942;gfx950."
  }
}

variable "USE_AITER" {
  type        = string
  default     = "ON"
  description = "Build PyTorch with AITER."
}

variable "USE_FLYDSL" {
  type        = string
  default     = "ON"
  description = "Build PyTorch with FlyDSL."
}

variable "USE_FLASH_ATTENTION" {
  type        = string
  default     = "ON"
  description = "Build PyTorch with flash attention."
}

variable "USE_ROCM_CK_SDPA_GFX12" {
  type        = string
  default     = ""
  description = "RDNA4 Composable Kernel SDPA (PyTorch 2.15, OFF upstream). ON takes effect only on a gfx12 RDNA4 target; anywhere else it stays OFF."
}

variable "MAX_JOBS" {
  type        = string
  default     = ""
  description = "Parallel compile jobs, set in the environment (MAX_JOBS=8 kiln build). Empty: kiln build hands each compile its share of the node (the kiln-jobs secret); plain bake derives it from MemAvailable (2 GB per job) in the step. Set: every compile gets exactly this many, through the same secret, never a build arg."
  validation {
    condition     = can(regex("^([1-9][0-9]*)?$", MAX_JOBS))
    error_message = "MAX_JOBS must be empty or a positive integer."
  }
}

variable "PREBUILD_KERNELS" {
  type        = string
  default     = ""
  description = "AITER kernel prebuild level. Empty means 0, on every architecture."
  validation {
    condition     = can(regex("^[0-9]*$", PREBUILD_KERNELS))
    error_message = "PREBUILD_KERNELS must be empty or a level number (0, 1, 2)."
  }
  validation {
    condition     = !(PREBUILD_KERNELS == "2" && can(regex("gfx12(01|5[0-9a-z])", PYTORCH_ROCM_ARCH)))
    error_message = "PREBUILD_KERNELS=2 builds no AITER wheel at all on gfx1201 or gfx125x."
  }
}

variable "ROCM_PRUNE_PROFILE" {
  type        = string
  default     = "keep-toolchain"
  description = "How hard docker/rocm-prune.sh cuts the ROCm SDK down; minimal also drops the headers and the HIP cmake package."
}

# ---------------------------------------------------------------------------
# Compiler cache (sccache). Credentials are never variables: they reach a build
# only as a BuildKit secret (--set '*.secrets+=id=aws,src=...': `+=` appends;
# a plain `=` replaces the list, and with it a pinned MAX_JOBS's kiln-jobs).
# ---------------------------------------------------------------------------

variable "SCCACHE_WEBDAV_HOST" {
  type        = string
  default     = "snoc-strix.fold-leaffish.ts.net"
  description = "Host of the nginx WebDAV store."
}

variable "SCCACHE_WEBDAV_PORT" {
  type        = string
  default     = "8081"
  description = "Port of the nginx WebDAV store."
}

variable "SCCACHE_WEBDAV_ENDPOINT" {
  type        = string
  default     = ""
  description = "WebDAV endpoint; empty composes it from SCCACHE_WEBDAV_HOST and SCCACHE_WEBDAV_PORT. The Makefile supplies a resolved address."
}

variable "SCCACHE_WEBDAV_KEY_PREFIX" {
  type        = string
  default     = "rocm-pytorch"
  description = "Namespace within the WebDAV store."
}

variable "SCCACHE_BUCKET" {
  type        = string
  default     = ""
  description = "S3 store, for builds off the fleet. Empty selects WebDAV."
}

variable "SCCACHE_REGION" {
  type        = string
  default     = ""
  description = "Region of SCCACHE_BUCKET; required whenever SCCACHE_BUCKET is set."
  validation {
    condition     = SCCACHE_BUCKET == "" || SCCACHE_REGION != ""
    error_message = "SCCACHE_REGION is required whenever SCCACHE_BUCKET is set."
  }
}

variable "SCCACHE_S3_KEY_PREFIX" {
  type        = string
  default     = "rocm-pytorch"
  description = "Namespace within the S3 bucket."
}

variable "SCCACHE_LOG" {
  type        = string
  default     = "warn"
  description = "sccache log level; debug reveals what \"Cache errors\" is counting."
}

variable "SCCACHE_VERSION" {
  type        = string
  default     = "0.19.0"
  description = "sccache release installed into pytorch-base; 0.8.0 is the floor for caching hipcc -x hip."
  validation {
    condition     = try(semvercmp(SCCACHE_VERSION, ">= 0.8.0"), false)
    error_message = "SCCACHE_VERSION must be a version >= 0.8.0, the first that caches hipcc -x hip."
  }
}

variable "REQUIRE_SCCACHE" {
  type        = string
  default     = "1"
  description = "1 refuses to compile when the compiler cache store is unreachable."
  validation {
    condition     = contains(["0", "1"], REQUIRE_SCCACHE)
    error_message = "REQUIRE_SCCACHE must be 0 or 1."
  }
}

variable "FORCE_RECACHE" {
  type        = bool
  default     = false
  description = "true recompiles everything, ignoring sccache."
}

# ---------------------------------------------------------------------------
# Reproducibility. SOURCE_DATE_EPOCH is a constant, not the commit time: a
# per-commit epoch would change every image on every commit.
# ---------------------------------------------------------------------------

variable "SDE_EPOCH" {
  type        = string
  default     = "1700000000"
  description = "SOURCE_DATE_EPOCH pinned into every image config."
  validation {
    condition     = can(regex("^[0-9]+$", SDE_EPOCH))
    error_message = "SDE_EPOCH must be a Unix timestamp in seconds."
  }
}

variable "SDE_ROCM" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for rocm-runtime; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_ROCM))
    error_message = "SDE_ROCM must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_BASE" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for pytorch-base; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_BASE))
    error_message = "SDE_BASE must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_PYTORCH" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for pytorch-src, pytorch, pytorch-wheel and pytorch-test; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_PYTORCH))
    error_message = "SDE_PYTORCH must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_TRITON" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for triton-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_TRITON))
    error_message = "SDE_TRITON must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_AITER" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for aiter-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_AITER))
    error_message = "SDE_AITER must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_RUNTIME" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for pytorch-run; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_RUNTIME))
    error_message = "SDE_RUNTIME must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_NIXL" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for nixl-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_NIXL))
    error_message = "SDE_NIXL must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_VLLM" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for vllm and vllm-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_VLLM))
    error_message = "SDE_VLLM must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_LMCACHE" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for lmcache and lmcache-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_LMCACHE))
    error_message = "SDE_LMCACHE must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_CUPY" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for cupy-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_CUPY))
    error_message = "SDE_CUPY must be empty or a Unix timestamp in seconds."
  }
}

variable "SDE_TORCHVISION" {
  type        = string
  default     = ""
  description = "SOURCE_DATE_EPOCH for torchvision-wheel; empty means SDE_EPOCH."
  validation {
    condition     = can(regex("^[0-9]*$", SDE_TORCHVISION))
    error_message = "SDE_TORCHVISION must be empty or a Unix timestamp in seconds."
  }
}

variable "VCS_REF" {
  type        = string
  default     = ""
  description = "Commit the images are built from, with a -dirty suffix for an unclean tree. Supplied by the Makefile."
}

variable "BUILD_DATE" {
  type        = string
  default     = ""
  description = "The commit's own timestamp (RFC 3339), not the wall clock. Supplied by the Makefile."
}

# ---------------------------------------------------------------------------
# Caching and scheduling
# ---------------------------------------------------------------------------

variable "CACHE_TAG_SUFFIX" {
  type        = string
  default     = ""
  description = "Suffix of the layer-cache tag written by cache-to. Empty writes the rolling tag; -ref refreshes the frozen baseline."
  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]*$", CACHE_TAG_SUFFIX))
    error_message = "CACHE_TAG_SUFFIX must be usable in an image tag (letters, digits, _ . -)."
  }
}

variable "PUBLISHED_INPUTS" {
  type        = string
  default     = ""
  description = "1 resolves sibling inputs from the registry (the PUB_* references) instead of target: contexts, for one bake invocation per target."
  validation {
    condition     = contains(["", "1"], PUBLISHED_INPUTS)
    error_message = "PUBLISHED_INPUTS must be empty or 1 (any other non-empty value would also switch to registry inputs)."
  }
}

variable "RUN_ID" {
  type        = string
  default     = "dev"
  description = "Stamped into every BuildKit history record name: rocm-pytorch-build/<target>/<arch>/<RUN_ID>."
}

# ---------------------------------------------------------------------------
# Derived values. Global attributes, not variables: they cannot be overridden
# from the environment, only through the variables they are computed from.
# ---------------------------------------------------------------------------

USE_PUB = PUBLISHED_INPUTS != ""

# The architecture as it appears in tags and names; ";" cannot appear in a tag.
ARCH_TAG = replace(PYTORCH_ROCM_ARCH, ";", "_")

# Every torch-family image is tagged <pytorch>-<rocm>-<arch>.
STACK_VERSION = "${PYTORCH_VERSION}-${ROCM_VERSION}"

ROCM_DEV_IMAGE = "rocm/dev-ubuntu-26.04:${ROCM_VERSION}"

SCCACHE_ENDPOINT = SCCACHE_WEBDAV_ENDPOINT != "" ? SCCACHE_WEBDAV_ENDPOINT : "http://${SCCACHE_WEBDAV_HOST}:${SCCACHE_WEBDAV_PORT}"

# Prefix of BuildKit history record names: this repository's name, because a
# sibling project builds on the same nodes with the same image names.
HISTORY_PREFIX = "rocm-pytorch-build"

# Registry references of the targets others consume, used when PUBLISHED_INPUTS=1.
# Each reads the first tag of the target it mirrors, so it tracks that tag by
# construction rather than by a second copy of the tag expression.
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

# An image reference in this stack's registry namespace.
function "image" {
  params = [name, version]
  result = "${REGISTRY}/${REGISTRY_NAME}/${name}:${version}"
}

# A tag with the architecture appended; every target but triton-wheel uses it.
function "tag" {
  params = [name, version]
  result = image(name, "${version}-${ARCH_TAG}")
}

# A release tag without its leading v, for use inside image tags.
function "ver" {
  params = [ref]
  result = trimprefix(ref, "v")
}

# SOURCE_DATE_EPOCH for one image: its SDE_* override, else SDE_EPOCH.
function "sde" {
  params = [override]
  result = override != "" ? override : SDE_EPOCH
}

# The BuildKit history record name (BUILDKIT_BUILD_NAME) of one target.
function "build_name" {
  params = [name]
  result = "${HISTORY_PREFIX}/${name}/${ARCH_TAG}/${RUN_ID}"
}

# Layer cache: one commit-independent ref per (target, arch) in the target's own
# repository, exported mode=max (the expensive work is in discarded builder
# stages, which inline cache cannot carry). Import the rolling ref and the frozen
# -ref baseline; export the one CACHE_TAG_SUFFIX selects.
function "cache_ref" {
  params = [name, flavour]
  result = "${REGISTRY}/${REGISTRY_NAME}/${name}:buildcache-${flavour}"
}

function "cache_from" {
  params = [name, flavour]
  result = [
    "type=registry,ref=${cache_ref(name, flavour)},registry.insecure=${REGISTRY_INSECURE}",
    "type=registry,ref=${cache_ref(name, flavour)}-ref,registry.insecure=${REGISTRY_INSECURE}",
  ]
}

function "cache_to" {
  params = [name, flavour]
  result = [
    "type=registry,ref=${cache_ref(name, flavour)}${CACHE_TAG_SUFFIX},mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true,registry.insecure=${REGISTRY_INSECURE}",
  ]
}

# ---------------------------------------------------------------------------
# Groups. There is no "all" group. pytorch-test and pytorch-run are outside
# default on purpose: pytorch-test's stage exits 1 without a GPU and a BuildKit
# RUN step has no /dev/kfd (run it on a GPU node); no node has a usable GPU to
# exercise pytorch-run on.
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
# Shared settings (inherited; never built on their own)
# ---------------------------------------------------------------------------

target "_common" {
  context   = "."
  platforms = ["linux/amd64"]
  args = {
    SOURCE_DATE_EPOCH = SDE_EPOCH
    VCS_REF           = VCS_REF
    BUILD_DATE        = BUILD_DATE
  }
  labels = {
    "org.opencontainers.image.source"   = SOURCE_URL
    "org.opencontainers.image.revision" = VCS_REF != "" ? VCS_REF : null
    "org.opencontainers.image.created"  = BUILD_DATE != "" ? BUILD_DATE : null
  }
}

# Targets that compile. The job count is never a build arg (an arg is in the
# cache key of every later RUN): each compile step mounts the secret kiln-jobs,
# which kiln build hands it (the node's free memory / 2 GB, shared among the
# node's concurrent builds). A pinned MAX_JOBS is that secret, read from the
# environment variable MAX_JOBS; unpinned, plain bake hands none and the step
# derives the count from MemAvailable on the node.
target "_compile" {
  secret = MAX_JOBS != "" ? ["id=kiln-jobs,env=MAX_JOBS"] : []
  args = {
    SCCACHE_WEBDAV_ENDPOINT   = SCCACHE_ENDPOINT
    SCCACHE_WEBDAV_KEY_PREFIX = SCCACHE_WEBDAV_KEY_PREFIX
    SCCACHE_BUCKET            = SCCACHE_BUCKET
    SCCACHE_REGION            = SCCACHE_REGION
    SCCACHE_S3_KEY_PREFIX     = SCCACHE_S3_KEY_PREFIX
    SCCACHE_LOG               = SCCACHE_LOG
    REQUIRE_SCCACHE           = REQUIRE_SCCACHE
    FORCE_RECACHE             = FORCE_RECACHE
  }
}

# The PyTorch build shape, shared by pytorch and pytorch-wheel.
target "_torch" {
  args = {
    PYTORCH_VERSION        = PYTORCH_VERSION
    GIT_REF                = GIT_REF
    PYTORCH_ROCM_ARCH      = PYTORCH_ROCM_ARCH
    USE_AITER              = USE_AITER
    USE_FLYDSL             = USE_FLYDSL
    USE_FLASH_ATTENTION    = USE_FLASH_ATTENTION
    USE_ROCM_CK_SDPA_GFX12 = USE_ROCM_CK_SDPA_GFX12
  }
}

# ---------------------------------------------------------------------------
# Targets.
#
# Inputs: each input from a sibling is a named context plus an arg naming it.
#   PUBLISHED_INPUTS empty:  contexts = { base-img = "target:pytorch-base" },
#                            BASE_IMAGE = "base-img"  (resolved in-process)
#   PUBLISHED_INPUTS=1:      contexts = {},
#                            BASE_IMAGE = PUB_BASE    (pulled from the registry)
# The Dockerfile does `ARG BASE_IMAGE` / `FROM ${BASE_IMAGE}` either way. A target
# with no context on an input is, to bake, independent of it and may run
# concurrently with it, so every input must appear here.
# ---------------------------------------------------------------------------

# rocm/dev-ubuntu-26.04 pruned to one architecture.
target "rocm-runtime" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.rocm-runtime"
  tags       = [tag("rocm-runtime", ROCM_VERSION)]
  args = {
    ROCM_DEV_IMAGE      = ROCM_DEV_IMAGE
    ROCM_VERSION        = ROCM_VERSION
    PYTORCH_ROCM_ARCH   = PYTORCH_ROCM_ARCH
    ROCM_PRUNE_PROFILE  = ROCM_PRUNE_PROFILE
    SOURCE_DATE_EPOCH   = sde(SDE_ROCM)
    BUILDKIT_BUILD_NAME = build_name("rocm-runtime")
  }
  cache-from = cache_from("rocm-runtime", ARCH_TAG)
  cache-to   = cache_to("rocm-runtime", ARCH_TAG)
}

# PyTorch source only. Its content is noarch, but its tag still carries the
# architecture: seed 003 makes triton-wheel the only target without one.
target "pytorch-src" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-src"
  tags       = [tag("pytorch-src", PYTORCH_VERSION)]
  args = {
    PYTORCH_VERSION     = PYTORCH_VERSION
    GIT_REF             = GIT_REF
    SOURCE_DATE_EPOCH   = sde(SDE_PYTORCH)
    BUILDKIT_BUILD_NAME = build_name("pytorch-src")
  }
  cache-from = cache_from("pytorch-src", ARCH_TAG)
  cache-to   = cache_to("pytorch-src", ARCH_TAG)
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
    ROCM_VERSION        = ROCM_VERSION
    PYTHON_VERSION      = PYTHON_VERSION
    SCCACHE_VERSION     = SCCACHE_VERSION
    SOURCE_DATE_EPOCH   = sde(SDE_BASE)
    BUILDKIT_BUILD_NAME = build_name("pytorch-base")
  }
  cache-from = cache_from("pytorch-base", ARCH_TAG)
  cache-to   = cache_to("pytorch-base", ARCH_TAG)
}

# Non-obvious edge: triton-wheel builds from the base, not from pytorch. Triton
# needs cmake<4 while PyTorch pulls cmake 4.x, so they cannot share an
# environment, and Triton builds in parallel with PyTorch. The only target with
# no architecture in its tag (noarch).
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
    SOURCE_DATE_EPOCH   = sde(SDE_TRITON)
    BUILDKIT_BUILD_NAME = build_name("triton-wheel")
  }
  cache-from = cache_from("triton-wheel", "noarch")
  cache-to   = cache_to("triton-wheel", "noarch")
}

# Non-obvious edge: cupy-wheel hangs off the base, because CuPy has no torch
# dependency. Not optional: LMCache's MP server imports cupy at module scope and
# no published wheel fits this stack.
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
    PYTORCH_ROCM_ARCH   = PYTORCH_ROCM_ARCH
    SOURCE_DATE_EPOCH   = sde(SDE_CUPY)
    BUILDKIT_BUILD_NAME = build_name("cupy-wheel")
  }
  cache-from = cache_from("cupy-wheel", ARCH_TAG)
  cache-to   = cache_to("cupy-wheel", ARCH_TAG)
}

target "pytorch" {
  inherits   = ["_common", "_compile", "_torch"]
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
    SOURCE_DATE_EPOCH   = sde(SDE_PYTORCH)
    BUILDKIT_BUILD_NAME = build_name("pytorch")
  }
  cache-from = cache_from("pytorch", ARCH_TAG)
  cache-to   = cache_to("pytorch", ARCH_TAG)
}

target "pytorch-wheel" {
  inherits   = ["_common", "_compile", "_torch"]
  dockerfile = "docker/Dockerfile.pytorch-wheel"
  tags       = [tag("pytorch-wheel", STACK_VERSION)]
  contexts = USE_PUB ? {} : {
    pytorch-source = "target:pytorch-src"
    pytorch-img    = "target:pytorch"
  }
  args = {
    PYTORCH_SRC_IMAGE   = USE_PUB ? PUB_SRC : "pytorch-source"
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    SOURCE_DATE_EPOCH   = sde(SDE_PYTORCH)
    BUILDKIT_BUILD_NAME = build_name("pytorch-wheel")
  }
  cache-from = cache_from("pytorch-wheel", ARCH_TAG)
  cache-to   = cache_to("pytorch-wheel", ARCH_TAG)
}

# The exception to the input pattern: pytorch-run's input from pytorch must
# resolve in both modes, so it is a docker-image:// context on pytorch's first
# tag (pytorch must have been pushed). Its input from rocm-runtime is a normal
# target: context. Outside default: no node has a GPU to exercise it on.
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
    PYTHON_VERSION      = PYTHON_VERSION
    SOURCE_DATE_EPOCH   = sde(SDE_RUNTIME)
    BUILDKIT_BUILD_NAME = build_name("pytorch-run")
  }
  cache-from = cache_from("pytorch-run", ARCH_TAG)
  cache-to   = cache_to("pytorch-run", ARCH_TAG)
}

# Outside default: its stage exits 1 when torch.cuda.is_available() is false,
# and a BuildKit RUN step has no /dev/kfd. Run it on a GPU node.
target "pytorch-test" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.pytorch-test"
  tags       = [tag("pytorch-test", STACK_VERSION)]
  contexts = USE_PUB ? {} : {
    pytorch-img = "target:pytorch"
  }
  args = {
    PYTORCH_IMAGE       = USE_PUB ? PUB_PYTORCH : "pytorch-img"
    SOURCE_DATE_EPOCH   = sde(SDE_PYTORCH)
    BUILDKIT_BUILD_NAME = build_name("pytorch-test")
  }
  cache-from = cache_from("pytorch-test", ARCH_TAG)
  cache-to   = cache_to("pytorch-test", ARCH_TAG)
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
    PYTORCH_ROCM_ARCH   = PYTORCH_ROCM_ARCH
    PREBUILD_KERNELS    = PREBUILD_KERNELS
    SOURCE_DATE_EPOCH   = sde(SDE_AITER)
    BUILDKIT_BUILD_NAME = build_name("aiter-wheel")
  }
  cache-from = cache_from("aiter-wheel", ARCH_TAG)
  cache-to   = cache_to("aiter-wheel", ARCH_TAG)
}

# Hangs off pytorch because its setup.py imports torch to decide it is building
# for ROCm at all, which is also why it cannot be installed into pytorch itself.
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
    PYTORCH_ROCM_ARCH   = PYTORCH_ROCM_ARCH
    SOURCE_DATE_EPOCH   = sde(SDE_TORCHVISION)
    BUILDKIT_BUILD_NAME = build_name("torchvision-wheel")
  }
  cache-from = cache_from("torchvision-wheel", ARCH_TAG)
  cache-to   = cache_to("torchvision-wheel", ARCH_TAG)
}

# NIXL, with UCX built from source.
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
    SOURCE_DATE_EPOCH   = sde(SDE_NIXL)
    BUILDKIT_BUILD_NAME = build_name("nixl-wheel")
  }
  cache-from = cache_from("nixl-wheel", ARCH_TAG)
  cache-to   = cache_to("nixl-wheel", ARCH_TAG)
}

# Non-obvious: lmcache takes no AITER context. Its extension is cache movement,
# not GEMMs. It does take cupy-wheel (its MP server imports cupy at module scope).
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
    PYTORCH_ROCM_ARCH   = PYTORCH_ROCM_ARCH
    SOURCE_DATE_EPOCH   = sde(SDE_LMCACHE)
    BUILDKIT_BUILD_NAME = build_name("lmcache")
  }
  cache-from = cache_from("lmcache", ARCH_TAG)
  cache-to   = cache_to("lmcache", ARCH_TAG)
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
    SOURCE_DATE_EPOCH   = sde(SDE_LMCACHE)
    BUILDKIT_BUILD_NAME = build_name("lmcache-wheel")
  }
  cache-from = cache_from("lmcache-wheel", ARCH_TAG)
  cache-to   = cache_to("lmcache-wheel", ARCH_TAG)
}

# Two non-obvious edges:
# - lmcache-wheel: vLLM ships the LMCache MP connector but imports lmcache.utils
#   from it, so the wheel must exist first (and, scheduled, be published first).
# - torchvision-wheel: vLLM's build requirements pull timm, timm requires
#   torchvision, and transformers' image_utils imports torchvision.io at module
#   scope. PyPI has only CUDA builds, which cannot load on ROCm.
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
    RUST_VERSION            = RUST_VERSION
    PYTORCH_ROCM_ARCH       = PYTORCH_ROCM_ARCH
    SOURCE_DATE_EPOCH       = sde(SDE_VLLM)
    BUILDKIT_BUILD_NAME     = build_name("vllm")
  }
  cache-from = cache_from("vllm", ARCH_TAG)
  cache-to   = cache_to("vllm", ARCH_TAG)
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
    SOURCE_DATE_EPOCH   = sde(SDE_VLLM)
    BUILDKIT_BUILD_NAME = build_name("vllm-wheel")
  }
  cache-from = cache_from("vllm-wheel", ARCH_TAG)
  cache-to   = cache_to("vllm-wheel", ARCH_TAG)
}
