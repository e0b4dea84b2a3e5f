//! The scheduler: builds targets in dependency order, independent ones
//! concurrently up to a cap; before each target it computes the content
//! key (with its upstreams' *output* ids: early cutoff), and skips the
//! target without contacting BuildKit when the record store has the key
//! and the engine still holds the image. It hands each finished target to
//! its dependents by a unique local reference, records what it built,
//! blocks the dependents of a failed target and lets independent ones
//! finish (or stops at once with fail-fast).
//!
//! The rooms: [`summary`] (the JSON contract and a target's result),
//! `shared` (what the run is given and its tasks share), `nodes` (nodes,
//! lanes, placement, job counts), `handover` (references between targets
//! and nodes), `target` (one target's life: look up or claim, then build
//! and record). This module is the scheduling loop alone, shaped as
//! nextest's runner is: the loop is the one place that decides what the
//! run does next; target tasks are units that report back a `Done`, and the
//! reporter is the one outside voice. A stop has a reason, and the more
//! serious reason wins: `--fail-fast` after a failure, then a fatal error
//! (the engine, the store or a tool lost mid-run). Either way every target
//! ends with a result and a finished event — finished ones as they
//! finished, stopped and unstarted ones `blocked` — so the summary, the
//! run report and the history keep what was done.
//!
//! Must never: build, look up or record a target itself (that is
//! `target`'s), or print anything (events go to the reporter).

mod handover;
mod nodes;
mod recent;
mod shared;
pub mod summary;
mod target;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinSet;

use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::naming::by_digest;
use crate::spec::{BuildSpec, Endpoint};
use crate::steps::StepCounts;
use handover::{Produced, context_refs, node_ref, refs_on};
use shared::{Shared, log_path};
use target::{Done, Outcome};

pub use nodes::{NodeSpec, node_engine};
pub use recent::Recent;
pub use shared::RunOptions;
use summary::ms;
pub use summary::{Attempt, NodeUse, RunSummary, TargetResult, TargetStatus, now_rfc3339};

/// Targets being keyed, looked up or built at once (builds themselves are
/// capped by `--jobs`).
const MAX_TASKS: usize = 32;

/// Runs `specs` (in a valid build order) on the local engine, or on the
/// fleet `opts.nodes` names. `Err` only when nothing could start (no node
/// answers, a target no node can build, a store `--require-store` cannot
/// write); an error mid-run ends the run with a summary that says so
/// (`RunSummary::stopped`).
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
    let nodes = nodes::connect_all(&node_specs, fleet, opts.gb_per_job, reporter.as_ref()).await?;
    for n in &nodes {
        n.driver.check(&specs)?;
    }
    // Preferred and eligible nodes by name (a node that did not answer is
    // not among them).
    let name = |k: &usize| node_specs.get(*k).map(|n| n.name.clone());
    let placement: HashMap<String, String> = opts
        .placement
        .iter()
        .filter_map(|(t, k)| Some((t.clone(), name(k)?)))
        .collect();
    let eligible: HashMap<String, Vec<String>> = opts
        .eligible
        .iter()
        .map(|(t, ks)| (t.clone(), ks.iter().filter_map(name).collect()))
        .collect();
    let shared = Arc::new(Shared {
        nodes,
        fleet,
        specs,
        reporter,
        opts,
        writable: tokio::sync::OnceCell::new(),
        warmed: std::sync::OnceLock::new(),
        store_down: std::sync::atomic::AtomicBool::new(false),
        busy: std::sync::atomic::AtomicBool::new(false),
        claims_unsupported: std::sync::atomic::AtomicBool::new(false),
        heads: Default::default(),
        warm_hits: Default::default(),
    });
    if shared.opts.require_store
        && let Err(why) = shared.writable().await
    {
        return Err(EngineError::Store(format!(
            "{why}; --require-store: nothing was built (give kiln credentials that may write, or a store it can write to)"
        )));
    }
    if !shared.fleet && !shared.opts.force {
        let (warmed, hits) =
            target::warm(&shared.nodes[0], &shared.specs, &shared.opts, &shared.heads).await;
        let _ = shared.warmed.set(warmed);
        if let Ok(mut h) = shared.warm_hits.lock() {
            *h = hits;
        }
    }
    // A containerd store named by hand that could not be read (asked by
    // the preflight or the warm-up) is said, once.
    for n in &shared.nodes {
        if let Some(message) = n.engine.as_ref().and_then(|e| e.take_store_trouble()) {
            shared.reporter.event(&Event::Warning {
                target: String::new(),
                message,
            });
        }
    }
    let mut s = Scheduler::new(shared, placement, eligible);
    s.drive().await;
    Ok(s.finish())
}

/// Why the run stops starting targets. Ordered: the more serious reason
/// wins when both happen.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stop {
    /// `--fail-fast` after a target failed.
    FailFast,
    /// The run cannot go on (its message): the engine, the store or a
    /// tool failed mid-run, or a target task failed.
    Fatal(String),
}

impl Stop {
    /// The reason a target that never finished is blocked with.
    fn reason(&self) -> String {
        match self {
            Stop::FailFast => "stopped by --fail-fast".into(),
            Stop::Fatal(why) => format!("the run stopped: {why}"),
        }
    }
}

/// The loop's state: what every target came to so far.
struct Scheduler {
    sh: Arc<Shared>,
    placement: HashMap<String, String>,
    eligible: HashMap<String, Vec<String>>,
    index: HashMap<String, usize>,
    results: Vec<Option<TargetResult>>,
    /// Started (or given a result) targets: never started again, except a
    /// target whose node was lost.
    started: Vec<bool>,
    /// Finished targets' output image ids (for keys) and where their
    /// images are (for the hand-over).
    outputs: HashMap<String, String>,
    produced: HashMap<String, Produced>,
    /// Targets sent to each node and not finished.
    queued: Vec<usize>,
    running: JoinSet<Done>,
    /// Which target each running task is.
    tasks: HashMap<tokio::task::Id, usize>,
    stop: Option<Stop>,
    /// The error behind a fatal stop.
    stop_error: Option<EngineError>,
    /// The run's clock: every target's start and end are seconds since.
    t0: Instant,
    started_at: String,
    /// Attempts on a node that stopped answering, per target.
    lost: HashMap<usize, Vec<Attempt>>,
}

impl Scheduler {
    fn new(
        sh: Arc<Shared>,
        placement: HashMap<String, String>,
        eligible: HashMap<String, Vec<String>>,
    ) -> Scheduler {
        let n = sh.specs.len();
        let index = sh
            .specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        let queued = vec![0; sh.nodes.len()];
        Scheduler {
            sh,
            placement,
            eligible,
            index,
            results: vec![None; n],
            started: vec![false; n],
            outputs: HashMap::new(),
            produced: HashMap::new(),
            queued,
            running: JoinSet::new(),
            tasks: HashMap::new(),
            stop: None,
            stop_error: None,
            t0: Instant::now(),
            started_at: now_rfc3339(),
            lost: HashMap::new(),
        }
    }

    /// Runs until no target task is left.
    async fn drive(&mut self) {
        loop {
            self.block_unbuildable();
            self.start_ready();
            let Some(joined) = self.running.join_next_with_id().await else {
                break;
            };
            match joined {
                Ok((id, done)) => {
                    self.tasks.remove(&id);
                    self.on_done(done);
                }
                Err(e) => {
                    let Some(i) = self.tasks.remove(&e.id()) else {
                        continue;
                    };
                    if e.is_cancelled() {
                        // Stopped: it ends now, said like any other end.
                        let why = self.stop.as_ref().map(Stop::reason).unwrap_or_default();
                        self.end_unstarted(i, TargetStatus::Blocked, why);
                    } else {
                        let why = format!("a target task failed: {e}");
                        self.end_unstarted(i, TargetStatus::Failed, why.clone());
                        self.stop_on(EngineError::Build(why));
                    }
                }
            }
        }
    }

    /// Stops starting targets and cancels the running ones; `Stop::Fatal`
    /// outranks `--fail-fast`.
    fn stop_with(&mut self, stop: Stop) {
        if self.stop.as_ref().is_none_or(|s| *s < stop) {
            self.stop = Some(stop);
        }
        self.running.abort_all();
    }

    /// A fatal error mid-run: the run stops, keeping what finished.
    fn stop_on(&mut self, e: EngineError) {
        let why = e.to_string();
        if self.stop_error.is_none() {
            self.stop_error = Some(e);
        }
        self.stop_with(Stop::Fatal(why));
    }

    /// Ends target `i` without a build: blocked or failed, with `why`,
    /// said as a finished event.
    fn end_unstarted(&mut self, i: usize, status: TargetStatus, why: String) {
        let s = &self.sh.specs[i];
        let node = &self.sh.nodes[0];
        self.sh.reporter.event(&Event::TargetFinished {
            target: s.name.clone(),
            status: status.as_str().into(),
            duration_s: 0.0,
            image: None,
            reason: Some(why.clone()),
        });
        let mut r = TargetResult::unstarted(s, &node.name, node.driver.kind(s, false), status, why);
        if let Some(a) = self.lost.remove(&i) {
            r.attempts = a;
        }
        self.results[i] = Some(r);
        self.started[i] = true;
    }

    /// Blocks targets whose dependencies did not build, and every target
    /// not started once the run stops.
    fn block_unbuildable(&mut self) {
        for i in 0..self.sh.specs.len() {
            if self.started[i] || self.results[i].is_some() {
                continue;
            }
            let bad = self.sh.specs[i].deps.iter().find(|d| {
                self.index
                    .get(*d)
                    .and_then(|&j| self.results[j].as_ref())
                    .is_some_and(|r| !r.status.ok())
            });
            let why = match (bad, &self.stop) {
                (Some(d), _) => format!("dependency {d} did not build"),
                (None, Some(stop)) => stop.reason(),
                (None, None) => continue,
            };
            self.end_unstarted(i, TargetStatus::Blocked, why);
        }
    }

    /// Starts every ready target (its dependencies built or skipped) on the
    /// node placement chooses.
    fn start_ready(&mut self) {
        for i in 0..self.sh.specs.len() {
            if self.stop.is_some() || self.running.len() >= MAX_TASKS {
                break;
            }
            let s = &self.sh.specs[i];
            let ready = s.deps.iter().all(|d| match self.index.get(d) {
                Some(&j) => self.results[j].as_ref().is_some_and(|r| r.status.ok()),
                None => true,
            });
            if self.started[i] || !ready {
                continue;
            }
            match nodes::choose(
                &self.sh.nodes,
                &self.placement,
                &self.eligible,
                &s.name,
                &self.queued,
            ) {
                Some(k) => self.start(i, k),
                None => self.no_node_for(i),
            }
        }
    }

    /// No live node may build target `i`: it fails, its dependents are
    /// blocked, independent targets go on.
    fn no_node_for(&mut self, i: usize) {
        let s = &self.sh.specs[i];
        let alive: Vec<&str> = self
            .sh
            .nodes
            .iter()
            .filter(|n| n.alive())
            .map(|n| n.name.as_str())
            .collect();
        let msg = format!(
            "no eligible node remains for {} (it may run on: {}; alive: {})",
            s.name,
            self.eligible
                .get(&s.name)
                .map(|v| v.join(", "))
                .unwrap_or_else(|| "any".into()),
            alive.join(", ")
        );
        self.end_unstarted(i, TargetStatus::Failed, msg);
        if self.sh.opts.fail_fast {
            self.stop_with(Stop::FailFast);
        }
    }

    /// Starts target `i` on node `k` as a task of its own.
    fn start(&mut self, i: usize, k: usize) {
        let s = &self.sh.specs[i];
        self.started[i] = true;
        self.queued[k] += 1;
        let hand_over = context_refs(s, &self.sh.specs, &refs_on(&self.produced, k));
        let rebuilt: Vec<String> = s
            .deps
            .iter()
            .filter(|d| {
                self.index
                    .get(*d)
                    .and_then(|&j| self.results[j].as_ref())
                    .is_some_and(|r| r.status == TargetStatus::Built)
            })
            .cloned()
            .collect();
        let outputs = self.outputs.clone();
        let shared = self.sh.clone();
        let run_t0 = self.t0;
        let handle = self.running.spawn(async move {
            let t0 = Instant::now();
            let (outcome, keyed, held) =
                target::process(&shared, k, i, &outputs, &hand_over, &rebuilt).await;
            // One measured time per target, used everywhere (summary,
            // live lines, report bar, learned costs): a build's from when it
            // took its slot (it may have waited for one, or for another
            // run's claim), a skip's from when its task started.
            let began = held.slot_taken.unwrap_or(t0);
            let ended = Instant::now();
            Done {
                handed: hand_over.clone(),
                node: k,
                index: i,
                outcome,
                keyed,
                jobs: held.jobs,
                slot: held.slot,
                changes: held.changes,
                duration_s: ended.saturating_duration_since(began).as_secs_f64(),
                start_s: began.saturating_duration_since(run_t0).as_secs_f64(),
                end_s: ended.saturating_duration_since(run_t0).as_secs_f64(),
            }
        });
        self.tasks.insert(handle.id(), i);
    }

    /// A target task came back.
    fn on_done(&mut self, done: Done) {
        let k = done.node;
        self.queued[k] = self.queued[k].saturating_sub(1);
        if let Err(EngineError::Unreachable { detail, .. }) = &done.outcome
            && self.sh.fleet
        {
            let detail = detail.clone();
            self.node_lost(done, &detail);
            return;
        }
        let r = self.result_of(done);
        if r.status == TargetStatus::Failed && self.sh.opts.fail_fast {
            self.stop_with(Stop::FailFast);
        }
        let i = self.index[&r.name];
        // One name per image: the tag the user asked for; kiln's own
        // reference only where it is the only name.
        let shown = r
            .image
            .as_ref()
            .map(|own| self.sh.specs[i].tags.first().unwrap_or(own).clone());
        self.sh.reporter.event(&Event::TargetFinished {
            target: r.name.clone(),
            status: r.status.as_str().into(),
            duration_s: r.duration_s,
            image: shown,
            reason: r.reason.clone().or_else(|| r.error.clone()),
        });
        self.results[i] = Some(r);
    }

    /// A fleet node stopped answering: it loses only this target, which
    /// goes back to the queue for another node; finished work is kept. With
    /// no node left the run stops.
    fn node_lost(&mut self, done: Done, detail: &str) {
        let (i, k) = (done.index, done.node);
        let node = &self.sh.nodes[k];
        let name = self.sh.specs[i].name.clone();
        node.lose();
        self.lost.entry(i).or_default().push(Attempt {
            node: node.name.clone(),
            slot: done.slot,
            start_s: ms(done.start_s),
            end_s: ms(done.end_s),
            outcome: "lost".into(),
            error: None,
        });
        let left: Vec<&str> = self
            .sh
            .nodes
            .iter()
            .filter(|n| n.alive())
            .map(|n| n.name.as_str())
            .collect();
        if left.is_empty() {
            let e = EngineError::Unreachable {
                endpoint: node.driver.describe(),
                detail: format!(
                    "node {} stopped answering ({detail}) and no other node of the fleet is left for {name}",
                    node.name
                ),
            };
            self.end_unstarted(i, TargetStatus::Failed, e.to_string());
            self.stop_on(e);
            return;
        }
        self.sh.reporter.event(&Event::Warning {
            target: name.clone(),
            message: format!(
                "node {} stopped answering ({detail}); {name} goes to another node ({})",
                node.name,
                left.join(", ")
            ),
        });
        self.started[i] = false;
    }

    /// A finished target's result: the one conversion from what its task
    /// found to the summary's contract; built and skipped images become
    /// their dependents' inputs.
    fn result_of(&mut self, done: Done) -> TargetResult {
        let i = done.index;
        let k = done.node;
        let s = &self.sh.specs[i];
        let duration_s = ms(done.duration_s);
        let key = done.keyed.as_ref().and_then(|k| k.key.clone());
        let hashed = done.keyed.as_ref().map(|k| k.stats);
        let jobs_secret = done.keyed.as_ref().is_some_and(|k| k.jobs_secret);
        let mut r = TargetResult {
            name: s.name.clone(),
            status: TargetStatus::Failed,
            node: self.sh.nodes[k].name.clone(),
            image: None,
            digest: None,
            key,
            duration_s,
            steps: StepCounts::default(),
            driver: self.sh.nodes[k].driver.kind(s, jobs_secret).into(),
            cache: Vec::new(),
            log: log_path(&self.sh.opts, &s.name)
                .filter(|p| p.is_file())
                .map(|p| p.display().to_string()),
            reason: None,
            error: None,
            failed_step: None,
            failed_at: None,
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
            attempts: self.lost.remove(&i).unwrap_or_default(),
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
                        node: self.sh.nodes[k].name.clone(),
                        slot: done.slot,
                        start_s: ms(t.start.saturating_duration_since(self.t0).as_secs_f64()),
                        end_s: ms(t.end.saturating_duration_since(self.t0).as_secs_f64()),
                        outcome: "transient".into(),
                        error: Some(t.message.clone()),
                    });
                }
                let remote = pushed.first().map(|(r, d)| by_digest(r, d));
                let image = self.produce(i, k, built.image_id.clone(), remote);
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
                    s.push_repository().map(|r| by_digest(&r, d))
                });
                let image = self.produce(i, k, image_id, remote);
                r.status = TargetStatus::Skipped;
                r.image = Some(image);
                r.digest = pushed.first().map(|(_, d)| d.clone()).or(digest);
                r.reason = Some(reason);
                r.pushed = pushed_refs(pushed);
            }
            Ok(Outcome::Failed(f)) => {
                r.build_name = build_name;
                r.error = Some(f.message);
                r.failed_at = f
                    .step
                    .as_deref()
                    .and_then(|st| crate::inputs::step_location(s, st));
                r.failed_step = f.step;
                r.log_tail = f.log_tail;
                r.steps = f.steps;
                r.cache = f.cache;
            }
            // The run cannot go on without its engine, its store or a tool:
            // it stops, keeping what finished.
            Err(
                e
                @ (EngineError::Unreachable { .. } | EngineError::Store(_) | EngineError::Tool(_)),
            ) => {
                r.error = Some(e.to_string());
                self.stop_on(e);
            }
            Err(e) => r.error = Some(e.to_string()),
        }
        r
    }

    /// Target `i` came out as `image_id` on node `k` (and in the registry
    /// as `remote`, when pushed): its dependents' input, handed over by the
    /// reference returned.
    fn produce(&mut self, i: usize, k: usize, image_id: String, remote: Option<String>) -> String {
        let s = &self.sh.specs[i];
        let local = node_ref(&self.sh.nodes[k], s, &image_id, &remote);
        self.outputs.insert(s.name.clone(), image_id);
        self.produced.insert(
            s.name.clone(),
            Produced {
                node: k,
                local: local.clone(),
                remote,
            },
        );
        local
    }

    /// The summary: every target's result (one not finished is blocked by
    /// the reason the run stopped), the nodes, and why the run stopped.
    fn finish(self) -> RunSummary {
        let why = self
            .stop
            .as_ref()
            .map(Stop::reason)
            .unwrap_or_else(|| "stopped by --fail-fast".into());
        let mut lost = self.lost;
        let sh = &self.sh;
        let targets = sh
            .specs
            .iter()
            .zip(self.results)
            .enumerate()
            .map(|(i, (s, r))| {
                let node = &sh.nodes[0];
                let mut r = r.unwrap_or_else(|| {
                    TargetResult::unstarted(
                        s,
                        &node.name,
                        node.driver.kind(s, false),
                        TargetStatus::Blocked,
                        why.clone(),
                    )
                });
                if let Some(a) = lost.remove(&i) {
                    r.attempts = a;
                }
                r
            })
            .collect();
        let stopped = match &self.stop {
            Some(Stop::Fatal(why)) => Some(why.clone()),
            _ => None,
        };
        RunSummary {
            run_id: sh.opts.run_id.clone(),
            stamps: BTreeMap::new(),
            started_at: self.started_at,
            wall_s: ms(self.t0.elapsed().as_secs_f64()),
            nodes: sh
                .nodes
                .iter()
                .map(|n| NodeUse {
                    name: n.name.clone(),
                    slots: n.capacity,
                    lost: !n.alive(),
                })
                .collect(),
            targets,
            stopped,
            stop_error: self.stop_error.map(Arc::new),
        }
    }
}
