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
//! Must never: build, tag or write anything.

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
    // One platform keys as itself; several as their list in the target's
    // order (BuildKit's `TARGETPLATFORM` and the index follow it).
    let platform = if spec.platforms.is_empty() {
        engine_platform.to_string()
    } else {
        spec.platforms.join(",")
    };
    let o = outside(spec, specs, outputs, lookup, &platform).await?;
    let pins = o.pins.clone();
    let s = spec.clone();
    let g = tokio::task::spawn_blocking(move || {
        gather_for_build(&s, &platform, &o.images, &o.upstreams, &cache)
    })
    .await
    .map_err(|e| EngineError::Build(format!("hashing task failed: {e}")))??;
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

/// The key of `spec`, external images resolved by `resolver`.
pub async fn key_on(
    resolver: &Resolver,
    spec: &BuildSpec,
    specs: &[BuildSpec],
    outputs: &HashMap<String, String>,
    cache: Arc<StatCache>,
) -> Result<Keyed, EngineError> {
    key_with(
        spec,
        specs,
        outputs,
        |r| async move { resolver.resolve(&r, spec.multi_platform()).await },
        &resolver.platform(),
        cache,
    )
    .await
}

/// What `kiln build` will do with a target, predicted before any build.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Build,
    Skip,
}

/// A target's predicted key, action and reason.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub name: String,
    /// `None` when it depends on an upstream output not built yet.
    pub key: Option<String>,
    pub action: Action,
    pub reason: String,
    /// What differs from the target's last recorded build.
    pub changes: Vec<Change>,
    /// The key of the last recorded build, if any.
    pub recorded_key: Option<String>,
    /// When the last recorded build ran (RFC 3339).
    pub recorded_at: Option<String>,
    /// Why the target's last record could not be used (a damaged or
    /// unreadable record or latest-record pointer), when that is so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
    #[serde(skip)]
    pub manifest: InputManifest,
}

/// Predicts, in build order, what a run of `specs` will do: a target is
/// skipped when its key is recorded and the image is on the engine; its
/// dependents then take the recorded output. A target whose upstream will
/// be rebuilt has no key yet (early cutoff may still skip it).
///
/// `engine` is `None` when no engine answers: external images are then
/// unresolved and every target is predicted to build. `registry_only` is
/// the platform of a builder that keeps no image store (`engine` is then
/// `None`): images resolve in the registry, and a recorded image the
/// registry holds is a skip, as `kiln build` on that builder decides.
pub async fn predict(
    engine: Option<&LocalEngine>,
    registry_only: Option<String>,
    registry: Option<&Registry>,
    specs: &[BuildSpec],
    store: &dyn RecordStore,
    cache: Arc<StatCache>,
) -> Result<Vec<Prediction>, EngineError> {
    let registry_only_builder = registry_only.is_some();
    let mut resolver = Resolver::new(engine.cloned(), registry.cloned());
    if let Some(p) = registry_only {
        resolver = resolver.with_platform(p);
    }
    let mut outputs: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    let store_err = |e: kiln_store::StoreError| EngineError::Store(e.to_string());
    for spec in specs {
        let keyed = key_on(&resolver, spec, specs, &outputs, cache.clone()).await?;
        let latest = store.latest(&spec.name).map_err(store_err)?;
        let (mut recorded, recorded_manifest) = match &latest {
            Lookup::Hit(e) => (
                Some(e.record.clone()),
                serde_json::from_value::<InputManifest>(e.inputs.clone()).ok(),
            ),
            _ => (None, None),
        };
        let damaged = match &latest {
            Lookup::Corrupt(why) => Some(why.clone()),
            _ => None,
        };
        let mut changes = recorded_manifest
            .as_ref()
            .map(|m| diff(m, &keyed.manifest))
            .unwrap_or_default();
        // When the current key is recorded (an older build, say, after a
        // change was reverted), that record decides: what changed is told
        // against it, never against a later build of other inputs.
        // So does it when the latest-record pointer is missing or damaged:
        // plan, why and build never disagree about a recorded key.
        if let Some(key) = keyed.key.as_ref().filter(|_| keyed.volatile.is_empty())
            && recorded.as_ref().is_none_or(|r| &r.key != key)
            && let Lookup::Hit(e) = store.get(key).map_err(store_err)?
        {
            changes = serde_json::from_value::<InputManifest>(e.inputs.clone())
                .ok()
                .map(|m| diff(&m, &keyed.manifest))
                .unwrap_or_default();
            recorded = Some(e.record);
        }
        let (action, reason) = match &keyed.key {
            Some(_) if !keyed.volatile.is_empty() => (
                Action::Build,
                format!("always built: {}", keyed.volatile.join("; ")),
            ),
            None => (
                Action::Build,
                format!(
                    "needs the new output of {}; skipped if that image comes out unchanged (early cutoff)",
                    keyed.pending.join(", ")
                ),
            ),
            Some(key) => match store.get(key).map_err(store_err)? {
                Lookup::Hit(entry) => {
                    let id = entry.record.image_id.clone();
                    let rec = &entry.record;
                    // A multi-platform image is an index in the registry,
                    // never on an engine (docs/driver-buildx.md).
                    let engine = engine.filter(|_| !spec.multi_platform());
                    match locate(engine, &resolver, &spec.name, rec).await {
                        Located::Engine { .. } => {
                            outputs.insert(spec.name.clone(), id);
                            (
                                Action::Skip,
                                format!("up to date (built {} on {})", rec.built_at, rec.node),
                            )
                        }
                        Located::Registry(r) => {
                            outputs.insert(spec.name.clone(), id);
                            let how = if engine.is_some() {
                                "will be pulled from"
                            } else {
                                "in the registry as"
                            };
                            (
                                Action::Skip,
                                format!(
                                    "up to date (built {} on {}; {how} {r})",
                                    rec.built_at, rec.node
                                ),
                            )
                        }
                        Located::Gone if registry_only_builder => (
                            Action::Build,
                            format!(
                                "recorded image {} is in no registry any more",
                                short_id(&id)
                            ),
                        ),
                        Located::Gone => gone(engine.is_some(), &id),
                    }
                }
                Lookup::Corrupt(why) => (Action::Build, format!("record damaged ({why})")),
                Lookup::Miss => match (&latest, changes.is_empty()) {
                    (Lookup::Miss, _) => (Action::Build, "never built".into()),
                    (Lookup::Corrupt(why), _) => {
                        (Action::Build, format!("the last record is damaged ({why})"))
                    }
                    (Lookup::Hit(_), false) => (
                        Action::Build,
                        format!("inputs changed: {}", summarize(&changes)),
                    ),
                    (Lookup::Hit(_), true) => (
                        Action::Build,
                        "inputs changed since the last recorded build".into(),
                    ),
                },
            },
        };
        out.push(Prediction {
            name: spec.name.clone(),
            key: keyed.key,
            action,
            reason,
            changes,
            recorded_key: recorded.as_ref().map(|r| r.key.clone()),
            recorded_at: recorded.as_ref().map(|r| r.built_at.clone()),
            damaged: damaged.filter(|_| recorded.is_none()),
            manifest: keyed.manifest,
        });
    }
    Ok(out)
}

/// Where the image of a record can be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// The engine holds the image (same identity) under `source`, a
    /// reference it knows: the unique reference when that still points at
    /// it (`unique_tagged`), else one of the recorded tags.
    Engine { source: String, unique_tagged: bool },
    /// Only a registry holds it, as this `repo@digest` (pushed when built).
    Registry(String),
    /// Neither.
    Gone,
}

/// Finds the image of `target`'s record: on the engine (its unique
/// reference answers in one request in the usual case, else a recorded
/// tag that still names the same image), else in a registry it was pushed
/// to. Images are compared by identity ([`crate::identity`]), which is the
/// same on every engine and image store. `kiln plan` and `kiln build`
/// decide skips with this one function.
pub async fn locate(
    engine: Option<&LocalEngine>,
    resolver: &Resolver,
    target: &str,
    rec: &kiln_store::Record,
) -> Located {
    if let Some(e) = engine {
        let id = rec.image_id.as_str();
        let unique = crate::naming::local_ref(target, id);
        // The unique reference's inspect also answers for every tag of the
        // same image (a skip then checks the tags again, answered from what
        // was learned); tags it does not list are asked together.
        let here = e.image_id(&unique).await;
        if here.as_deref() == Some(id) {
            return Located::Engine {
                source: unique,
                unique_tagged: true,
            };
        }
        let refs: Vec<&str> = rec.tags.iter().map(String::as_str).collect();
        e.prefetch(&refs).await;
        for t in &rec.tags {
            if e.image_id(t).await.as_deref() == Some(id) {
                return Located::Engine {
                    source: t.clone(),
                    unique_tagged: false,
                };
            }
        }
    }
    match in_registry(resolver, rec).await {
        Some(r) => Located::Registry(r),
        None => Located::Gone,
    }
}

/// The `repo@digest` under which a registry still holds a recorded image
/// (pushed when it was built).
pub async fn in_registry(resolver: &Resolver, rec: &kiln_store::Record) -> Option<String> {
    let digest = rec.digest.as_ref()?;
    let registry = resolver.registry()?;
    for t in &rec.tags {
        let Some(r) = kiln_plan::ImageRef::parse(t) else {
            continue;
        };
        let reference = format!("{}/{}@{digest}", r.domain(), r.path());
        if matches!(registry.check(&reference).await, Ok(Resolution::Found(_))) {
            return Some(reference);
        }
    }
    None
}

/// A record whose image is nowhere: build, saying why.
fn gone(have_engine: bool, id: &str) -> (Action, String) {
    if have_engine {
        (
            Action::Build,
            format!("recorded image {} is gone from the engine", short_id(id)),
        )
    } else {
        (
            Action::Build,
            "recorded, but no engine answers to confirm the image exists".into(),
        )
    }
}

fn short_id(id: &str) -> String {
    let hex = id.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
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
