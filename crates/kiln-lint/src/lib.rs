//! kiln-lint: cache and hygiene defects in bake files, Dockerfiles and CI
//! workflow files (`kiln lint`).
//!
//! Every source is read into one shape before the cache rules run: a bake
//! target and a `docker build` command line in a workflow both become a
//! [`build::Build`] (tags, cache imports and exports, build args, the
//! Dockerfile and stage it builds), so the same rules judge both. Per-file
//! rules (Dockerfile ARG order, secrets, refs) run where the file is read.
//!
//! Bake files are judged as kiln builds them (kiln applies its cache
//! policy, so the rules asking for cache refs are set aside) or as
//! `docker buildx bake` builds them ([`view`]: by default from whether a CI
//! workflow of the repository runs bake on them).
//!
//! Owns: file discovery, the rules and their table ([`rules`]), findings and
//! the output formats ([`output`]). Must never: run a build, a command, or
//! reach the network; panic on any input (a file that does not parse is a
//! `parse-error` finding).

pub mod bake;
pub mod build;
pub mod discover;
pub mod dockerfile;
pub mod names;
pub mod output;
pub mod rules;
pub mod shell;
pub mod view;
pub mod workflow;
pub mod yaml;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use rules::{RULES, Rule, Severity};
pub use view::{BakeSet, Judged, View};

/// A position in a file: 1-based line and column (characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub file: String,
    pub line: usize,
    pub col: usize,
}

impl Loc {
    pub fn new(file: impl Into<String>, line: usize, col: usize) -> Loc {
        Loc {
            file: file.into(),
            line: line.max(1),
            col: col.max(1),
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Finding {
    /// A finding of `rule` at `loc` (severity from the rule table).
    #[must_use]
    pub fn new(rule: &'static str, loc: &Loc, message: impl Into<String>) -> Finding {
        Finding {
            rule,
            severity: rules::rule(rule).severity,
            file: loc.file.clone(),
            line: loc.line,
            column: loc.col,
            message: message.into(),
        }
    }
    /// The rule's entry in the table (why, fix).
    #[must_use]
    pub fn rule_info(&self) -> &'static Rule {
        rules::rule(self.rule)
    }
}

/// The result of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// Sorted by file, line, column, rule.
    pub findings: Vec<Finding>,
    /// How many files were read.
    pub files_checked: usize,
    /// Every bake file set read, and whose build it was judged as.
    pub bake: Vec<BakeSet>,
    /// Findings of the rules kiln's cache policy answers
    /// ([`rules::KILN_POLICY`]) on bake targets judged as kiln builds them:
    /// not in `findings`, not counted, never exit 1. `--buildx` reports
    /// them. Sorted and folded as `findings`.
    pub set_aside: Vec<Finding>,
}

impl Report {
    /// How many findings of each severity: (errors, warnings, notes).
    #[must_use]
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |s| self.findings.iter().filter(|f| f.severity == s).count();
        (n(Severity::Error), n(Severity::Warning), n(Severity::Note))
    }
    /// Whether an error-level finding exists (exit 1).
    #[must_use]
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
    /// The reported findings that judging their bake file as kiln builds it
    /// would set aside: [`rules::KILN_POLICY`] findings in bake files judged
    /// as `docker buildx bake` builds them (`--kiln` drops them).
    #[must_use]
    pub fn policy_findings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| rules::KILN_POLICY.contains(&f.rule))
            .filter(|f| {
                self.bake
                    .iter()
                    .any(|b| b.judged == Judged::Buildx && b.files.contains(&f.file))
            })
            .count()
    }
}

/// What the readers collect: findings, builds for the cache rules, and the
/// Dockerfiles builds name (linted once each).
#[derive(Debug, Default)]
pub struct Collector {
    pub findings: Vec<Finding>,
    pub builds: Vec<build::Build>,
    pub dockerfiles: BTreeSet<PathBuf>,
    pub files_checked: usize,
    /// The bake calls workflows make (see [`view`]).
    pub bake_calls: Vec<workflow::BakeCall>,
    /// Findings kiln's cache policy makes moot (see [`Report::set_aside`]).
    pub set_aside: Vec<Finding>,
}

impl Collector {
    pub fn add(&mut self, rule: &'static str, loc: &Loc, message: impl Into<String>) {
        self.findings.push(Finding::new(rule, loc, message));
    }
}

/// How a path is shown: as given, `/`-separated, without a leading `./`.
#[must_use]
pub fn display_path(p: &Path) -> String {
    let s = p.to_string_lossy().replace('\\', "/");
    let mut s = s.as_str();
    while let Some(rest) = s.strip_prefix("./") {
        s = rest;
    }
    if s.is_empty() {
        ".".into()
    } else {
        s.to_string()
    }
}

/// Reads a file as text; a failure is a `parse-error` finding.
pub(crate) fn read(path: &Path, c: &mut Collector) -> Option<String> {
    c.files_checked += 1;
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(s) => Some(s),
            Err(e) => {
                c.add(
                    rules::PARSE_ERROR,
                    &Loc::new(display_path(path), 1, 1),
                    format!("not UTF-8 text: {e}"),
                );
                None
            }
        },
        Err(e) => {
            c.add(
                rules::PARSE_ERROR,
                &Loc::new(display_path(path), 1, 1),
                format!("cannot read the file: {e}"),
            );
            None
        }
    }
}

/// Lints the given files and directories (directories are searched, see
/// [`discover`]), judging bake files by [`View::Auto`].
///
/// # Errors
/// A path that does not exist (the caller's usage error).
pub fn lint(paths: &[PathBuf]) -> Result<Report, String> {
    lint_as(paths, View::Auto)
}

/// How to lint (the `kiln lint --kiln` switch; [`lint_as`] takes the full
/// choice, `--buildx` included).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Every bake file is built by kiln, which applies its cache policy
    /// (docs/cache-policy.md): `cache-from-self`, `cache-per-commit-only`
    /// and `no-cache-export` are set aside for bake targets ([`View::Kiln`]).
    /// `false` is the default judgement, [`View::Auto`], not
    /// [`View::Buildx`]. Workflows and Dockerfiles are checked as always.
    pub kiln: bool,
}

impl Options {
    /// The view these options ask for.
    #[must_use]
    pub fn view(&self) -> View {
        if self.kiln { View::Kiln } else { View::Auto }
    }
}

/// [`lint`] with options.
///
/// # Errors
/// A path that does not exist (the caller's usage error).
pub fn lint_with(paths: &[PathBuf], opts: &Options) -> Result<Report, String> {
    lint_as(paths, opts.view())
}

/// [`lint`], judging bake files by `view`.
///
/// # Errors
/// A path that does not exist (the caller's usage error).
pub fn lint_as(paths: &[PathBuf], view: View) -> Result<Report, String> {
    let found = discover::discover(paths)?;
    let mut c = Collector::default();
    let mut judge = view::Judge::new(view);
    let mut sets = Vec::new();
    for group in &found.bake {
        let first = c.builds.len();
        bake::lint(group, &mut c);
        let set = judge.judge(group);
        for b in &mut c.builds[first..] {
            b.policy_applied = set.judged == Judged::Kiln;
            b.judged_because = Some(set.because.clone());
        }
        sets.push(set);
    }
    for w in &found.workflows {
        workflow::lint(w, &mut c);
    }
    let mut seen = BTreeSet::new();
    let mut dockerfiles: Vec<PathBuf> = found.dockerfiles.clone();
    dockerfiles.extend(c.dockerfiles.iter().cloned());
    for d in dockerfiles {
        let key = std::fs::canonicalize(&d).unwrap_or_else(|_| d.clone());
        if seen.insert(key) && d.is_file() {
            dockerfile::lint(&d, &mut c);
        }
    }
    let builds = std::mem::take(&mut c.builds);
    build::check(&builds, &mut c);
    let mut report = finish(c);
    report.bake = sets;
    Ok(report)
}

fn finish(c: Collector) -> Report {
    Report {
        findings: fold(c.findings),
        files_checked: c.files_checked,
        bake: Vec::new(),
        set_aside: fold(c.set_aside),
    }
}

/// Sorts findings and folds those of one rule at one position into one
/// (targets that inherit one attribute share its position).
fn fold(mut f: Vec<Finding>) -> Vec<Finding> {
    f.sort_by(|a, b| {
        (&a.file, a.line, a.column, a.rule, &a.message)
            .cmp(&(&b.file, b.line, b.column, b.rule, &b.message))
    });
    let mut out: Vec<Finding> = Vec::new();
    let mut extra = 0usize;
    for x in f {
        match out.last_mut() {
            Some(last)
                if last.rule == x.rule
                    && last.file == x.file
                    && last.line == x.line
                    && last.column == x.column =>
            {
                if last.message != x.message {
                    extra += 1;
                }
            }
            _ => {
                if extra > 0
                    && let Some(last) = out.last_mut()
                {
                    last.message
                        .push_str(&format!(" (and {extra} more at this position)"));
                }
                extra = 0;
                out.push(x);
            }
        }
    }
    if extra > 0
        && let Some(last) = out.last_mut()
    {
        last.message
            .push_str(&format!(" (and {extra} more at this position)"));
    }
    out
}
