//! The text form of a report: a table per stage, imports and exports, the
//! longest steps, the verdict with its why and hint.

use std::fmt::Write;

use crate::contract::{Report, TransferOutcome};

/// Step text longer than this is cut with `…`.
const STEP_WIDTH: usize = 72;

/// `1.2s`, `12m03s`, `2h21m30s`.
fn duration(t: f64) -> String {
    if t < 60.0 {
        return format!("{t:.1}s");
    }
    let s = t.round() as u64;
    if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m{:02}s", s / 3600, s % 3600 / 60, s % 60)
    }
}

fn outcome(o: TransferOutcome) -> &'static str {
    match o {
        TransferOutcome::Ok => "ok",
        TransferOutcome::Error => "error",
        TransferOutcome::Canceled => "canceled",
        TransferOutcome::Incomplete => "incomplete",
    }
}

fn cut(s: &str, width: usize) -> String {
    let one_line = s.split('\n').next().unwrap_or("");
    if one_line.chars().count() <= width && one_line.len() == s.len() {
        return s.to_string();
    }
    let mut out: String = one_line.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `title: none`, or one line per import or export: outcome, what, error.
fn transfers<'a>(
    t: &mut String,
    title: &str,
    rows: impl ExactSizeIterator<Item = (TransferOutcome, String, Option<&'a str>)>,
) {
    if rows.len() == 0 {
        let _ = writeln!(t, "{title}: none");
        return;
    }
    let _ = writeln!(t, "{title}:");
    for (o, what, error) in rows {
        let _ = write!(t, "  {:<10}  {what}", outcome(o));
        if let Some(e) = error {
            let _ = write!(t, ": {}", cut(e, 100));
        }
        t.push('\n');
    }
}

/// Renders a report for people.
pub fn render(r: &Report) -> String {
    let mut t = String::new();
    let format = match r.input.format {
        crate::contract::LogFormat::Plain => "plain",
        crate::contract::LogFormat::Rawjson => "rawjson",
    };
    let outcome_word = match r.outcome {
        crate::contract::Outcome::Succeeded => "succeeded",
        crate::contract::Outcome::Failed => "failed",
        crate::contract::Outcome::Incomplete => "incomplete (the log ends before the build does)",
    };
    let _ = writeln!(
        t,
        "{format} progress, {} line(s), {} build(s): {outcome_word}",
        r.input.lines, r.input.builds
    );
    if r.input.builds > 1 {
        let _ = writeln!(t, "note: counts are summed over the builds in the log");
    }
    if r.input.unrecognized > 0 {
        let _ = writeln!(
            t,
            "note: {} line(s) were not BuildKit progress",
            r.input.unrecognized
        );
    }
    t.push('\n');

    let width = r
        .stages
        .iter()
        .map(|s| s.name.chars().count())
        .chain([5])
        .max()
        .unwrap_or(5);
    let classified = r.rebuilds.is_some();
    let _ = write!(
        t,
        "{:<width$}  {:>5}  {:>6}  {:>7}  {:>9}",
        "stage", "steps", "cached", "rebuilt", "time"
    );
    if classified {
        let _ = write!(t, "  {:>5}  {:>11}", "legit", "unexplained");
    }
    t.push('\n');
    for s in &r.stages {
        let _ = write!(
            t,
            "{:<width$}  {:>5}  {:>6}  {:>7}  {:>9}",
            s.name,
            s.total,
            s.cached,
            s.rebuilt,
            duration(s.time_s)
        );
        if let Some(x) = s.rebuilds {
            let _ = write!(t, "  {:>5}  {:>11}", x.legitimate, x.unexplained);
        }
        t.push('\n');
    }
    let _ = write!(
        t,
        "{:<width$}  {:>5}  {:>6}  {:>7}  {:>9}",
        "total",
        r.steps.total,
        r.steps.cached,
        r.steps.rebuilt,
        duration(r.time_s)
    );
    if let Some(x) = &r.rebuilds {
        let _ = write!(t, "  {:>5}  {:>11}", x.legitimate, x.unexplained);
    }
    t.push('\n');
    if r.steps.failed > 0 {
        let _ = writeln!(t, "({} step(s) failed)", r.steps.failed);
    }
    t.push('\n');

    let imports = r.imports.iter().map(|i| {
        // BuildKit's message often starts with the ref itself.
        let error = i.error.as_deref().map(|e| {
            e.strip_prefix(i.reference.as_str())
                .and_then(|r| r.strip_prefix(": "))
                .unwrap_or(e)
        });
        (i.outcome, i.reference.clone(), error)
    });
    transfers(&mut t, "cache imports", imports);
    let exports = r.exports.iter().map(|e| {
        let label = match e.layers {
            0 => e.name.clone(),
            n => format!("{} ({n} layer(s))", e.name),
        };
        (e.outcome, label, e.error.as_deref())
    });
    transfers(&mut t, "cache exports", exports);
    t.push('\n');

    if !r.longest.is_empty() {
        let _ = writeln!(t, "longest steps:");
        let sw = r
            .longest
            .iter()
            .map(|l| l.stage.chars().count())
            .max()
            .unwrap_or(0);
        for l in &r.longest {
            let _ = writeln!(
                t,
                "  {:>9}  {:<sw$}  {}{}",
                duration(l.time_s),
                l.stage,
                cut(&l.step, STEP_WIDTH),
                if l.cached { " (cached)" } else { "" }
            );
        }
        t.push('\n');
    }

    if let Some(x) = &r.rebuilds {
        let _ = writeln!(
            t,
            "rebuilds: {} legitimate, {} unexplained",
            x.legitimate, x.unexplained
        );
        if x.changes.is_empty() {
            let _ = writeln!(t, "  no input changed between the two manifests");
        } else {
            let _ = writeln!(t, "  changed inputs:");
            for c in &x.changes {
                let _ = writeln!(t, "    {c}");
            }
        }
        if !x.unexplained_stages.is_empty() {
            let _ = writeln!(
                t,
                "  rebuilt without a changed input (a cache failure): {}",
                x.unexplained_stages.join(", ")
            );
        }
        for n in &x.notes {
            let _ = writeln!(t, "  note: {n}");
        }
        t.push('\n');
    }

    let _ = writeln!(t, "verdict: {}: {}", r.verdict, r.why);
    if let Some(h) = &r.hint {
        let _ = writeln!(t, "hint: {h}");
    }
    if r.findings.len() > 1 {
        let also: Vec<&str> = r.findings[1..].iter().map(|v| v.as_str()).collect();
        let _ = writeln!(t, "also: {}", also.join(", "));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(0.04), "0.0s");
        assert_eq!(duration(1.25), "1.2s");
        assert_eq!(duration(723.0), "12m03s");
        assert_eq!(duration(8490.2), "2h21m30s");
    }

    #[test]
    fn cuts() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("RUN <<EOF\nx\nEOF", 40), "RUN <<EOF…");
    }
}
