//! Content keys on an engine: resolves what a target's key needs from
//! outside its files — external images to the ids the engine holds, named
//! contexts and dependency tags to the *output* image ids of the upstream
//! targets (early cutoff) — and gathers the input manifest
//! ([`crate::inputs::gather`]).
//!
//! An upstream whose output is not known yet (it will be rebuilt) leaves
//! the key *pending*: `kiln plan` reports it, `kiln build` computes the key
//! only once every upstream has finished.
//!
//! The room has three parts: this module (the resolver and keying one
//! target), [`locate`] (where a recorded image can be had: the skip
//! decision `kiln plan` and `kiln build` share) and [`predict`] (what a run
//! will do, for `kiln plan`, `kiln why` and `kiln schedule`).
//!
//! Must never: build, tag or write anything.

mod locate;
mod predict;

pub use locate::{Located, at_digest, in_registry, locate};
pub use predict::{Action, Prediction, predict};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kiln_plan::key::{Change, InputManifest, diff, summarize};
use kiln_plan::normalize_reference;
use kiln_store::{Lookup, RecordStore};
use serde::Serialize;

use crate::driver::local::LocalEngine;
use crate::error::EngineError;
use crate::hashing::{HashStats, StatCache};
use crate::inputs::{external_images, gather_for_build};
use crate::registry::{Registry, RegistryError, Resolution};
use crate::spec::{BuildSpec, ContextSource};

/// The value an input takes when the engine does not hold the image.
pub const UNRESOLVED: &str = "unresolved";

/// What a target's key needs from outside its files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outside {
    /// External image → id on the engine (or [`UNRESOLVED`]).
    pub images: BTreeMap<String, String>,
    /// Named context → the image id it resolves to.
    pub upstreams: BTreeMap<String, String>,
    /// Upstream targets whose output is not known yet.
    pub pending: Vec<String>,
    /// External images resolved through a registry → `repo@digest`: the
    /// build is handed that exact image, the one the key names.
    pub pins: BTreeMap<String, String>,
}

/// An external image resolved: its digest or image id, and the immutable
/// reference to build from when it came from a registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub id: String,
    pub pin: Option<String>,
}

/// The dependency of `spec` (among `specs`) that produces `image`, if any.
fn producer_of<'a>(spec: &BuildSpec, specs: &'a [BuildSpec], image: &str) -> Option<&'a str> {
    let want = normalize_reference(image)?;
    spec.deps.iter().find_map(|d| {
        let ds = specs.iter().find(|s| &s.name == d)?;
        ds.tags
            .iter()
            .any(|t| normalize_reference(t).as_deref() == Some(want.as_str()))
            .then_some(ds.name.as_str())
    })
}

/// Resolves the outside inputs of `spec`. `outputs` maps finished targets
/// to their output image ids; `lookup` resolves an external reference to
/// an image id (the engine's image store).
pub async fn outside<F, Fut>(
    spec: &BuildSpec,
    specs: &[BuildSpec],
    outputs: &HashMap<String, String>,
    lookup: F,
    platform: &str,
) -> Result<Outside, EngineError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Option<Found>>,
{
    let mut out = Outside::default();
    let upstream = |name: &str, out: &mut Outside| -> String {
        match outputs.get(name) {
            Some(id) => id.clone(),
            None => {
                if !out.pending.iter().any(|p| p == name) {
                    out.pending.push(name.to_string());
                }
                format!("pending:{name}")
            }
        }
    };
    for (ctx, src) in &spec.contexts {
        let v = match src {
            ContextSource::Target { name } => upstream(name, &mut out),
            ContextSource::Image {
                producer: Some(p), ..
            } => upstream(p, &mut out),
            ContextSource::Image {
                reference,
                producer: None,
            } => match lookup(reference.clone()).await {
                Some(f) => {
                    if let Some(p) = f.pin {
                        out.pins.insert(reference.clone(), p);
                    }
                    f.id
                }
                None => UNRESOLVED.into(),
            },
            // A local directory's content digest replaces this when the
            // files are hashed (`inputs::gather_for_build`).
            ContextSource::Local { path } => format!("local:{path}"),
        };
        out.upstreams.insert(ctx.clone(), v);
    }
    for image in external_images(spec, platform)? {
        let v = match producer_of(spec, specs, &image) {
            Some(p) => upstream(p, &mut out),
            None => match lookup(image.clone()).await {
                Some(f) => {
                    if let Some(p) = f.pin {
                        out.pins.insert(image.clone(), p);
                    }
                    f.id
                }
                None => UNRESOLVED.into(),
            },
        };
        out.images.insert(image, v);
    }
    Ok(out)
}

/// A target's manifest and key.
#[derive(Clone, Debug)]
pub struct Keyed {
    pub manifest: InputManifest,
    /// `None` while an upstream's output is pending.
    pub key: Option<String>,
    pub pending: Vec<String>,
    /// Why the key cannot vouch for every input (the target is then always
    /// built): see [`crate::inputs::volatile`].
    pub volatile: Vec<String>,
    /// Registry-resolved external images → `repo@digest` to build from.
    pub pins: BTreeMap<String, String>,
    pub stats: HashStats,
    /// Whether the build is handed the job count (secret `kiln-jobs`):
    /// decided by the Dockerfile, never part of the key.
    pub jobs_secret: bool,
}

/// The key of `spec`: resolves the outside inputs with `lookup`, then
/// hashes the files on a blocking thread.
pub async fn key_with<F, Fut>(
    spec: &BuildSpec,
    specs: &[BuildSpec],
    outputs: &HashMap<String, String>,
    lookup: F,
    engine_platform: &str,
    cache: Arc<StatCache>,
) -> Result<Keyed, EngineError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Option<Found>>,
{
    if !spec.join.is_empty() {
        return Ok(join_key(spec, outputs));
    }
    let platform = crate::inputs::key_platform(spec, engine_platform);
    let o = outside(spec, specs, outputs, lookup, &platform).await?;
    let pins = o.pins.clone();
    // Gathered ahead: composed here. Else read from disk, off the runtime.
    let g = match crate::inputs::gather_ready(spec, &platform, &o.images, &o.upstreams) {
        Some(g) => g,
        None => {
            let s = spec.clone();
            tokio::task::spawn_blocking(move || {
                gather_for_build(&s, &platform, &o.images, &o.upstreams, &cache)
            })
            .await
            .map_err(|e| EngineError::Build(format!("hashing task failed: {e}")))??
        }
    };
    let (manifest, stats, jobs_secret) = (g.manifest, g.stats, g.jobs_secret);
    let key = o.pending.is_empty().then(|| manifest.key());
    let volatile = crate::inputs::volatile(&manifest);
    Ok(Keyed {
        manifest,
        key,
        pending: o.pending,
        volatile,
        pins,
        stats,
        jobs_secret,
    })
}

/// The key of a join (a multi-platform target built as platform units):
/// its platforms and each unit's output, nothing else. The index is made
/// of its units' images, so it is the same index exactly when they are.
fn join_key(spec: &BuildSpec, outputs: &HashMap<String, String>) -> Keyed {
    let mut upstreams = BTreeMap::new();
    let mut pending = Vec::new();
    for (platform, unit) in &spec.join {
        match outputs.get(unit) {
            Some(id) => {
                upstreams.insert(platform.clone(), id.clone());
            }
            None => pending.push(unit.clone()),
        }
    }
    let manifest = kiln_plan::key::InputManifest {
        recipe: kiln_plan::key::RECIPE.to_string(),
        dockerfile: "kiln:join".into(),
        platform: spec.platforms.join(","),
        upstreams,
        attest: spec.attest.clone(),
        ..Default::default()
    };
    let key = pending.is_empty().then(|| manifest.key());
    Keyed {
        manifest,
        key,
        pending,
        volatile: Vec::new(),
        pins: BTreeMap::new(),
        stats: Default::default(),
        jobs_secret: false,
    }
}

/// Resolves external images as a build will see them: the engine's own
/// image first (its BuildKit uses a local image before asking a registry),
/// then the registry's current digest (pinned for the build). Each
/// reference is resolved once per run, and a registry that could not be
/// reached is not asked again in the same run (an offline machine pays one
/// timeout per registry, not one per target).
pub struct Resolver {
    engine: Option<LocalEngine>,
    registry: Option<Registry>,
    /// The platform builds are for, when no engine says it (a builder
    /// that keeps no image store).
    platform: Option<String>,
    memo: std::sync::Mutex<HashMap<String, Option<Found>>>,
    dead: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Resolver {
    pub fn new(engine: Option<LocalEngine>, registry: Option<Registry>) -> Resolver {
        Resolver {
            engine,
            registry,
            platform: None,
            memo: Default::default(),
            dead: Default::default(),
        }
    }

    /// Builds are for `platform` (a builder's own, when it has no engine).
    #[must_use]
    pub fn with_platform(mut self, platform: String) -> Resolver {
        self.platform = Some(platform);
        self
    }

    /// The registry client, if one could be made.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// The builder's platform: the one given, else the engine's, else
    /// `linux/amd64`.
    pub fn platform(&self) -> String {
        self.platform
            .clone()
            .or_else(|| self.engine.as_ref().map(|e| e.platform.clone()))
            .unwrap_or_else(|| "linux/amd64".into())
    }

    /// `None` when neither the engine nor the registry knows `reference`.
    /// With `all_platforms` (a multi-platform target), only the registry
    /// is asked: its digest (an index) covers every platform, where the
    /// engine's image is one platform's.
    pub async fn resolve(&self, reference: &str, all_platforms: bool) -> Option<Found> {
        let memo_key = if all_platforms {
            format!("registry:{reference}")
        } else {
            reference.to_string()
        };
        if let Some(f) = self.memo.lock().ok()?.get(&memo_key) {
            return f.clone();
        }
        let found = self.lookup(reference, all_platforms).await;
        if let Ok(mut m) = self.memo.lock() {
            m.insert(memo_key, found.clone());
        }
        found
    }

    /// `found` (a registry-resolved image, pinned by digest) as the build
    /// of one `platform` reads it: its id becomes the identity of that
    /// platform's image in it (`crate::identity`, read from its config),
    /// which stays the same when only another platform of an index
    /// changes; the pin (the index) is kept to build from. Unchanged when
    /// it is not pinned in a registry, or the registry cannot say.
    pub async fn for_platform(&self, found: Found, platform: &str) -> Found {
        let (Some(pin), Some(r)) = (found.pin.clone(), self.registry.as_ref()) else {
            return found;
        };
        let memo_key = format!("platform:{platform}:{pin}");
        if let Some(Some(f)) = self
            .memo
            .lock()
            .ok()
            .and_then(|m| m.get(&memo_key).cloned())
        {
            return f;
        }
        let id = match r.identity(&pin, platform).await {
            Ok(Some(id)) => format!("{platform}:{id}"),
            _ => return found,
        };
        let f = Found { id, pin: Some(pin) };
        if let Ok(mut m) = self.memo.lock() {
            m.insert(memo_key, Some(f.clone()));
        }
        f
    }

    async fn lookup(&self, reference: &str, all_platforms: bool) -> Option<Found> {
        if let Some(e) = self.engine.as_ref().filter(|_| !all_platforms)
            && let Some(id) = e.image_id(reference).await
        {
            return Some(Found { id, pin: None });
        }
        let r = self.registry.as_ref()?;
        let parsed = kiln_plan::ImageRef::parse(reference)?;
        let host = parsed.domain().to_string();
        if self.dead.lock().ok()?.contains(&host) {
            return None;
        }
        match r.resolve(reference).await {
            Ok(Resolution::Found(digest)) => Some(Found {
                pin: Some(format!("{host}/{}@{digest}", parsed.path())),
                id: digest,
            }),
            Ok(Resolution::Absent) => None,
            Err(RegistryError::Unreachable { .. } | RegistryError::Transport { .. }) => {
                if let Ok(mut d) = self.dead.lock() {
                    d.insert(host);
                }
                None
            }
            Err(_) => None,
        }
    }
}

/// Starts, on the current runtime, gathering what the keys of `specs`
/// read of their own ([`crate::inputs::pregather`], on a thread of its own):
/// on the platform of the engine at `engine` once it has said it, else on
/// `platform`. Beside the rest of the run's preparation, which mostly
/// waits on the engine. A key made on another platform gathers its own
/// again; errors are left for the keys to meet.
pub fn gather_early(
    engine: Option<crate::Endpoint>,
    platform: String,
    specs: Vec<BuildSpec>,
    cache: Arc<StatCache>,
) {
    tokio::spawn(async move {
        let platform = match engine {
            Some(endpoint) => match crate::driver::local::LocalEngine::connect(endpoint).await {
                Ok(engine) => engine.platform.clone(),
                Err(_) => return,
            },
            None => platform,
        };
        // A thread of its own, never joined: a run that stops before its
        // keys (a failed preflight, a signal) does not wait for files to
        // be hashed that nothing will read. It yields to the run's thread
        // (`crate::ahead`).
        let _ = crate::ahead::spawn("kiln-gather", move || {
            crate::inputs::pregather(&specs, &platform, &cache)
        });
    });
}

/// The key of `spec`, external images resolved by `resolver`.
pub async fn key_on(
    resolver: &Resolver,
    spec: &BuildSpec,
    specs: &[BuildSpec],
    outputs: &HashMap<String, String>,
    cache: Arc<StatCache>,
) -> Result<Keyed, EngineError> {
    let unit_platform = spec.unit.as_ref().map(|u| u.platform.as_str());
    key_with(
        spec,
        specs,
        outputs,
        // `pull` (bake's `--pull`): the registry answers, never the
        // engine's copy, so a moved tag changes the key.
        |r| async move {
            let found = resolver
                .resolve(&r, spec.registry_only() || spec.pull)
                .await?;
            // A platform unit reads one platform of a base image: it is
            // keyed by that platform's image, so a base that changes for
            // another platform only rebuilds no unit of this one.
            match unit_platform {
                Some(p) => Some(resolver.for_platform(found, p).await),
                None => Some(found),
            }
        },
        &resolver.platform(),
        cache,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, deps: &[&str], tags: &[&str]) -> BuildSpec {
        BuildSpec {
            name: name.into(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            tags: tags.iter().map(|d| d.to_string()).collect(),
            dockerfile_inline: Some(
                "ARG BASE=r/base:1\nFROM ${BASE} AS b\nFROM other:1\nCOPY --from=b / /\n".into(),
            ),
            ..BuildSpec::default()
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn dependency_tags_and_contexts_take_upstream_outputs() {
        let base = spec("base", &[], &["r/base:1"]);
        let mut app = spec("app", &["base"], &[]);
        app.contexts.insert(
            "b".into(),
            ContextSource::Target {
                name: "base".into(),
            },
        );
        let specs = vec![base, app.clone()];
        let lookup = |r: String| async move {
            (r == "other:1").then(|| Found {
                id: "sha256:other".to_string(),
                pin: Some("docker.io/library/other@sha256:other".into()),
            })
        };
        let done: HashMap<String, String> = [("base".into(), "sha256:out".into())].into();
        let o = block(outside(&app, &specs, &done, lookup, "linux/amd64")).unwrap();
        assert_eq!(o.images["r/base:1"], "sha256:out");
        assert_eq!(o.images["other:1"], "sha256:other");
        assert_eq!(o.pins["other:1"], "docker.io/library/other@sha256:other");
        assert_eq!(o.upstreams["b"], "sha256:out");
        assert!(o.pending.is_empty());
        // Before base has finished, app's key is pending on it.
        let o = block(outside(
            &app,
            &specs,
            &HashMap::new(),
            lookup,
            "linux/amd64",
        ))
        .unwrap();
        assert_eq!(o.pending, vec!["base".to_string()]);
        assert_eq!(o.images["r/base:1"], "pending:base");
    }

    #[test]
    fn missing_images_are_unresolved() {
        let app = spec("app", &[], &[]);
        let o = block(outside(
            &app,
            std::slice::from_ref(&app),
            &HashMap::new(),
            |_| async { None },
            "linux/amd64",
        ))
        .unwrap();
        assert_eq!(o.images["r/base:1"], UNRESOLVED);
        assert_eq!(o.images["other:1"], UNRESOLVED);
    }
}
