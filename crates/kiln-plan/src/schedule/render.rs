//! The renderings of a schedule: the `kiln schedule --format json` contract
//! ([`Report`]), a terminal Gantt chart with a summary and a table ([`render_text`]),
//! and an SVG Gantt chart ([`render_svg`], hand-written, self-contained).

use std::fmt::Write as _;

use serde::Serialize;

use super::Schedule;
use super::input::DEFAULT_COST;
use super::model::{Assignment, Problem};

/// The JSON contract. `makespan_s`, `lower_bound_s`, `policy` and `assignments`
/// (`target`, `node`, `start_s`, `end_s`) are the stable part; the rest is added detail.
/// Times are seconds from the start of the run, rounded to milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub makespan_s: f64,
    pub lower_bound_s: f64,
    /// A tighter proven bound (docs/scheduling.md): no schedule can end before it.
    pub tight_lower_bound_s: f64,
    pub policy: String,
    pub assignments: Vec<ReportAssignment>,
    /// Targets already built (their key recorded): not scheduled, skipped by key.
    pub published: Vec<String>,
    /// Targets whose cost is the documented default (no history, not in the costs file).
    pub default_costs: Vec<String>,
}

/// One target on one node. `start_s` is when the node starts on it (pulls first),
/// `end_s` when its push completes; `pull_s + build_s + push_s = end_s - start_s`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportAssignment {
    pub target: String,
    /// The platform of a platform unit, or of a target that names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Built under emulation: no node of the fleet builds its platform natively.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
    pub node: String,
    pub start_s: f64,
    pub end_s: f64,
    pub pull_s: f64,
    pub build_s: f64,
    pub push_s: f64,
}

fn ms(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0 + 0.0 // no -0.0
}

impl Report {
    pub fn new(p: &Problem, s: &Schedule, default_costs: &[String]) -> Report {
        Report {
            makespan_s: ms(s.makespan_s),
            lower_bound_s: ms(s.lower_bound_s),
            tight_lower_bound_s: ms(s.tight_lower_bound_s),
            policy: s.policy.name().to_string(),
            assignments: s
                .assignments
                .iter()
                .map(|a| ReportAssignment {
                    target: p.jobs()[a.job].name.clone(),
                    platform: p.jobs()[a.job].platform.clone(),
                    emulated: p.emulates(a.job, a.node),
                    node: p.nodes()[a.node].name.clone(),
                    start_s: ms(a.start_s),
                    end_s: ms(a.end_s),
                    pull_s: ms(a.pull_s),
                    build_s: ms(a.build_s),
                    push_s: ms(a.push_s),
                })
                .collect(),
            published: p
                .jobs()
                .iter()
                .filter(|j| j.published)
                .map(|j| j.name.clone())
                .collect(),
            default_costs: default_costs.to_vec(),
        }
    }
}

/// A duration as `3h 02m 05s`, `12m 00s` or `42s` (whole seconds).
fn human(s: f64) -> String {
    let t = s.round() as u64;
    let (h, m, sec) = (t / 3600, t / 60 % 60, t % 60);
    if h > 0 {
        format!("{h}h {m:02}m {sec:02}s")
    } else if m > 0 {
        format!("{m}m {sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// A time as `H:MM:SS` (whole seconds).
fn clock(s: f64) -> String {
    let t = s.round() as u64;
    format!("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
}

/// One chart row: a node, or one slot of a node with several.
struct Row {
    label: String,
    assignments: Vec<Assignment>,
}

/// Rows per node, each assignment in the first slot free at its start (assignments are
/// in start order); a node with one slot, or whose builds never overlap, gets one row.
fn rows(p: &Problem, s: &Schedule) -> Vec<Row> {
    let mut out = Vec::new();
    for (n, node) in p.nodes().iter().enumerate() {
        let mut lanes: Vec<Vec<Assignment>> = Vec::new();
        for a in s.assignments.iter().filter(|a| a.node == n) {
            match lanes
                .iter_mut()
                .find(|l| l.last().is_none_or(|b| b.end_s <= a.start_s))
            {
                Some(l) => l.push(*a),
                None => lanes.push(vec![*a]),
            }
        }
        if lanes.is_empty() {
            lanes.push(Vec::new());
        }
        let several = lanes.len() > 1;
        for (k, l) in lanes.into_iter().enumerate() {
            out.push(Row {
                label: if several {
                    format!("{}/{}", node.name, k + 1)
                } else {
                    node.name.clone()
                },
                assignments: l,
            });
        }
    }
    out
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// The text form: a summary, a Gantt chart (`width` columns of time, one row per node
/// and busy slot, each target drawn `[name---]`, or `#` when one column wide), and every assignment with its phases.
/// With `color`, targets alternate ANSI colours.
pub fn render_text(
    p: &Problem,
    s: &Schedule,
    default_costs: &[String],
    width: usize,
    color: bool,
) -> String {
    let width = width.max(20);
    let mut o = String::new();
    let jobs = p.jobs();
    let published: Vec<String> = jobs
        .iter()
        .filter(|j| j.published)
        .map(|j| j.name.clone())
        .collect();
    let _ = writeln!(
        o,
        "policy {}: {} targets to build on {} nodes",
        s.policy.name(),
        s.assignments.len(),
        p.nodes().len()
    );
    let _ = writeln!(
        o,
        "makespan     {} ({:.1} s)",
        human(s.makespan_s),
        s.makespan_s
    );
    let ratio = |bound: f64| {
        if bound > 0.0 {
            s.makespan_s / bound
        } else {
            1.0
        }
    };
    let _ = writeln!(
        o,
        "lower bound  {} ({:.1} s); makespan / lower bound {:.3}",
        human(s.lower_bound_s),
        s.lower_bound_s,
        ratio(s.lower_bound_s)
    );
    let _ = writeln!(
        o,
        "tight bound  {} ({:.1} s); makespan / tight bound {:.3}",
        human(s.tight_lower_bound_s),
        s.tight_lower_bound_s,
        ratio(s.tight_lower_bound_s)
    );
    let _ = writeln!(
        o,
        "default costs (work_s {}, output_mb {}, min_memory_gb {}): {}",
        DEFAULT_COST.work_s,
        DEFAULT_COST.output_mb,
        DEFAULT_COST.min_memory_gb,
        list_or_none(default_costs)
    );
    let _ = writeln!(
        o,
        "already built (cost nothing: recorded, skipped by key): {}",
        list_or_none(&published)
    );
    let emulated: Vec<String> = s
        .assignments
        .iter()
        .filter(|a| p.emulates(a.job, a.node))
        .map(|a| format!("{} on {}", jobs[a.job].name, p.nodes()[a.node].name))
        .collect();
    if !emulated.is_empty() {
        let _ = writeln!(
            o,
            "under emulation (no node builds the platform natively; build time x{}): {}",
            super::model::EMULATION_SLOWDOWN,
            emulated.join(", ")
        );
    }
    o.push('\n');

    let rows = rows(p, s);
    let label_w = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);
    let span = if s.makespan_s > 0.0 {
        s.makespan_s
    } else {
        1.0
    };
    let col = |t: f64| ((t / span * width as f64).round() as usize).min(width);
    // The time axis: labels at 0, 1/4, 1/2, 3/4 (centred) and the end (right-aligned),
    // over the chart's columns (after the row's opening `|`); one that would touch its
    // neighbour is left out.
    let mut axis = vec![' '; width + 2];
    let mut free_from = 0;
    for k in 0..=4 {
        let t = s.makespan_s * k as f64 / 4.0;
        let text: Vec<char> = human(t).chars().collect();
        let at = match k {
            0 => 0,
            4 => width + 2 - text.len().min(width + 2),
            _ => (col(t) + 1).saturating_sub(text.len() / 2),
        };
        if at >= free_from && at + text.len() <= width + 2 {
            axis[at..at + text.len()].copy_from_slice(&text);
            free_from = at + text.len() + 1;
        }
    }
    let _ = writeln!(
        o,
        "{:label_w$} {}",
        "",
        axis.iter().collect::<String>().trim_end()
    );
    let mut paint = 0usize;
    for row in &rows {
        let mut cells: Vec<(char, usize)> = vec![(' ', 0); width];
        for a in &row.assignments {
            paint += 1;
            let c0 = col(a.start_s).min(width - 1);
            let c1 = col(a.end_s).clamp(c0 + 1, width);
            let w = c1 - c0;
            let name: Vec<char> = jobs[a.job].name.chars().collect();
            for (i, cell) in cells[c0..c1].iter_mut().enumerate() {
                let ch = if w == 1 {
                    '#'
                } else if i == 0 {
                    '['
                } else if i == w - 1 {
                    ']'
                } else {
                    name.get(i - 1).copied().unwrap_or('-')
                };
                *cell = (ch, 1 + paint % 2);
            }
        }
        let mut line = String::new();
        let mut current = 0;
        for (ch, c) in cells {
            if color && c != current {
                line.push_str(match c {
                    0 => "\x1b[0m",
                    1 => "\x1b[36m",
                    _ => "\x1b[33m",
                });
                current = c;
            }
            line.push(ch);
        }
        if color && current != 0 {
            line.push_str("\x1b[0m");
        }
        let _ = writeln!(o, "{:label_w$} |{}|", row.label, line);
    }
    o.push('\n');

    let name_w = s
        .assignments
        .iter()
        .map(|a| jobs[a.job].name.chars().count())
        .chain([6])
        .max()
        .unwrap_or(6);
    let node_w = p
        .nodes()
        .iter()
        .map(|n| n.name.chars().count())
        .chain([4])
        .max()
        .unwrap_or(4);
    let _ = writeln!(
        o,
        "{:name_w$}  {:node_w$}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}",
        "target", "node", "start", "end", "pull", "build", "push"
    );
    for a in &s.assignments {
        let _ = writeln!(
            o,
            "{:name_w$}  {:node_w$}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}",
            jobs[a.job].name,
            p.nodes()[a.node].name,
            clock(a.start_s),
            clock(a.end_s),
            clock(a.pull_s),
            clock(a.build_s),
            clock(a.push_s)
        );
    }
    o
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG Gantt chart: one row per node (and busy slot), each target a bar split into
/// pull (light), build and push (dark) with its name and a tooltip, a time axis.
pub fn render_svg(p: &Problem, s: &Schedule) -> String {
    const CHART_W: f64 = 1000.0;
    const ROW_H: f64 = 30.0;
    const TOP: f64 = 40.0;
    let rows = rows(p, s);
    let label_w = 12.0
        + 7.5
            * rows
                .iter()
                .map(|r| r.label.chars().count())
                .max()
                .unwrap_or(4) as f64;
    let span = if s.makespan_s > 0.0 {
        s.makespan_s
    } else {
        1.0
    };
    let x = |t: f64| label_w + t / span * CHART_W;
    let height = TOP + ROW_H * rows.len() as f64 + 30.0;
    let total_w = label_w + CHART_W + 20.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0}" height="{height:.0}" viewBox="0 0 {total_w:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        o,
        r#"<text x="{label_w:.1}" y="18" font-size="14">kiln schedule — policy {}, makespan {}, lower bound {}</text>"#,
        s.policy.name(),
        human(s.makespan_s),
        human(s.lower_bound_s)
    );
    let bottom = TOP + ROW_H * rows.len() as f64;
    for k in 0..=4 {
        let t = s.makespan_s * k as f64 / 4.0;
        let anchor = match k {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" y1="{TOP:.1}" x2="{0:.1}" y2="{bottom:.1}" stroke="#ccc"/><text x="{0:.1}" y="{1:.1}" text-anchor="{anchor}">{2}</text>"##,
            x(t),
            bottom + 16.0,
            human(t)
        );
    }
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="18" text-anchor="end" fill="#555">bars: pull (light), build, push (dark)</text>"##,
        label_w + CHART_W
    );
    let palette = [
        ("#9ecae1", "#3182bd", "#08519c"),
        ("#fdae6b", "#e6550d", "#a63603"),
        ("#a1d99b", "#31a354", "#006d2c"),
        ("#bcbddc", "#756bb1", "#54278f"),
    ];
    let mut k = 0;
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let _ = writeln!(
            o,
            r#"<text x="6" y="{:.1}">{}</text>"#,
            y + ROW_H / 2.0 + 4.0,
            xml(&row.label)
        );
        for a in &row.assignments {
            let (light, mid, dark) = palette[k % palette.len()];
            k += 1;
            let name = xml(&p.jobs()[a.job].name);
            let _ = writeln!(
                o,
                "<g><title>{name} on {}: {} to {} (pull {}, build {}, push {})</title>",
                xml(&p.nodes()[a.node].name),
                clock(a.start_s),
                clock(a.end_s),
                human(a.pull_s),
                human(a.build_s),
                human(a.push_s)
            );
            let mut t = a.start_s;
            for (d, fill) in [(a.pull_s, light), (a.build_s, mid), (a.push_s, dark)] {
                if d > 0.0 {
                    let _ = writeln!(
                        o,
                        r#"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{fill}"/>"#,
                        x(t),
                        y + 4.0,
                        (x(t + d) - x(t)).max(0.5),
                        ROW_H - 8.0
                    );
                }
                t += d;
            }
            let bar = x(a.end_s) - x(a.start_s);
            if bar > 7.0 * name.chars().count().min(4) as f64 {
                let _ = writeln!(
                    o,
                    r#"<svg x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}"><text x="3" y="{:.1}" fill="white">{name}</text></svg>"#,
                    x(a.start_s),
                    y + 4.0,
                    bar,
                    ROW_H - 8.0,
                    ROW_H / 2.0
                );
            }
            o.push_str("</g>\n");
        }
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Cost, Job, Node, Policy, schedule};

    fn problem(published: bool, slots: u32) -> Problem {
        let job = |name: &str| Job {
            name: name.into(),
            deps: vec![],
            cost: Cost {
                work_s: 100.0,
                output_mb: 0.0,
                min_memory_gb: 0.0,
            },
            published,
            platform: None,
        };
        let node = Node {
            name: "n".into(),
            endpoint: "n".into(),
            cores: 16,
            memory_gb: 8.0,
            speed: 1.0,
            link_mbps: 1.0,
            slots,
            platforms: Vec::new(),
        };
        Problem::new(vec![job("a"), job("b")], vec![node]).unwrap()
    }

    #[test]
    fn busy_slots_get_rows_and_nothing_to_build_renders() {
        let p = problem(false, 2);
        let s = schedule(&p, Policy::Kiln);
        let text = render_text(&p, &s, &[], 20, false);
        assert!(text.contains("\nn/1 |[a"), "{text}");
        assert!(text.contains("\nn/2 |[b"), "{text}");
        let p = problem(true, 1);
        let s = schedule(&p, Policy::Kiln);
        let text = render_text(&p, &s, &[], 20, false);
        assert!(text.contains("already built (cost nothing: recorded, skipped by key): a, b"));
        assert!(text.contains("\nn |                    |\n"), "{text}");
        let json = serde_json::to_value(Report::new(&p, &s, &[])).unwrap();
        assert_eq!(json["makespan_s"], 0.0);
        assert_eq!(json["published"], serde_json::json!(["a", "b"]));
        assert!(render_svg(&p, &s).ends_with("</svg>\n"));
    }

    #[test]
    fn durations() {
        assert_eq!(human(42.4), "42s");
        assert_eq!(human(720.0), "12m 00s");
        assert_eq!(human(3.0 * 3600.0 + 125.0), "3h 02m 05s");
        assert_eq!(clock(3725.0), "1:02:05");
    }
}
