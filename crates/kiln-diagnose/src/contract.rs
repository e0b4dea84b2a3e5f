//! The `kiln diagnose --format json` contract: every type the JSON output is
//! made of, in one place (also described in docs/diagnose.md).
//!
//! ```json
//! {"input": {"format": "plain", "lines": 120, "unrecognized": 0, "builds": 1},
//!  "outcome": "succeeded",
//!  "steps": {"total": 7, "cached": 5, "rebuilt": 2, "failed": 0},
//!  "time_s": 3.2,
//!  "stages": [{"name": "build", "total": 3, "cached": 1, "rebuilt": 2, "time_s": 3.1,
//!              "rebuilds": {"legitimate": 2, "unexplained": 0}}],
//!  "imports": [{"ref": "registry/app:buildcache", "outcome": "error",
//!               "error": "...: not found", "cause": "not-found", "time_s": 0.1}],
//!  "exports": [{"name": "exporting cache to registry", "kind": "registry",
//!               "outcome": "ok", "error": null, "layers": 12, "time_s": 4.0}],
//!  "longest": [{"stage": "build", "step": "RUN make", "time_s": 3.0, "cached": false}],
//!  "rebuilds": {"legitimate": 2, "unexplained": 0, "changes": ["..."],
//!               "unexplained_stages": [], "notes": []},
//!  "verdict": "import-failed", "findings": ["import-failed", "no-cache-export"],
//!  "why": "...", "hint": "..."}
//! ```
//!
//! Fields are only ever added; a consumer should ignore fields it does not
//! know. Times are seconds, rounded to milliseconds. `rebuilds` (top level
//! and per stage) is present only with `--inputs`.

use serde::Serialize;

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// What was read.
    pub input: InputSummary,
    /// How the build(s) in the log ended.
    pub outcome: Outcome,
    /// Dockerfile instruction steps (see [`Steps`] for what counts).
    pub steps: Steps,
    /// The sum of the steps' times (not wall-clock time: stages run in
    /// parallel).
    pub time_s: f64,
    /// Per Dockerfile stage, in the order the log first mentions them.
    pub stages: Vec<Stage>,
    /// Cache imports (`importing cache manifest from REF`), in log order.
    pub imports: Vec<Import>,
    /// Cache exports (`exporting cache…`, or inline cache prepared inside
    /// `exporting to image`), in log order.
    pub exports: Vec<Export>,
    /// The longest steps (at most five, longest first; steps that took no
    /// time are left out).
    pub longest: Vec<LongStep>,
    /// Rebuilt steps split into legitimate and unexplained (`--inputs` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuilds: Option<Rebuilds>,
    /// The first of `findings`, or `healthy`.
    pub verdict: Verdict,
    /// Every verdict rule that matched, in rule order (empty when healthy).
    pub findings: Vec<Verdict>,
    /// One line: why this verdict.
    pub why: String,
    /// One line: what to change (none when healthy).
    pub hint: Option<String>,
}

/// What was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputSummary {
    /// `plain` or `rawjson`, detected from the first non-blank line.
    pub format: LogFormat,
    /// Lines read.
    pub lines: u64,
    /// Non-blank lines that were neither BuildKit progress nor a message
    /// kiln looks for (garbled JSON, foreign output).
    pub unrecognized: u64,
    /// Builds found in the log (a new build starts at `#0 building with …`
    /// or at a second `#1 [internal] load build definition …`); counts are
    /// summed over all of them.
    pub builds: u32,
}

/// The two progress formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// `--progress=plain`.
    Plain,
    /// `--progress=rawjson`: `client.SolveStatus` JSON objects, one a line
    /// or (buildx ≥ 0.13) indented over many lines.
    Rawjson,
}

/// How the build ended, as far as the log shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// No vertex failed and every step finished.
    Succeeded,
    /// A vertex other than a cache import or export failed.
    Failed,
    /// A step started but never finished (a truncated log).
    Incomplete,
}

/// Step counts. A step is a Dockerfile instruction vertex
/// (`[stage i/n] RUN …`); `FROM` steps are not counted (this engine reports
/// `FROM <local image>` DONE, never CACHED), nor are internal vertices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Steps {
    pub total: u64,
    /// Reported `CACHED` (plain) or `"cached": true` (rawjson).
    pub cached: u64,
    /// `total - cached`: run, failed, or not finished.
    pub rebuilt: u64,
    /// Steps that ended in an error.
    pub failed: u64,
}

/// One Dockerfile stage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stage {
    /// The name BuildKit prints in `[name i/n]`; `stage-0` for the single
    /// unnamed stage (`[i/n]`); a `--platform` prefix is kept
    /// (`linux/amd64 build`).
    pub name: String,
    pub total: u64,
    pub cached: u64,
    pub rebuilt: u64,
    /// The sum of the stage's step times.
    pub time_s: f64,
    /// `--inputs` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuilds: Option<StageRebuilds>,
}

/// A stage's rebuilt steps, classified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StageRebuilds {
    /// A consumed input of the step (or of an earlier step or stage it
    /// depends on) changed.
    pub legitimate: u64,
    /// No consumed input changed: a cache failure.
    pub unexplained: u64,
}

/// The end of a cache import or export vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransferOutcome {
    /// `DONE` / completed without error.
    Ok,
    /// `ERROR: …` / an `error` field, or a message saying the import failed.
    Error,
    /// `CANCELED` (the build stopped first).
    Canceled,
    /// Started, never ended in the log.
    Incomplete,
}

/// Why an import failed, from its error message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportCause {
    /// The ref does not exist (`not found`, 404, `manifest unknown`).
    NotFound,
    /// 401/403, `unauthorized`, `denied`.
    Unauthorized,
    /// BuildKit refuses cache manifest blobs over 1 MiB (`is too large`).
    TooLarge,
    /// Connection refused, no such host, timeouts.
    Unreachable,
    /// Anything else.
    Other,
}

/// One cache import.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Import {
    /// What follows `importing cache manifest from ` (`local:<id>` for a
    /// local cache directory), or the path of a local cache import the
    /// client warned about.
    #[serde(rename = "ref")]
    pub reference: String,
    pub outcome: TransferOutcome,
    pub error: Option<String>,
    /// Set when `outcome` is `error`.
    pub cause: Option<ImportCause>,
    pub time_s: f64,
}

/// The cache backend an export vertex names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExportKind {
    /// `exporting cache to registry`.
    Registry,
    /// `exporting cache to client directory`.
    Local,
    /// `exporting to GitHub Actions Cache`.
    Gha,
    /// `exporting cache to Amazon S3`.
    S3,
    /// `exporting cache to Azure Blob Storage`.
    Azblob,
    /// Inline cache on BuildKit ≥ 0.12: the status `preparing layers for
    /// inline cache` inside the image export (`exporting to image`), or a
    /// vertex of that name; also a vertex `exporting inline cache`.
    Inline,
    /// `exporting cache` / `exporting content cache`: the backend is not
    /// named (older BuildKit, e.g. dockerd 20.10's embedded one, prints
    /// `exporting cache` for inline cache).
    Unspecified,
}

/// One cache export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Export {
    /// The vertex name; for inline cache inside an image export, which has
    /// no vertex of its own, the status: `preparing layers for inline
    /// cache`.
    pub name: String,
    pub kind: ExportKind,
    /// For inline cache inside an image export: the image export's outcome
    /// (the cache travels in the image's config).
    pub outcome: TransferOutcome,
    pub error: Option<String>,
    /// `writing layer …` sub-steps that finished (0 for inline cache).
    pub layers: u64,
    /// The vertex's time; for inline cache inside an image export, the
    /// status's.
    pub time_s: f64,
}

/// One of the longest steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LongStep {
    pub stage: String,
    /// The instruction as BuildKit names it (`RUN make -j8`).
    pub step: String,
    pub time_s: f64,
    pub cached: bool,
}

/// Rebuilt steps, classified against the input manifests (`--inputs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Rebuilds {
    pub legitimate: u64,
    pub unexplained: u64,
    /// The changed inputs, one line each (as `kiln why` prints them).
    pub changes: Vec<String>,
    /// Stages with at least one unexplained rebuild, in stage order.
    pub unexplained_stages: Vec<String>,
    /// Anything that limited the classification (a stage of the log the
    /// manifest does not know, step counts that disagree).
    pub notes: Vec<String>,
}

/// The verdict. Rules, in order (the first that matches is the verdict;
/// docs/diagnose.md explains the order):
///
/// 1. `import-failed`: at least one import was attempted, at least one
///    failed and none succeeded;
/// 2. `no-cache-import`: no import was attempted and at least one step was
///    rebuilt;
/// 3. `all-miss`: an import succeeded, there are steps and none was cached
///    (with `--inputs`: and at least one rebuild is unexplained);
/// 4. `no-cache-export`: the build succeeded and no cache export succeeded,
///    unless none was attempted while an import succeeded and no step was
///    rebuilt (nothing to export: `healthy`, and `why` notes that no export
///    is configured);
/// 5. `healthy`: none of the above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    ImportFailed,
    NoCacheImport,
    AllMiss,
    NoCacheExport,
    Healthy,
}

impl Verdict {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::ImportFailed => "import-failed",
            Verdict::NoCacheImport => "no-cache-import",
            Verdict::AllMiss => "all-miss",
            Verdict::NoCacheExport => "no-cache-export",
            Verdict::Healthy => "healthy",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
