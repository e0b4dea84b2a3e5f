//! `kiln lint [PATH]... [--format text|json|sarif]`: cache and hygiene
//! defects in bake files, Dockerfiles and CI workflow files. The rules and
//! formats live in `kiln-lint`; this command picks the paths, prints, and
//! exits 1 when an error-level finding exists (docs/lint.md).
//!
//! Must never: change a file it lints or build anything: it reads the
//! paths and reports.

use std::io::Write;
use std::path::PathBuf;

use crate::cli::LintFormat;
use crate::error::{CliError, Kind};

pub struct LintSettings {
    pub paths: Vec<String>,
    pub format: LintFormat,
    /// How bake files are judged: as kiln builds them, as buildx bake
    /// does, or per file (`--kiln`, `--buildx`, default).
    pub view: kiln_lint::View,
}

pub fn run(s: LintSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let paths: Vec<PathBuf> = s.paths.iter().map(PathBuf::from).collect();
    let report = kiln_lint::lint_as(&paths, s.view).map_err(|e| {
        CliError::usage(e).with_hint("kiln lint takes files or directories; without a path it searches the current directory")
    })?;
    let text = match s.format {
        LintFormat::Text => kiln_lint::output::text(&report),
        LintFormat::Json => kiln_lint::output::json(&report),
        LintFormat::Sarif => kiln_lint::output::sarif(&report),
    };
    crate::output::write(out, &text)?;
    if report.has_errors() {
        let (errors, ..) = report.counts();
        return Err(CliError {
            kind: Kind::Failed,
            message: format!(
                "kiln lint found {errors} error-level finding{}",
                if errors == 1 { "" } else { "s" }
            ),
            hint: None,
        });
    }
    Ok(())
}
