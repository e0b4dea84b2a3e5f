//! The Markdown rendering of a run report, for a CI's job summary (GitHub's
//! `$GITHUB_STEP_SUMMARY`, a Buildkite annotation, a GitLab note): the run
//! in one line, a table with a row per target (outcome, time, cached steps,
//! image, why it was built or skipped), and each failure with its step,
//! where the step is written and its last lines of output.
//!
//! Must never: let text from the run break the table or the page: cells
//! are escaped, code is fenced with a fence longer than any run of
//! backticks in it.

use std::fmt::Write;

use super::text::duration;
use super::{RunReport, TargetInfo};

/// The run report as Markdown.
pub fn render(r: &RunReport) -> String {
    let mut o = String::new();
    let state = if r.run.failed { "failed" } else { "ok" };
    let _ = writeln!(
        o,
        "### kiln run `{}` of {}: {state}\n",
        code(&r.run.id),
        cell(&r.run.project)
    );
    let t = &r.totals;
    let mut counts = vec![
        format!("{} built", t.built),
        format!("{} skipped", t.skipped),
    ];
    for (n, what) in [
        (t.cutoff, "by early cutoff"),
        (t.pulled, "pulled"),
        (t.failed, "failed"),
        (t.blocked, "blocked"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {what}"));
        }
    }
    let _ = write!(
        o,
        "{} targets: {} · took {}",
        t.targets,
        counts.join(", "),
        duration(r.run.wall_s)
    );
    if t.steps > 0 {
        let _ = write!(o, " · {}/{} steps cached", t.steps_cached, t.steps);
    }
    if t.saved_s > 0.0 {
        let _ = write!(o, " · {} saved by skipping", duration(t.saved_s));
    }
    let _ = writeln!(o, " · driver {}\n", cell(&r.run.driver));
    let _ = writeln!(
        o,
        "| target | outcome | time | cached steps | image | why |"
    );
    let _ = writeln!(o, "| --- | --- | ---: | ---: | --- | --- |");
    for t in &r.targets {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&t.name),
            outcome(&t.outcome),
            time(t),
            if t.steps.total > 0 {
                format!("{}/{}", t.steps.cached, t.steps.total)
            } else {
                "–".into()
            },
            t.image_ref()
                .map_or_else(|| "–".into(), |i| format!("`{}`", code(&i))),
            why(t).map_or_else(|| "–".into(), |w| cell(&w)),
        );
    }
    for t in r.targets.iter().filter(|t| t.outcome == "failed") {
        let _ = writeln!(
            o,
            "\n#### {} failed\n\n{}",
            cell(&t.name),
            cell(t.error.as_deref().unwrap_or("(no message)"))
        );
        if let Some(s) = &t.failed_step {
            let at = t
                .failed_at
                .as_deref()
                .map(|a| format!(" at `{}`", code(a)))
                .unwrap_or_default();
            let _ = writeln!(o, "\nstep `{}`{at}", code(s));
        }
        if !t.log_tail.is_empty() {
            let body = super::printable(&t.log_tail.join("\n"));
            let fence = "`".repeat(longest_backticks(&body).max(2) + 1);
            let _ = writeln!(o, "\n{fence}text\n{body}\n{fence}");
        }
    }
    o
}

/// An outcome as a word with a mark a reader scans for.
fn outcome(o: &str) -> String {
    let mark = match o {
        "built" => "🔨",
        "skipped" | "cutoff" | "pulled" => "✅",
        "failed" => "❌",
        "blocked" => "⛔",
        _ => "",
    };
    format!("{mark} {o}").trim().to_string()
}

/// A target's time: its build, or for a target that was not built, what
/// skipping it saved.
fn time(t: &TargetInfo) -> String {
    match (t.outcome.as_str(), t.saved_s) {
        ("built" | "failed", _) => duration(t.duration_s),
        (_, Some(s)) if s > 0.0 => format!("saved {}", duration(s)),
        _ => "–".into(),
    }
}

/// Why the target was built, skipped or not built.
fn why(t: &TargetInfo) -> Option<String> {
    if t.outcome == "failed" {
        return t
            .error
            .as_deref()
            .and_then(|e| e.lines().next())
            .map(String::from);
    }
    if !t.why.is_empty() {
        return Some(t.why.join("; "));
    }
    t.reason.clone()
}

/// Text for a table cell: one line, `|` and Markdown's active characters
/// escaped, so the run's text cannot open a link, an image or HTML.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Text for inline code inside backticks: one line, without backticks
/// or the `|` that would end a table cell (GitHub reads `\|` as `|` even
/// in code).
fn code(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '`' => '\'',
            '\n' | '\r' => ' ',
            c => c,
        })
        .filter(|c| !c.is_control())
        .collect::<String>()
        .replace('|', "\\|")
}

/// The longest run of backticks in `s`.
fn longest_backticks(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}
