//! The engine side of a run: the record store and stat cache, the async
//! runtime, the engine endpoint or buildx builder, registry probes, and
//! engine errors as CLI errors.
//!
//! Must never: connect to an engine or read or write a record: it opens
//! the store and names the endpoint, and the run does the rest.

use std::sync::Arc;

use kiln_engine::{Endpoint, EngineError};

use crate::error::{CliError, Kind};
use crate::settings::StoreSettings;

/// Opens the record store and the stat cache.
pub fn open_store(
    s: &StoreSettings,
) -> Result<
    (
        Arc<dyn kiln_store::RecordStore>,
        Arc<kiln_engine::hashing::StatCache>,
    ),
    CliError,
> {
    use kiln_store::trust::{Layered, SigningKey, TrustedKey, Trusting};
    let open = |loc: &str, base: &std::path::Path| {
        kiln_store::open(loc, base).map_err(|e| match e {
            kiln_store::StoreError::Invalid(m) => CliError::usage(m),
            e => CliError::env(e.to_string()),
        })
    };
    // The key is read once; only its name and public half are ever shown.
    let signer = match &s.signing_key {
        Some(p) => Some(Arc::new(SigningKey::read(p).map_err(|m| {
            CliError::usage(m)
                .with_hint("`kiln keys generate NAME` writes a key file (docs/trust.md)")
        })?)),
        None => None,
    };
    let trusted = s
        .trusted_keys
        .iter()
        .map(|k| TrustedKey::parse(k).map_err(CliError::usage))
        .collect::<Result<Vec<_>, _>>()?;
    let mine: Arc<dyn kiln_store::RecordStore> = Arc::new(Trusting::new(
        Arc::from(open(&s.store, &s.store_base)?),
        signer,
        trusted.clone(),
    ));
    let store: Arc<dyn kiln_store::RecordStore> = if s.read_stores.is_empty() {
        mine
    } else {
        // (Relative read-store directories were made absolute from where
        // kiln runs, as --store's are.)
        let reads = s
            .read_stores
            .iter()
            .map(|r| {
                let inner = Arc::from(open(r, &s.store_base)?);
                Ok(Arc::new(Trusting::new(inner, None, trusted.clone()))
                    as Arc<dyn kiln_store::RecordStore>)
            })
            .collect::<Result<Vec<_>, CliError>>()?;
        Arc::new(Layered::new(mine, reads))
    };
    Ok((
        store,
        kiln_engine::hashing::StatCache::shared(&s.stat_cache),
    ))
}

/// A multi-threaded runtime for the engine calls.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::env(format!("cannot start the async runtime: {e}")))
}

/// An engine error as a CLI error of the matching kind; an unreachable
/// engine says how to start one.
pub fn engine_error(e: EngineError, ep: &Endpoint) -> CliError {
    match e {
        EngineError::Unreachable { endpoint, detail } => CliError::env(format!("cannot reach the Docker engine at {endpoint}: {detail}"))
            .with_hint(format!(
                "start a Docker engine (dockerd) and point DOCKER_HOST or --host at it (tried {}); in a kiln checkout, `export $(scripts/dev-env up)` starts one",
                ep.host
            )),
        EngineError::Input(m) => CliError::usage(m),
        EngineError::Build(m) => CliError { kind: Kind::Failed, message: m, hint: None },
        e @ (EngineError::Io { .. } | EngineError::Store(_) | EngineError::Tool(_)) => {
            CliError::env(e.to_string())
        }
    }
}

/// The buildx builder a `--driver buildx` run uses: `--builder`, then
/// `KILN_BUILDER`, then `BUILDX_BUILDER`, then `default`; buildx runs as
/// `$KILN_DOCKER` (default `docker` on the PATH).
pub fn builder_spec(name: Option<&str>) -> kiln_engine::driver::buildx::BuilderSpec {
    let name = name
        .map(String::from)
        .or_else(|| {
            std::env::var("BUILDX_BUILDER")
                .ok()
                .filter(|b| !b.is_empty())
        })
        .unwrap_or_else(|| "default".into());
    kiln_engine::driver::buildx::BuilderSpec {
        name,
        docker: std::env::var_os("KILN_DOCKER")
            .map(Into::into)
            .unwrap_or_else(|| "docker".into()),
    }
}

/// A node's engine endpoint, with a relative unix socket path taken
/// relative to the directory kiln runs in.
pub fn endpoint(raw: &str, cwd: &std::path::Path) -> Option<kiln_engine::Endpoint> {
    let host = if let Some(p) = raw.strip_prefix("unix://") {
        let path = std::path::Path::new(p);
        if path.is_absolute() {
            raw.to_string()
        } else {
            format!("unix://{}", cwd.join(path).display())
        }
    } else if raw.starts_with("tcp://") {
        raw.to_string()
    } else {
        return None;
    };
    Some(kiln_engine::Endpoint {
        host,
        docker_cli: std::env::var_os("KILN_DOCKER_CLI")
            .map(Into::into)
            .unwrap_or_else(|| "/usr/bin/docker".into()),
    })
}

/// Whether each registry ref exists (a raw manifest request; a cache-only
/// manifest counts): `Some(true|false)`, or `None` when its registry could
/// not be asked. Each ref is asked once; a registry that fails once is not
/// asked again (one warning per registry).
pub fn probe_refs(
    refs: impl IntoIterator<Item = String>,
) -> Result<std::collections::HashMap<String, Option<bool>>, CliError> {
    use kiln_engine::registry::Resolution;
    let registry = kiln_engine::registry::Registry::new(std::time::Duration::from_secs(10))
        .map_err(|e| CliError::env(e.to_string()))?;
    let rt = runtime()?;
    let mut out = std::collections::HashMap::new();
    let mut dead: std::collections::HashSet<String> = Default::default();
    for r in refs {
        if out.contains_key(&r) {
            continue;
        }
        let host = kiln_plan::ImageRef::parse(&r)
            .map(|i| i.domain().to_string())
            .unwrap_or_default();
        let found = if dead.contains(&host) {
            None
        } else {
            match rt.block_on(registry.check(&r)) {
                Ok(Resolution::Found(_)) => Some(true),
                Ok(Resolution::Absent) => Some(false),
                Err(err) => {
                    eprintln!("warning: cannot ask the registry {host}: {err}");
                    dead.insert(host);
                    None
                }
            }
        };
        out.insert(r, found);
    }
    Ok(out)
}
