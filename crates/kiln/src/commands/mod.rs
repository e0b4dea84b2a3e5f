//! One module per subcommand. A command never imports another: what
//! commands share to prepare a run is in [`crate::prepare`] (and learned
//! costs in [`crate::costs`]).
//!
//! Must never: let a command import another, or hold what commands share
//! (that goes in [`crate::prepare`]).

pub mod build;
pub mod diagnose;
pub mod fleet;
pub mod history;
pub mod keys;
pub mod lint;
pub mod plan;
pub mod preflight;
pub mod print;
pub mod report;
pub mod schedule;
pub mod vars;
pub mod versions;
pub mod why;
