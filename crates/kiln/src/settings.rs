//! Settings resolved from the command line and the environment, once.
//!
//! Must never: connect to the engine, open the store or read a bake file:
//! it only says where each is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cli::{BakeArgs, CacheArgs, StoreArgs};
use crate::error::CliError;

/// What every bake-reading command needs.
#[derive(Debug, Clone)]
pub struct BakeSettings {
    pub files: Vec<String>,
    pub sets: Vec<String>,
    /// The names `--var` set, in order (kiln may add its own to `opts.vars`).
    pub given_vars: Vec<String>,
    pub opts: kiln_bake::Options,
    pub cwd: PathBuf,
    /// `SOURCE_DATE_EPOCH` as bake reads it: `--source-date-epoch` when
    /// given (`none`: unset), else the environment's.
    pub source_date_epoch: Option<String>,
    /// The one kiln gives every planned target whose args set none:
    /// `source_date_epoch`, else `DEFAULT_SOURCE_DATE_EPOCH`; `None` when
    /// `--source-date-epoch none`.
    pub sde_default: Option<String>,
}

/// kiln's SOURCE_DATE_EPOCH when nothing sets one: a constant, so that the
/// image of unchanged inputs does not change with the time of its build.
pub const DEFAULT_SOURCE_DATE_EPOCH: &str = "0";

/// The platform of this machine in OCI form (`linux/amd64`).
pub fn local_platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

fn truthy(v: Option<&String>) -> bool {
    v.is_some_and(|v| kiln_bake::model::parse_go_bool(v).unwrap_or(false))
}

impl BakeSettings {
    pub fn resolve(args: &BakeArgs) -> Result<BakeSettings, CliError> {
        let env: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let cwd = std::env::current_dir()
            .map_err(|e| CliError::env(format!("cannot read the current directory: {e}")))?;
        let mut vars = BTreeMap::new();
        for v in &args.var {
            let Some((k, val)) = v.split_once('=') else {
                return Err(CliError::usage(format!(
                    "invalid --var {v:?}: expected NAME=VALUE"
                )));
            };
            vars.insert(k.to_string(), val.to_string());
        }
        let mut files = args.files.clone();
        if files.is_empty()
            && let Some(f) = env.get("BUILDX_BAKE_FILE").filter(|f| !f.is_empty())
        {
            let sep = env
                .get("BUILDX_BAKE_PATH_SEPARATOR")
                .cloned()
                .unwrap_or_else(|| ":".into());
            files = f
                .split(sep.as_str())
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if files.is_empty() {
            files = kiln_bake::default_files(&cwd)
                .map_err(CliError::from)?
                .into_iter()
                .map(|p| {
                    p.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                })
                .collect();
        }
        let opts = kiln_bake::Options {
            builtins: [
                ("BAKE_CMD_CONTEXT".to_string(), "cwd://".to_string()),
                ("BAKE_LOCAL_PLATFORM".to_string(), local_platform()),
            ]
            .into(),
            disable_env_lookup: truthy(env.get("BUILDX_BAKE_DISABLE_VARS_ENV_LOOKUP")),
            file_relative_paths: truthy(env.get("BUILDX_BAKE_FILE_RELATIVE_PATHS")),
            env: env.clone(),
            vars,
        };
        let (source_date_epoch, sde_default) = match args.source_date_epoch.as_deref() {
            Some("none") => (None, None),
            Some(v) => {
                if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) || v.len() > 18 {
                    return Err(CliError::usage(format!(
                        "invalid --source-date-epoch {v:?}: expected seconds since 1970-01-01 (a non-negative integer) or none"
                    )));
                }
                (Some(v.to_string()), Some(v.to_string()))
            }
            None => {
                let env_sde = env
                    .get("SOURCE_DATE_EPOCH")
                    .filter(|v| !v.is_empty())
                    .cloned();
                let default = env_sde
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SOURCE_DATE_EPOCH.to_string());
                (env_sde, Some(default))
            }
        };
        Ok(BakeSettings {
            files,
            sets: args.set.clone(),
            given_vars: args
                .var
                .iter()
                .filter_map(|v| v.split_once('=').map(|(k, _)| k.to_string()))
                .collect(),
            opts,
            cwd,
            source_date_epoch,
            sde_default,
        })
    }
}

/// Where the engine, the record store and the stat cache are.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    pub endpoint: kiln_engine::Endpoint,
    /// The store location as given (`kiln_store::open` reads it): a
    /// directory (relative to `store_base`) or a URL.
    pub store: String,
    /// What a relative store directory is relative to: where kiln runs
    /// for one given on the command line, the project for the default.
    pub store_base: PathBuf,
    /// The directory `.kiln/` lives in: the project's, that of the first
    /// bake file (`BakeSettings::project_dir`), wherever kiln runs.
    pub project: PathBuf,
    pub stat_cache: PathBuf,
    /// The build history costs are learned from.
    pub history: PathBuf,
    /// Stores read after `store`, never written (`--read-store`).
    pub read_stores: Vec<String>,
    /// The key records are signed with (`--signing-key`).
    pub signing_key: Option<PathBuf>,
    /// Public keys whose signed records count (`--trusted-key`).
    pub trusted_keys: Vec<String>,
}

impl StoreSettings {
    pub fn resolve(
        args: &StoreArgs,
        cwd: &std::path::Path,
        project: &std::path::Path,
    ) -> StoreSettings {
        StoreSettings {
            endpoint: resolve_endpoint(args.host.as_deref(), cwd),
            // A directory given on the command line is the user's, taken
            // from where they are; the default lives in the project.
            store: match args.store.clone().filter(|s| !s.is_empty()) {
                Some(s) => s,
                None => ".kiln/store".into(),
            },
            store_base: if args.store.as_deref().is_some_and(|s| !s.is_empty()) {
                cwd.to_path_buf()
            } else {
                project.to_path_buf()
            },
            project: project.to_path_buf(),
            stat_cache: project.join(".kiln/stat-cache.json"),
            history: project.join(kiln_store::history::DEFAULT_LOCATION),
            // A directory given on the command line is taken from where
            // kiln runs, as --store's is.
            read_stores: args
                .read_stores
                .iter()
                .filter(|s| !s.trim().is_empty())
                .map(|s| match s.contains("://") || Path::new(s).is_absolute() {
                    true => s.clone(),
                    false => cwd.join(s).display().to_string(),
                })
                .collect(),
            signing_key: args
                .signing_key
                .clone()
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| cwd.join(p)),
            trusted_keys: args
                .trusted_keys
                .iter()
                .filter(|s| !s.trim().is_empty())
                .cloned()
                .collect(),
        }
    }
}

impl BakeSettings {
    /// The project a run belongs to: the directory of the first bake file
    /// (its records, stat cache and history live in `.kiln/` there, so
    /// building the same file from another directory finds them), or the
    /// current directory for a bake file read from stdin.
    pub fn project_dir(&self) -> PathBuf {
        self.files
            .iter()
            .find(|f| f.as_str() != "-" && !f.contains("://"))
            .and_then(|f| self.cwd.join(f).parent().map(PathBuf::from))
            .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
            .unwrap_or_else(|| self.cwd.clone())
    }
}

/// Where the engine is: `--host`, then `DOCKER_HOST`, then the socket
/// `scripts/dev-env` creates in this repository, then the system socket.
pub fn resolve_endpoint(flag: Option<&str>, cwd: &std::path::Path) -> kiln_engine::Endpoint {
    let docker_cli = std::env::var_os("KILN_DOCKER_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/docker"));
    let host = flag
        .map(String::from)
        .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()))
        .or_else(|| {
            cwd.ancestors()
                .map(|d| d.join(".kiln/dev-env/docker.sock"))
                .find(|p| p.exists())
                .map(|p| format!("unix://{}", p.display()))
        })
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string());
    kiln_engine::Endpoint { host, docker_cli }
}

/// Cache-ref naming from the command line and environment.
pub fn cache_settings(a: &CacheArgs) -> kiln_plan::cache::CacheSettings {
    kiln_plan::cache::CacheSettings {
        repository: a.cache_repo.clone().filter(|s| !s.is_empty()),
        scope: a.cache_scope.clone().filter(|s| !s.is_empty()),
        disabled: false,
    }
}

/// What `kiln build` is asked to do, resolved from its flags.
pub struct BuildSettings {
    pub bake: BakeSettings,
    pub targets: Vec<String>,
    pub jobs: usize,
    pub fail_fast: bool,
    pub require_store: bool,
    /// `--claim-wait` (or `KILN_CLAIM_WAIT`).
    pub claim_wait: std::time::Duration,
    pub push: bool,
    pub progress: crate::cli::Progress,
    pub format: crate::cli::Format,
    pub force: bool,
    pub store: StoreSettings,
    pub cache: kiln_plan::cache::CacheSettings,
    pub fleet: Option<String>,
    pub costs: Option<String>,
    pub gb_per_job: f64,
    pub driver: crate::cli::DriverKind,
    /// `--builder` (or `KILN_BUILDER`).
    pub builder: Option<String>,
    /// `--run-id`.
    pub run_id: Option<String>,
    /// `--compiler-cache` (or `KILN_COMPILER_CACHE`).
    pub compiler_cache: Option<String>,
    pub require_compiler_cache: bool,
    pub force_recache: bool,
    /// `--allow`: the entitlements a target may ask for.
    pub allow: Vec<String>,
    /// `--metadata-file`: where bake's metadata of the run goes.
    pub metadata_file: Option<PathBuf>,
}

/// What `kiln build` does instead of building, asked by bake's flags.
pub enum Instead {
    /// `--print`: `kiln print`'s JSON.
    Print,
    /// `--list`: the targets or the variables.
    List(crate::cli::ListKind),
}

/// Applies `docker buildx bake`'s own flags to a build, with bake's
/// meaning: the shorthands become `--set` overrides after the user's own,
/// as bake appends them (`--load` → `*.load=true`, `--no-cache` →
/// `*.no-cache=true`, `--pull` → `*.pull=true`, `--sbom`/`--provenance`
/// → `*.attest=…`); a flag kiln cannot honour is refused with the reason.
/// `Some` when the flags ask for something else than a build.
pub fn apply_bake_flags(
    f: &crate::cli::BakeFlags,
    progress: crate::cli::Progress,
    bake: &mut BakeSettings,
) -> Result<Option<Instead>, CliError> {
    use crate::cli::Progress;
    if f.debug {
        return Err(CliError::usage(
            "-D/--debug: kiln keeps no debug log of its own, so it does not take bake's debug flag",
        )
        .with_hint("drop it: --progress raw shows every line BuildKit reports, --progress json every event of kiln's"));
    }
    if progress == Progress::Rawjson {
        return Err(CliError::usage(
            "--progress rawjson: kiln does not pass BuildKit's raw solve status through",
        )
        .with_hint("use --progress json (kiln's events, one JSON object per line) or --progress raw (every line BuildKit reports)"));
    }
    if progress == Progress::Tty && !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return Err(CliError::usage(
            "--progress tty: stderr is not a terminal, so there is no live view to draw",
        )
        .with_hint(
            "use --progress auto (the live view on a terminal, plain lines otherwise) or plain",
        ));
    }
    let method = if f.check {
        "check"
    } else {
        f.call.as_deref().unwrap_or("build")
    };
    match method {
        "build" => {}
        "check" | "outline" | "targets" => {
            return Err(CliError::usage(format!(
                "--call {method}: kiln builds and does not run the Dockerfile frontend's other methods"
            ))
            .with_hint(if method == "check" {
                "run `kiln lint` for the Dockerfile checks (docs/lint.md), or `docker buildx bake --call check` with buildx 0.15 or later"
            } else {
                "run `docker buildx bake --call METHOD` with buildx 0.15 or later"
            }));
        }
        other => {
            return Err(CliError::usage(format!(
                "--call {other}: not a method; bake's are build, check, outline and targets"
            )));
        }
    }
    let mut shorthands = Vec::new();
    if f.load {
        shorthands.push("*.load=true".to_string());
    }
    if f.no_cache {
        shorthands.push("*.no-cache=true".to_string());
    }
    if f.pull {
        shorthands.push("*.pull=true".to_string());
    }
    for (kind, value) in [("sbom", &f.sbom), ("provenance", &f.provenance)] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            shorthands.push(format!("*.attest={}", canonical_attest(kind, v)));
        }
    }
    bake.sets.extend(shorthands);
    if let Some(l) = &f.list {
        return list_kind(l).map(|k| Some(Instead::List(k)));
    }
    Ok(f.print.then_some(Instead::Print))
}

/// `--sbom`/`--provenance`'s value as an `attest` entry, as buildx writes
/// it: a boolean turns it on or off, anything else follows `type=`.
fn canonical_attest(kind: &str, value: &str) -> String {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "t" => format!("type={kind},disabled=false"),
        "false" | "0" | "f" => format!("type={kind},disabled=true"),
        _ => format!("type={kind},{value}"),
    }
}

/// bake's `--list` value: `targets`, `variables`, or
/// `type=targets|variables[,format=table]`.
fn list_kind(value: &str) -> Result<crate::cli::ListKind, CliError> {
    use crate::cli::ListKind;
    let mut kind = None;
    for part in value.split(',') {
        let (k, v) = part.split_once('=').unwrap_or(("type", part));
        match (k.trim(), v.trim()) {
            ("type", "targets") => kind = Some(ListKind::Targets),
            ("type", "variables") => kind = Some(ListKind::Variables),
            ("format", "table") => {}
            ("format", other) => {
                return Err(CliError::usage(format!(
                    "--list {value}: kiln lists as a table only, not as {other}"
                ))
                .with_hint("use `kiln vars list --format json` for the variables as JSON, or `kiln print` for the targets"));
            }
            _ => {
                return Err(CliError::usage(format!(
                    "--list {value}: not a list bake knows; say targets or variables"
                )));
            }
        }
    }
    kind.ok_or_else(|| {
        CliError::usage(format!(
            "--list {value}: say type=targets or type=variables"
        ))
    })
}
