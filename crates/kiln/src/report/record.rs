//! Recording a finished run: its report (`.kiln/runs/<run-id>.json`) and
//! its row in the build history.
//!
//! Must never: fail the command; what cannot be recorded is a warning.

use kiln_engine::TargetStatus;

/// What recording a finished build needs besides its summary.
pub struct Recording<'a> {
    /// The history database (`.kiln/history.sqlite`); the runs directory
    /// is beside it.
    pub history: &'a std::path::Path,
    /// Whether the run was spread over a fleet.
    pub fleet: bool,
    pub project: &'a str,
    pub specs: &'a [kiln_engine::BuildSpec],
    /// The plan the report compares the run with.
    pub planned: &'a crate::report::Planned,
    pub tags: &'a std::collections::HashMap<String, Vec<String>>,
    /// Each node's relative speed (1.0 when unknown).
    pub speeds: &'a std::collections::HashMap<String, f64>,
    /// Each built target's pushed size in MB, when known.
    pub sizes: &'a std::collections::BTreeMap<String, f64>,
}

/// A run as recorded: the id it was recorded under and, when its report
/// was written, the report and where.
pub struct Recorded {
    pub id: String,
    pub report: Option<(std::path::PathBuf, crate::report::RunReport)>,
}

/// Records a finished build: the run (report and history row, see
/// [`record_run`]) and what each target cost, normalised by its node's
/// speed, for learned costs.
pub fn record_build(r: &Recording<'_>, summary: &kiln_engine::RunSummary) -> Recorded {
    let recorded = record_run(
        r.history, r.fleet, r.project, summary, r.specs, r.planned, r.tags, r.speeds, r.sizes,
    );
    crate::costs::record(
        r.history,
        summary,
        |node| r.speeds.get(node).copied().unwrap_or(1.0),
        |target| r.sizes.get(target).copied(),
    );
    recorded
}

/// Records the run: its report (`.kiln/runs/<run-id>.json`, what `kiln
/// report` renders) and its row in the build history (`kiln history`), and
/// returns it as recorded, under its id (`<run-id>.2`, ... when the id was
/// already recorded: the earlier run is kept). Failures are warnings: the
/// images are built either way.
#[expect(
    clippy::too_many_arguments,
    reason = "one caller (kiln build), each argument distinct"
)]
fn record_run(
    history: &std::path::Path,
    fleet: bool,
    project: &str,
    summary: &kiln_engine::RunSummary,
    specs: &[kiln_engine::BuildSpec],
    planned: &crate::report::Planned,
    tags: &std::collections::HashMap<String, Vec<String>>,
    speeds: &std::collections::HashMap<String, f64>,
    sizes: &std::collections::BTreeMap<String, f64>,
) -> Recorded {
    let deps: std::collections::HashMap<String, Vec<String>> = specs
        .iter()
        .map(|sp| (sp.name.clone(), sp.deps.clone()))
        .collect();
    // Time saved counts learned costs only: a default guess is not a saving.
    let costs: std::collections::HashMap<String, f64> = crate::costs::learned(history)
        .into_iter()
        .map(|(t, c)| (t, c.work_s))
        .collect();
    let last_built = last_builds(history);
    let driver = if fleet {
        format!("fleet of {}", summary.nodes.len())
    } else {
        summary
            .targets
            .iter()
            .find(|t| t.status != TargetStatus::Blocked)
            .map(|t| t.driver.clone())
            .unwrap_or_else(|| "engine".into())
    };
    let cx = crate::report::Context {
        project: project.to_string(),
        driver,
        planned,
        deps: &deps,
        tags,
        costs: &costs,
        last_built: &last_built,
        speeds,
        sizes,
    };
    let mut report = crate::report::build(summary, &cx);
    let kiln_dir = history
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| std::path::PathBuf::from(".kiln"));
    let saved = match crate::report::save(&kiln_dir, &mut report) {
        Ok(path) => {
            if report.run.id != summary.run_id {
                eprintln!(
                    "note: run id {} is already recorded, so this run is recorded as {} ({}); the earlier run is kept",
                    summary.run_id,
                    report.run.id,
                    path.display()
                );
            }
            Some(path)
        }
        Err(e) => {
            eprintln!(
                "warning: could not record the run in {}: {e}",
                crate::report::runs_dir(&kiln_dir).display()
            );
            None
        }
    };
    let entry = kiln_store::history::RunEntry {
        id: report.run.id.clone(),
        project: report.run.project.clone(),
        started_at: report.run.started_at.clone(),
        wall_s: report.run.wall_s,
        failed: report.run.failed,
        targets: report
            .targets
            .iter()
            .map(|t| kiln_store::history::RunTarget {
                target: t.name.clone(),
                outcome: t.outcome.clone(),
                node: t.node.clone(),
                duration_s: t.duration_s,
                expected_s: t.expected_s,
            })
            .collect(),
    };
    let r = kiln_store::history::History::shared(history).and_then(|h| h.record_run(&entry));
    if let Err(e) = r {
        eprintln!("warning: could not record the run in the build history: {e}");
    }
    Recorded {
        id: report.run.id.clone(),
        report: saved.map(|path| (path, report)),
    }
}

/// What each target's last recorded build took (its `duration_s` in the
/// newest run of the history that built it, among the runs a project
/// keeps): the most skipping it can save. Empty without a history. Read
/// once per process and history (a build reads it ahead, beside its
/// preflight: `crate::costs::read_ahead`), before the run is recorded.
pub fn last_builds(history: &std::path::Path) -> std::collections::HashMap<String, f64> {
    static READ: kiln_util::Memo<std::path::PathBuf, std::collections::HashMap<String, f64>> =
        kiln_util::Memo::new();
    READ.get_or_insert_with(history, || {
        if !history.exists() {
            return std::collections::HashMap::new();
        }
        kiln_store::history::History::shared(history)
            .and_then(|h| h.last_built(crate::report::KEEP))
            .map(|m| m.into_iter().collect())
            .unwrap_or_default()
    })
}
