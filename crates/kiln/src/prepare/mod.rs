//! Everything the commands share to prepare a run, so that no command
//! imports another (`commands/` holds one module per subcommand and each
//! calls this one):
//!
//! - [`bake`]: loading the bake files and resolving the requested targets
//!   (`load`, `resolve`, `check_requested`);
//! - [`plan`]: the resolved targets as a plan (`Planned`, `build_plan`) and
//!   what a build would do with each (`predictions`);
//! - [`spec`]: bake targets → engine `BuildSpec`s (`spec_for`, `specs_for`,
//!   `missing_dockerfile`) and the cache policy per driver (`cache_policy`,
//!   `apply_local_cache`, `apply_buildx_cache`);
//! - [`platforms`]: multi-platform targets split into platform units and
//!   a join on buildx (`split`);
//! - [`engine`]: the record store and stat cache (`open_store`), the async
//!   runtime (`runtime`), the engine endpoint or buildx builder (`endpoint`,
//!   `builder_spec`), registry probes (`probe_refs`) and engine errors as CLI
//!   errors (`engine_error`);
//! - [`fleet`]: the fleet plan of a `--fleet` run (`fleet_plan`, `FleetPlan`);
//! - [`preflight`]: the check `kiln build` and `kiln preflight` both run
//!   (`needs`, `check`, `verdict`, `FleetNodes`);
//! - [`build`]: all of `kiln build`'s preparation (`prepare`, `Prepared`);
//! - [`names`]: the run's id and each build's name in BuildKit's history;
//! - [`compiler_cache`]: the compiler cache probed and handed to builds;
//! - [`stamps`] and [`checkout`]: `VCS_REF`/`BUILD_DATE` kept out of keys,
//!   and read from the checkout's files when git's last answer holds.
//!
//! Costs learned from the build history are in [`crate::costs`].
//!
//! Must never: print to stdout (warnings go to stderr), or decide an exit
//! code: failures are returned as [`CliError`]s, which the command hands
//! back to `run`.
//!
//! [`CliError`]: crate::error::CliError

pub mod bake;
pub mod build;
pub mod checkout;
pub mod compiler_cache;
pub mod engine;
pub mod fleet;
pub mod names;
pub mod plan;
pub mod platforms;
pub mod preflight;
pub mod spec;
pub mod stamps;

pub use bake::{check_requested, load, resolve};
pub use engine::{builder_spec, endpoint, engine_error, open_store, probe_refs, runtime};
pub use fleet::{FleetPlan, fleet_plan};
pub use plan::{Planned, build_plan, predictions};
pub use preflight::{FleetNodes, check, needs, verdict};
pub use spec::{
    apply_buildx_cache, apply_local_cache, cache_policy, missing_dockerfile, spec_for, specs_for,
};
