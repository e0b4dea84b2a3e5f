//! The run report: what `kiln build` records about a run
//! (`.kiln/runs/<run-id>.json`, format `kiln-run-report-v1`), and its
//! renderings — one self-contained HTML page (`html.rs`, the page in
//! `template.html`), text, JSON, a Markdown job summary (`markdown.rs`)
//! and JUnit XML (`junit.rs`) (`kiln report`; docs/report.md).
//!
//! Everything here is built from what the run recorded: the run summary
//! (per-target outcome, node, slot, start and end), the schedule kiln
//! planned, learned costs, the build logs (`kiln diagnose`'s verdict per
//! target). The engine and the planner know nothing of it.
//!
//! Must never: read anything but recorded data when rendering, or let a
//! string from the run close the page's script element.

pub mod html;
pub mod junit;
pub mod markdown;
pub mod record;
pub mod text;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The format tag of a recorded run.
pub const FORMAT: &str = "kiln-run-report-v1";

/// Where recorded runs live, under the project's `.kiln/`.
pub const RUNS_DIR: &str = "runs";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunReport {
    pub format: String,
    pub run: RunInfo,
    pub nodes: Vec<NodeInfo>,
    /// In build order (dependencies first).
    pub targets: Vec<TargetInfo>,
    pub totals: Totals,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub id: String,
    pub project: String,
    pub started_at: String,
    pub finished_at: String,
    /// First start to last end, seconds.
    pub wall_s: f64,
    pub planned_makespan_s: Option<f64>,
    pub lower_bound_s: Option<f64>,
    /// Targets the plan gave the default cost (no history yet).
    #[serde(default)]
    pub planned_guessed: usize,
    pub failed: bool,
    pub driver: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub slots: usize,
    pub speed: f64,
    pub lost: bool,
    /// Where the node was reached, when its recorded name was that
    /// address (one engine: the page calls it `engine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PlannedSlot {
    pub node: String,
    pub slot: usize,
    pub start_s: f64,
    pub end_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Steps {
    pub total: u64,
    pub cached: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Stage {
    pub name: String,
    pub total: u64,
    pub cached: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LongStep {
    pub name: String,
    pub duration_s: f64,
    pub cached: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CacheTransfer {
    /// `import` or `export`.
    pub direction: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub outcome: String,
    pub detail: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub code: String,
    pub summary: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Attempt {
    pub node: String,
    pub slot: Option<usize>,
    pub start_s: f64,
    pub end_s: f64,
    /// `lost` (the node stopped answering) or `transient` (the registry or
    /// BuildKit's concurrent pushes failed it; run again).
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TargetInfo {
    pub name: String,
    /// built | skipped | cutoff | pulled | failed | blocked
    pub outcome: String,
    pub node: Option<String>,
    pub slot: Option<usize>,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    pub duration_s: f64,
    /// What the schedule expected the build to take on its node.
    pub expected_s: Option<f64>,
    pub planned: Option<PlannedSlot>,
    pub deps: Vec<String>,
    pub critical: bool,
    pub image: Option<String>,
    pub digest: Option<String>,
    pub tags: Vec<String>,
    pub reason: Option<String>,
    pub why: Vec<String>,
    pub steps: Steps,
    pub stages: Vec<Stage>,
    pub longest_steps: Vec<LongStep>,
    pub cache: Vec<CacheTransfer>,
    pub verdict: Option<Verdict>,
    pub error: Option<String>,
    pub failed_step: Option<String>,
    /// Where the failed step is written: `path/Dockerfile:LINE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<String>,
    pub log_tail: Vec<String>,
    pub attempts: Vec<Attempt>,
    pub pushed_bytes: Option<u64>,
    pub compiler_cache: Option<kiln_store::compiler_cache::Stats>,
    /// How it was built (`docker-cli`, `engine-api`, `buildx`): which
    /// cache verdicts mean something for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// A target that was not built: what its last recorded build took
    /// (its bar, start to end), the most skipping it can have saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_build_s: Option<f64>,
    /// A target that was not built: the time skipping it saved (its
    /// learned cost on its node, at most `last_build_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_s: Option<f64>,
    /// A platform unit (`app@linux/arm64`): the target it is a platform
    /// of, listed just before its units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_of: Option<String>,
}

/// The targets with each platform unit moved after the target it is a
/// platform of (a run lists units first: they build before their index),
/// and marked as such, so that a target's platforms are shown under it.
pub fn group_units(targets: Vec<TargetInfo>) -> Vec<TargetInfo> {
    let names: std::collections::HashSet<String> = targets.iter().map(|t| t.name.clone()).collect();
    let of = |t: &TargetInfo| -> Option<String> {
        let (base, _) = t.name.split_once('@')?;
        names.contains(base).then(|| base.to_string())
    };
    let mut units: BTreeMap<String, Vec<TargetInfo>> = BTreeMap::new();
    let mut rest = Vec::with_capacity(targets.len());
    for mut t in targets {
        match of(&t) {
            Some(base) => {
                t.unit_of = Some(base.clone());
                units.entry(base).or_default().push(t);
            }
            None => rest.push(t),
        }
    }
    let mut out = Vec::with_capacity(rest.len());
    for t in rest {
        let mine = units.remove(&t.name).unwrap_or_default();
        out.push(t);
        out.extend(mine);
    }
    out.extend(units.into_values().flatten());
    out
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Totals {
    pub targets: usize,
    pub built: usize,
    pub skipped: usize,
    pub cutoff: usize,
    pub pulled: usize,
    pub failed: usize,
    pub blocked: usize,
    /// The time saved by skipping: the sum of the skipped targets'
    /// `saved_s` (learned costs only, each at most what the target's last
    /// build took).
    pub saved_s: f64,
    pub pushed_bytes: u64,
    pub steps: u64,
    pub steps_cached: u64,
}

/// The schedule kiln planned for the run, per target.
#[derive(Clone, Debug, Default)]
pub struct Planned {
    pub makespan_s: Option<f64>,
    pub lower_bound_s: Option<f64>,
    pub targets: BTreeMap<String, PlannedSlot>,
    /// Expected build seconds on the planned node (none for a target
    /// whose cost is the default guess).
    pub expected_s: BTreeMap<String, f64>,
    /// How many targets were planned with the default cost (no history,
    /// no costs file): the plan's times are that much of a guess.
    pub guessed: usize,
}

/// Planned assignments `(target, node, start, end)` → lanes: on each node,
/// a build takes the lowest slot free at its start (the slots a schedule
/// implies).
pub fn planned_slots(
    assignments: &[(String, String, f64, f64)],
    slots: &HashMap<String, usize>,
) -> BTreeMap<String, PlannedSlot> {
    let mut order: Vec<&(String, String, f64, f64)> = assignments.iter().collect();
    order.sort_by(|a, b| a.2.total_cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
    let mut free_at: HashMap<&str, Vec<f64>> = HashMap::new();
    let mut out = BTreeMap::new();
    for (target, node, start, end) in order {
        let lanes = free_at
            .entry(node.as_str())
            .or_insert_with(|| vec![0.0; slots.get(node).copied().unwrap_or(1).max(1)]);
        // A tiny tolerance: a build that starts as another ends reuses its slot.
        let slot = match lanes.iter().position(|&f| f <= start + 1e-6) {
            Some(s) => s,
            None => {
                lanes.push(0.0);
                lanes.len() - 1
            }
        };
        lanes[slot] = *end;
        out.insert(
            target.clone(),
            PlannedSlot {
                node: node.clone(),
                slot,
                start_s: *start,
                end_s: *end,
            },
        );
    }
    out
}

/// What the report needs beside the run summary.
pub struct Context<'a> {
    pub project: String,
    pub driver: String,
    pub planned: &'a Planned,
    /// Each target's dependencies (names of targets of the run).
    pub deps: &'a HashMap<String, Vec<String>>,
    /// Each target's requested tags.
    pub tags: &'a HashMap<String, Vec<String>>,
    /// Learned work seconds per target (at speed 1.0), for the time saved
    /// by skipping; a target without one saves nothing.
    pub costs: &'a HashMap<String, f64>,
    /// What each target's last recorded build took (start to end), the cap
    /// of what skipping it saves.
    pub last_built: &'a HashMap<String, f64>,
    /// Node speeds (1.0 when unknown).
    pub speeds: &'a HashMap<String, f64>,
    /// Pushed sizes in MB of built targets.
    pub sizes: &'a BTreeMap<String, f64>,
}

/// The outcome a target is drawn with.
pub fn outcome(t: &kiln_engine::TargetResult) -> &'static str {
    use kiln_engine::TargetStatus;
    match t.status {
        TargetStatus::Built => "built",
        TargetStatus::Failed => "failed",
        TargetStatus::Blocked => "blocked",
        TargetStatus::Skipped if t.pulled.is_some() => "pulled",
        TargetStatus::Skipped if !t.cutoff_by.is_empty() => "cutoff",
        TargetStatus::Skipped => "skipped",
    }
}

/// Builds the report of a finished run.
pub fn build(summary: &kiln_engine::RunSummary, cx: &Context<'_>) -> RunReport {
    let mut targets: Vec<TargetInfo> = summary.targets.iter().map(|t| target_info(t, cx)).collect();
    mark_critical(&mut targets);
    let mut totals = Totals {
        targets: targets.len(),
        ..Totals::default()
    };
    for (t, r) in targets.iter().zip(&summary.targets) {
        match t.outcome.as_str() {
            "built" => totals.built += 1,
            "skipped" => totals.skipped += 1,
            "cutoff" => totals.cutoff += 1,
            "pulled" => totals.pulled += 1,
            "failed" => totals.failed += 1,
            _ => totals.blocked += 1,
        }
        if r.status == kiln_engine::TargetStatus::Skipped {
            totals.saved_s += t.saved_s.unwrap_or(0.0);
        }
        totals.pushed_bytes += t.pushed_bytes.unwrap_or(0);
        totals.steps += t.steps.total;
        totals.steps_cached += t.steps.cached;
    }
    totals.saved_s = (totals.saved_s * 10.0).round() / 10.0;
    let targets = group_units(targets);
    let finished_at = add_seconds(&summary.started_at, summary.wall_s);
    let mut report = RunReport {
        format: FORMAT.into(),
        run: RunInfo {
            id: summary.run_id.clone(),
            project: cx.project.clone(),
            started_at: summary.started_at.clone(),
            finished_at,
            wall_s: summary.wall_s,
            planned_makespan_s: cx.planned.makespan_s,
            lower_bound_s: cx.planned.lower_bound_s,
            planned_guessed: cx.planned.guessed,
            failed: summary.failed(),
            driver: cx.driver.clone(),
        },
        nodes: summary
            .nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                slots: n.slots,
                speed: cx.speeds.get(&n.name).copied().unwrap_or(1.0),
                lost: n.lost,
                endpoint: None,
            })
            .collect(),
        targets,
        totals,
    };
    normalize(&mut report);
    report
}

fn target_info(t: &kiln_engine::TargetResult, cx: &Context<'_>) -> TargetInfo {
    let diagnosis = t
        .log
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|bytes| kiln_diagnose::diagnose(&kiln_diagnose::parse(&bytes), None).ok());
    let (stages, longest_steps, mut cache, verdict) = match &diagnosis {
        Some(d) => (
            d.stages
                .iter()
                .map(|s| Stage {
                    name: s.name.clone(),
                    total: s.total,
                    cached: s.cached,
                })
                .collect(),
            d.longest
                .iter()
                .take(5)
                .map(|l| LongStep {
                    name: format!("[{}] {}", l.stage, l.step),
                    duration_s: l.time_s,
                    cached: l.cached,
                })
                .collect(),
            d.imports
                .iter()
                .map(|i| CacheTransfer {
                    direction: "import".into(),
                    reference: Some(i.reference.clone()),
                    outcome: json_word(&i.outcome),
                    detail: i.error.clone(),
                })
                .chain(d.exports.iter().map(|e| CacheTransfer {
                    direction: "export".into(),
                    reference: Some(e.name.clone()),
                    outcome: json_word(&e.outcome),
                    detail: e.error.clone(),
                }))
                .collect::<Vec<_>>(),
            Some(Verdict {
                code: d.verdict.as_str().into(),
                summary: d.why.clone(),
            }),
        ),
        None => (Vec::new(), Vec::new(), Vec::new(), None),
    };
    if cache.is_empty() {
        cache = t
            .cache
            .iter()
            .map(|c| CacheTransfer {
                direction: c.kind.into(),
                reference: c.reference.clone(),
                outcome: c.outcome.into(),
                detail: c.error.clone(),
            })
            .collect();
    }
    let ran = t.slot.is_some() || t.status == kiln_engine::TargetStatus::Failed;
    let speed = cx.speeds.get(&t.node).copied().unwrap_or(1.0);
    let expected_s = cx
        .planned
        .expected_s
        .get(&t.name)
        .copied()
        .or_else(|| cx.costs.get(&t.name).map(|c| c / speed))
        .filter(|_| ran);
    let skipped = t.status == kiln_engine::TargetStatus::Skipped;
    let last_build_s = cx
        .last_built
        .get(&t.name)
        .copied()
        .filter(|s| skipped && s.is_finite() && *s >= 0.0);
    // Learned costs only, on the node that skipped it, and never more than
    // its last build took.
    let saved_s = match (cx.costs.get(&t.name), last_build_s) {
        (Some(c), Some(last)) if c.is_finite() && *c >= 0.0 => {
            Some(round_ms((c / speed).min(last)))
        }
        _ => None,
    };
    TargetInfo {
        name: t.name.clone(),
        outcome: outcome(t).into(),
        node: (t.status != kiln_engine::TargetStatus::Blocked).then(|| t.node.clone()),
        slot: t.slot,
        start_s: t.start_s,
        end_s: t.end_s,
        duration_s: measured(t.slot, t.start_s, t.end_s).unwrap_or(t.duration_s),
        expected_s: expected_s.map(|e| (e * 10.0).round() / 10.0),
        planned: cx.planned.targets.get(&t.name).cloned(),
        deps: cx.deps.get(&t.name).cloned().unwrap_or_default(),
        critical: false,
        image: t.image.clone(),
        digest: t.digest.clone(),
        tags: cx.tags.get(&t.name).cloned().unwrap_or_default(),
        reason: t.reason.clone().or_else(|| {
            ran.then(|| {
                if t.changes.is_empty() {
                    "built".to_string()
                } else {
                    format!("built: {}", t.changes.join("; "))
                }
            })
        }),
        why: t.changes.clone(),
        steps: Steps {
            total: t.steps.total as u64,
            cached: t.steps.cached as u64,
        },
        stages,
        longest_steps,
        cache,
        verdict: verdict.filter(|v| means_something(&v.code, Some(&t.driver))),
        error: t.error.clone(),
        failed_step: t.failed_step.clone(),
        failed_at: t.failed_at.clone(),
        log_tail: t.log_tail.clone(),
        attempts: t
            .attempts
            .iter()
            .map(|a| Attempt {
                node: a.node.clone(),
                slot: a.slot,
                start_s: a.start_s,
                end_s: a.end_s,
                outcome: a.outcome.clone(),
                error: a.error.clone(),
            })
            .collect(),
        pushed_bytes: cx
            .sizes
            .get(&t.name)
            .map(|mb| (mb * 1024.0 * 1024.0).round() as u64),
        compiler_cache: t.compiler_cache,
        driver: (t.status != kiln_engine::TargetStatus::Blocked).then(|| t.driver.clone()),
        last_build_s,
        saved_s,
        unit_of: None,
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// A build's time: from taking its build slot to its end, the one figure
/// its bar, its details, the summary and the history show. `None` for a
/// target that took no slot.
pub fn measured(slot: Option<usize>, start: Option<f64>, end: Option<f64>) -> Option<f64> {
    match (slot, start, end) {
        (Some(_), Some(s), Some(e)) if s.is_finite() && e.is_finite() => {
            Some(round_ms((e - s).max(0.0)))
        }
        _ => None,
    }
}

/// The drivers that build on a Docker engine's own BuildKit: it imports a
/// cache only from a pushing target's tags and exports none to a registry
/// (docs/cache-policy.md), so no import or no export says nothing there.
fn engine_driver(driver: &str) -> bool {
    matches!(driver, "docker-cli" | "engine-api" | "engine" | "local")
}

/// Whether a `kiln diagnose` verdict means something for a build by
/// `driver`: on the engine, `no-cache-import` and `no-cache-export` are the
/// driver's design, not a defect.
pub fn means_something(code: &str, driver: Option<&str>) -> bool {
    !(driver.is_some_and(engine_driver) && matches!(code, "no-cache-import" | "no-cache-export"))
}

/// What a node's lane is called: one engine reached at an address is
/// `engine` (as the live view says); a builder or fleet node keeps its name.
fn looks_like_address(name: &str) -> bool {
    name.contains("://") || name.starts_with('/')
}

/// Makes a run (just built, or recorded by an older kiln) say its numbers
/// one way: lanes named by node (`engine` for one engine recorded under its
/// address), a build's time is its bar (start to end), no verdict that
/// means nothing for the driver that built.
pub fn normalize(r: &mut RunReport) {
    if let [node] = r.nodes.as_mut_slice()
        && looks_like_address(&node.name)
        && !r.run.driver.starts_with("fleet")
    {
        let address = std::mem::replace(&mut node.name, "engine".into());
        let rename = |n: &mut String| {
            if *n == address || looks_like_address(n) {
                *n = "engine".into();
            }
        };
        for t in &mut r.targets {
            if let Some(n) = t.node.as_mut() {
                rename(n);
            }
            if let Some(p) = t.planned.as_mut() {
                rename(&mut p.node);
            }
            for a in &mut t.attempts {
                rename(&mut a.node);
            }
        }
        node.endpoint = Some(address);
    }
    for t in &mut r.targets {
        if let Some(d) = measured(t.slot, t.start_s, t.end_s) {
            t.duration_s = d;
        }
        let driver = t.driver.as_deref().unwrap_or(&r.run.driver);
        if t.verdict
            .as_ref()
            .is_some_and(|v| !means_something(&v.code, Some(driver)))
        {
            t.verdict = None;
        }
    }
}

impl RunReport {
    /// A run that built nothing: every target was skipped, cut off or
    /// pulled (nothing failed either).
    pub fn built_nothing(&self) -> bool {
        self.targets
            .iter()
            .all(|t| matches!(t.outcome.as_str(), "skipped" | "cutoff" | "pulled"))
            && !self.run.failed
    }

    /// Whether the plan and its lower bound are guesses: some target was
    /// planned with the default cost (no learned cost, no costs file), so
    /// their seconds are not on the run's time scale.
    pub fn plan_guessed(&self) -> bool {
        self.run.planned_guessed > 0
    }
}

impl TargetInfo {
    /// The target's image as people and CI tools name it: its first tag
    /// (kiln's own reference when it has none), `@digest` when the digest
    /// is known.
    pub fn image_ref(&self) -> Option<String> {
        let name = self.tags.first().or(self.image.as_ref())?;
        Some(match &self.digest {
            Some(d) if !name.contains('@') => format!("{name}@{d}"),
            _ => name.clone(),
        })
    }
}

/// Log text as it reads on a terminal: ANSI escape sequences (colours,
/// cursor moves) and other control characters removed, tabs and newlines
/// kept.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ parameters... final byte in @..~
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A serde unit variant's JSON spelling (`ok`, `error`, …).
fn json_word<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Marks the run's critical path as it happened: from the target that
/// ended last, back through the dependency that ended last, to one with
/// none. Only targets that took a build slot count (a skip costs no
/// time: the path ends where the work began).
pub fn mark_critical(targets: &mut [TargetInfo]) {
    let index: HashMap<String, usize> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let end = |t: &TargetInfo| t.end_s.unwrap_or(f64::NEG_INFINITY);
    let Some(mut at) = (0..targets.len())
        .filter(|&i| targets[i].end_s.is_some() && targets[i].slot.is_some())
        .max_by(|&a, &b| end(&targets[a]).total_cmp(&end(&targets[b])))
    else {
        return;
    };
    let mut guard = 0;
    loop {
        targets[at].critical = true;
        guard += 1;
        let next = targets[at]
            .deps
            .iter()
            .filter_map(|d| index.get(d).copied())
            .filter(|&j| {
                targets[j].end_s.is_some() && targets[j].slot.is_some() && !targets[j].critical
            })
            .max_by(|&a, &b| end(&targets[a]).total_cmp(&end(&targets[b])));
        match next {
            Some(j) if guard <= targets.len() => at = j,
            _ => break,
        }
    }
}

/// `2026-12-02T19:05:12Z` + seconds, RFC 3339 to the second (the input
/// unchanged when it cannot be read).
fn add_seconds(rfc3339: &str, s: f64) -> String {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(rfc3339, &Rfc3339)
        .ok()
        .and_then(|t| {
            (t + time::Duration::seconds_f64(s.max(0.0).round()))
                .format(&Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| rfc3339.to_string())
}

/// The directory of recorded runs of the project whose `.kiln` directory
/// is `kiln_dir`.
pub fn runs_dir(kiln_dir: &Path) -> PathBuf {
    kiln_dir.join(RUNS_DIR)
}

/// Writes a run's report as `<runs>/<run-id>.json` (atomically: a reader
/// never sees half a file) and points `<runs>/last` at it. A run id that is
/// already recorded (a CI job run again with the same `RUN_ID`, two jobs
/// sharing one) never overwrites the earlier run: this one is recorded as
/// `<run-id>.2` (`.3`, ...), the first name free, taken with a link that
/// fails if the name exists, so two runs saving at once both keep theirs.
/// The report's id is set to the name it was recorded under.
pub fn save(kiln_dir: &Path, report: &mut RunReport) -> std::io::Result<PathBuf> {
    let dir = runs_dir(kiln_dir);
    std::fs::create_dir_all(&dir)?;
    let given = report.run.id.clone();
    let mut n = 1u32;
    let (name, path) = loop {
        if n > 1 {
            report.run.id = format!("{given}.{n}");
        }
        let name = format!("{}.json", safe_name(&report.run.id));
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let text = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, text)?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => break (name, path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => return Err(e),
        }
    };
    let last_tmp = dir.join(format!(".last.tmp-{}", std::process::id()));
    std::fs::write(&last_tmp, format!("{name}\n"))?;
    std::fs::rename(&last_tmp, dir.join("last"))?;
    // Only the newest runs are kept (with their rendered pages). Their
    // names are counted first: the times that order them are read only
    // when there are [`PRUNE_SLACK`] too many, and then the oldest go
    // down to [`KEEP`] at once, so that a project past it does not list
    // and order every run at the end of each.
    let recorded = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".json") && !name.starts_with('.')
        })
        .count();
    if recorded <= KEEP + PRUNE_SLACK {
        return Ok(path);
    }
    let runs = list(kiln_dir);
    for old in runs.iter().take(runs.len().saturating_sub(KEEP)) {
        let stem = safe_name(old);
        let _ = std::fs::remove_file(dir.join(format!("{stem}.json")));
        let _ = std::fs::remove_file(dir.join(format!("{stem}.html")));
    }
    Ok(path)
}

/// How many recorded runs a project keeps (up to [`PRUNE_SLACK`] more
/// between two prunings).
pub const KEEP: usize = 200;

/// How many runs past [`KEEP`] wait for the next pruning.
pub const PRUNE_SLACK: usize = 20;

/// A run id as a file name.
fn safe_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Finds a recorded run: `None` is the last one; otherwise a run id, or
/// a path to a recorded run's JSON file.
pub fn locate(kiln_dir: &Path, run: Option<&str>) -> Result<PathBuf, String> {
    let dir = runs_dir(kiln_dir);
    match run {
        Some(r) if Path::new(r).is_file() => Ok(PathBuf::from(r)),
        Some(r) => {
            let p = dir.join(format!("{}.json", safe_name(r)));
            if p.is_file() {
                Ok(p)
            } else {
                let known = list(kiln_dir);
                Err(format!(
                    "no recorded run {r:?} in {} ({})",
                    dir.display(),
                    if known.is_empty() {
                        "none is recorded".to_string()
                    } else {
                        format!(
                            "recorded: {}",
                            known
                                .iter()
                                .rev()
                                .take(5)
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ))
            }
        }
        None => {
            let last = std::fs::read_to_string(dir.join("last")).map_err(|_| {
                format!(
                    "no run is recorded in {} (kiln build records each run there)",
                    dir.display()
                )
            })?;
            let p = dir.join(last.trim());
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!(
                    "{} names {}, which is gone",
                    dir.join("last").display(),
                    p.display()
                ))
            }
        }
    }
}

/// The run `kiln report` shows by default: the last run that built
/// something (newest first: `last`, then the other recorded runs by file
/// time), with the ids of the later runs that built nothing. When no run
/// built anything, the last run, with none skipped.
pub fn last_that_built(kiln_dir: &Path) -> Result<(PathBuf, Vec<String>), String> {
    let last = locate(kiln_dir, None)?;
    let dir = runs_dir(kiln_dir);
    let candidates = std::iter::once(last.clone()).chain(
        list(kiln_dir)
            .into_iter()
            .rev()
            .map(|id| dir.join(format!("{id}.json")))
            .filter(|p| *p != last),
    );
    let mut noops = Vec::new();
    for p in candidates {
        let Ok(r) = load(&p) else { continue };
        if !r.built_nothing() {
            return Ok((p, noops));
        }
        noops.push(r.run.id);
    }
    Ok((last, Vec::new()))
}

/// The ids of the recorded runs, oldest first (by file time).
pub fn list(kiln_dir: &Path) -> Vec<String> {
    let mut runs: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(runs_dir(kiln_dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".json")?.to_string();
            if id.starts_with('.') {
                return None;
            }
            Some((e.metadata().ok()?.modified().ok()?, id))
        })
        .collect();
    runs.sort();
    runs.into_iter().map(|(_, id)| id).collect()
}

/// Reads a recorded run, checking its format.
pub fn load(path: &Path) -> Result<RunReport, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}:{}:{}: not JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    match v.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(format!(
                "{}: a recorded run of format {other:?}; this kiln reads {FORMAT:?}",
                path.display()
            ));
        }
        None => {
            return Err(format!(
                "{}: not a recorded kiln run (no \"format\")",
                path.display()
            ));
        }
    }
    let mut r: RunReport =
        serde_json::from_value(v).map_err(|e| format!("{}: {e}", path.display()))?;
    normalize(&mut r);
    Ok(r)
}

#[cfg(test)]
mod tests;
