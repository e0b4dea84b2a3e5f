//! One module per subcommand.

pub mod plan;
pub mod print;

use kiln_bake::{Bake, Resolved};

use crate::error::CliError;
use crate::settings::BakeSettings;

/// Loads and evaluates the bake files named by the settings.
pub fn load(s: &BakeSettings) -> Result<Bake, CliError> {
    kiln_bake::load_paths(&s.files, &s.opts).map_err(CliError::from)
}

/// Checks requested names before resolution, so an unknown name gets a
/// "did you mean" hint and the position of the file that was searched.
pub fn check_requested(bake: &Bake, requested: &[String]) -> Result<(), CliError> {
    for r in requested {
        let n = r.replace('.', "_");
        if n.contains(['*', '?', '[']) || n == "default" {
            continue;
        }
        let known = bake.config.targets.iter().any(|t| t.name == n)
            || bake.config.groups.iter().any(|g| g.name == n);
        if !known {
            let names = bake
                .config
                .targets
                .iter()
                .map(|t| t.name.as_str())
                .chain(bake.config.groups.iter().map(|g| g.name.as_str()));
            let mut err = CliError::usage(format!("unknown target or group {r:?}"));
            err = match kiln_bake::suggest::suggest(&n, names) {
                Some(s) => err.with_hint(format!(
                    "did you mean {s:?}? `kiln print --list targets` lists them"
                )),
                None => err.with_hint("`kiln print --list targets` lists the targets and groups"),
            };
            return Err(err);
        }
    }
    Ok(())
}

/// Resolves requested names with overrides (`ReadTargets`).
pub fn resolve(bake: &Bake, s: &BakeSettings, requested: &[String]) -> Result<Resolved, CliError> {
    check_requested(bake, requested)?;
    bake.resolve(requested, &s.sets, &s.opts)
        .map_err(CliError::from)
}
