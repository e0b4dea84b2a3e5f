//! The run's JSON contract (`kiln build --format json`): the summary, one
//! result per target, the attempts that did not finish and the nodes the
//! run used; and the one place a target's result is made, whether it
//! finished, never started, or was stopped.
//!
//! Must never: decide anything about a target; it only writes down what
//! the scheduler and a target's task found.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::error::EngineError;
use crate::spec::BuildSpec;
use crate::steps::StepCounts;

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
    /// The target's one measured time: from taking its build slot (a
    /// skip: from its task's start) to its end, `end_s - start_s`; waits
    /// for a slot or another run's claim are not in it.
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
    /// Where the failed step is written: `path/Dockerfile:LINE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<String>,
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
    /// The run's id (`--run-id`, `RUN_ID`, or generated), as the run is
    /// recorded: `<id>.2` (`.3`, ...) when that id was already recorded, so
    /// the earlier run's report is kept.
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
    /// Why the run stopped before every target could finish (the engine
    /// or the record store was lost, or a tool failed): the targets it had
    /// finished are in `targets` as they finished; the rest are `blocked`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The error behind `stopped`, for the caller's exit code.
    #[serde(skip)]
    pub stop_error: Option<Arc<EngineError>>,
}

impl RunSummary {
    /// Whether any target failed or was blocked.
    pub fn failed(&self) -> bool {
        self.targets.iter().any(|t| !t.status.ok())
    }
}

/// Seconds rounded to the millisecond.
pub(crate) fn ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
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

impl TargetResult {
    /// A target that never ran on a node: `status` is `Blocked` (with
    /// `why` as its reason) or `Failed` (with `why` as its error); `node`
    /// and `driver` name where it would have run.
    pub(crate) fn unstarted(
        s: &BuildSpec,
        node: &str,
        driver: &str,
        status: TargetStatus,
        why: String,
    ) -> TargetResult {
        let (reason, error) = match status {
            TargetStatus::Failed => (None, Some(why)),
            _ => (Some(why), None),
        };
        TargetResult {
            name: s.name.clone(),
            status,
            node: node.to_string(),
            image: None,
            digest: None,
            key: None,
            duration_s: 0.0,
            steps: StepCounts::default(),
            driver: driver.to_string(),
            cache: Vec::new(),
            log: None,
            reason,
            error,
            failed_step: None,
            failed_at: None,
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
}
