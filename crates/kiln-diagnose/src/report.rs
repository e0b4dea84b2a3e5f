//! From the vertices of a log to the report: counts per stage, imports and
//! exports with their outcome (an export vertex, or inline cache prepared
//! inside an image export), the longest steps, and the verdict.

use crate::contract::{
    Export, ExportKind, Import, ImportCause, InputSummary, LongStep, Outcome, Rebuilds, Report,
    Stage, StageRebuilds, Steps, TransferOutcome, Verdict,
};
use crate::inputs::{Class, Inputs};
use crate::trace::{INLINE_CACHE, Kind, State, Trace, Vertex, import_cause};

/// How many steps `longest` lists.
const LONGEST: usize = 5;

/// Why a log cannot be diagnosed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not one BuildKit vertex in the log.
    NoProgress { lines: u64 },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoProgress { lines } => write!(
                f,
                "no BuildKit progress in the log ({lines} line(s) read): expected the output of \
                 `--progress=plain` (`#1 [internal] load build definition …`) or `--progress=rawjson`"
            ),
        }
    }
}

impl std::error::Error for Error {}

fn round(t: f64) -> f64 {
    (t * 1000.0).round() / 1000.0
}

fn transfer(v: &Vertex) -> (TransferOutcome, Option<String>) {
    match &v.state {
        State::Done => (TransferOutcome::Ok, None),
        State::Error(e) => (TransferOutcome::Error, Some(e.clone())),
        State::Canceled => (TransferOutcome::Canceled, None),
        State::Pending => (TransferOutcome::Incomplete, None),
    }
}

/// Builds the report of a log; `inputs` classifies rebuilt steps.
pub fn diagnose(trace: &Trace, inputs: Option<&Inputs>) -> Result<Report, Error> {
    if trace.is_empty() {
        return Err(Error::NoProgress { lines: trace.lines });
    }
    let mut stages: Vec<Stage> = Vec::new();
    let mut steps = Steps::default();
    let mut time = 0.0;
    let mut imports: Vec<Import> = Vec::new();
    let mut exports: Vec<Export> = Vec::new();
    let mut timed: Vec<LongStep> = Vec::new();
    let mut rebuilds = inputs.map(|i| Rebuilds {
        changes: i.changes(),
        ..Rebuilds::default()
    });
    let (mut failed, mut pending) = (false, false);
    for v in &trace.vertices {
        match &v.kind {
            Kind::Step {
                stage,
                index,
                total,
                instruction,
            } => {
                let at = match stages.iter().position(|s| &s.name == stage) {
                    Some(i) => i,
                    None => {
                        stages.push(Stage {
                            name: stage.clone(),
                            total: 0,
                            cached: 0,
                            rebuilt: 0,
                            time_s: 0.0,
                            rebuilds: inputs.map(|_| StageRebuilds::default()),
                        });
                        stages.len() - 1
                    }
                };
                let s = &mut stages[at];
                s.total += 1;
                steps.total += 1;
                s.time_s += v.time_s;
                time += v.time_s;
                if v.cached {
                    s.cached += 1;
                    steps.cached += 1;
                } else {
                    s.rebuilt += 1;
                    steps.rebuilt += 1;
                    if let (Some(i), Some(sr), Some(r)) =
                        (inputs, s.rebuilds.as_mut(), rebuilds.as_mut())
                    {
                        let class = i.classify(stage, *index, *total);
                        if class == Class::Legitimate {
                            sr.legitimate += 1;
                            r.legitimate += 1;
                        } else {
                            sr.unexplained += 1;
                            r.unexplained += 1;
                        }
                        if let Class::Unmatched(note) = class
                            && !r.notes.contains(&note)
                        {
                            r.notes.push(note);
                        }
                    }
                }
                match v.state {
                    State::Error(_) => {
                        steps.failed += 1;
                        failed = true;
                    }
                    State::Pending => pending = true,
                    _ => {}
                }
                if v.time_s > 0.0 {
                    timed.push(LongStep {
                        stage: stage.clone(),
                        step: instruction.clone(),
                        time_s: round(v.time_s),
                        cached: v.cached,
                    });
                }
            }
            Kind::Import { reference } => {
                let (outcome, error) = transfer(v);
                imports.push(Import {
                    reference: reference.clone(),
                    outcome,
                    cause: error.as_deref().map(import_cause),
                    error,
                    time_s: round(v.time_s),
                });
            }
            Kind::Export(kind) => {
                let (outcome, error) = transfer(v);
                exports.push(Export {
                    name: v.name.clone(),
                    kind: *kind,
                    outcome,
                    error,
                    layers: v.layers,
                    time_s: round(v.time_s),
                });
            }
            Kind::From | Kind::Other => {
                match v.state {
                    State::Error(_) => failed = true,
                    State::Pending | State::Canceled => pending = true,
                    State::Done => {}
                }
                // Inline cache rides in the image: it is exported when the
                // image export that prepared it is.
                if let (Kind::Other, Some(t)) = (&v.kind, v.inline_cache) {
                    let (outcome, error) = transfer(v);
                    exports.push(Export {
                        name: INLINE_CACHE.to_string(),
                        kind: ExportKind::Inline,
                        outcome,
                        error,
                        layers: 0,
                        time_s: round(t),
                    });
                }
            }
        }
    }
    for n in &trace.notices {
        match imports.iter_mut().find(|i| i.reference == n.reference) {
            Some(i) if i.outcome == TransferOutcome::Error => {}
            Some(i) => {
                i.outcome = TransferOutcome::Error;
                i.cause = Some(import_cause(&n.error));
                i.error = Some(n.error.clone());
            }
            None => imports.push(Import {
                reference: n.reference.clone(),
                outcome: TransferOutcome::Error,
                cause: Some(import_cause(&n.error)),
                error: Some(n.error.clone()),
                time_s: 0.0,
            }),
        }
    }
    for s in &mut stages {
        s.time_s = round(s.time_s);
    }
    if let Some(r) = rebuilds.as_mut() {
        r.unexplained_stages = stages
            .iter()
            .filter(|s| s.rebuilds.is_some_and(|x| x.unexplained > 0))
            .map(|s| s.name.clone())
            .collect();
    }
    // Longest first; the log order breaks ties (the sort is stable).
    timed.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));
    timed.truncate(LONGEST);
    let outcome = if failed {
        Outcome::Failed
    } else if pending {
        Outcome::Incomplete
    } else {
        Outcome::Succeeded
    };
    let findings = findings(&steps, &imports, &exports, outcome, rebuilds.as_ref());
    let verdict = findings.first().copied().unwrap_or(Verdict::Healthy);
    let (why, hint) = explain(verdict, &steps, &imports, &exports, rebuilds.as_ref());
    Ok(Report {
        input: InputSummary {
            format: trace.format,
            lines: trace.lines,
            unrecognized: trace.unrecognized,
            builds: trace.builds,
        },
        outcome,
        steps,
        time_s: round(time),
        stages,
        imports,
        exports,
        longest: timed,
        rebuilds,
        verdict,
        findings,
        why,
        hint,
    })
}

fn count(imports: &[Import], o: TransferOutcome) -> usize {
    imports.iter().filter(|i| i.outcome == o).count()
}

/// The verdict rules that match, in order (see [`Verdict`]).
fn findings(
    steps: &Steps,
    imports: &[Import],
    exports: &[Export],
    outcome: Outcome,
    rebuilds: Option<&Rebuilds>,
) -> Vec<Verdict> {
    let ok = count(imports, TransferOutcome::Ok);
    let failed = count(imports, TransferOutcome::Error);
    let mut out = Vec::new();
    if failed > 0 && ok == 0 {
        out.push(Verdict::ImportFailed);
    }
    if imports.is_empty() && steps.rebuilt > 0 {
        out.push(Verdict::NoCacheImport);
    }
    if ok > 0 && steps.total > 0 && steps.cached == 0 && rebuilds.is_none_or(|r| r.unexplained > 0)
    {
        out.push(Verdict::AllMiss);
    }
    if outcome == Outcome::Succeeded
        && !exports.iter().any(|e| e.outcome == TransferOutcome::Ok)
        && !served_by_import(steps, imports, exports)
    {
        out.push(Verdict::NoCacheExport);
    }
    out
}

/// A build with nothing to export: an import succeeded, no step was rebuilt
/// and no export was attempted. Everything this build used was already
/// available to a builder that imports the same ref, so the missing export
/// lost nothing; `why` notes it (see [`Verdict::NoCacheExport`]). A failed
/// export is not excused: it would fail on the next rebuild too.
fn served_by_import(steps: &Steps, imports: &[Import], exports: &[Export]) -> bool {
    count(imports, TransferOutcome::Ok) > 0 && steps.rebuilt == 0 && exports.is_empty()
}

fn cause_text(c: Option<ImportCause>) -> &'static str {
    match c {
        Some(ImportCause::NotFound) => "not found",
        Some(ImportCause::Unauthorized) => "not authorized",
        Some(ImportCause::TooLarge) => "cache manifest too large",
        Some(ImportCause::Unreachable) => "registry unreachable",
        Some(ImportCause::Other) | None => "failed",
    }
}

const LINT_IMPORT: &str = "kiln lint rules cache-from-self, cache-per-commit-only";
const LINT_EXPORT: &str =
    "kiln lint rules no-cache-export, inline-cache-under-buildx, cache-mode-min-multistage";
const LINT_MODE: &str = "kiln lint rules inline-cache-under-buildx, cache-mode-min-multistage";

/// The one-line why and the fix hint of a verdict.
fn explain(
    verdict: Verdict,
    steps: &Steps,
    imports: &[Import],
    exports: &[Export],
    rebuilds: Option<&Rebuilds>,
) -> (String, Option<String>) {
    let failed: Vec<&Import> = imports
        .iter()
        .filter(|i| i.outcome == TransferOutcome::Error)
        .collect();
    match verdict {
        Verdict::ImportFailed => {
            let first = failed[0];
            let why = format!(
                "{} cache import(s) attempted, none succeeded: {} ({})",
                imports.len(),
                first.reference,
                cause_text(first.cause)
            );
            let hint = match first.cause {
                Some(ImportCause::NotFound) => format!(
                    "the cache ref does not exist: a ref that is only the tag being built, or one \
                     per commit, is missing on every new commit; import a commit-independent ref \
                     that the build also exports to ({LINT_IMPORT})"
                ),
                Some(ImportCause::Unauthorized) => "the builder could not read the cache ref: log \
                     in to the registry where the build runs before building"
                    .to_string(),
                Some(ImportCause::TooLarge) => "BuildKit refuses cache manifests over 1 MiB on \
                     import although it exported them: keep one cache ref per target and platform \
                     so each manifest stays small"
                    .to_string(),
                Some(ImportCause::Unreachable) => "the registry did not answer: check the cache \
                     ref's host and the builder's network"
                    .to_string(),
                _ => {
                    "read the import's error above; BuildKit goes on without the cache".to_string()
                }
            };
            (why, Some(hint))
        }
        Verdict::NoCacheImport => (
            format!(
                "{} of {} steps were rebuilt{} and no cache import was attempted",
                steps.rebuilt,
                steps.total,
                rebuilds.map_or(String::new(), |r| format!(
                    " ({} without a changed input)",
                    r.unexplained
                ))
            ),
            Some(format!(
                "import a commit-independent registry cache ref (--cache-from \
                 type=registry,ref=<repo>:buildcache) as well as any per-commit one; a guard that \
                 drops --cache-from when the ref is missing leaves no trace in the log ({LINT_IMPORT})"
            )),
        ),
        Verdict::AllMiss => {
            let refs: Vec<&str> = imports
                .iter()
                .filter(|i| i.outcome == TransferOutcome::Ok)
                .map(|i| i.reference.as_str())
                .collect();
            let mut why = format!(
                "cache was imported from {} yet none of the {} steps was cached",
                refs.join(", "),
                steps.total
            );
            if let Some(r) = rebuilds {
                why.push_str(&format!(
                    "; {} rebuilt step(s) had no changed input",
                    r.unexplained
                ));
            }
            (
                why,
                Some(format!(
                    "the imported cache does not hold these steps: inline cache and mode=min keep \
                     only the final stage's layers, so builder stages behind COPY --from are never \
                     restored; export with --cache-to type=registry,mode=max ({LINT_MODE})"
                )),
            )
        }
        Verdict::NoCacheExport => {
            let why = match exports.first() {
                None if steps.rebuilt == 0 && steps.total > 0 => format!(
                    "no cache export in the log and no cache imported: all {} steps came from \
                     this builder's local cache, which no other builder shares",
                    steps.total
                ),
                None => "no cache export in the log: what was built here stays in this builder's \
                         local cache only"
                    .to_string(),
                Some(e) => format!(
                    "the cache export did not succeed: {} ({})",
                    e.name,
                    e.error.as_deref().unwrap_or("did not finish")
                ),
            };
            (
                why,
                Some(format!(
                    "export to a commit-independent registry ref with --cache-to \
                     type=registry,ref=<repo>:buildcache,mode=max,ignore-error=true; \
                     BUILDKIT_INLINE_CACHE=1 does nothing under buildx's container and remote \
                     drivers ({LINT_EXPORT})"
                )),
            )
        }
        Verdict::Healthy => {
            let mut why = if steps.total == 0 {
                "no Dockerfile steps in the log".to_string()
            } else {
                format!("{} of {} steps cached", steps.cached, steps.total)
            };
            let ok = count(imports, TransferOutcome::Ok);
            if ok > 0 {
                why.push_str(&format!("; {ok} cache import(s) succeeded"));
            }
            if !failed.is_empty() {
                why.push_str(&format!(
                    "; {} of {} imports failed ({}: {})",
                    failed.len(),
                    imports.len(),
                    failed[0].reference,
                    cause_text(failed[0].cause)
                ));
            }
            if exports.iter().any(|e| e.outcome == TransferOutcome::Ok) {
                why.push_str("; cache exported");
            } else if served_by_import(steps, imports, exports) {
                why.push_str(
                    "; no cache export configured: nothing was rebuilt, so nothing was lost, but \
                     a future rebuild would stay in this builder's local cache (add --cache-to \
                     type=registry,ref=<repo>:buildcache,mode=max to share it)",
                );
            }
            if let Some(r) = rebuilds.filter(|r| r.unexplained > 0) {
                why.push_str(&format!(
                    "; but {} rebuilt step(s) had no changed input ({})",
                    r.unexplained,
                    r.unexplained_stages.join(", ")
                ));
            }
            (why, None)
        }
    }
}
