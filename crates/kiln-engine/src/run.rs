//! The scheduler: builds targets in dependency order, independent ones
//! concurrently up to a cap; before each target it computes the content
//! key (with its upstreams' *output* ids: early cutoff), and skips the
//! target without contacting BuildKit when the record store has the key
//! and the engine still holds the image. It hands each finished target to
//! its dependents by a unique local reference, records what it built,
//! blocks the dependents of a failed target and lets independent ones
//! finish (or stops at once with fail-fast).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_store::{Lookup, Record, RecordStore};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::driver::local::LocalEngine;
use crate::driver::{BuildRequest, Driver, EngineDriver};
use crate::driver::{Built, Failed};
use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::hashing::StatCache;
use crate::keys::{Keyed, key_on};
use crate::naming::{by_digest, local_ref};
use crate::spec::{BuildSpec, ContextSource, Endpoint};
use crate::steps::StepCounts;

/// Targets being keyed, looked up or built at once (builds themselves are
/// capped by `--jobs`).
const MAX_TASKS: usize = 32;

/// How to run.
#[derive(Clone)]
pub struct RunOptions {
    /// BuildKit builds running at once (at least 1). Keys, lookups and
    /// skips are not builds: they run for every ready target.
    pub jobs: usize,
    /// Stop everything at the first failure.
    pub fail_fast: bool,
    /// A short id naming this run (used in internal tags).
    pub run_id: String,
    /// Build even when the key is recorded, and overwrite the record.
    pub force: bool,
    /// Where keys are looked up and builds recorded.
    pub store: Arc<dyn RecordStore>,
    /// File digests by stat, so an unchanged file is not read again.
    pub stat_cache: Arc<StatCache>,
    /// The fleet (empty: the one engine `run` is given, `jobs` slots).
    pub nodes: Vec<NodeSpec>,
    /// Preferred node (index into `nodes`) per target, from the schedule.
    pub placement: HashMap<String, usize>,
    /// The nodes (indices into `nodes`) a target may run on (memory); a
    /// target not listed may run anywhere.
    pub eligible: HashMap<String, Vec<usize>>,
    /// Memory per compile job when deriving a node's job count (handed to
    /// builds that mount the secret `kiln-jobs`, `crate::jobs`).
    pub gb_per_job: f64,
    /// Build through this buildx builder instead of the engine (a run on
    /// one node; a fleet names a builder per node).
    pub builder: Option<crate::driver::buildx::BuilderSpec>,
    /// Where each build's BuildKit progress is kept, as the builder
    /// printed it (`<dir>/<target>.log`, for `kiln diagnose`); builds
    /// through the Engine API have no such log.
    pub log_dir: Option<std::path::PathBuf>,
    /// Stop before anything builds when the store cannot be written
    /// (otherwise a warning says nothing will be recorded, once).
    pub require_store: bool,
    /// The lease of a claim on a key being built (cross-run deduplication,
    /// `crate::claims`); `None` makes no claims and waits for none.
    pub claim_ttl: Option<Duration>,
}

/// One builder node of a fleet run.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub endpoint: Endpoint,
    /// A buildx builder: the node builds through it (`crate::buildx`),
    /// and `endpoint` is unused (the builder's engine is found from it).
    pub builder: Option<crate::driver::buildx::BuilderSpec>,
    /// Concurrent builds on the node.
    pub slots: usize,
    /// The node's memory as the fleet file states it: the job count of a
    /// builder that keeps no engine kiln can probe comes from it.
    pub memory_gb: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetStatus {
    /// Built by BuildKit in this run.
    Built,
    /// Not built: its key is recorded and the image is on the engine (up
    /// to date, or early cutoff). A success.
    Skipped,
    /// The build failed.
    Failed,
    /// Not built because a dependency failed or the run stopped.
    Blocked,
}

impl TargetStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetStatus::Built => "built",
            TargetStatus::Skipped => "skipped",
            TargetStatus::Failed => "failed",
            TargetStatus::Blocked => "blocked",
        }
    }

    /// Whether dependents may use the target's image.
    pub fn ok(self) -> bool {
        matches!(self, TargetStatus::Built | TargetStatus::Skipped)
    }
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
    /// The content key (absent when the target never got that far).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub duration_s: f64,
    pub steps: StepCounts,
    /// `engine-api`, `docker-cli` or `buildx`.
    pub driver: String,
    /// The layer-cache imports and exports BuildKit reported for this
    /// build and their outcome (a failed export is reported here and as a
    /// warning even when `ignore-error=true` kept the build going).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache: Vec<crate::steps::CacheOp>,
    /// The build's BuildKit progress log as the builder printed it (plain
    /// or rawjson), for `kiln diagnose`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
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
    /// Context files hashed for the key, and how many were read (the rest
    /// came from the stat cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hashed: Option<crate::hashing::HashStats>,
    /// The compile-job count handed to the build as the secret `kiln-jobs`
    /// (its node's affordable jobs divided by its build slots,
    /// `crate::jobs`); absent when the target does not mount it or was not
    /// built. A secret, so it never enters a key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u32>,
    /// What the build was handed for its named contexts and its
    /// dependencies' tags: unique local references on the same node,
    /// `repo@sha256:…` from another node.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub handed: BTreeMap<String, String>,
    /// The build's name in BuildKit's history (`BUILDKIT_BUILD_NAME`),
    /// when BuildKit ran it (built or failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_name: Option<String>,
    /// sccache's counters, when the build printed `sccache --show-stats`
    /// (filled by the CLI from the build's log lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compiler_cache: Option<kiln_store::compiler_cache::Stats>,
    /// When it started (for a build: took its build slot) and ended, in
    /// seconds since the run started (absent for a target that never
    /// started: blocked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    /// The node's build slot (lane, from 0) it was built in; absent when
    /// it took none (skipped, pulled, blocked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<usize>,
    /// Earlier attempts that did not finish: on a node that stopped
    /// answering mid-build (it was then run again elsewhere).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Skipped by pulling its recorded image from the registry: the
    /// reference pulled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulled: Option<String>,
    /// Skipped by early cutoff: the upstreams rebuilt in this run whose
    /// images came out the same.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cutoff_by: Vec<String>,
    /// Why it was built, as `kiln why` says it: each input that changed
    /// since its last recorded build (or that there was none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
}

/// An attempt at a target that did not finish.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Attempt {
    pub node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<usize>,
    pub start_s: f64,
    pub end_s: f64,
    /// `lost`: the node stopped answering; `transient`: the registry or
    /// BuildKit's concurrent pushes failed it, and it was run again.
    pub outcome: String,
    /// What failed it, for `transient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A node as the run used it.
#[derive(Clone, Debug, Serialize)]
pub struct NodeUse {
    pub name: String,
    /// Its build slots (lanes).
    pub slots: usize,
    /// It stopped answering during the run.
    pub lost: bool,
}

/// The run summary.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// The run's id (`--run-id`, `RUN_ID`, or generated).
    pub run_id: String,
    /// The provenance stamps this run built with (`VCS_REF`,
    /// `BUILD_DATE`); a skipped target's image keeps those of the run
    /// that built it (docs/stamps.md).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub stamps: BTreeMap<String, String>,
    /// When the run's first target task could start (RFC 3339, UTC);
    /// targets' `start_s`/`end_s` count from here.
    pub started_at: String,
    /// Seconds from then to the end of the last target.
    pub wall_s: f64,
    /// The nodes the run used (one for a single engine or builder).
    pub nodes: Vec<NodeUse>,
    pub targets: Vec<TargetResult>,
}

impl RunSummary {
    /// Whether any target failed or was blocked.
    pub fn failed(&self) -> bool {
        self.targets.iter().any(|t| !t.status.ok())
    }
}

/// What happened to one target.
enum Outcome {
    /// Built: the image, pushed `(reference, digest)` pairs.
    Built(Built, Vec<(String, String)>),
    /// Skipped: the recorded image id, its registry digest, why; where it
    /// was pulled from and which rebuilt upstreams it was cut off by.
    Skipped {
        image_id: String,
        digest: Option<String>,
        pushed: Vec<(String, String)>,
        reason: String,
        pulled: Option<String>,
        cutoff_by: Vec<String>,
    },
    Failed(Failed),
}

struct Done {
    node: usize,
    handed: BTreeMap<String, String>,
    index: usize,
    outcome: Result<Outcome, EngineError>,
    keyed: Option<Keyed>,
    /// The job count handed to the build, if it was handed one.
    jobs: Option<u32>,
    /// The node's build slot it ran in, if it took one.
    slot: Option<usize>,
    /// Why it was built (what changed since its last record).
    changes: Vec<String>,
    duration_s: f64,
    /// When it started (took its slot, when it built) and ended, in
    /// seconds since the run started.
    start_s: f64,
    end_s: f64,
}

/// A connected node.
struct Node {
    name: String,
    /// How it builds (the scheduler never asks which driver it is).
    driver: Arc<dyn Driver>,
    /// Where its images live: `driver.engine()`; `None` for a builder
    /// that keeps no image store (registry only).
    engine: Option<LocalEngine>,
    /// The fleet file's memory for the node, if any.
    memory_gb: Option<f64>,
    /// One permit per concurrent BuildKit build.
    slots: tokio::sync::Semaphore,
    capacity: usize,
    resolver: crate::keys::Resolver,
    alive: std::sync::atomic::AtomicBool,
    /// The job count one build on this node is handed: set from the
    /// fleet's probe at the start, or probed when the first build that
    /// wants it starts (a run that builds none probes nothing).
    jobs: tokio::sync::OnceCell<u32>,
    /// Which of its build slots are busy: a build takes the lowest free
    /// one, so the run summary can say which lane it ran on.
    lanes: std::sync::Mutex<Vec<bool>>,
}

/// A build slot taken on a node; freed when dropped.
struct Lane<'a> {
    lanes: &'a std::sync::Mutex<Vec<bool>>,
    index: usize,
}

impl Node {
    /// Takes the lowest free lane (the caller holds a slot permit, so one
    /// is free; a full table still yields a lane past the end).
    fn take_lane(&self) -> Lane<'_> {
        let mut l = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let index = l.iter().position(|b| !b).unwrap_or(l.len());
        if index == l.len() {
            l.push(true);
        } else {
            l[index] = true;
        }
        Lane {
            lanes: &self.lanes,
            index,
        }
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        let mut l = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = l.get_mut(self.index) {
            *b = false;
        }
    }
}

impl Node {
    fn alive(&self) -> bool {
        self.alive.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What every target task shares.
struct Shared {
    nodes: Vec<Node>,
    /// Whether this is a fleet run (hand-over through the registry).
    fleet: bool,
    specs: Vec<BuildSpec>,
    reporter: Arc<dyn Reporter>,
    opts: RunOptions,
    /// Whether the store took the write probe (asked once, before the
    /// first build): `Err` says why not, and nothing is recorded.
    writable: tokio::sync::OnceCell<Result<(), String>>,
    /// Keys the warm-up computed (`warm`), each with the upstream outputs
    /// it assumed: the run takes one when its upstreams came out the same.
    warmed: std::sync::OnceLock<HashMap<String, (Outputs, Keyed)>>,
    /// A lookup failed because the store did not answer: it is not asked
    /// again in this run.
    store_down: std::sync::atomic::AtomicBool,
    /// A build or a pull has started: from then on the warm-up's keys are
    /// not reused (time has passed since it hashed the files, and files
    /// edited meanwhile must be keyed as they are).
    busy: std::sync::atomic::AtomicBool,
    /// The store said it cannot hold claims (said once per run).
    claims_unsupported: std::sync::atomic::AtomicBool,
}

/// The outputs of a target's upstreams a key was computed with.
type Outputs = Vec<(String, Option<String>)>;

fn upstream_outputs(spec: &BuildSpec, outputs: &HashMap<String, String>) -> Outputs {
    spec.deps
        .iter()
        .map(|d| (d.clone(), outputs.get(d).cloned()))
        .collect()
}

impl Shared {
    /// The write probe's answer, asking the store the first time.
    async fn writable(&self) -> &Result<(), String> {
        self.writable
            .get_or_init(|| async {
                let probe = store_call(&self.opts.store, |s| s.probe_write())
                    .await
                    .map_err(|e| e.to_string());
                if let Err(why) = &probe
                    && !self.opts.require_store
                {
                    self.reporter.event(&Event::Warning {
                        target: String::new(),
                        message: format!(
                            "{why}; nothing built in this run will be recorded, so the next run builds it again (--require-store stops instead)"
                        ),
                    });
                }
                probe
            })
            .await
    }
}

/// The driver of a node: its buildx builder when it names one, else its
/// Docker engine.
async fn connect(ns: &NodeSpec) -> Result<Arc<dyn Driver>, EngineError> {
    Ok(match &ns.builder {
        Some(b) => Arc::new(crate::driver::buildx::BuildxDriver::connect(b).await?),
        None => Arc::new(EngineDriver {
            engine: LocalEngine::connect(ns.endpoint.clone()).await?,
        }),
    })
}

/// The engine where a node's images live: its own, or the one behind its
/// buildx builder; `None` for a builder that keeps no image store.
pub async fn node_engine(ns: &NodeSpec) -> Result<Option<LocalEngine>, EngineError> {
    Ok(connect(ns).await?.engine().cloned())
}

/// Runs `specs` (in a valid build order) on the local engine.
pub async fn run(
    endpoint: Endpoint,
    specs: Vec<BuildSpec>,
    opts: RunOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<RunSummary, EngineError> {
    let fleet = !opts.nodes.is_empty();
    let node_specs = if fleet {
        opts.nodes.clone()
    } else {
        vec![NodeSpec {
            name: opts
                .builder
                .as_ref()
                .map(|b| b.name.clone())
                .unwrap_or_else(|| endpoint.host.clone()),
            endpoint: endpoint.clone(),
            slots: opts.jobs.max(1),
            builder: opts.builder.clone(),
            memory_gb: None,
        }]
    };
    let registry = crate::registry::Registry::new(std::time::Duration::from_secs(30)).ok();
    let mut nodes = Vec::new();
    for ns in &node_specs {
        match connect(ns).await {
            Ok(driver) => {
                let engine = driver.engine().cloned();
                let jobs = tokio::sync::OnceCell::new();
                if fleet
                    && let Some(e) = &engine
                    && let Ok(f) = crate::probe::probe(e, opts.gb_per_job).await
                {
                    let _ = jobs.set(crate::jobs::per_build(f.jobs, ns.slots));
                }
                nodes.push(Node {
                    name: ns.name.clone(),
                    resolver: crate::keys::Resolver::new(engine.clone(), registry.clone())
                        .with_platform(driver.platform()),
                    driver,
                    engine,
                    memory_gb: ns.memory_gb,
                    slots: tokio::sync::Semaphore::new(ns.slots.max(1)),
                    capacity: ns.slots.max(1),
                    alive: std::sync::atomic::AtomicBool::new(true),
                    jobs,
                    lanes: std::sync::Mutex::new(vec![false; ns.slots.max(1)]),
                });
            }
            Err(e) if fleet => reporter.event(&Event::Warning {
                target: String::new(),
                message: format!("node {} does not answer and gets no work: {e}", ns.name),
            }),
            Err(e) => return Err(e),
        }
    }
    if nodes.is_empty() {
        return Err(EngineError::Unreachable {
            endpoint: node_specs
                .iter()
                .map(|n| n.endpoint.host.clone())
                .collect::<Vec<_>>()
                .join(", "),
            detail: "no node of the fleet answers".into(),
        });
    }
    for n in &nodes {
        n.driver.check(&specs)?;
    }
    let index: HashMap<String, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i))
        .collect();
    let n = specs.len();
    let fail_fast = opts.fail_fast;
    // Preferred nodes by name (a node that did not answer is not among them).
    let placement: HashMap<String, String> = opts
        .placement
        .iter()
        .filter_map(|(t, &k)| Some((t.clone(), node_specs.get(k)?.name.clone())))
        .collect();
    let eligible: HashMap<String, Vec<String>> = opts
        .eligible
        .iter()
        .map(|(t, ks)| {
            let names = ks
                .iter()
                .filter_map(|&k| node_specs.get(k).map(|n| n.name.clone()))
                .collect();
            (t.clone(), names)
        })
        .collect();
    let shared = Arc::new(Shared {
        nodes,
        fleet,
        specs,
        reporter: reporter.clone(),
        opts,
        writable: tokio::sync::OnceCell::new(),
        warmed: std::sync::OnceLock::new(),
        store_down: std::sync::atomic::AtomicBool::new(false),
        busy: std::sync::atomic::AtomicBool::new(false),
        claims_unsupported: std::sync::atomic::AtomicBool::new(false),
    });
    if shared.opts.require_store
        && let Err(why) = shared.writable().await
    {
        return Err(EngineError::Store(format!(
            "{why}; --require-store: nothing was built (give kiln credentials that may write, or a store it can write to)"
        )));
    }
    if !shared.fleet && !shared.opts.force {
        let warmed = warm(&shared.nodes[0], &shared.specs, &shared.opts).await;
        let _ = shared.warmed.set(warmed);
    }
    let specs = &shared.specs;
    let mut results: Vec<Option<TargetResult>> = vec![None; n];
    // Finished targets' output image ids (for keys) and unique references
    // (for the hand-over).
    let mut outputs: HashMap<String, String> = HashMap::new();
    let mut produced: HashMap<String, Produced> = HashMap::new();
    let mut queued: Vec<usize> = vec![0; shared.nodes.len()];
    let mut running: JoinSet<Done> = JoinSet::new();
    let mut started: Vec<bool> = vec![false; n];
    let mut stop = false;
    // The run's clock: every target's start and end are seconds since.
    let run_t0 = Instant::now();
    let started_at = now_rfc3339();
    // Attempts on a node that stopped answering, per target.
    let mut lost: HashMap<usize, Vec<Attempt>> = HashMap::new();
    loop {
        // Block targets whose dependencies did not build.
        for (i, s) in specs.iter().enumerate() {
            if started[i] || results[i].is_some() {
                continue;
            }
            let bad = s.deps.iter().find(|d| {
                index
                    .get(*d)
                    .and_then(|&j| results[j].as_ref())
                    .is_some_and(|r| !r.status.ok())
            });
            if let Some(d) = bad.cloned().or_else(|| stop.then(String::new)) {
                let reason = if d.is_empty() {
                    "stopped by --fail-fast".to_string()
                } else {
                    format!("dependency {d} did not build")
                };
                reporter.event(&Event::TargetFinished {
                    target: s.name.clone(),
                    status: TargetStatus::Blocked.as_str().into(),
                    duration_s: 0.0,
                    image: None,
                    reason: Some(reason.clone()),
                });
                results[i] = Some(blocked(s, &shared.nodes[0], reason));
                started[i] = true;
            }
        }
        // Start ready targets.
        for (i, s) in specs.iter().enumerate() {
            if stop || running.len() >= MAX_TASKS {
                break;
            }
            if started[i] {
                continue;
            }
            let ready = s.deps.iter().all(|d| match index.get(d) {
                Some(&j) => results[j].as_ref().is_some_and(|r| r.status.ok()),
                None => true,
            });
            if !ready {
                continue;
            }
            let Some(k) = choose(&shared, &placement, &eligible, &s.name, &queued) else {
                // No live node may build it: it fails, its dependents are
                // blocked, independent targets go on.
                let alive: Vec<&str> = shared
                    .nodes
                    .iter()
                    .filter(|n| n.alive())
                    .map(|n| n.name.as_str())
                    .collect();
                let msg = format!(
                    "no eligible node remains for {} (it may run on: {}; alive: {})",
                    s.name,
                    eligible
                        .get(&s.name)
                        .map(|v| v.join(", "))
                        .unwrap_or_else(|| "any".into()),
                    alive.join(", ")
                );
                reporter.event(&Event::TargetFinished {
                    target: s.name.clone(),
                    status: TargetStatus::Failed.as_str().into(),
                    duration_s: 0.0,
                    image: None,
                    reason: Some(msg.clone()),
                });
                let mut r = blocked(s, &shared.nodes[0], String::new());
                r.status = TargetStatus::Failed;
                r.reason = None;
                r.error = Some(msg);
                results[i] = Some(r);
                started[i] = true;
                if fail_fast {
                    stop = true;
                    running.abort_all();
                }
                continue;
            };
            started[i] = true;
            queued[k] += 1;
            let hand_over = context_refs(s, specs, &refs_on(&produced, k));
            let rebuilt: Vec<String> = s
                .deps
                .iter()
                .filter(|d| {
                    index
                        .get(*d)
                        .and_then(|&j| results[j].as_ref())
                        .is_some_and(|r| r.status == TargetStatus::Built)
                })
                .cloned()
                .collect();
            let outputs = outputs.clone();
            let shared = shared.clone();
            running.spawn(async move {
                let t0 = Instant::now();
                let (outcome, keyed, held) =
                    process(&shared, k, i, &outputs, &hand_over, &rebuilt).await;
                Done {
                    handed: hand_over.clone(),
                    node: k,
                    index: i,
                    outcome,
                    keyed,
                    jobs: held.jobs,
                    slot: held.slot,
                    changes: held.changes,
                    duration_s: t0.elapsed().as_secs_f64(),
                    // A build's bar starts when it took its slot (it may
                    // have waited for one); a skip's when its task did.
                    start_s: held
                        .slot_taken
                        .unwrap_or(t0)
                        .saturating_duration_since(run_t0)
                        .as_secs_f64(),
                    end_s: run_t0.elapsed().as_secs_f64(),
                }
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let done = match joined {
            Ok(d) => d,
            // Aborted by --fail-fast: reported as blocked below.
            Err(e) if e.is_cancelled() => continue,
            Err(e) => return Err(EngineError::Build(format!("a build task failed: {e}"))),
        };
        let i = done.index;
        let k = done.node;
        queued[k] = queued[k].saturating_sub(1);
        let s = &specs[i];
        // A node that stopped answering loses only this target: it goes
        // back to the queue for another node; finished work is kept.
        if let Err(EngineError::Unreachable { detail, .. }) = &done.outcome
            && shared.fleet
        {
            shared.nodes[k]
                .alive
                .store(false, std::sync::atomic::Ordering::Relaxed);
            let left: Vec<&str> = shared
                .nodes
                .iter()
                .filter(|n| n.alive())
                .map(|n| n.name.as_str())
                .collect();
            if left.is_empty() {
                return Err(EngineError::Unreachable {
                    endpoint: shared.nodes[k].driver.describe(),
                    detail: format!(
                        "node {} stopped answering ({detail}) and no other node of the fleet is left for {}",
                        shared.nodes[k].name, s.name
                    ),
                });
            }
            reporter.event(&Event::Warning {
                target: s.name.clone(),
                message: format!(
                    "node {} stopped answering ({detail}); {} goes to another node ({})",
                    shared.nodes[k].name,
                    s.name,
                    left.join(", ")
                ),
            });
            lost.entry(i).or_default().push(Attempt {
                node: shared.nodes[k].name.clone(),
                slot: done.slot,
                start_s: ms(done.start_s),
                end_s: ms(done.end_s),
                outcome: "lost".into(),
                error: None,
            });
            started[i] = false;
            continue;
        }
        let duration_s = ms(done.duration_s);
        let key = done.keyed.as_ref().and_then(|k| k.key.clone());
        let hashed = done.keyed.as_ref().map(|k| k.stats);
        let jobs_secret = done.keyed.as_ref().is_some_and(|k| k.jobs_secret);
        let mut r = TargetResult {
            name: s.name.clone(),
            status: TargetStatus::Failed,
            node: shared.nodes[k].name.clone(),
            image: None,
            digest: None,
            key,
            duration_s,
            steps: StepCounts::default(),
            driver: shared.nodes[k].driver.kind(s, jobs_secret).into(),
            cache: Vec::new(),
            log: log_path(&shared.opts, &s.name)
                .filter(|p| p.is_file())
                .map(|p| p.display().to_string()),
            reason: None,
            error: None,
            failed_step: None,
            log_tail: Vec::new(),
            pushed: Vec::new(),
            hashed,
            jobs: done.jobs,
            handed: done.handed,
            build_name: None,
            compiler_cache: None,
            start_s: Some(ms(done.start_s)),
            end_s: Some(ms(done.end_s)),
            slot: done.slot,
            attempts: lost.remove(&i).unwrap_or_default(),
            pulled: None,
            cutoff_by: Vec::new(),
            changes: done.changes,
        };
        let build_name = s.args.get("BUILDKIT_BUILD_NAME").cloned();
        let pushed_refs = |p: Vec<(String, String)>| -> Vec<String> {
            p.into_iter().map(|(r, d)| format!("{r}@{d}")).collect()
        };
        match done.outcome {
            Ok(Outcome::Built(built, pushed)) => {
                // Tries the registry or BuildKit's concurrent pushes
                // failed, run again: attempts, never a failure.
                for t in &built.retries {
                    r.attempts.push(Attempt {
                        node: shared.nodes[k].name.clone(),
                        slot: done.slot,
                        start_s: ms(t.start.saturating_duration_since(run_t0).as_secs_f64()),
                        end_s: ms(t.end.saturating_duration_since(run_t0).as_secs_f64()),
                        outcome: "transient".into(),
                        error: Some(t.message.clone()),
                    });
                }
                let remote = pushed.first().map(|(r, d)| by_digest(r, d));
                let image = node_ref(&shared.nodes[k], s, &built.image_id, &remote);
                outputs.insert(s.name.clone(), built.image_id.clone());
                produced.insert(
                    s.name.clone(),
                    Produced {
                        node: k,
                        local: image.clone(),
                        remote,
                    },
                );
                r.status = TargetStatus::Built;
                r.build_name = build_name;
                r.image = Some(image);
                r.digest = pushed.first().map(|(_, d)| d.clone());
                r.steps = built.steps;
                r.cache = built.cache;
                r.pushed = pushed_refs(pushed);
            }
            Ok(Outcome::Skipped {
                image_id,
                digest,
                pushed,
                reason,
                pulled,
                cutoff_by,
            }) => {
                r.pulled = pulled;
                r.cutoff_by = cutoff_by;
                let remote = pushed.first().map(|(r, d)| by_digest(r, d)).or_else(|| {
                    let d = digest.as_ref()?;
                    s.tags.first().map(|t| by_digest(t, d))
                });
                let image = node_ref(&shared.nodes[k], s, &image_id, &remote);
                outputs.insert(s.name.clone(), image_id);
                produced.insert(
                    s.name.clone(),
                    Produced {
                        node: k,
                        local: image.clone(),
                        remote,
                    },
                );
                r.status = TargetStatus::Skipped;
                r.image = Some(image);
                r.digest = pushed.first().map(|(_, d)| d.clone()).or(digest);
                r.reason = Some(reason);
                r.pushed = pushed_refs(pushed);
            }
            Ok(Outcome::Failed(f)) => {
                r.build_name = build_name;
                r.error = Some(f.message);
                r.failed_step = f.step;
                r.log_tail = f.log_tail;
                r.steps = f.steps;
                r.cache = f.cache;
            }
            Err(
                e
                @ (EngineError::Unreachable { .. } | EngineError::Store(_) | EngineError::Tool(_)),
            ) => {
                return Err(e);
            }
            Err(e) => r.error = Some(e.to_string()),
        }
        if r.status == TargetStatus::Failed && fail_fast {
            stop = true;
            running.abort_all();
        }
        reporter.event(&Event::TargetFinished {
            target: s.name.clone(),
            status: r.status.as_str().into(),
            duration_s,
            image: r.image.clone(),
            reason: r.reason.clone().or_else(|| r.error.clone()),
        });
        results[i] = Some(r);
    }
    // Anything never started or aborted by fail-fast is blocked.
    let targets = specs
        .iter()
        .zip(results)
        .enumerate()
        .map(|(i, (s, r))| {
            let mut r =
                r.unwrap_or_else(|| blocked(s, &shared.nodes[0], "stopped by --fail-fast".into()));
            if let Some(a) = lost.remove(&i) {
                r.attempts = a;
            }
            r
        })
        .collect();
    Ok(RunSummary {
        run_id: shared.opts.run_id.clone(),
        stamps: BTreeMap::new(),
        started_at,
        wall_s: ms(run_t0.elapsed().as_secs_f64()),
        nodes: shared
            .nodes
            .iter()
            .map(|n| NodeUse {
                name: n.name.clone(),
                slots: n.capacity,
                lost: !n.alive(),
            })
            .collect(),
        targets,
    })
}

fn blocked(s: &BuildSpec, node: &Node, reason: String) -> TargetResult {
    TargetResult {
        name: s.name.clone(),
        status: TargetStatus::Blocked,
        node: node.name.clone(),
        image: None,
        digest: None,
        key: None,
        duration_s: 0.0,
        steps: StepCounts::default(),
        driver: node.driver.kind(s, false).into(),
        cache: Vec::new(),
        log: None,
        reason: Some(reason),
        error: None,
        failed_step: None,
        log_tail: Vec::new(),
        pushed: Vec::new(),
        hashed: None,
        jobs: None,
        handed: BTreeMap::new(),
        build_name: None,
        compiler_cache: None,
        start_s: None,
        end_s: None,
        slot: None,
        attempts: Vec::new(),
        pulled: None,
        cutoff_by: Vec::new(),
        changes: Vec::new(),
    }
}

/// Seconds rounded to the millisecond.
fn ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// Where the progress log of `target`'s build goes in this run.
fn log_path(opts: &RunOptions, target: &str) -> Option<std::path::PathBuf> {
    let safe: String = target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    Some(opts.log_dir.as_ref()?.join(format!("{safe}.log")))
}

/// Where a finished target's image is: the node that has it locally and,
/// when pushed, its registry reference by digest.
struct Produced {
    node: usize,
    local: String,
    remote: Option<String>,
}

/// The reference dependents on the same node (and `docker run` there) use
/// for a target's image: the unique local tag on an engine, the registry
/// digest on a builder that keeps no image store.
fn node_ref(node: &Node, spec: &BuildSpec, image_id: &str, remote: &Option<String>) -> String {
    match (engine_for(node, spec), remote) {
        (None, Some(r)) => r.clone(),
        _ => local_ref(&spec.name, image_id),
    }
}

/// The engine that holds `spec`'s image on `node`: none on a builder that
/// keeps no image store, and none for a multi-platform target, whose image
/// is an index in the registry (docs/driver-buildx.md).
fn engine_for<'a>(node: &'a Node, spec: &BuildSpec) -> Option<&'a LocalEngine> {
    node.engine.as_ref().filter(|_| !spec.multi_platform())
}

/// The references dependents on node `k` use: the unique local tag when
/// the image was made on `k`, else its registry digest (a fleet run pushes
/// everything), never a tag that could move.
fn refs_on(produced: &HashMap<String, Produced>, k: usize) -> HashMap<String, String> {
    produced
        .iter()
        .filter_map(|(t, p)| {
            let r = if p.node == k {
                p.local.clone()
            } else {
                p.remote.clone()?
            };
            Some((t.clone(), r))
        })
        .collect()
}

/// What placement needs to know of a node.
struct Slot<'a> {
    name: &'a str,
    alive: bool,
    capacity: usize,
}

fn choose(
    sh: &Shared,
    placement: &HashMap<String, String>,
    eligible: &HashMap<String, Vec<String>>,
    target: &str,
    queued: &[usize],
) -> Option<usize> {
    let slots: Vec<Slot<'_>> = sh
        .nodes
        .iter()
        .map(|n| Slot {
            name: &n.name,
            alive: n.alive(),
            capacity: n.capacity,
        })
        .collect();
    choose_among(&slots, placement, eligible, target, queued)
}

/// The node a ready target goes to: its placement when that node is alive
/// and eligible, else the live eligible node with the most free slots
/// (queued work counted), lowest index first. `None` when no live node may
/// build it.
fn choose_among(
    nodes: &[Slot<'_>],
    placement: &HashMap<String, String>,
    eligible: &HashMap<String, Vec<String>>,
    target: &str,
    queued: &[usize],
) -> Option<usize> {
    let may = |n: &Slot<'_>| {
        n.alive
            && eligible
                .get(target)
                .is_none_or(|v| v.iter().any(|e| e == n.name))
    };
    if let Some(name) = placement.get(target)
        && let Some(k) = nodes.iter().position(|n| n.name == name && may(n))
    {
        return Some(k);
    }
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| may(n))
        .max_by(|(a, na), (b, nb)| {
            let free = |k: usize, n: &Slot<'_>| n.capacity as i64 - queued[k] as i64;
            free(*a, na).cmp(&free(*b, nb)).then(b.cmp(a))
        })
        .map(|(k, _)| k)
}

/// Runs a store call off the async threads (a store may block on I/O).
/// Asks the engine at once about every image a skip will check, so a run
/// where much is recorded waits for one round of image lookups instead of
/// one per level of the graph. It follows the records the way the run will
/// (a hit's recorded image is its output for its dependents' keys) but
/// decides nothing: the run still looks up and locates every target itself,
/// and what changes between here and there (a record that turns out stale,
/// an image that is gone) is found then. The keys it computes are returned
/// with the upstream outputs each assumed: the run reuses a key only when
/// the upstreams really came out that way. Errors only end the guess.
async fn warm(
    node: &Node,
    specs: &[BuildSpec],
    opts: &RunOptions,
) -> HashMap<String, (Outputs, Keyed)> {
    let mut warmed = HashMap::new();
    let Some(engine) = &node.engine else {
        return warmed;
    };
    let mut outputs: HashMap<String, String> = HashMap::new();
    let mut refs: Vec<String> = Vec::new();
    for spec in specs {
        let Ok(keyed) = key_on(
            &node.resolver,
            spec,
            specs,
            &outputs,
            opts.stat_cache.clone(),
        )
        .await
        else {
            continue;
        };
        warmed.insert(
            spec.name.clone(),
            (upstream_outputs(spec, &outputs), keyed.clone()),
        );
        let Some(key) = keyed.key.filter(|_| keyed.volatile.is_empty()) else {
            continue;
        };
        match store_call(&opts.store, move |s| s.get(&key)).await {
            Ok(Lookup::Hit(entry)) => {
                refs.push(local_ref(&spec.name, &entry.record.image_id));
                outputs.insert(spec.name.clone(), entry.record.image_id);
            }
            Ok(_) => {}
            // A store that does not answer: the run finds out (and says so)
            // itself; the guess stops here rather than wait per target.
            Err(_) => break,
        }
    }
    let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
    engine.prefetch(&refs).await;
    warmed
}

async fn store_call<T: Send + 'static>(
    store: &Arc<dyn RecordStore>,
    f: impl FnOnce(&dyn RecordStore) -> Result<T, kiln_store::StoreError> + Send + 'static,
) -> Result<T, EngineError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || f(store.as_ref()))
        .await
        .map_err(|e| EngineError::Store(format!("record store task failed: {e}")))?
        .map_err(|e| EngineError::Store(e.to_string()))
}

/// One target: key, lookup, then skip or build, then record.
async fn process(
    sh: &Shared,
    k: usize,
    i: usize,
    outputs: &HashMap<String, String>,
    hand_over: &BTreeMap<String, String>,
    rebuilt: &[String],
) -> (Result<Outcome, EngineError>, Option<Keyed>, Held) {
    let spec = &sh.specs[i];
    let node = &sh.nodes[k];
    // The warm-up's key, when it assumed the outputs the upstreams have
    // now and nothing has been built or pulled since (it keyed on node 0's
    // resolver: single-engine runs only).
    let warmed = sh
        .warmed
        .get()
        .filter(|_| k == 0 && !sh.busy.load(std::sync::atomic::Ordering::Relaxed))
        .and_then(|m| m.get(&spec.name))
        .filter(|(assumed, _)| *assumed == upstream_outputs(spec, outputs))
        .map(|(_, keyed)| keyed.clone());
    let keyed = match warmed {
        Some(keyed) => keyed,
        None => match key_on(
            &node.resolver,
            spec,
            &sh.specs,
            outputs,
            sh.opts.stat_cache.clone(),
        )
        .await
        {
            Ok(k) => k,
            Err(e) => return (Err(e), None, Held::default()),
        },
    };
    sh.reporter.event(&Event::Key {
        target: spec.name.clone(),
        key: keyed.key.clone(),
        files: keyed.stats.files,
        read_files: keyed.stats.read_files,
        read_bytes: keyed.stats.read_bytes,
    });
    let mut held = Held::default();
    let mut side = ClaimSide::default();
    let outcome = decide_and_build(
        sh, node, spec, &keyed, hand_over, rebuilt, &mut held, &mut side,
    )
    .await;
    let outcome = side.finish(outcome).await;
    (outcome, Some(keyed), held)
}

/// What a target's build held while it ran.
#[derive(Default)]
struct Held {
    /// The job count handed to the build, if it was handed one.
    jobs: Option<u32>,
    /// The node's build slot (lane) it ran in, if it took one.
    slot: Option<usize>,
    /// Why it was built: what changed since its last recorded build.
    changes: Vec<String>,
    /// When it took its build slot.
    slot_taken: Option<Instant>,
}

/// Why a target is built, as `kiln why` says it: its inputs against its
/// last recorded build (one line each), `never built` without one, and
/// `--force` when forced. Best effort: a store that does not answer gives
/// no lines.
async fn changes_since_last(
    sh: &Shared,
    spec: &BuildSpec,
    keyed: &Keyed,
    force: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if sh.opts.force {
        out.push("--force: built even though its key may be recorded".to_string());
    } else if force {
        out.push(
            "its record could not be used (a damaged record, or its image is gone): rebuilt"
                .to_string(),
        );
    }
    if !keyed.volatile.is_empty() {
        out.push(format!("always built: {}", keyed.volatile.join("; ")));
    }
    let name = spec.name.clone();
    match store_call(&sh.opts.store, move |s| s.latest(&name)).await {
        Ok(Lookup::Hit(e)) => {
            if let Ok(m) = serde_json::from_value::<kiln_plan::key::InputManifest>(e.inputs) {
                out.extend(
                    kiln_plan::key::diff(&m, &keyed.manifest)
                        .iter()
                        .map(|c| c.to_string()),
                );
            }
        }
        Ok(Lookup::Miss) => out.push("never built before (no record of this target)".into()),
        _ => {}
    }
    out
}

/// The job count one build on `node` is handed: the node's affordable jobs
/// (free memory / GB per job) divided by its build slots, at least 1,
/// probed once per node. When the probe fails, the engine's CPU count
/// (`docker info`) divided by the slots stands in, else 1, with a warning:
/// the build goes on either way.
async fn node_jobs(sh: &Shared, node: &Node, target: &str) -> u32 {
    *node
        .jobs
        .get_or_init(|| async {
            let Some(engine) = &node.engine else {
                return declared_jobs(sh, node, target);
            };
            match crate::probe::probe(engine, sh.opts.gb_per_job).await {
                Ok(f) => crate::jobs::per_build(f.jobs, node.capacity),
                Err(e) => {
                    let cpus = engine.cpus().await;
                    let n = crate::jobs::per_build(cpus.unwrap_or(1), node.capacity);
                    let source = match cpus {
                        Some(c) => format!(
                            "the engine's {c} CPUs over {} build slots",
                            node.capacity
                        ),
                        None => "the engine's CPU count is unknown too".into(),
                    };
                    sh.reporter.event(&Event::Warning {
                        target: target.to_string(),
                        message: format!(
                            "could not read node {}'s free memory ({e}); builds there are handed kiln-jobs = {n} ({source})",
                            node.name
                        ),
                    });
                    n
                }
            }
        })
        .await
}

/// The job count of a builder with no engine kiln can probe: the fleet
/// file's memory over the GB per job and the node's slots; without a
/// fleet file, 1, with a warning saying how to hand more.
fn declared_jobs(sh: &Shared, node: &Node, target: &str) -> u32 {
    match node.memory_gb {
        Some(gb) => {
            let jobs = (gb / sh.opts.gb_per_job.max(0.001)).floor().max(1.0) as u32;
            crate::jobs::per_build(jobs, node.capacity)
        }
        None => {
            sh.reporter.event(&Event::Warning {
                target: target.to_string(),
                message: format!(
                    "{} keeps no engine kiln can ask for free memory; builds there are handed kiln-jobs = 1 (describe it as a fleet node with memory_gb to hand more)",
                    node.driver.describe()
                ),
            });
            1
        }
    }
}

/// What the claim on a target's key came to (cross-run deduplication,
/// `crate::claims`).
#[derive(Default)]
struct ClaimSide {
    /// This run's claim while it builds.
    holding: Option<crate::claims::Holding>,
    /// Whom this run waited for, and how long, before the record appeared.
    waited: Option<(String, Duration)>,
}

impl ClaimSide {
    /// Ends this run's claim by the outcome (`done` when built, else
    /// `failed`: a waiter builds it), and tells in a skip's reason whom
    /// this run waited for.
    async fn finish(mut self, mut r: Result<Outcome, EngineError>) -> Result<Outcome, EngineError> {
        if let (Ok(Outcome::Skipped { reason, .. }), Some((holder, waited))) =
            (&mut r, &self.waited)
        {
            reason.push_str(&format!(
                "; built by {holder} while this run waited {:.0} s",
                waited.as_secs_f64()
            ));
        }
        if let Some(h) = self.holding.take() {
            let state = match &r {
                Ok(Outcome::Built(..)) => kiln_store::ClaimState::Done,
                _ => kiln_store::ClaimState::Failed,
            };
            h.end(state).await;
        }
        r
    }
}

/// Claims `key` for this build, or waits for the run that holds it
/// (`None`: no claim is made — claims are off, the store is down or takes
/// no writes).
async fn claim(
    sh: &Shared,
    node: &Node,
    spec: &BuildSpec,
    key: &str,
) -> Result<Option<crate::claims::Decision>, EngineError> {
    let Some(ttl) = sh.opts.claim_ttl else {
        return Ok(None);
    };
    if sh.store_down.load(std::sync::atomic::Ordering::Relaxed) || sh.writable().await.is_err() {
        return Ok(None);
    }
    let me = kiln_store::Claimant {
        holder: crate::claims::holder(),
        run_id: sh.opts.run_id.clone(),
        target: spec.name.clone(),
        node: node.name.clone(),
        since: now_rfc3339(),
        beat: 0,
        state: kiln_store::ClaimState::Building,
    };
    let (reporter, target) = (sh.reporter.clone(), spec.name.clone());
    let say: Arc<dyn Fn(String) + Send + Sync> = Arc::new(move |message| {
        reporter.event(&Event::Waiting {
            target: target.clone(),
            message,
        })
    });
    let unsupported = || {
        if !sh
            .claims_unsupported
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            sh.reporter.event(&Event::Warning {
                target: String::new(),
                message: format!(
                    "record store {} cannot hold claims (it has no create-if-absent), so a run started at the same time may build the same keys too (docs/store-claims.md)",
                    sh.opts.store.location()
                ),
            });
        }
    };
    crate::claims::claim_or_wait(&sh.opts.store, key, me, ttl, say, unsupported)
        .await
        .map(Some)
}

#[allow(clippy::too_many_arguments)]
async fn decide_and_build(
    sh: &Shared,
    node: &Node,
    spec: &BuildSpec,
    keyed: &Keyed,
    hand_over: &BTreeMap<String, String>,
    rebuilt: &[String],
    held: &mut Held,
    side: &mut ClaimSide,
) -> Result<Outcome, EngineError> {
    let warn = |message: String| {
        sh.reporter.event(&Event::Warning {
            target: spec.name.clone(),
            message,
        })
    };
    let mut force = sh.opts.force;
    let inputs = serde_json::to_value(&keyed.manifest)
        .map_err(|e| EngineError::Input(format!("encoding the input manifest: {e}")))?;
    // A key that cannot vouch for every input never skips.
    let lookup = !force && keyed.volatile.is_empty();
    if !keyed.volatile.is_empty() {
        warn(format!("always built: {}", keyed.volatile.join("; ")));
    }
    if let Some(key) = keyed.key.clone().filter(|_| lookup) {
        loop {
            let k = key.clone();
            // A store that cannot be read is a miss with a warning (the target
            // builds), unless --require-store makes it the run's error. After
            // the first such failure the store is not asked again in this run:
            // one warning, and no timeout paid per target.
            let found = if sh.store_down.load(std::sync::atomic::Ordering::Relaxed) {
                Lookup::Miss
            } else {
                match store_call(&sh.opts.store, move |s| s.get(&k)).await {
                    Ok(l) => l,
                    Err(e) if sh.opts.require_store => return Err(e),
                    Err(e) => {
                        if !sh
                            .store_down
                            .swap(true, std::sync::atomic::Ordering::Relaxed)
                        {
                            warn(format!(
                                "{e}; the store is not asked again in this run: every target is looked up as a miss, so it builds"
                            ));
                        }
                        Lookup::Miss
                    }
                }
            };
            match found {
                Lookup::Hit(entry) => {
                    let rec = entry.record;
                    use crate::keys::Located;
                    let engine = engine_for(node, spec);
                    let located =
                        crate::keys::locate(engine, &node.resolver, &spec.name, &rec).await;
                    if matches!(located, Located::Registry(_)) && engine.is_some() {
                        // A pull takes time: the warm-up's keys are not reused
                        // after it.
                        sh.busy.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    match &located {
                        Located::Engine {
                            source,
                            unique_tagged,
                        } => {
                            let from = Source {
                                reference: source.clone(),
                                unique_tagged: *unique_tagged,
                                pulled: false,
                            };
                            return adopt(sh, node, spec, rec, inputs, rebuilt, from).await;
                        }
                        // A builder that keeps no image store skips on what
                        // the registry holds: nothing to pull.
                        Located::Registry(r) if engine.is_none() => {
                            let from = Source {
                                reference: r.clone(),
                                unique_tagged: true,
                                pulled: false,
                            };
                            return adopt(sh, node, spec, rec, inputs, rebuilt, from).await;
                        }
                        // Pushed when it was built and still in the registry:
                        // pull it by digest instead of building it again.
                        Located::Registry(r) => match pull_recorded(node, &rec, r).await {
                            Ok(()) => {
                                let from = Source {
                                    reference: r.clone(),
                                    unique_tagged: false,
                                    pulled: true,
                                };
                                return adopt(sh, node, spec, rec, inputs, rebuilt, from).await;
                            }
                            Err(why) => warn(format!(
                                "the record for {key} names image {}, pushed as {r}, but {why}; rebuilding",
                                rec.image_id
                            )),
                        },
                        Located::Gone if engine.is_none() => warn(format!(
                            "the record for {key} names image {}, which no registry holds any more; rebuilding",
                            rec.image_id
                        )),
                        Located::Gone => warn(format!(
                            "the record for {key} names image {}, which the engine no longer has and no registry holds; rebuilding",
                            rec.image_id
                        )),
                    }
                    force = true;
                }
                Lookup::Corrupt(why) => {
                    warn(format!(
                        "the record for {key} is damaged ({why}); treating it as a miss, rebuilding and repairing it"
                    ));
                    force = true;
                }
                Lookup::Miss => match claim(sh, node, spec, &key).await? {
                    Some(crate::claims::Decision::Build(h)) => side.holding = h,
                    Some(crate::claims::Decision::Recorded { waited, holder }) => {
                        side.waited = Some((holder, waited));
                        continue;
                    }
                    None => {}
                },
            }
            break;
        }
    }
    sh.busy.store(true, std::sync::atomic::Ordering::Relaxed);
    held.changes = changes_since_last(sh, spec, keyed, force).await;
    // Before the first build of the run: can what is built be recorded?
    // Said once; a run that builds nothing never asks.
    let recordable = sh.writable().await.is_ok();
    let _permit = node
        .slots
        .acquire()
        .await
        .map_err(|e| EngineError::Build(format!("build slots closed: {e}")))?;
    let jobs = if keyed.jobs_secret {
        Some(node_jobs(sh, node, &spec.name).await)
    } else {
        None
    };
    let _lane = node.take_lane();
    held.slot = Some(_lane.index);
    held.slot_taken = Some(Instant::now());
    held.jobs = jobs;
    sh.reporter.event(&Event::TargetStarted {
        target: spec.name.clone(),
        driver: node.driver.kind(spec, keyed.jobs_secret).into(),
        node: node.name.clone(),
        slot: held.slot,
    });
    let t0 = Instant::now();
    // Registry-resolved base images are built from the digest the key names.
    let mut hand_over = hand_over.clone();
    for (image, pin) in &keyed.pins {
        hand_over
            .entry(image.clone())
            .or_insert_with(|| pin.clone());
    }
    let outcome = node
        .driver
        .build(BuildRequest {
            spec,
            hand_over: &hand_over,
            run_id: &sh.opts.run_id,
            jobs,
            reporter: sh.reporter.as_ref(),
            log: log_path(&sh.opts, &spec.name).as_deref(),
        })
        .await?;
    let (built, pushed) = match outcome {
        Ok(x) => x,
        Err(f) => return Ok(Outcome::Failed(f)),
    };
    for op in built
        .cache
        .iter()
        .filter(|o| o.kind == "export" && o.outcome != "ok")
    {
        warn(format!(
            "the layer-cache export failed ({}); the image is built, but a cold builder will rebuild this target's discarded stages until an export succeeds (ignore-error=true only kept it from failing the build)",
            op.error.as_deref().unwrap_or(op.outcome)
        ));
    }
    if let Some(key) = keyed.key.as_ref().filter(|_| recordable) {
        let record = Record {
            format: kiln_store::FORMAT.into(),
            key: key.clone(),
            target: spec.name.clone(),
            image_id: built.image_id.clone(),
            image_ref: Some(match (engine_for(node, spec), pushed.first()) {
                (None, Some((r, d))) => by_digest(r, d),
                _ => local_ref(&spec.name, &built.image_id),
            }),
            digest: pushed.first().map(|(_, d)| d.clone()),
            tags: spec.tags.clone(),
            platform: Some(keyed.manifest.platform.clone()),
            built_at: now_rfc3339(),
            node: node.name.clone(),
            duration_s: (t0.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            steps_total: built.steps.total as u64,
            steps_cached: built.steps.cached as u64,
            inputs_digest: kiln_store::digest(&kiln_store::payload_bytes(&inputs)),
            check: None,
        };
        match store_call(&sh.opts.store, move |s| s.put(&record, &inputs, force)).await {
            Ok(_) => {}
            // --require-store: a build that cannot be recorded stops the
            // run, as a store that cannot be written does at its start.
            Err(e) if sh.opts.require_store => {
                return Err(EngineError::Store(format!(
                    "target {}: the build succeeded but could not be recorded, and --require-store was given: {e}",
                    spec.name
                )));
            }
            Err(e) => warn(format!(
                "the build succeeded but could not be recorded ({e}); the next run will build it again"
            )),
        }
    }
    Ok(Outcome::Built(built, pushed))
}

/// Where a recorded image was found on the engine: a reference the engine
/// knows that names it, and how it got there.
struct Source {
    reference: String,
    /// The unique reference already points at it.
    unique_tagged: bool,
    /// Pulled from the registry in this run (by `reference`, a digest).
    pulled: bool,
}

/// A hit whose image the engine holds: no build. Restores the unique
/// reference and any requested tag that no longer points at the image,
/// pushes when asked, and refreshes the target's latest-record pointer.
async fn adopt(
    sh: &Shared,
    node: &Node,
    spec: &BuildSpec,
    rec: Record,
    inputs: serde_json::Value,
    rebuilt: &[String],
    from: Source,
) -> Result<Outcome, EngineError> {
    let id = rec.image_id.clone();
    let unique = local_ref(&spec.name, &id);
    let mut retagged = Vec::new();
    if let Some(engine) = engine_for(node, spec) {
        let to_check = (!from.unique_tagged).then_some(&unique);
        for t in to_check.into_iter().chain(spec.tags.iter()) {
            if engine.image_id(t).await.as_deref() != Some(id.as_str()) {
                engine.tag(&from.reference, t).await?;
                if t != &unique {
                    retagged.push(t.clone());
                }
            }
        }
    }
    let pulled = from.pulled.then(|| from.reference.clone());
    let mut pushed = Vec::new();
    if spec.push {
        for t in &spec.tags {
            // A tag the registry already has at the recorded digest needs
            // no push: nothing moves, and on the containerd image store an
            // image that BuildKit only read (a named context) may lack
            // blobs that a push would need ("missing content").
            let current = match (node.resolver.registry(), &rec.digest) {
                (Some(r), Some(d)) => match r.resolve(t).await {
                    Ok(crate::registry::Resolution::Found(have)) if &have == d => Some(have),
                    _ => None,
                },
                _ => None,
            };
            let digest = match (current, engine_for(node, spec)) {
                (Some(d), _) => d,
                (None, Some(engine)) => engine.push(t, &spec.name, sh.reporter.as_ref()).await?.0,
                // No engine: the tag is pointed at the recorded image in
                // the registry itself.
                (None, None) => {
                    node.driver.retag(&from.reference, t).await?;
                    retagged.push(t.clone());
                    rec.digest.clone().unwrap_or_default()
                }
            };
            sh.reporter.event(&Event::Pushed {
                target: spec.name.clone(),
                reference: t.clone(),
                digest: digest.clone(),
            });
            pushed.push((t.clone(), digest));
        }
    }
    let mut reason = if rebuilt.is_empty() {
        "up to date".to_string()
    } else {
        format!(
            "early cutoff: {} rebuilt to an identical image",
            rebuilt.join(", ")
        )
    };
    if let Some(p) = &pulled {
        reason.push_str(&format!(" (pulled {p})"));
    }
    if !retagged.is_empty() {
        reason.push_str(&format!(" (re-tagged {})", retagged.join(", ")));
    }
    let digest = rec.digest.clone();
    let _ = store_call(&sh.opts.store, move |s| s.put(&rec, &inputs, false)).await;
    Ok(Outcome::Skipped {
        image_id: id,
        digest,
        pushed,
        reason,
        pulled,
        cutoff_by: rebuilt.to_vec(),
    })
}

/// Pulls a recorded image the engine lacks from `reference` (its
/// `repo@digest`); done once the pulled image has the recorded identity.
async fn pull_recorded(node: &Node, rec: &Record, reference: &str) -> Result<(), String> {
    let Some(engine) = &node.engine else {
        return Err("the builder keeps no image store to pull it into".into());
    };
    engine
        .pull(reference)
        .await
        .map_err(|e| format!("pulling it failed ({e})"))?;
    match engine.image_id(reference).await {
        Some(id) if id == rec.image_id => Ok(()),
        Some(id) => Err(format!("the pulled image is {id}, not the recorded one")),
        None => Err("the engine does not show the pulled image".into()),
    }
}

/// The current time, RFC 3339 UTC to the second.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0);
    now.ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_falls_back_to_live_eligible_nodes_with_free_slots() {
        let nodes = |alive: [bool; 3]| {
            ["a", "b", "c"]
                .into_iter()
                .zip(alive)
                .zip([1, 2, 1])
                .map(|((name, alive), capacity)| Slot {
                    name,
                    alive,
                    capacity,
                })
                .collect::<Vec<_>>()
        };
        let placement: HashMap<String, String> = [("t".to_string(), "c".to_string())].into();
        let none: HashMap<String, Vec<String>> = HashMap::new();
        let unplaced: HashMap<String, String> = HashMap::new();
        let all_up = nodes([true; 3]);
        // The placement wins while its node is alive, even if busy.
        assert_eq!(
            choose_among(&all_up, &placement, &none, "t", &[0, 0, 5]),
            Some(2)
        );
        // Its node dead: the live node with the most free slots (b has 2).
        let c_dead = nodes([true, true, false]);
        assert_eq!(
            choose_among(&c_dead, &placement, &none, "t", &[0, 0, 0]),
            Some(1)
        );
        // Queued work counts; ties go to the lower index.
        assert_eq!(
            choose_among(&c_dead, &placement, &none, "t", &[0, 1, 0]),
            Some(0)
        );
        // Memory eligibility: only c may build t; c dead → nowhere.
        let only_c: HashMap<String, Vec<String>> =
            [("t".to_string(), vec!["c".to_string()])].into();
        assert_eq!(
            choose_among(&all_up, &unplaced, &only_c, "t", &[0, 0, 0]),
            Some(2)
        );
        assert_eq!(
            choose_among(&c_dead, &placement, &only_c, "t", &[0, 0, 0]),
            None
        );
        // A placement on an ineligible node is not followed.
        let only_a: HashMap<String, Vec<String>> =
            [("t".to_string(), vec!["a".to_string()])].into();
        assert_eq!(
            choose_among(&all_up, &placement, &only_a, "t", &[0, 0, 0]),
            Some(0)
        );
        assert_eq!(
            choose_among(&nodes([false; 3]), &unplaced, &none, "t", &[0, 0, 0]),
            None
        );
    }

    #[test]
    fn local_refs_are_unique_and_valid() {
        assert_eq!(
            local_ref("Pytorch.Base", "sha256:0123456789abcdef0123"),
            "kiln.local/pytorch.base:0123456789abcdef"
        );
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
