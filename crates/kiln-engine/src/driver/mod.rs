//! The driver seam: what the scheduler (the `run` module) asks of a builder
//! node, and the outcome every transport returns. The scheduler holds every
//! node as a `dyn Driver` and never knows which driver it is. The
//! implementations: [`engine::EngineDriver`] (a Docker engine, through the
//! Engine API or the docker CLI's BuildKit client, [`cli`]) and
//! [`buildx::BuildxDriver`] (a buildx builder of any driver); [`local`] is
//! the Engine API client both use for images, tags, pulls and pushes.
//!
//! A driver builds one target at a time into the image store of its
//! engine (the node's Docker engine, or the engine behind a docker-driver
//! buildx builder), tags it with its unique reference and the target's
//! tags, and pushes it when the target pushes. Keys, lookups, skips and
//! records are the scheduler's; a driver never decides what to build.
//!
//! Must never: evaluate bake files, compute keys, write records, or import
//! the scheduler or the key resolver.

pub mod buildx;
pub mod cli;
pub mod containerd;
pub mod engine;
pub mod local;

use std::collections::BTreeMap;

use futures_util::future::BoxFuture;

use crate::error::EngineError;
use crate::events::Reporter;
use crate::spec::{BuildSpec, ContextSource};
use crate::steps::StepCounts;
use local::LocalEngine;

pub use engine::EngineDriver;

/// The result of one successful build.
#[derive(Clone, Debug)]
pub struct Built {
    /// The image's identity (`crate::identity`).
    pub image_id: String,
    pub steps: StepCounts,
    /// Layer-cache imports and exports and their outcome.
    pub cache: Vec<crate::steps::CacheOp>,
    /// Earlier tries that failed in a way another try may not (the
    /// registry or BuildKit's concurrent pushes), each run again.
    pub retries: Vec<Retry>,
}

/// A try of a build or a push that failed for a transient reason
/// ([`transient_registry_failure`]) and was run again.
#[derive(Clone, Debug)]
pub struct Retry {
    pub message: String,
    pub start: std::time::Instant,
    pub end: std::time::Instant,
}

/// A failed build with what the user needs to see.
#[derive(Clone, Debug)]
pub struct Failed {
    pub message: String,
    pub step: Option<String>,
    pub log_tail: Vec<String>,
    pub steps: StepCounts,
    pub cache: Vec<crate::steps::CacheOp>,
}

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
