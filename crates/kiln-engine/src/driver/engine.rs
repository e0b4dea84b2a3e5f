//! The Docker engine driver: a node that is a Docker engine builds through
//! the Engine API (`/build` with an uploaded context) on the classic image
//! store, and through the docker CLI's session-based BuildKit client
//! ([`super::cli`]) for builds with secrets and on the containerd store;
//! either way the image lands in the engine's store, where [`finish`] names
//! it by its identity and pushes it.
//!
//! Must never: decide what to build, compute keys or write records.

use futures_util::future::BoxFuture;

use super::local::{ImageStore, LocalEngine};
use super::{BuildOutcome, BuildRequest, Built, Driver, lost_or_failed, refuse_local_contexts};
use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::naming::{build_tag, local_ref};
use crate::rewrite::rewrite;
use crate::spec::BuildSpec;

/// The Docker engine driver: the Engine API (`/build` with an uploaded
/// context) on the classic image store, the docker CLI's session-based
/// BuildKit client for builds with secrets and on the containerd store.
pub struct EngineDriver {
    pub engine: LocalEngine,
}

impl Driver for EngineDriver {
    fn engine(&self) -> Option<&LocalEngine> {
        Some(&self.engine)
    }

    fn describe(&self) -> String {
        format!("the Docker engine at {}", self.engine.endpoint.host)
    }

    fn retag<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move { self.engine.tag(from, to).await })
    }

    fn kind(&self, spec: &BuildSpec, jobs_secret: bool) -> &'static str {
        engine_kind(spec, jobs_secret, self.engine.image_store)
    }

    fn check(&self, specs: &[BuildSpec]) -> Result<(), EngineError> {
        check_engine_specs(&self.engine, specs)
    }

    fn build<'a>(&'a self, req: BuildRequest<'a>) -> BoxFuture<'a, BuildOutcome> {
        Box::pin(engine_build(&self.engine, req))
    }
}

/// What the engine's BuildKit cannot build as the bake file says: several
/// platforms in one target, a platform other than the engine's, and
/// local-directory named contexts (no named contexts on dockerd 20.10).
pub(crate) fn check_engine_specs(
    engine: &LocalEngine,
    specs: &[BuildSpec],
) -> Result<(), EngineError> {
    for s in specs {
        if s.platforms.len() > 1 {
            return Err(EngineError::Input(format!(
                "target {}: the local engine builds one platform at a time, but {} are requested ({}); build them separately with --set {}.platform=...",
                s.name,
                s.platforms.len(),
                s.platforms.join(", "),
                s.name
            )));
        }
        if let Some(p) = s.platforms.first()
            && !p.starts_with(&engine.platform)
        {
            return Err(EngineError::Input(format!(
                "target {}: platform {p} cannot be built by this engine ({}), which has no emulation",
                s.name, engine.platform
            )));
        }
        refuse_local_contexts(s, "the local engine's BuildKit has no named contexts")?;
    }
    Ok(())
}

/// The transport of an engine build: the docker CLI when the build takes
/// a secret (the bake file's, or the job count) or the engine keeps its
/// images in the containerd store (whose BuildKit cannot read an uploaded
/// context tar), else the Engine API.
pub fn engine_kind(spec: &BuildSpec, jobs_secret: bool, store: ImageStore) -> &'static str {
    if spec.secrets.is_empty() && !jobs_secret && store == ImageStore::Classic {
        "engine-api"
    } else {
        "docker-cli"
    }
}

/// Builds one target on the engine; `jobs` set means the build mounts the
/// job-count secret, which only the docker CLI transport can carry.
async fn engine_build(engine: &LocalEngine, req: BuildRequest<'_>) -> BuildOutcome {
    let BuildRequest {
        spec,
        hand_over: refs,
        run_id,
        jobs,
        reporter,
        log,
    } = req;
    let text = match &spec.dockerfile_inline {
        Some(t) => t.clone(),
        None => std::fs::read_to_string(&spec.dockerfile).map_err(|e| {
            EngineError::Input(format!(
                "target {}: cannot read Dockerfile {}: {e}",
                spec.name,
                spec.dockerfile.display()
            ))
        })?,
    };
    let mut rw = rewrite(&text, &spec.args, refs);
    if spec.inline_cache {
        // A frontend option, not a declared ARG: it never enters a key.
        rw.args.insert("BUILDKIT_INLINE_CACHE".into(), "1".into());
    }
    let build_tag = build_tag(spec, run_id);
    let outcome = if engine_kind(spec, jobs.is_some(), engine.image_store) == "engine-api" {
        engine
            .build(spec, &rw.dockerfile, &rw.args, &build_tag, reporter)
            .await?
    } else {
        super::cli::build(
            &engine.endpoint,
            spec,
            &rw.dockerfile,
            &rw.args,
            &build_tag,
            jobs,
            reporter,
            log,
        )
        .await?
    };
    let built = match outcome {
        Ok(b) => b,
        Err(f) => {
            let alive = engine.answers().await;
            return lost_or_failed(alive, &engine.endpoint.host, spec, f);
        }
    };
    finish(engine, spec, &build_tag, built, None, reporter).await
}

/// After a build: the image's identity read from the tag the build named,
/// the unique reference and the target's tags made from it, the per-run
/// build tag removed, and the tags pushed when the target pushes (unless
/// the builder pushed them itself: `pushed_digest`).
pub(crate) async fn finish(
    engine: &LocalEngine,
    spec: &BuildSpec,
    build_tag: &str,
    mut built: Built,
    pushed_digest: Option<String>,
    reporter: &dyn Reporter,
) -> BuildOutcome {
    // What kiln records is the image's identity, the same on every engine
    // and image store; tags are made from the build tag the engine knows.
    // The build itself may have moved the build tag and the target's tags
    // (buildx names the image by them): what was learned of them is stale.
    engine.touched(build_tag);
    for t in &spec.tags {
        engine.touched(t);
    }
    built.image_id = engine.image_id(build_tag).await.ok_or_else(|| {
        EngineError::Build(format!(
            "build of {} finished, but the engine does not show its image {build_tag}",
            spec.name
        ))
    })?;
    let unique = local_ref(&spec.name, &built.image_id);
    engine.tag(build_tag, &unique).await?;
    for t in &spec.tags {
        if t != build_tag {
            engine.tag(build_tag, t).await?;
        }
    }
    // The per-run build tag has served its purpose.
    if build_tag.starts_with("kiln.local/") {
        engine.untag(build_tag).await;
    }
    let mut pushed = Vec::new();
    if spec.push {
        for t in &spec.tags {
            let digest = match &pushed_digest {
                Some(d) => d.clone(),
                None => {
                    let (digest, retries) = engine.push(t, &spec.name, reporter).await?;
                    built.retries.extend(retries);
                    digest
                }
            };
            reporter.event(&Event::Pushed {
                target: spec.name.clone(),
                reference: t.clone(),
                digest: digest.clone(),
            });
            pushed.push((t.clone(), digest));
        }
    }
    Ok(Ok((built, pushed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_the_job_count_take_the_cli() {
        let plain = BuildSpec::default();
        assert_eq!(
            engine_kind(&plain, false, ImageStore::Classic),
            "engine-api"
        );
        assert_eq!(engine_kind(&plain, true, ImageStore::Classic), "docker-cli");
        assert_eq!(
            engine_kind(&plain, false, ImageStore::Containerd),
            "docker-cli"
        );
        let with_secret = BuildSpec {
            secrets: vec![crate::spec::SecretSpec {
                id: "tok".into(),
                src: None,
                env: Some("T".into()),
            }],
            ..BuildSpec::default()
        };
        assert_eq!(
            engine_kind(&with_secret, false, ImageStore::Classic),
            "docker-cli"
        );
    }
}
