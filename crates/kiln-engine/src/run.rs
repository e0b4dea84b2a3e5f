//! The scheduler: builds targets in dependency order, independent ones
//! concurrently up to a cap; hands each finished target to its dependents
//! by a unique local reference; skips the dependents of a failed target
//! and lets independent ones finish (or stops at once with fail-fast).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio::task::JoinSet;

use crate::docker_cli;
use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::local::{Built, Failed, LocalEngine};
use crate::rewrite::rewrite;
use crate::spec::{BuildSpec, ContextSource, Endpoint};
use crate::steps::StepCounts;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Builds running at once (at least 1).
    pub jobs: usize,
    /// Stop everything at the first failure.
    pub fail_fast: bool,
    /// A short id naming this run (used in internal tags).
    pub run_id: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetStatus {
    Built,
    Failed,
    Skipped,
}

/// One target's outcome: the `kiln build --format json` contract.
#[derive(Clone, Debug, Serialize)]
pub struct TargetResult {
    pub name: String,
    pub status: TargetStatus,
    /// The node (engine) that built it.
    pub node: String,
    /// A reference `docker run` accepts on that node (a unique local tag).
    pub image: Option<String>,
    /// The registry digest, when pushed.
    pub digest: Option<String>,
    pub duration_s: f64,
    pub steps: StepCounts,
    /// `engine-api` or `docker-cli`.
    pub driver: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The step that failed and the tail of its log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_step: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
    /// Pushed references.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pushed: Vec<String>,
}

/// The run summary.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub targets: Vec<TargetResult>,
}

impl RunSummary {
    pub fn failed(&self) -> bool {
        self.targets.iter().any(|t| t.status != TargetStatus::Built)
    }
}

/// The unique local reference of a built image: derived from its id, so it
/// never moves (`FROM name@<image id>` does not resolve on a local engine).
pub fn local_ref(target: &str, image_id: &str) -> String {
    let hex = image_id.trim_start_matches("sha256:");
    let safe: String = target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("kiln.local/{safe}:{}", &hex[..hex.len().min(16)])
}

fn driver_name(spec: &BuildSpec) -> &'static str {
    if spec.secrets.is_empty() {
        "engine-api"
    } else {
        "docker-cli"
    }
}

/// A build's outcome: built (with pushed `(reference, digest)` pairs) or
/// failed, or an engine error.
type Outcome = Result<Result<(Built, Vec<(String, String)>), Failed>, EngineError>;

struct Done {
    name: String,
    outcome: Outcome,
    duration_s: f64,
}

/// Runs `specs` (in a valid build order) on the local engine.
pub async fn run(
    endpoint: Endpoint,
    specs: Vec<BuildSpec>,
    opts: RunOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<RunSummary, EngineError> {
    let engine = LocalEngine::connect(endpoint).await?;
    for s in &specs {
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
        for (name, c) in &s.contexts {
            if let ContextSource::Local { path } = c {
                return Err(EngineError::Input(format!(
                    "target {}: named context {name} = {path:?} is a local directory; the local engine's BuildKit has no named contexts, so only target: and docker-image:// contexts can be handed over",
                    s.name
                )));
            }
        }
    }
    let index: HashMap<String, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i))
        .collect();
    let mut results: Vec<Option<TargetResult>> = vec![None; specs.len()];
    let mut built_refs: HashMap<String, String> = HashMap::new();
    let mut running: JoinSet<Done> = JoinSet::new();
    let mut started: Vec<bool> = vec![false; specs.len()];
    let mut stop = false;
    let jobs = opts.jobs.max(1);
    loop {
        // Skip targets whose dependencies did not build.
        for (i, s) in specs.iter().enumerate() {
            if started[i] || results[i].is_some() {
                continue;
            }
            let bad = s.deps.iter().find(|d| {
                index
                    .get(*d)
                    .and_then(|&j| results[j].as_ref())
                    .is_some_and(|r| r.status != TargetStatus::Built)
            });
            if let Some(d) = bad.cloned().or_else(|| stop.then(String::new)) {
                let reason = if d.is_empty() {
                    "stopped by --fail-fast".to_string()
                } else {
                    format!("dependency {d} did not build")
                };
                reporter.event(&Event::TargetFinished {
                    target: s.name.clone(),
                    status: "skipped".into(),
                    duration_s: 0.0,
                    image: None,
                    reason: Some(reason.clone()),
                });
                results[i] = Some(skipped(s, &engine, reason));
                started[i] = true;
            }
        }
        // Start ready targets.
        for (i, s) in specs.iter().enumerate() {
            if stop || running.len() >= jobs {
                break;
            }
            if started[i] {
                continue;
            }
            let ready = s.deps.iter().all(|d| match index.get(d) {
                Some(&j) => results[j]
                    .as_ref()
                    .is_some_and(|r| r.status == TargetStatus::Built),
                None => true,
            });
            if !ready {
                continue;
            }
            started[i] = true;
            let refs = context_refs(s, &specs, &built_refs);
            let spec = s.clone();
            let engine = engine.clone();
            let reporter = reporter.clone();
            let run_id = opts.run_id.clone();
            reporter.event(&Event::TargetStarted {
                target: spec.name.clone(),
                driver: driver_name(&spec).into(),
            });
            running.spawn(async move {
                let t0 = Instant::now();
                let outcome = build_one(&engine, &spec, &refs, &run_id, reporter.as_ref()).await;
                Done {
                    name: spec.name.clone(),
                    outcome,
                    duration_s: t0.elapsed().as_secs_f64(),
                }
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let done = match joined {
            Ok(d) => d,
            // Aborted by --fail-fast: reported as skipped below.
            Err(e) if e.is_cancelled() => continue,
            Err(e) => return Err(EngineError::Build(format!("a build task failed: {e}"))),
        };
        let i = index[&done.name];
        let s = &specs[i];
        let duration_s = (done.duration_s * 1000.0).round() / 1000.0;
        let r = match done.outcome {
            Ok(Ok((built, pushed))) => {
                let image = local_ref(&s.name, &built.image_id);
                built_refs.insert(s.name.clone(), image.clone());
                reporter.event(&Event::TargetFinished {
                    target: s.name.clone(),
                    status: "built".into(),
                    duration_s,
                    image: Some(image.clone()),
                    reason: None,
                });
                let digest = pushed.first().map(|(_, d)| d.clone());
                TargetResult {
                    name: s.name.clone(),
                    status: TargetStatus::Built,
                    node: engine.endpoint.host.clone(),
                    image: Some(image),
                    digest,
                    duration_s,
                    steps: built.steps,
                    driver: driver_name(s).into(),
                    reason: None,
                    error: None,
                    failed_step: None,
                    log_tail: Vec::new(),
                    pushed: pushed
                        .into_iter()
                        .map(|(r, d)| format!("{r}@{d}"))
                        .collect(),
                }
            }
            Ok(Err(f)) => {
                if opts.fail_fast {
                    stop = true;
                    running.abort_all();
                }
                reporter.event(&Event::TargetFinished {
                    target: s.name.clone(),
                    status: "failed".into(),
                    duration_s,
                    image: None,
                    reason: Some(f.message.clone()),
                });
                TargetResult {
                    name: s.name.clone(),
                    status: TargetStatus::Failed,
                    node: engine.endpoint.host.clone(),
                    image: None,
                    digest: None,
                    duration_s,
                    steps: f.steps,
                    driver: driver_name(s).into(),
                    reason: None,
                    error: Some(f.message),
                    failed_step: f.step,
                    log_tail: f.log_tail,
                    pushed: Vec::new(),
                }
            }
            Err(e @ EngineError::Unreachable { .. }) => return Err(e),
            Err(e) => {
                if opts.fail_fast {
                    stop = true;
                    running.abort_all();
                }
                let msg = e.to_string();
                reporter.event(&Event::TargetFinished {
                    target: s.name.clone(),
                    status: "failed".into(),
                    duration_s,
                    image: None,
                    reason: Some(msg.clone()),
                });
                TargetResult {
                    name: s.name.clone(),
                    status: TargetStatus::Failed,
                    node: engine.endpoint.host.clone(),
                    image: None,
                    digest: None,
                    duration_s,
                    steps: StepCounts::default(),
                    driver: driver_name(s).into(),
                    reason: None,
                    error: Some(msg),
                    failed_step: None,
                    log_tail: Vec::new(),
                    pushed: Vec::new(),
                }
            }
        };
        results[i] = Some(r);
    }
    // Anything never started or aborted by fail-fast is skipped.
    let targets = specs
        .iter()
        .zip(results)
        .map(|(s, r)| r.unwrap_or_else(|| skipped(s, &engine, "stopped by --fail-fast".into())))
        .collect();
    Ok(RunSummary { targets })
}

fn skipped(s: &BuildSpec, engine: &LocalEngine, reason: String) -> TargetResult {
    TargetResult {
        name: s.name.clone(),
        status: TargetStatus::Skipped,
        node: engine.endpoint.host.clone(),
        image: None,
        digest: None,
        duration_s: 0.0,
        steps: StepCounts::default(),
        driver: driver_name(s).into(),
        reason: Some(reason),
        error: None,
        failed_step: None,
        log_tail: Vec::new(),
        pushed: Vec::new(),
    }
}

/// Named contexts (and tags of this run's targets used as image references)
/// mapped to the unique references of what this run built.
fn context_refs(
    s: &BuildSpec,
    specs: &[BuildSpec],
    built: &HashMap<String, String>,
) -> BTreeMap<String, String> {
    let mut refs = BTreeMap::new();
    for (name, c) in &s.contexts {
        match c {
            ContextSource::Target { name: t } => {
                if let Some(r) = built.get(t) {
                    refs.insert(name.clone(), r.clone());
                }
            }
            ContextSource::Image {
                reference,
                producer,
            } => {
                let r = producer
                    .as_ref()
                    .and_then(|p| built.get(p))
                    .cloned()
                    .unwrap_or_else(|| reference.clone());
                refs.insert(name.clone(), r);
            }
            ContextSource::Local { .. } => {}
        }
    }
    // A dependency's own tags, wherever the build names them, resolve to the
    // image this run built, never to whatever the tag points at.
    for d in &s.deps {
        if let (Some(r), Some(ds)) = (built.get(d), specs.iter().find(|x| &x.name == d)) {
            for t in &ds.tags {
                refs.entry(t.clone()).or_insert_with(|| r.clone());
            }
        }
    }
    refs
}

async fn build_one(
    engine: &LocalEngine,
    spec: &BuildSpec,
    refs: &BTreeMap<String, String>,
    run_id: &str,
    reporter: &dyn Reporter,
) -> Outcome {
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
    let rw = rewrite(&text, &spec.args, refs);
    let build_tag = format!("kiln.local/{}:run-{run_id}", spec.name.to_ascii_lowercase());
    let outcome = if spec.secrets.is_empty() {
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
            reporter,
        )
        .await?
    };
    let built = match outcome {
        Ok(b) => b,
        Err(mut f) => {
            f.message = explain_failure(spec, &f.message);
            return Ok(Err(f));
        }
    };
    let unique = local_ref(&spec.name, &built.image_id);
    engine.tag(&built.image_id, &unique).await?;
    for t in &spec.tags {
        engine.tag(&built.image_id, t).await?;
    }
    // The per-run build tag has served its purpose.
    engine.untag(&build_tag).await;
    let mut pushed = Vec::new();
    if spec.push {
        for t in &spec.tags {
            let digest = engine.push(t).await?;
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
    fn local_refs_are_unique_and_valid() {
        assert_eq!(
            local_ref("Pytorch.Base", "sha256:0123456789abcdef0123"),
            "kiln.local/pytorch.base:0123456789abcdef"
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
        assert!(m.contains("target app"), "{m}");
    }

    #[test]
    fn dependency_tags_map_to_built_refs() {
        let base = BuildSpec {
            name: "base".into(),
            tags: vec!["r/base:1".into()],
            ..BuildSpec::default()
        };
        let app = BuildSpec {
            name: "app".into(),
            deps: vec!["base".into()],
            contexts: [(
                "b".to_string(),
                ContextSource::Target {
                    name: "base".into(),
                },
            )]
            .into(),
            ..BuildSpec::default()
        };
        let built: HashMap<String, String> =
            [("base".to_string(), "kiln.local/base:1234".to_string())].into();
        let r = context_refs(&app, &[base, app.clone()], &built);
        assert_eq!(r["b"], "kiln.local/base:1234");
        assert_eq!(r["r/base:1"], "kiln.local/base:1234");
    }
}
