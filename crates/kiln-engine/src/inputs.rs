//! Gathering a target's input manifest (content key recipe `k1`, see
//! `kiln_plan::key`): the Dockerfile analysis says what the build reads;
//! this module reads it — the needed stages' text, the consumed context
//! files (after `.dockerignore`, hashed with the stat cache), the consumed
//! args — and combines it with what only the caller knows: external image
//! digests and upstream output digests.
//!
//! (Groundwork: `kiln build` does not consult keys yet.)

use std::collections::BTreeMap;

use kiln_dockerfile::dockerfile::{RemoteSource, analyze};
use kiln_plan::key::{ContextFile, InputManifest, RECIPE, select_files};

use crate::context;
use crate::error::EngineError;
use crate::hashing::{HashStats, StatCache, hash_paths};
use crate::spec::BuildSpec;

/// The Dockerfile text a spec builds.
fn dockerfile_text(spec: &BuildSpec) -> Result<String, EngineError> {
    match &spec.dockerfile_inline {
        Some(t) => Ok(t.clone()),
        None => std::fs::read_to_string(&spec.dockerfile).map_err(|e| {
            EngineError::Input(format!(
                "target {}: cannot read Dockerfile {}: {e}",
                spec.name,
                spec.dockerfile.display()
            ))
        }),
    }
}

fn analysis(
    spec: &BuildSpec,
    text: &str,
) -> Result<kiln_dockerfile::dockerfile::Analysis, EngineError> {
    use kiln_dockerfile::dockerfile::DockerfileError as E;
    analyze(text, spec.target.as_deref(), &spec.args).map_err(|e| {
        let path = spec.dockerfile.display();
        let source = |line: usize| {
            text.lines()
                .nth(line.saturating_sub(1))
                .map(|l| format!("\n{line:>4} | {l}"))
                .unwrap_or_default()
        };
        EngineError::Input(match &e {
            E::Parse {
                line,
                column,
                message,
            } => format!(
                "{path}:{line}:{column}: {message}{}\n{:>4} | {}^",
                source(*line),
                "",
                " ".repeat(column.saturating_sub(1))
            ),
            E::Invalid { line, message } => format!("{path}:{line}: {message}{}", source(*line)),
            _ => format!("{path}: {e}"),
        })
    })
}

/// The external images the needed stages read (named contexts excluded):
/// the caller resolves each to a digest.
pub fn external_images(spec: &BuildSpec) -> Result<Vec<String>, EngineError> {
    let text = dockerfile_text(spec)?;
    let a = analysis(spec, &text)?;
    Ok(a.images
        .into_iter()
        .filter(|i| !spec.contexts.contains_key(i))
        .collect())
}

/// Builds the input manifest of `spec`.
///
/// `images`: external image → digest (missing ones are recorded as
/// `unresolved`, which never matches a recorded key). `upstreams`: named
/// context → the output digest of what it resolves to.
pub fn gather(
    spec: &BuildSpec,
    platform: &str,
    images: &BTreeMap<String, String>,
    upstreams: &BTreeMap<String, String>,
    cache: &StatCache,
) -> Result<(InputManifest, HashStats), EngineError> {
    let text = dockerfile_text(spec)?;
    let a = analysis(spec, &text)?;
    let df_rel = spec
        .dockerfile
        .strip_prefix(&spec.context)
        .ok()
        .map(|p| p.display().to_string());
    let entries = context::list(&spec.context, df_rel.as_deref())?;
    let all: Vec<ContextFile> = entries
        .iter()
        .map(|e| ContextFile {
            path: e.path.clone(),
            mode: 0,
            digest: String::new(),
        })
        .collect();
    let selected: Vec<String> = select_files(&all, &a.context_sources)
        .into_iter()
        .map(|f| f.path)
        .collect();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (hashes, stats) = hash_paths(&spec.context, &selected, cache, threads)?;
    let files = hashes
        .into_iter()
        .map(|h| ContextFile {
            path: h.path,
            mode: h.mode,
            digest: h.digest,
        })
        .collect();
    let mut image_digests = BTreeMap::new();
    for i in a.images.iter().filter(|i| !spec.contexts.contains_key(*i)) {
        image_digests.insert(
            i.clone(),
            images
                .get(i)
                .cloned()
                .unwrap_or_else(|| "unresolved".into()),
        );
    }
    let remote = a
        .remote_sources
        .iter()
        .map(|r: &RemoteSource| {
            (
                r.url.clone(),
                r.checksum.clone().unwrap_or_else(|| "unpinned".into()),
            )
        })
        .collect();
    let mut m = InputManifest {
        recipe: RECIPE.into(),
        dockerfile: a.needed_text.clone(),
        target_stage: spec.target.clone(),
        platform: platform.to_string(),
        args: a
            .consumed_args
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect(),
        files,
        images: image_digests,
        upstreams: upstreams.clone(),
        remote,
        secrets: spec.secrets.iter().map(|s| s.id.clone()).collect(),
        ssh: Vec::new(),
        source_date_epoch: spec.args.get("SOURCE_DATE_EPOCH").cloned(),
        labels: spec.labels.clone(),
    };
    m.normalize();
    Ok((m, stats))
}
