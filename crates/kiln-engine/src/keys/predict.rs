//! What `kiln build` will do, predicted before any build: each target's
//! key, skip or build, and what changed since its last record, in build
//! order, taking a recorded output for a predicted skip.
//!
//! Must never: build, tag or write anything.

use super::*;

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
            Lookup::Corrupt(why) | Lookup::Untrusted(why) => Some(why.clone()),
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
                    // and a platform unit is pushed by digest: never on an
                    // engine (docs/driver-buildx.md).
                    let engine = engine.filter(|_| !spec.registry_only());
                    match locate(engine, &resolver, &spec.name, rec).await {
                        Located::Engine { .. } => {
                            outputs.insert(spec.name.clone(), id);
                            (
                                Action::Skip,
                                format!(
                                    "up to date (built {} on {}{})",
                                    rec.built_at,
                                    rec.node,
                                    signed_by(rec)
                                ),
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
                                    "up to date (built {} on {}{}; {how} {r})",
                                    rec.built_at,
                                    rec.node,
                                    signed_by(rec)
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
                Lookup::Untrusted(why) => (Action::Build, format!("{why}: rebuilding")),
                Lookup::Miss => match (&latest, changes.is_empty()) {
                    (Lookup::Miss, _) => (Action::Build, "never built".into()),
                    (Lookup::Corrupt(why), _) => {
                        (Action::Build, format!("the last record is damaged ({why})"))
                    }
                    (Lookup::Untrusted(why), _) => (
                        Action::Build,
                        format!("the last record is not trusted ({why})"),
                    ),
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

/// `, signed by NAME` for a signed record (the signer of the record a
/// decision used; docs/trust.md), else nothing.
fn signed_by(rec: &kiln_store::Record) -> String {
    rec.signature
        .as_ref()
        .map(|s| format!(", signed by {}", s.signer))
        .unwrap_or_default()
}
