//! The compiler cache of a run (`--compiler-cache`): probed for reads and
//! writes before anything builds, then handed to every build as the
//! BuildKit secret `kiln-sccache` in a private temporary file.
//!
//! Must never: put the cache's settings or credentials anywhere but that
//! file, which lives as long as the guard it returns.

use crate::error::CliError;

/// Probes the compiler cache at `location` for reads and writes, and
/// hands every build its settings as the secret `kiln-sccache` (a target
/// that declares a secret of that id keeps its own). A cache that fails
/// the probe stops the run with `require`, else is a warning and no build
/// gets it.
pub fn compiler_cache(
    location: &str,
    require: bool,
    force_recache: bool,
    specs: &mut [kiln_engine::BuildSpec],
) -> Result<Option<kiln_engine::proc::TempDir>, CliError> {
    use kiln_store::compiler_cache::{CompilerCache, SECRET_ID};
    let fail = |why: String| -> Result<Option<kiln_engine::proc::TempDir>, CliError> {
        if require {
            return Err(CliError::env(format!("compiler cache {why}")).with_hint(
                "fix the store or its credentials (a policy must grant writes, and s3:ListBucket so a missing object is a 404), or drop --require-compiler-cache to build without it",
            ));
        }
        eprintln!("warning: compiler cache {why}; builds compile without it");
        Ok(None)
    };
    let cache = match CompilerCache::open(location) {
        Ok(c) => c,
        Err(e) => return Err(CliError::usage(format!("--compiler-cache: {e}"))),
    };
    let p = cache.probe();
    if let Some(why) = &p.write {
        return fail(format!(
            "{} cannot be written ({why}): a cache that takes no writes caches nothing",
            cache.shown()
        ));
    }
    if let Some(why) = &p.read {
        return fail(format!("{} cannot be read back ({why})", cache.shown()));
    }
    if let Some(why) = &p.missing {
        eprintln!(
            "warning: compiler cache {}: an object that is not there is not answered as missing ({why}); sccache counts such lookups as errors, not misses (on S3, grant s3:ListBucket)",
            cache.shown()
        );
    }
    // A private directory (0700) holding the file (0600), removed when
    // the run ends, as the job-count secret's.
    let dir = kiln_engine::proc::TempDir::new("compiler-cache")
        .map_err(|e| CliError::env(e.to_string()))?;
    let secret = kiln_engine::jobs::write_private_secret(
        dir.path(),
        SECRET_ID,
        &cache.secret_text(force_recache),
    )
    .map_err(|e| CliError::env(e.to_string()))?;
    for spec in specs.iter_mut() {
        if !spec.secrets.iter().any(|x| x.id == SECRET_ID) {
            spec.secrets.push(secret.clone());
        }
    }
    Ok(Some(dir))
}
