//! `kiln build --metadata-file FILE`: the build result of every target in
//! `docker buildx bake --metadata-file`'s format, so that a workflow that
//! reads bake's file (docker/bake-action's `metadata` output) reads kiln's.
//!
//! Per target, under its name: `image.name` (its tags, joined by `,`),
//! `containerimage.digest`, and, when the image is in a registry,
//! `containerimage.descriptor` (`mediaType`, `digest`, `size` of its
//! manifest) and `containerimage.config.digest` (for one image's manifest,
//! not an index). An image only in the local engine has the engine's id as
//! its digest (the manifest's digest on the containerd image store; the
//! config's on the classic store, which is also its config digest), as
//! bake's docker driver writes. Unlike bake, a target kiln skipped is
//! there too, with its recorded image; kiln adds `kiln.status`
//! (`built`, `skipped`, `failed`, `blocked`) and `kiln.key`. Not written:
//! `buildx.build.ref` and `buildx.build.provenance` (no BuildKit build
//! stands behind a skipped target) and `buildx.build.warnings`.
//!
//! Must never: fail the run (a file that cannot be written is an error
//! after the summary, never a lost build), or ask a registry anything for a
//! target that was not pushed.

use std::path::Path;

use kiln_engine::driver::local::{ImageStore, LocalEngine};
use kiln_engine::registry::Registry;
use kiln_engine::{BuildSpec, RunSummary, TargetStatus};
use serde_json::{Map, Value, json};

/// The metadata document of a run. `engine`: the run's one engine, asked
/// for the id of an image it holds that no registry does.
pub async fn document(
    summary: &RunSummary,
    specs: &[BuildSpec],
    engine: Option<&LocalEngine>,
) -> Map<String, Value> {
    let registry = Registry::new(std::time::Duration::from_secs(20)).ok();
    let mut doc = Map::new();
    for t in &summary.targets {
        // bake's document names targets only: a platform unit is part of
        // its target's entry (the index it joins).
        if specs.iter().any(|s| s.name == t.name && s.unit.is_some()) {
            continue;
        }
        let mut m = Map::new();
        let tags: Vec<&str> = specs
            .iter()
            .find(|s| s.name == t.name)
            .map(|s| s.tags.iter().map(String::as_str).collect())
            .unwrap_or_default();
        if !tags.is_empty() {
            m.insert("image.name".into(), json!(tags.join(",")));
        }
        if t.status.ok() {
            described(&mut m, t, &tags, registry.as_ref(), engine).await;
        }
        m.insert("kiln.status".into(), json!(status_word(t.status)));
        if let Some(k) = &t.key {
            m.insert("kiln.key".into(), json!(k));
        }
        doc.insert(t.name.clone(), Value::Object(m));
    }
    doc
}

fn status_word(s: TargetStatus) -> &'static str {
    match s {
        TargetStatus::Built => "built",
        TargetStatus::Skipped => "skipped",
        TargetStatus::Failed => "failed",
        TargetStatus::Blocked => "blocked",
    }
}

/// The digest fields of a target that has an image.
async fn described(
    m: &mut Map<String, Value>,
    t: &kiln_engine::TargetResult,
    tags: &[&str],
    registry: Option<&Registry>,
    engine: Option<&LocalEngine>,
) {
    if let Some(digest) = &t.digest {
        m.insert("containerimage.digest".into(), json!(digest));
        let repo = t
            .pushed
            .first()
            .map(String::as_str)
            .or(tags.first().copied());
        if let (Some(r), Some(repo)) = (registry, repo) {
            let at = format!("{}@{digest}", kiln_plan::repository_name(repo));
            if let Ok(Some(d)) = r.descriptor(&at).await {
                if let Some(c) = &d.config_digest {
                    m.insert("containerimage.config.digest".into(), json!(c));
                }
                m.insert(
                    "containerimage.descriptor".into(),
                    json!({"mediaType": d.media_type, "digest": d.digest, "size": d.size}),
                );
            }
        }
        return;
    }
    let (Some(e), Some(image)) = (engine, &t.image) else {
        return;
    };
    if let Some(id) = e.engine_id(image).await {
        if e.image_store == ImageStore::Classic {
            m.insert("containerimage.config.digest".into(), json!(id));
        }
        m.insert("containerimage.digest".into(), json!(id));
    }
}

/// Writes `doc` to `path` as bake does (indented JSON), through a file
/// beside it renamed into place, so a reader never sees half of it.
pub fn write(path: &Path, doc: &Map<String, Value>) -> Result<(), String> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    let tmp = path.with_extension(format!("kiln-{}.tmp", std::process::id()));
    std::fs::write(&tmp, format!("{text}\n"))
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write the metadata file {}: {e}", path.display())
        })
}
