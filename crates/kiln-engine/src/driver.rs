//! The driver seam: what the scheduler (`crate::run`) asks of a builder
//! node, and the Docker engine driver behind it. The scheduler holds every
//! node as a `dyn Driver` and never knows which driver it is; the buildx
//! driver (`crate::buildx`) is the other implementation.
//!
//! A driver builds one target at a time into the image store of its
//! engine (the node's Docker engine, or the engine behind a docker-driver
//! buildx builder), tags it with its unique reference and the target's
//! tags, and pushes it when the target pushes. Keys, lookups, skips and
//! records are the scheduler's; a driver never decides what to build.
//!
//! Must never: evaluate bake files, compute keys or write records.

use std::collections::BTreeMap;

use futures_util::future::BoxFuture;

use crate::docker_cli;
use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::local::{Built, Failed, ImageStore, LocalEngine};
use crate::rewrite::rewrite;
use crate::run::local_ref;
use crate::spec::{BuildSpec, ContextSource};

/// A build's outcome: built (with pushed `(reference, digest)` pairs) or
/// failed, or an engine error.
pub type BuildOutcome = Result<Result<(Built, Vec<(String, String)>), Failed>, EngineError>;

/// One build, as the scheduler asks for it.
#[derive(Clone, Copy)]
pub struct BuildRequest<'a> {
    pub spec: &'a BuildSpec,
    /// Named contexts and dependency tags → the immutable references of
    /// what this run produced (unique local tags on the same node,
    /// `repo@digest` from another), plus registry-pinned base images.
    pub hand_over: &'a BTreeMap<String, String>,
    pub run_id: &'a str,
    /// The compile-job count handed as the secret `kiln-jobs`, if the
    /// build mounts it.
    pub jobs: Option<u32>,
    pub reporter: &'a dyn Reporter,
    /// Where to keep the build's progress log as the builder prints it.
    pub log: Option<&'a std::path::Path>,
}

/// A builder node as the scheduler sees it.
pub trait Driver: Send + Sync {
    /// The engine whose image store holds what this driver builds: keys
    /// resolve base images there, skips look for recorded images there,
    /// and hand-over on the same node uses its unique tags. `None` for a
    /// builder that keeps no image store (buildx's docker-container,
    /// remote and kubernetes drivers): everything it builds is pushed,
    /// skips and identities are read from the registry, and hand-over is
    /// by `repo@digest` only.
    fn engine(&self) -> Option<&LocalEngine>;
    /// The platform a target without one is built for.
    fn platform(&self) -> String {
        self.engine()
            .map(|e| e.platform.clone())
            .unwrap_or_else(|| "linux/amd64".into())
    }
    /// How messages name this node's builder.
    fn describe(&self) -> String;
    /// Points the registry tag `to` at `from` (`repo@digest`) without an
    /// engine (a builder that keeps no image store re-tags a skipped
    /// target this way).
    fn retag<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, Result<(), EngineError>>;
    /// What the run summary calls the driver of this build
    /// (`engine-api`, `docker-cli`, `buildx`).
    fn kind(&self, spec: &BuildSpec, jobs_secret: bool) -> &'static str;
    /// Refuses, before anything builds, targets this driver cannot build
    /// as the bake file says.
    fn check(&self, specs: &[BuildSpec]) -> Result<(), EngineError>;
    /// Builds one target (see the module docs for what that includes).
    fn build<'a>(&'a self, req: BuildRequest<'a>) -> BoxFuture<'a, BuildOutcome>;
}

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

/// Refuses a local-directory named context (`why`: what stops this
/// driver from handing it over).
pub(crate) fn refuse_local_contexts(s: &BuildSpec, why: &str) -> Result<(), EngineError> {
    for (name, c) in &s.contexts {
        if let ContextSource::Local { path } = c {
            return Err(EngineError::Input(format!(
                "target {}: named context {name} = {path:?} is a local directory, and {why}; the engine driver hands over only target: and docker-image:// contexts (the buildx driver, --driver buildx, builds local directories too)",
                s.name
            )));
        }
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

/// A build's progress log file (created with its directory); writing is
/// best effort: a log that cannot be written never fails a build.
pub(crate) struct LogFile(Option<std::io::BufWriter<std::fs::File>>);

impl LogFile {
    pub(crate) fn create(path: Option<&std::path::Path>) -> LogFile {
        LogFile(path.and_then(|p| {
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).ok()?;
            }
            std::fs::File::create(p).ok().map(std::io::BufWriter::new)
        }))
    }

    pub(crate) fn line(&mut self, line: &str) {
        use std::io::Write;
        if let Some(w) = &mut self.0
            && writeln!(w, "{line}").is_err()
        {
            self.0 = None;
        }
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        use std::io::Write;
        if let Some(w) = &mut self.0 {
            let _ = w.flush();
        }
    }
}

/// The per-run tag a build names its image with (`kiln.local/<t>:run-<id>`).
pub(crate) fn build_tag(spec: &BuildSpec, run_id: &str) -> String {
    format!("kiln.local/{}:run-{run_id}", spec.name.to_ascii_lowercase())
}

/// The daemon died under the build (a CLI transport only sees its client
/// fail): the node is gone, not the build. `alive`: whether the builder
/// (`endpoint`) still answers.
pub(crate) fn lost_or_failed(
    alive: bool,
    endpoint: &str,
    spec: &BuildSpec,
    mut f: Failed,
) -> BuildOutcome {
    if !alive {
        return Err(EngineError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!(
                "the engine stopped answering during the build ({})",
                f.message
            ),
        });
    }
    f.message = explain_failure(spec, &f.message);
    Ok(Err(f))
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
        docker_cli::build(
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

/// Adds what the user needs to know to common BuildKit failures.
fn explain_failure(spec: &BuildSpec, msg: &str) -> String {
    let df = spec.dockerfile.display();
    if let Some(i) = msg.find("dockerfile parse error line ") {
        let rest = &msg[i + "dockerfile parse error line ".len()..];
        let (line, what) = rest.split_once(':').unwrap_or((rest, ""));
        return format!("{df}:{}: {}", line.trim(), what.trim());
    }
    let lower = msg.to_ascii_lowercase();
    if lower.contains("failed to resolve source metadata")
        || lower.contains("pull access denied")
        || lower.contains("not found: manifest unknown")
    {
        let image = msg
            .split("source metadata for ")
            .nth(1)
            .or_else(|| msg.split("pull access denied for ").nth(1))
            .map(|s| s.split([':', ',', ' ']).next().unwrap_or(s).to_string());
        let what = image
            .map(|i| format!("base image {i}"))
            .unwrap_or_else(|| "a base image".into());
        return format!(
            "target {}: {what} is not available on this engine and cannot be pulled ({msg}); build or import it first",
            spec.name
        );
    }
    if let Some(i) = lower.find("failed to push ") {
        let pushed = msg[i + "failed to push ".len()..]
            .split(' ')
            .next()
            .unwrap_or_default()
            .trim_end_matches(':');
        let reference = kiln_plan::ImageRef::parse(pushed)
            .map(|r| r.domain().to_string())
            .unwrap_or_else(|| pushed.to_string());
        let unreachable = [
            "connection refused",
            "no such host",
            "i/o timeout",
            "deadline exceeded",
        ]
        .iter()
        .any(|w| lower.contains(w));
        let why = if unreachable {
            format!("the builder cannot reach the registry {reference}")
        } else if lower.contains("401")
            || lower.contains("403")
            || lower.contains("unauthorized")
            || lower.contains("denied")
        {
            format!(
                "the registry {reference} refused the push (credentials: docker login on the builder's side)"
            )
        } else {
            format!("the push to {reference} failed")
        };
        return format!(
            "target {}: {why}; the image was built but not pushed, and nothing was recorded ({msg})",
            spec.name
        );
    }
    if lower.contains("network bridge not found") {
        return format!(
            "{msg} (this engine runs without a bridge network: set network = \"host\" on the target)"
        );
    }
    msg.to_string()
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

    #[test]
    fn failures_are_explained() {
        let spec = BuildSpec {
            name: "app".into(),
            dockerfile: "/x/Dockerfile".into(),
            ..BuildSpec::default()
        };
        assert_eq!(
            explain_failure(
                &spec,
                "failed to solve with frontend dockerfile.v0: failed to create LLB definition: dockerfile parse error line 2: unknown instruction: COPYY"
            ),
            "/x/Dockerfile:2: unknown instruction: COPYY"
        );
        let m = explain_failure(
            &spec,
            "failed to solve: failed to resolve source metadata for docker.io/library/nope:latest: pull access denied",
        );
        assert!(m.contains("base image docker.io/library/nope"), "{m}");
        let m = explain_failure(
            &spec,
            "failed to push 127.0.0.1:1/x/a:1: failed to do request: Head \"https://127.0.0.1:1/v2/x/a/blobs/sha256:6a\": dial tcp 127.0.0.1:1: connect: connection refused",
        );
        assert!(
            m.contains("the builder cannot reach the registry 127.0.0.1"),
            "{m}"
        );
        assert!(m.contains("nothing was recorded"), "{m}");
        let m = explain_failure(
            &spec,
            "failed to push reg.example/x:1: unexpected status: 401 Unauthorized",
        );
        assert!(m.contains("refused the push"), "{m}");
        assert!(m.contains("target app"), "{m}");
    }
}
