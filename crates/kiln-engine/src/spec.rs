//! What the engine is asked to build: one [`BuildSpec`] per target, already
//! resolved from the bake files and ordered by the plan.
//!
//! Must never: hold a secret's value (a secret is its id and where the
//! docker CLI reads it from) or read a file: a spec is plain data.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

/// Where a named context comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ContextSource {
    /// `target:NAME`: another target of this run.
    Target { name: String },
    /// `docker-image://REF`; `producer` is the target of this run whose tag
    /// `REF` is, if any (it is then handed over by that target's output).
    Image {
        reference: String,
        producer: Option<String>,
    },
    /// A local directory (`./dir`): needs named-context support in BuildKit.
    Local { path: String },
}

/// A BuildKit secret: its id and where its value comes from. Values are
/// never read or stored by kiln; the docker CLI reads them at build time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretSpec {
    pub id: String,
    pub src: Option<PathBuf>,
    pub env: Option<String>,
}

/// The args and labels a target is keyed by, where they differ from those
/// it is built with: provenance stamps (`VCS_REF`, `BUILD_DATE`) are built
/// with their values and keyed by a fixed stand-in (docs/stamps.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KeyView {
    pub args: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// One platform of a multi-platform target, built on its own and pushed by
/// digest into the target's repository (docs/driver-buildx.md, *Platform
/// units*). Its spec is named `TARGET@PLATFORM`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Unit {
    /// The bake target it is a platform of.
    pub target: String,
    /// Its one platform, as the target names it.
    pub platform: String,
    /// The repository it is pushed to by digest (the target's tags').
    pub repository: String,
}

/// One target to build.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BuildSpec {
    pub name: String,
    /// The build context directory (absolute).
    pub context: PathBuf,
    /// The Dockerfile (absolute path), unless `dockerfile_inline` is set.
    pub dockerfile: PathBuf,
    pub dockerfile_inline: Option<String>,
    pub args: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub tags: Vec<String>,
    /// The stage to build (`--target`).
    pub target: Option<String>,
    pub platforms: Vec<String>,
    pub network: Option<String>,
    pub no_cache: bool,
    /// Pull every referenced image (bake's `pull`, `--pull`): outside
    /// images are resolved in their registry, and BuildKit pulls them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pull: bool,
    /// The image must end in the Docker engine (bake's `load`, an output
    /// `type=docker`): a builder that keeps no image store refuses it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub load: bool,
    /// Attestations (bake's `attest`, `--provenance`, `--sbom`), each as
    /// buildx's `--attest` value (`type=provenance,mode=max`). They change
    /// what is pushed, so they are part of the key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attest: Vec<String>,
    /// Entitlements the target asks for and `--allow` granted
    /// (`network.host`, `security.insecure`), handed to buildx as `--allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    pub contexts: BTreeMap<String, ContextSource>,
    pub secrets: Vec<SecretSpec>,
    /// Targets of this run that must finish first.
    pub deps: Vec<String>,
    pub push: bool,
    /// Images to import layer cache from (inline cache in their config).
    pub cache_from: Vec<String>,
    /// Embed inline cache in the image (`BUILDKIT_INLINE_CACHE=1`).
    pub inline_cache: bool,
    /// The layer-cache policy on a buildx builder (registry import and
    /// `mode=max` export; `kiln_plan::cache`), set when building with buildx.
    pub buildx_cache: Option<kiln_plan::cache::CachePolicy>,
    /// What the key reads in place of `args` and `labels`, when stamps
    /// reach them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_view: Option<KeyView>,
    /// A platform unit of a multi-platform target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// A multi-platform target whose platforms are built as units: nothing
    /// is built for it; its image index is made in the registry from its
    /// units' images (`(platform, unit name)`, its dependencies) and put
    /// under its tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub join: Vec<(String, String)>,
}

impl BuildSpec {
    /// The spec as its content key sees it: `key_view`'s args and labels
    /// in place of the real ones.
    pub fn keyed(&self) -> std::borrow::Cow<'_, BuildSpec> {
        match &self.key_view {
            None => std::borrow::Cow::Borrowed(self),
            Some(v) => {
                let mut k = self.clone();
                k.args = v.args.clone();
                k.labels = v.labels.clone();
                k.key_view = None;
                std::borrow::Cow::Owned(k)
            }
        }
    }

    /// Several platforms in one target: its image is an index that lives
    /// in a registry only (pushed by digest, identified by the identities
    /// of all its platforms), never one engine's image.
    pub fn multi_platform(&self) -> bool {
        self.platforms.len() > 1
    }

    /// Its image lives in a registry only, never in an engine: an index of
    /// several platforms, or a platform unit pushed by digest.
    pub fn registry_only(&self) -> bool {
        self.multi_platform() || self.unit.is_some()
    }

    /// Whether its build pushes: to its tags, or a platform unit by digest.
    pub fn pushes(&self) -> bool {
        self.push && (!self.tags.is_empty() || self.unit.is_some())
    }

    /// The repository its pushed image is named in by digest: a unit's, or
    /// its first tag's.
    pub fn push_repository(&self) -> Option<String> {
        match &self.unit {
            Some(u) => Some(u.repository.clone()),
            None => self
                .tags
                .first()
                .map(|t| kiln_plan::repository_name(t).to_string()),
        }
    }
}

/// How to reach the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `unix:///path/to/docker.sock` or `tcp://host:port`.
    pub host: String,
    /// The docker CLI with a built-in BuildKit client (for secrets).
    pub docker_cli: PathBuf,
}
