//! kiln-engine: runs planned builds on BuildKit.
//!
//! Owns: the drivers (the Docker Engine API through `bollard` for the local
//! engine's embedded BuildKit; the docker CLI's BuildKit client for targets
//! that need secrets), build contexts (filtered by `.dockerignore`), the
//! hand-over of `target:` / `docker-image://` named contexts on an engine
//! without named-context support, the scheduler (dependency order, a
//! concurrency cap, fail-fast or keep-going) and progress events.
//! Must never: evaluate bake files or decide what to build (that is the
//! plan's job); print anything itself (events go to a [`events::Reporter`]).

pub mod ahead;
pub mod claims;
pub mod context;
pub mod driver;
pub mod error;
pub mod events;
pub mod git;
pub mod hashing;
pub mod identity;
pub mod inputs;
pub mod jobs;
pub mod keys;
pub mod naming;
pub mod preflight;
pub mod probe;
pub mod proc;
pub mod registry;
pub mod rewrite;
pub mod run;
pub mod spec;
pub mod steps;
pub mod user_cache;

pub use error::EngineError;
pub use events::{Event, Reporter};
pub use run::{RunOptions, RunSummary, TargetResult, TargetStatus, run};
pub use spec::{BuildSpec, ContextSource, Endpoint, KeyView, SecretSpec, Unit};
