//! Diagnosing BuildKit's layer cache from a build's progress log, for
//! `kiln diagnose`.
//!
//! [`Parser`] reads a log as it arrives — BuildKit's `--progress=plain`
//! text or buildx's `--progress=rawjson` (`client.SolveStatus` JSON
//! objects, one a line or indented over many lines) — keeping one record
//! per vertex, never the log itself.
//! [`diagnose`] turns what it read into a [`contract::Report`]: steps
//! total/cached/rebuilt per Dockerfile stage, cache imports and exports with
//! their outcome, the longest steps and a verdict (`healthy`,
//! `import-failed`, `no-cache-import`, `all-miss`, `no-cache-export`).
//! With [`Inputs`] (kiln's input manifests of the previous and of this
//! build) it tells rebuilds caused by a changed input from cache failures.
//! [`render_text`] writes the report for people; the JSON contract is
//! [`contract`]. The format rules, the verdict rules and their order are in
//! docs/diagnose.md.
//!
//! Pure: no file, network or environment access; callers pass the bytes.
//! Never panics on any input (property-tested on truncated, garbled and
//! shuffled logs).

pub mod contract;
mod inputs;
mod parse;
mod report;
mod text;
mod time;
mod trace;

pub use inputs::{Inputs, InputsError};
pub use parse::{MAX_LINE, MAX_OBJECT, Parser, parse};
pub use report::{Error, diagnose};
pub use text::render as render_text;
pub use trace::Trace;

/// Whether a vertex name is a counted Dockerfile step (`[stage i/n] RUN …`,
/// not `FROM`, not internal): the rule `kiln_engine::steps::is_step` applies
/// to builds kiln runs, restated here so that this crate stays pure.
pub fn is_step(name: &str) -> bool {
    matches!(trace::classify(name), trace::Kind::Step { .. })
}
