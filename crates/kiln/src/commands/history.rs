//! `kiln history [TARGET] [--format text|json] [--limit N]`: the runs in
//! the build history (`.kiln/history.sqlite`) — when, what each built,
//! skipped or failed, durations per target over time — and the learned
//! cost the next schedule will use, with how far the last predictions were
//! off (docs/report.md).
//!
//! Must never: record a run or start a history (a project without one is
//! told to build first), or ask the engine or a registry.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::cli::Format;
use crate::error::CliError;
use crate::report::text::duration;
use kiln_store::history::{History, RunEntry};

pub struct HistorySettings {
    pub history: PathBuf,
    pub target: Option<String>,
    pub format: Format,
    pub limit: usize,
}

/// The `kiln history --format json` contract.
#[derive(Debug, Serialize)]
struct HistoryOut {
    runs: Vec<RunOut>,
    /// Per target: the cost the next schedule uses and the prediction error.
    targets: Vec<TargetOut>,
}

#[derive(Debug, Serialize)]
struct RunOut {
    id: String,
    project: String,
    started_at: String,
    wall_s: f64,
    failed: bool,
    counts: BTreeMap<String, usize>,
    targets: Vec<RunTargetOut>,
}

#[derive(Debug, Serialize)]
struct RunTargetOut {
    target: String,
    outcome: String,
    node: Option<String>,
    duration_s: f64,
    expected_s: Option<f64>,
}

#[derive(Debug, Serialize)]
struct TargetOut {
    target: String,
    /// The learned cost (median work on a speed-1.0 node), if any.
    learned_work_s: Option<f64>,
    samples: usize,
    /// The last builds: actual against expected, newest first.
    last_builds: Vec<Prediction>,
    /// Mean of |actual − expected| / expected over those builds.
    mean_error: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Prediction {
    run: String,
    duration_s: f64,
    expected_s: f64,
    /// (actual − expected) / expected.
    error: f64,
}

pub fn run(s: HistorySettings, out: &mut dyn Write) -> Result<(), CliError> {
    if !s.history.exists() {
        return Err(
            CliError::usage(format!("no build history at {}", s.history.display()))
                .with_hint("run `kiln build` in this project first: every run is recorded there"),
        );
    }
    let h = History::open(&s.history).map_err(|e| CliError::usage(e.to_string()))?;
    let runs = h
        .runs(s.target.as_deref(), s.limit)
        .map_err(|e| CliError::usage(e.to_string()))?;
    if let Some(t) = &s.target
        && runs.is_empty()
    {
        return Err(CliError::usage(format!(
            "target {t} is in no recorded run of {}",
            s.history.display()
        ))
        .with_hint("`kiln history` without a target lists the runs and their targets"));
    }
    let learned = h.costs(1).map_err(|e| CliError::usage(e.to_string()))?;
    let report = HistoryOut {
        targets: targets(&runs, &learned, s.target.as_deref()),
        runs: runs.iter().map(run_out).collect(),
    };
    let text = match s.format {
        Format::Json => {
            let mut t =
                serde_json::to_string_pretty(&report).map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => render(&report, s.target.is_some()),
    };
    crate::output::write(out, &text)
}

fn run_out(r: &RunEntry) -> RunOut {
    let mut counts = BTreeMap::new();
    for t in &r.targets {
        *counts.entry(t.outcome.clone()).or_insert(0) += 1;
    }
    RunOut {
        id: r.id.clone(),
        project: r.project.clone(),
        started_at: r.started_at.clone(),
        wall_s: r.wall_s,
        failed: r.failed,
        counts,
        targets: r
            .targets
            .iter()
            .map(|t| RunTargetOut {
                target: t.target.clone(),
                outcome: t.outcome.clone(),
                node: t.node.clone(),
                duration_s: t.duration_s,
                expected_s: t.expected_s,
            })
            .collect(),
    }
}

/// How many recent builds a prediction error is the mean of.
const LAST: usize = 5;

fn targets(
    runs: &[RunEntry],
    learned: &BTreeMap<String, kiln_store::history::LearnedCost>,
    only: Option<&str>,
) -> Vec<TargetOut> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for t in &r.targets {
            if !names.contains(&t.target) && only.is_none_or(|o| o == t.target) {
                names.push(t.target.clone());
            }
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let last_builds: Vec<Prediction> = runs
                .iter()
                .filter_map(|r| {
                    let t = r
                        .targets
                        .iter()
                        .find(|t| t.target == name && t.outcome == "built")?;
                    let expected_s = t.expected_s.filter(|e| *e > 0.0)?;
                    Some(Prediction {
                        run: r.id.clone(),
                        duration_s: t.duration_s,
                        expected_s,
                        error: (t.duration_s - expected_s) / expected_s,
                    })
                })
                .take(LAST)
                .collect();
            let mean_error = (!last_builds.is_empty()).then(|| {
                last_builds.iter().map(|p| p.error.abs()).sum::<f64>() / last_builds.len() as f64
            });
            let l = learned.get(&name);
            TargetOut {
                learned_work_s: l.map(|l| l.work_s),
                samples: l.map(|l| l.samples).unwrap_or(0),
                target: name,
                last_builds,
                mean_error,
            }
        })
        .collect()
}

fn render(h: &HistoryOut, one_target: bool) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let idw = h.runs.iter().map(|r| r.id.len()).max().unwrap_or(3).max(3);
    let _ = writeln!(
        o,
        "{:<idw$}  {:<20}  {:>8}  {:>5}  {:>7}  {:>6}  {:>6}  {:>7}  {:>6}",
        "RUN", "STARTED", "WALL", "BUILT", "SKIPPED", "CUTOFF", "PULLED", "FAILED", "BLOCKED"
    );
    for r in &h.runs {
        let c = |k: &str| r.counts.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            o,
            "{:<idw$}  {:<20}  {:>8}  {:>5}  {:>7}  {:>6}  {:>6}  {:>7}  {:>6}",
            r.id,
            r.started_at,
            kiln_util::wall(r.wall_s),
            c("built"),
            c("skipped"),
            c("cutoff"),
            c("pulled"),
            c("failed"),
            c("blocked")
        );
        if one_target {
            for t in &r.targets {
                let _ = writeln!(
                    o,
                    "{:<idw$}    {} {} on {}: {} (expected {})",
                    "",
                    t.target,
                    t.outcome,
                    t.node.as_deref().unwrap_or("-"),
                    duration(t.duration_s),
                    t.expected_s.map(duration).unwrap_or_else(|| "-".into())
                );
            }
        }
    }
    let tw = h
        .targets
        .iter()
        .map(|t| t.target.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        o,
        "\n{:<tw$}  {:>12}  {:>7}  {:>10}  LAST BUILDS (actual / expected)",
        "TARGET", "LEARNED COST", "SAMPLES", "MEAN ERROR"
    );
    for t in &h.targets {
        let builds: Vec<String> = t
            .last_builds
            .iter()
            .map(|p| format!("{} / {}", duration(p.duration_s), duration(p.expected_s)))
            .collect();
        let _ = writeln!(
            o,
            "{:<tw$}  {:>12}  {:>7}  {:>10}  {}",
            t.target,
            t.learned_work_s.map(duration).unwrap_or_else(|| "-".into()),
            t.samples,
            t.mean_error
                .map(|e| format!("{:.0}%", e * 100.0))
                .unwrap_or_else(|| "-".into()),
            if builds.is_empty() {
                "-".to_string()
            } else {
                builds.join(", ")
            }
        );
    }
    o
}
