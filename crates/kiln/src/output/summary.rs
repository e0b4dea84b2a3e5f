//! The run summary as text on stdout (`kiln build --format text`): one row
//! per target, the compiler cache's counters, the totals; and what a
//! failure shows on stderr.
//!
//! Must never: decide anything about the run; it only shows the summary.

use std::collections::{BTreeSet, HashMap};

use kiln_engine::{RunSummary, TargetResult, TargetStatus};
use kiln_util::wall;

/// `image (reason)`, or whichever of the two there is.
pub fn image_and_reason(image: Option<&str>, reason: Option<&str>) -> String {
    match (image, reason) {
        (Some(i), Some(r)) => format!("{i} ({r})"),
        (Some(x), None) | (None, Some(x)) => x.to_string(),
        (None, None) => String::new(),
    }
}

/// What the summary shows as a target's image: the first tag the bake
/// file asked for (`+N` more), or the reference kiln made when it asked
/// for none.
fn shown_image(r: &TargetResult, tags: Option<&Vec<String>>) -> Option<String> {
    if !r.status.ok() {
        return None;
    }
    match tags.map(Vec::as_slice) {
        Some([one]) => Some(one.clone()),
        Some([first, rest @ ..]) => Some(format!("{first} (+{} more)", rest.len())),
        _ => r.image.clone(),
    }
}

/// The summary's last line: how many targets did what, and where the
/// images are.
fn totals(summary: &RunSummary, several_nodes: bool) -> String {
    let count = |st: TargetStatus| summary.targets.iter().filter(|t| t.status == st).count();
    let cutoff = summary
        .targets
        .iter()
        .filter(|t| {
            t.status == TargetStatus::Skipped
                && t.reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("early cutoff"))
        })
        .count();
    let mut line = format!(
        "{} target(s): {} built, {} skipped",
        summary.targets.len(),
        count(TargetStatus::Built),
        count(TargetStatus::Skipped)
    );
    if cutoff > 0 {
        line.push_str(&format!(" ({cutoff} by early cutoff)"));
    }
    let failed = count(TargetStatus::Failed);
    let blocked = count(TargetStatus::Blocked);
    if failed + blocked > 0 {
        line.push_str(&format!(", {failed} failed, {blocked} blocked"));
    }
    let node = summary
        .targets
        .first()
        .map(|t| t.node.as_str())
        .unwrap_or("");
    let pushed = summary.targets.iter().any(|t| !t.pushed.is_empty());
    if several_nodes {
        line.push_str("; images on the nodes in the NODE column, pushed ones in the registry");
    } else if !node.is_empty() {
        line.push_str(&format!("; images on {node}"));
        if !pushed {
            line.push_str(", none pushed");
        }
    }
    line.push_str(&format!("; run {}", summary.run_id));
    line.push('\n');
    line
}

/// The summary as a table: a row per target (the node column only when
/// more than one node worked), the compiler cache's counters, the totals,
/// and why the run stopped when it did.
pub fn text(
    summary: &RunSummary,
    tags: &HashMap<String, Vec<String>>,
    page: Option<&std::path::Path>,
) -> String {
    let w = summary
        .targets
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let nodes: BTreeSet<&str> = summary.targets.iter().map(|t| t.node.as_str()).collect();
    let nw = if nodes.len() > 1 {
        nodes.iter().map(|n| n.len()).max().unwrap_or(4).max(4) + 2
    } else {
        0
    };
    let node_col = |n: &str| {
        if nw == 0 {
            String::new()
        } else {
            format!("{n:<w$}", w = nw)
        }
    };
    let mut t = format!(
        "{:<w$}  {:<7}  {}{:>7}  {:>6}  IMAGE / REASON\n",
        "TARGET",
        "STATUS",
        node_col("NODE"),
        "TIME",
        "CACHED"
    );
    for r in &summary.targets {
        let cached = if r.status == TargetStatus::Built || r.steps.total > 0 {
            format!("{}/{}", r.steps.cached, r.steps.total)
        } else {
            "-".into()
        };
        t.push_str(&format!(
            "{:<w$}  {:<7}  {}{:>6.1}s  {:>6}  {}\n",
            r.name,
            r.status.as_str(),
            node_col(&r.node),
            r.duration_s,
            cached,
            image_and_reason(
                shown_image(r, tags.get(&r.name)).as_deref(),
                r.reason
                    .as_deref()
                    .or_else(|| r.error.as_deref().and_then(|e| e.lines().next()))
            )
        ));
    }
    for r in &summary.targets {
        if let Some(c) = &r.compiler_cache {
            t.push_str(&format!(
                "compiler cache: {}: {} hit(s), {} miss(es) of {} compile request(s){}\n",
                r.name,
                c.hits,
                c.misses,
                c.requests,
                if c.errors > 0 {
                    format!(", {} error(s)", c.errors)
                } else {
                    String::new()
                }
            ));
        }
    }
    t.push_str(&totals(summary, nw > 0));
    if let Some(why) = &summary.stopped {
        t.push_str(&format!("the run stopped: {why}\n"));
    }
    t.push_str(&format!("took {}", wall(summary.wall_s)));
    if let Some(p) = page {
        t.push_str(&format!("; report: {}", p.display()));
    }
    t.push('\n');
    t
}

/// Each failed target's error, failing step and the tail of its log, on
/// stderr.
pub fn failures(summary: &RunSummary) {
    for t in summary
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::Failed)
    {
        eprintln!(
            "error: target {} failed: {}",
            t.name,
            t.error.clone().unwrap_or_default()
        );
        match (&t.failed_step, &t.failed_at) {
            (Some(step), Some(at)) => eprintln!("  step: {step}\n    at: {at}"),
            (Some(step), None) => eprintln!("  step: {step}"),
            _ => {}
        }
        for l in &t.log_tail {
            eprintln!("  | {l}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_ends_with_the_wall_time_and_the_page() {
        let summary = RunSummary {
            run_id: "r1".into(),
            stamps: Default::default(),
            started_at: "2026-12-04T10:00:00Z".into(),
            wall_s: 0.42,
            nodes: Vec::new(),
            targets: Vec::new(),
            stopped: None,
            stop_error: None,
        };
        let page = std::path::Path::new(".kiln/runs/r1.html");
        let text = text(&summary, &HashMap::new(), Some(page));
        assert_eq!(
            text.lines().last(),
            Some("took 0.42s; report: .kiln/runs/r1.html"),
            "{text}"
        );
        let text = super::text(&summary, &HashMap::new(), None);
        assert_eq!(text.lines().last(), Some("took 0.42s"), "{text}");
    }
}
