//! The build graph of a kiln run: which target needs which, and in what order to build.
//!
//! This crate owns the derivation of dependency edges from resolved targets
//! ([`PlanTarget`]): `target:` named contexts, and registry references — a
//! `docker-image://` context or a build arg — that name a tag another target produces,
//! compared after Docker's reference normalisation ([`normalize_reference`]). It owns the
//! deterministic build order, the closure of a request, cycle and unknown-name errors with
//! "did you mean" suggestions ([`suggest`]), and the mermaid/Graphviz renderings.
//!
//! It is pure and must stay so: no file, network, process or clock access, no environment
//! reads, no randomness. Given the same targets it returns the same graph, order and text,
//! so plans can be snapshot-tested and simulated. It must never depend on the bake
//! evaluator (`kiln-bake`): callers convert their targets into [`PlanTarget`]. Its cost is
//! linear in targets plus edges (up to a log factor for ordering), so it serves graphs of
//! tens of thousands of targets.

pub mod cache;
mod error;
mod graph;
pub mod key;
pub mod plan;
pub mod platform;
mod reference;
mod render;
pub mod schedule;
mod target;

pub use error::GraphError;
pub use graph::{Edge, EdgeKind, Graph};
pub use kiln_util::suggest;
pub use plan::{Plan, PlannedTarget};
pub use reference::{ImageRef, normalize_reference, repository_name};
pub use target::PlanTarget;
