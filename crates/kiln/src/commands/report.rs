//! `kiln report [RUN] [-o FILE] [--format html|text|json|markdown|junit]`:
//! a recorded run (default: the last one that built something) as one
//! self-contained HTML page, or the same facts as text, JSON, a Markdown
//! job summary or JUnit XML (docs/report.md). Reads only what `kiln build`
//! recorded in `.kiln/runs/`, so a report can be made again at any time.
//!
//! Exit codes: 0 written; 2 when no such run is recorded or the file cannot
//! be read or written.
//!
//! Must never: ask the engine or build again: it reads only the recorded
//! run, and writes only its rendering (to a file or stdout).

use std::io::Write;
use std::path::PathBuf;

use crate::error::CliError;
use crate::report;

pub use crate::cli::ReportFormat;

pub struct ReportSettings {
    /// The project's `.kiln` directory.
    pub kiln_dir: PathBuf,
    pub run: Option<String>,
    pub output: Option<PathBuf>,
    pub format: ReportFormat,
}

pub fn run(s: ReportSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let hint = "run `kiln build` in this project first (each run is recorded), or name a run id (`kiln history` lists them) or a recorded run's JSON file";
    // No run named: the last run that built something (later runs that
    // built nothing are said, not shown) — but a CI's summary or test
    // results are of the run that just ran, a no-op too.
    let for_ci = matches!(s.format, ReportFormat::Markdown | ReportFormat::Junit);
    let (path, noops) = match s.run.as_deref() {
        Some(run) => (report::locate(&s.kiln_dir, Some(run)), Vec::new()),
        None if for_ci => (report::locate(&s.kiln_dir, None), Vec::new()),
        None => match report::last_that_built(&s.kiln_dir) {
            Ok((p, n)) => (Ok(p), n),
            Err(e) => (Err(e), Vec::new()),
        },
    };
    let path = path.map_err(|e| CliError::usage(e).with_hint(hint))?;
    let r = report::load(&path).map_err(CliError::usage)?;
    if !noops.is_empty() {
        eprintln!(
            "showing run {}, the last run that built something; the {} later run{} ({}) built nothing: every target was up to date (`kiln report {}` shows it)",
            r.run.id,
            noops.len(),
            if noops.len() == 1 { "" } else { "s" },
            noops.join(", "),
            noops[0]
        );
    }
    let text = match s.format {
        ReportFormat::Html => report::html::render(&r),
        ReportFormat::Text => report::text::render(&r),
        ReportFormat::Markdown => report::markdown::render(&r),
        ReportFormat::Junit => report::junit::render(&r),
        ReportFormat::Json => {
            let mut t =
                serde_json::to_string_pretty(&r).map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
    };
    // HTML goes to a file: -o, else beside the recorded run.
    let target = match (&s.output, s.format) {
        (Some(p), _) => Some(p.clone()),
        (None, ReportFormat::Html) => Some(path.with_extension("html")),
        (None, _) => None,
    };
    match target {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::write(&p, text).map_err(|e| {
                CliError::usage(format!("cannot write the report to {}: {e}", p.display()))
            })?;
            crate::output::write(out, &format!("{}\n", p.display()))?;
            eprintln!(
                "report of run {} ({} targets) written to {}",
                r.run.id,
                r.targets.len(),
                p.display()
            );
            Ok(())
        }
        _ => crate::output::write(out, &text),
    }
}
