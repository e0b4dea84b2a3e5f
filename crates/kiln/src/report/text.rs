//! The text rendering of a run report: the same facts as the page, for a
//! terminal — the run and its totals, makespan against plan and bound, one
//! line per lane with its builds in order, a table of targets, cache
//! health, and what failed.
//!
//! Must never: read or write anything but the report it is given: it
//! returns the text, and `kiln report` writes it out.

use std::fmt::Write;

use super::RunReport;

pub use kiln_util::duration;

/// `512 B`, `3.4 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The makespan against plan and lower bound: their seconds only when the
/// plan was made from learned costs; with guessed costs, says so.
pub fn makespan_line(r: &RunReport) -> String {
    let mut m = format!("makespan {}", duration(r.run.wall_s));
    if r.run.planned_makespan_s.is_none() && r.run.lower_bound_s.is_none() {
        return m;
    }
    if r.plan_guessed() {
        let _ = write!(
            m,
            "; no plan to compare: {} of {} targets had no learned cost, so the plan's \
             times and its lower bound are guesses, not compared with the run",
            r.run.planned_guessed, r.totals.targets
        );
        return m;
    }
    if let Some(p) = r.run.planned_makespan_s {
        let _ = write!(m, ", planned {}", duration(p));
    }
    if let Some(lb) = r.run.lower_bound_s.filter(|lb| *lb > 0.0) {
        let _ = write!(
            m,
            ", lower bound {} ({:.2}× the bound{})",
            duration(lb),
            r.run.wall_s / lb,
            if r.run.wall_s < lb {
                ": under it, builds went faster than learned"
            } else {
                ""
            }
        );
    }
    m
}

pub fn render(r: &RunReport) -> String {
    let mut o = String::new();
    let status = if r.run.failed { "FAILED" } else { "ok" };
    let _ = writeln!(
        o,
        "run {} ({}) {} — {} to {}, driver {}",
        r.run.id, r.run.project, status, r.run.started_at, r.run.finished_at, r.run.driver
    );
    let t = &r.totals;
    let _ = writeln!(
        o,
        "targets {}: built {}, skipped {}, cutoff {}, pulled {}, failed {}, blocked {}",
        t.targets, t.built, t.skipped, t.cutoff, t.pulled, t.failed, t.blocked
    );
    let _ = writeln!(
        o,
        "steps cached {}/{}; time saved by skipping {}; pushed {}",
        t.steps_cached,
        t.steps,
        duration(t.saved_s),
        bytes(t.pushed_bytes)
    );
    if r.built_nothing() {
        let _ = writeln!(o, "nothing to do: {} targets up to date", r.targets.len());
        for t in &r.targets {
            let _ = writeln!(
                o,
                "  {:<8}  {}  {}",
                t.outcome,
                t.name,
                t.reason.as_deref().unwrap_or("")
            );
        }
        return o;
    }
    let _ = writeln!(o, "{}", makespan_line(r));

    // Lanes, in the order the page draws them.
    let _ = writeln!(o, "\nlanes (as it ran):");
    for n in &r.nodes {
        for slot in 0..n.slots.max(1) {
            let mut bars: Vec<(f64, String)> = r
                .targets
                .iter()
                .filter(|t| t.node.as_deref() == Some(n.name.as_str()) && t.slot == Some(slot))
                .map(|t| {
                    let s = t.start_s.unwrap_or(0.0);
                    (
                        s,
                        format!(
                            "{} [{} {}–{}]",
                            t.name,
                            t.outcome,
                            duration(s),
                            duration(t.end_s.unwrap_or(s))
                        ),
                    )
                })
                .chain(r.targets.iter().flat_map(|t| {
                    t.attempts
                        .iter()
                        .filter(|a| a.node == n.name && a.slot == Some(slot))
                        .map(|a| {
                            (
                                a.start_s,
                                format!(
                                    "{} [{} {}–{}]",
                                    t.name,
                                    a.outcome,
                                    duration(a.start_s),
                                    duration(a.end_s)
                                ),
                            )
                        })
                }))
                .collect();
            bars.sort_by(|a, b| a.0.total_cmp(&b.0));
            let lost = if n.lost { " (lost)" } else { "" };
            let list: Vec<String> = bars.into_iter().map(|(_, b)| b).collect();
            let _ = writeln!(
                o,
                "  {}/{slot}{lost}: {}",
                n.name,
                if list.is_empty() {
                    "-".to_string()
                } else {
                    list.join(" → ")
                }
            );
        }
    }

    let w = r
        .targets
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        o,
        "\n{:<w$}  {:<8}  {:>9}  {:>9}  {:>7}  {:<16}  REASON",
        "TARGET", "OUTCOME", "DURATION", "EXPECTED", "CACHED", "VERDICT"
    );
    for t in &r.targets {
        let crit = if t.critical { "*" } else { " " };
        let _ = writeln!(
            o,
            "{:<w$}{crit} {:<8}  {:>9}  {:>9}  {:>7}  {:<16}  {}",
            t.name,
            t.outcome,
            duration(t.duration_s),
            t.expected_s.map(duration).unwrap_or_else(|| "-".into()),
            format!("{}/{}", t.steps.cached, t.steps.total),
            t.verdict.as_ref().map(|v| v.code.as_str()).unwrap_or("-"),
            t.reason.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(o, "(* on the critical path)");

    let transfers: Vec<String> = r
        .targets
        .iter()
        .flat_map(|t| {
            t.cache.iter().map(move |c| {
                format!(
                    "  {} {} {}: {}{}",
                    t.name,
                    c.direction,
                    c.reference.as_deref().unwrap_or("-"),
                    c.outcome,
                    c.detail
                        .as_ref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default()
                )
            })
        })
        .collect();
    if !transfers.is_empty() {
        let _ = writeln!(o, "\ncache imports and exports:");
        for l in transfers {
            let _ = writeln!(o, "{l}");
        }
    }
    for t in r.targets.iter().filter(|t| t.outcome == "failed") {
        let _ = writeln!(
            o,
            "\n{} failed: {}",
            t.name,
            t.error.as_deref().unwrap_or("(no message)")
        );
        if let Some(s) = &t.failed_step {
            let _ = writeln!(o, "  step: {s}");
        }
        if let Some(at) = &t.failed_at {
            let _ = writeln!(o, "    at: {at}");
        }
        for l in &t.log_tail {
            let _ = writeln!(o, "  | {l}");
        }
    }
    o
}
