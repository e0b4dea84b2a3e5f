//! The JUnit XML rendering of a run report, which GitLab, Jenkins,
//! Buildkite and Azure DevOps show as test results: one test suite for the
//! run, a test case per target. A built or skipped target passes (a
//! skipped one is marked `<skipped/>` with why); a failed one has a
//! `<failure>` whose message is its error and whose body is its failing
//! step, where the step is written and the step's last lines; a blocked
//! one an `<error>` naming what blocked it.
//!
//! Must never: write text that is not XML 1.0: every attribute and text is
//! escaped, and characters XML cannot hold (control characters, ANSI
//! escapes) are left out.

use std::fmt::Write;

use super::{RunReport, TargetInfo, printable};

/// The run report as JUnit XML.
pub fn render(r: &RunReport) -> String {
    let t = &r.totals;
    let skipped = t.skipped + t.cutoff + t.pulled;
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"kiln\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{skipped}\" time=\"{:.3}\">",
        t.targets, t.failed, t.blocked, r.run.wall_s
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"{}\" id=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{skipped}\" time=\"{:.3}\" timestamp=\"{}\">",
        attr(&r.run.project),
        attr(&r.run.id),
        t.targets,
        t.failed,
        t.blocked,
        r.run.wall_s,
        attr(r.run.started_at.trim_end_matches('Z'))
    );
    let _ = writeln!(o, "    <properties>");
    for (k, v) in [
        ("kiln.run", r.run.id.as_str()),
        ("kiln.driver", r.run.driver.as_str()),
    ] {
        let _ = writeln!(o, "      <property name=\"{k}\" value=\"{}\"/>", attr(v));
    }
    let _ = writeln!(o, "    </properties>");
    for t in &r.targets {
        case(&mut o, &r.run.project, t);
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}

fn case(o: &mut String, project: &str, t: &TargetInfo) {
    let time = match t.outcome.as_str() {
        "built" | "failed" => t.duration_s,
        _ => 0.0,
    };
    let _ = write!(
        o,
        "    <testcase name=\"{}\" classname=\"kiln.{}\" time=\"{time:.3}\"",
        attr(&t.name),
        attr(project)
    );
    let reason = t.reason.clone().unwrap_or_default();
    match t.outcome.as_str() {
        "skipped" | "cutoff" | "pulled" => {
            let _ = writeln!(o, ">\n      <skipped message=\"{}\"/>", attr(&reason));
        }
        "failed" => {
            let message = t.error.as_deref().unwrap_or("the build failed");
            let first = message.lines().next().unwrap_or(message);
            let mut body = String::new();
            if let Some(s) = &t.failed_step {
                let _ = writeln!(body, "step: {s}");
            }
            if let Some(at) = &t.failed_at {
                let _ = writeln!(body, "at: {at}");
            }
            if message.lines().count() > 1 {
                let _ = writeln!(body, "{message}");
            }
            for l in &t.log_tail {
                let _ = writeln!(body, "| {l}");
            }
            let _ = writeln!(
                o,
                ">\n      <failure message=\"{}\" type=\"build\">{}</failure>",
                attr(first),
                text(&body)
            );
        }
        "blocked" => {
            let _ = writeln!(
                o,
                ">\n      <error message=\"{}\" type=\"blocked\"/>",
                attr(&reason)
            );
        }
        _ => {
            let image = t.image_ref().unwrap_or_default();
            let why = if t.why.is_empty() {
                reason
            } else {
                t.why.join("; ")
            };
            let _ = writeln!(
                o,
                ">\n      <system-out>{}</system-out>",
                text(&format!("image: {image}\nwhy: {why}\n"))
            );
        }
    }
    o.push_str("    </testcase>\n");
}

/// Text as XML character data.
fn text(s: &str) -> String {
    escape(s, false)
}

/// Text as an XML attribute value (in double quotes).
fn attr(s: &str) -> String {
    escape(s, true)
}

/// HTML's escaping is XML's; what XML 1.0 cannot hold is left out, and an
/// attribute keeps its line breaks and tabs as references.
fn escape(s: &str, attribute: bool) -> String {
    let clean: String = printable(s)
        .chars()
        .filter(|c| !matches!(c, '\u{fffe}' | '\u{ffff}'))
        .collect();
    let e = super::html::escape_html(&clean);
    if attribute {
        e.replace('\n', "&#10;").replace('\t', "&#9;")
    } else {
        e
    }
}
