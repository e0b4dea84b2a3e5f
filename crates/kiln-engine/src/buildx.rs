//! The buildx driver: builds a target with `docker buildx build` on a
//! buildx builder, with kiln's cache policy applied, and reads the outcome
//! back (live progress as kiln's events, the pushed digest from
//! `--metadata-file`). [`command`] is the command line (also what
//! `kiln plan --driver buildx` prints); [`BuildxDriver`] runs it.
//!
//! Only buildx's documented command-line contract is used: `buildx
//! version`, `buildx inspect`, `buildx build` with `--progress`,
//! `--metadata-file`, `--build-context`, `--secret`, `--cache-from/to`,
//! `--push`; features are chosen by the version buildx reports.
//!
//! What it always does: registry cache import of the stable ref and the
//! per-commit ref, export to the stable ref with `mode=max`; named contexts
//! handed over as `--build-context NAME=docker-image://REF@DIGEST` (the
//! builder is remote, so hand-over is through the registry by digest, never
//! a tag); secrets by id and source only; `--progress rawjson` and a
//! metadata file so kiln can read the outcome.
//! What it never does: add `BUILDKIT_INLINE_CACHE`, or pass a secret value.
//!
//! Must never: evaluate bake files or decide what to build.

use std::collections::BTreeMap;
use std::path::Path;

use kiln_plan::cache::CachePolicy;

use crate::driver::{BuildOutcome, BuildRequest};
use crate::error::EngineError;
use crate::local::Failed;
use crate::spec::{BuildSpec, ContextSource};

/// How to invoke buildx.
#[derive(Clone, Debug)]
pub struct BuildxOptions {
    /// `--builder NAME`.
    pub builder: String,
    /// The docker CLI with the buildx plugin.
    pub docker: String,
    /// Where buildx writes the build result (`--metadata-file`).
    pub metadata_file: Option<String>,
    /// A docker-driver builder is a docker context: buildx before 0.14
    /// selects it only as `docker --context NAME buildx`, so it is named
    /// that way instead of `--builder`.
    pub context: Option<String>,
    /// `--progress` (`rawjson`, or `plain` for a buildx without it).
    pub progress: String,
    /// Secrets kiln adds itself (the job count), after the bake file's.
    pub implicit_secrets: Vec<crate::spec::SecretSpec>,
    /// Extra tags (the per-run build tag when nothing is pushed).
    pub extra_tags: Vec<String>,
    /// Clamp the file times in the pushed layers to `SOURCE_DATE_EPOCH`
    /// (the image exporter's `rewrite-timestamp`), so that a rebuild of
    /// unchanged inputs is byte-identical. Only where BuildKit can: a
    /// pushed image of a builder whose exporter does not unpack into an
    /// engine (`rewrite_applies`).
    pub rewrite_timestamp: bool,
}

impl Default for BuildxOptions {
    fn default() -> Self {
        BuildxOptions {
            builder: "default".into(),
            docker: "docker".into(),
            metadata_file: None,
            context: None,
            progress: "rawjson".into(),
            implicit_secrets: Vec::new(),
            extra_tags: Vec::new(),
            rewrite_timestamp: false,
        }
    }
}

/// Whether a build of `spec` on a builder can have its layer file times
/// rewritten to `SOURCE_DATE_EPOCH`: it has one, its image is pushed, and
/// the builder keeps no engine image store. A docker-driver builder's
/// image exporter always unpacks into the engine, and BuildKit refuses
/// `rewrite-timestamp` with `unpack` (moby/buildkit#4230).
pub fn rewrite_applies(spec: &BuildSpec, keeps_images: bool) -> bool {
    !keeps_images
        && spec.push
        && !spec.tags.is_empty()
        && spec
            .args
            .get("SOURCE_DATE_EPOCH")
            .is_some_and(|v| !v.is_empty())
}

/// Shows `p` relative to `base` when it is inside it (stable snapshots and
/// shorter lines); otherwise as is.
fn shown(p: &Path, base: &Path) -> String {
    match p.strip_prefix(base) {
        Ok(r) if r.as_os_str().is_empty() => ".".into(),
        Ok(r) => r.display().to_string(),
        Err(_) => p.display().to_string(),
    }
}

/// The argv of `docker buildx build` for `spec` under `policy`.
///
/// `hand_over` maps each named context (and dependency tag) to the immutable
/// reference of what this run produced for it (`repo@sha256:…`). Paths are
/// shown relative to `cwd` (the directory buildx runs in).
pub fn command(
    spec: &BuildSpec,
    policy: &CachePolicy,
    hand_over: &BTreeMap<String, String>,
    opts: &BuildxOptions,
    cwd: &Path,
) -> Vec<String> {
    let mut a: Vec<String> = vec![opts.docker.clone()];
    match &opts.context {
        Some(c) => a.extend([
            "--context".into(),
            c.clone(),
            "buildx".into(),
            "build".into(),
        ]),
        None => a.extend([
            "buildx".into(),
            "build".into(),
            "--builder".into(),
            opts.builder.clone(),
        ]),
    }
    a.extend(["--progress".into(), opts.progress.clone()]);
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    match &spec.dockerfile_inline {
        // buildx reads an inline Dockerfile from stdin.
        Some(_) => flag("--file", "-".into()),
        None => flag("--file", shown(&spec.dockerfile, cwd)),
    }
    if let Some(t) = &spec.target {
        flag("--target", t.clone());
    }
    if !spec.platforms.is_empty() {
        flag("--platform", spec.platforms.join(","));
    }
    for (k, v) in &spec.args {
        // A dependency's tag used as an arg value resolves to what this run
        // built; a context name stays (buildx resolves it by --build-context).
        let v = match hand_over.get(v) {
            Some(r) if !spec.contexts.contains_key(v) => r.clone(),
            _ => v.clone(),
        };
        flag("--build-arg", format!("{k}={v}"));
    }
    for (k, v) in &spec.labels {
        flag("--label", format!("{k}={v}"));
    }
    for t in spec.tags.iter().chain(&opts.extra_tags) {
        flag("--tag", t.clone());
    }
    for (name, src) in &spec.contexts {
        let value = match src {
            ContextSource::Target { name: t } => hand_over
                .get(name)
                .or_else(|| hand_over.get(t))
                .map(|r| format!("docker-image://{r}"))
                .unwrap_or_else(|| format!("target:{t}")),
            ContextSource::Image { reference, .. } => format!(
                "docker-image://{}",
                hand_over.get(name).unwrap_or(reference)
            ),
            ContextSource::Local { path } => shown(Path::new(path), cwd),
        };
        flag("--build-context", format!("{name}={value}"));
    }
    // A dependency's tag (or a registry-pinned base image) named directly
    // in the Dockerfile resolves to what this run built: BuildKit takes a
    // named context whose name is an image reference in its place.
    for (name, r) in hand_over {
        if !spec.contexts.contains_key(name) && kiln_plan::ImageRef::parse(name).is_some() {
            flag("--build-context", format!("{name}=docker-image://{r}"));
        }
    }
    for s in spec.secrets.iter().chain(&opts.implicit_secrets) {
        let mut v = format!("id={}", s.id);
        if let Some(src) = &s.src {
            v.push_str(&format!(",src={}", shown(src, cwd)));
        } else if let Some(env) = &s.env {
            v.push_str(&format!(",env={env}"));
        }
        flag("--secret", v);
    }
    if let Some(n) = &spec.network {
        flag("--network", n.clone());
    }
    if spec.no_cache {
        a.push("--no-cache".into());
    }
    for e in &policy.from {
        a.push("--cache-from".into());
        a.push(e.csv());
    }
    for e in &policy.to {
        a.push("--cache-to".into());
        a.push(e.csv());
    }
    if spec.push && !spec.tags.is_empty() {
        if opts.rewrite_timestamp {
            // `--push` is `--output type=registry`; the tags name it.
            a.push("--output".into());
            a.push("type=registry,rewrite-timestamp=true".into());
        } else {
            a.push("--push".into());
        }
    }
    if let Some(m) = &opts.metadata_file {
        a.push("--metadata-file".into());
        a.push(m.clone());
    }
    a.push(shown(&spec.context, cwd));
    a
}

/// The policy of a spec given none (a build outside `kiln build`'s cache
/// policy): no import, no export.
fn no_cache_policy() -> CachePolicy {
    CachePolicy {
        driver: kiln_plan::cache::Driver::Buildx,
        platform: "native".into(),
        stable_ref: None,
        from: Vec::new(),
        to: Vec::new(),
        inline: false,
        notices: Vec::new(),
    }
}

/// A buildx builder to build on, as the user names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BuilderSpec {
    /// The builder's name (`docker buildx ls`); for a docker-driver
    /// builder, its docker context.
    pub name: String,
    /// The docker CLI that carries the buildx plugin.
    pub docker: std::path::PathBuf,
}

/// A buildx version, as `docker buildx version` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// From `github.com/docker/buildx v0.15.1 <commit>` or
    /// `github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3` (distribution
    /// builds drop the `v` and add a suffix).
    pub fn parse(text: &str) -> Option<Version> {
        let word = text.split_whitespace().nth(1)?;
        let word = word.trim_start_matches('v');
        let mut nums = word
            .split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<u32>().ok());
        Some(Version(
            nums.next()??,
            nums.next()??,
            nums.next().flatten().unwrap_or(0),
        ))
    }

    /// The oldest buildx kiln drives: `--build-context` (named contexts,
    /// kiln's hand-over) arrived in 0.8, `--metadata-file` before it.
    pub const OLDEST: Version = Version(0, 8, 0);

    /// `--progress rawjson` (present in 0.13, as the distribution build
    /// checked here shows; documented from 0.15); `plain` before it.
    pub fn progress(self) -> &'static str {
        if self >= Version(0, 13, 0) {
            "rawjson"
        } else {
            "plain"
        }
    }
}

/// What `docker buildx inspect NAME` says of a builder.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Inspected {
    /// `docker`, `docker-container`, `remote`, `kubernetes`.
    pub driver: String,
    /// The first node's endpoint (for the docker driver: its context).
    pub endpoint: Option<String>,
    /// The first node's status (`running`, `inactive`, `stopped`, ...).
    pub status: Option<String>,
    /// The first node's BuildKit version, when buildx could ask it.
    pub buildkit: Option<String>,
    /// The first node's platforms, the native one first.
    pub platforms: Vec<String>,
    /// How many nodes the builder has (one `Endpoint:` each).
    pub nodes: usize,
}

impl Inspected {
    /// From the text of `docker buildx inspect` (documented fields
    /// `Driver:` and, per node, `Endpoint:`, `Status:`, `BuildKit
    /// version:` (`Buildkit:` before buildx 0.11), `Platforms:`).
    pub fn parse(text: &str) -> Option<Inspected> {
        let field = |k: &str| {
            text.lines().find_map(|l| {
                let (a, b) = l.split_once(':')?;
                (a.trim() == k).then(|| b.trim().to_string())
            })
        };
        let platforms = field("Platforms")
            .map(|p| {
                p.split(',')
                    .map(|x| x.trim().trim_end_matches('*').to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Some(Inspected {
            driver: field("Driver")?,
            endpoint: field("Endpoint").filter(|e| !e.is_empty()),
            status: field("Status").filter(|e| !e.is_empty()),
            buildkit: field("BuildKit version")
                .or_else(|| field("Buildkit"))
                .filter(|e| !e.is_empty()),
            platforms,
            nodes: text
                .lines()
                .filter(|l| {
                    l.split_once(':')
                        .is_some_and(|(k, _)| k.trim() == "Endpoint")
                })
                .count()
                .max(1),
        })
    }

    /// Whether the builder's images land in a Docker engine's image store
    /// kiln can read: only the docker driver's. Every other driver
    /// (docker-container, remote, kubernetes, and any later one) keeps
    /// what it builds in its own BuildKit, so kiln hands over, skips and
    /// identifies through the registry alone.
    pub fn keeps_images(&self) -> bool {
        self.driver == "docker"
    }
}

/// What `kiln fleet` reports of a buildx node.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BuilderFacts {
    pub builder: String,
    /// The buildx driver of the builder (`docker`, ...).
    pub driver: String,
    /// The buildx version.
    pub buildx: String,
    /// The progress format kiln reads from it.
    pub progress: &'static str,
    /// The engine behind the builder (a docker-driver builder), or `none`
    /// for a builder that keeps no image store.
    pub engine: String,
    /// The engine's version, or the builder's BuildKit version.
    pub engine_version: String,
    /// `classic`, `containerd`, or `none` (registry only).
    pub image_store: &'static str,
    /// How kiln hands images to and from it: `engine` (unique local tags
    /// on the same engine) or `registry` (by digest only).
    pub hand_over: &'static str,
    /// The builder's platforms, native first.
    pub platforms: Vec<String>,
    /// What buildx says of its first node (`running`, `inactive`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// The buildx driver: one builder.
pub struct BuildxDriver {
    builder: BuilderSpec,
    /// The buildx version, asked when the first build starts: a run that
    /// builds nothing starts no buildx process at all.
    version: tokio::sync::OnceCell<Version>,
    inspected: Inspected,
    /// The engine whose image store holds what the builder builds (a
    /// docker-driver builder); `None` for a builder that keeps no image
    /// store, whose every build is pushed and read back from the registry.
    engine: Option<crate::local::LocalEngine>,
    /// Reads what a registry-only builder pushed.
    registry: crate::registry::Registry,
}

/// Runs the docker CLI; its stdout, or stdout+stderr on failure.
/// `env_clean` removes `DOCKER_HOST` and `DOCKER_CONTEXT`. Bounded (four
/// times the engine request bound, 120 s by default): a builder or engine
/// that never answers is an error that says so, and the CLI is killed.
async fn docker_output(
    docker: &std::path::Path,
    args: &[&str],
    env_clean: bool,
) -> Result<String, String> {
    let bound = crate::local::request_bound().saturating_mul(4);
    docker_output_within(docker, args, env_clean, bound).await
}

async fn docker_output_within(
    docker: &std::path::Path,
    args: &[&str],
    env_clean: bool,
    bound: std::time::Duration,
) -> Result<String, String> {
    let mut c = tokio::process::Command::new(docker);
    c.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if env_clean {
        c.env_remove("DOCKER_HOST").env_remove("DOCKER_CONTEXT");
    }
    let child = c
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", docker.display()))?;
    // The CLI and the buildx plugin it runs stop together when the bound
    // passes (crate::children); both streams are read as they come.
    let _group = crate::children::Group::new(child.id());
    let o = tokio::time::timeout(bound, child.wait_with_output())
        .await
        .map_err(|_| {
            format!(
                "`{} {}` did not finish within {}s (a builder or engine that does not answer? set KILN_ENGINE_TIMEOUT=SECONDS, a quarter of this bound, to wait longer)",
                docker.display(),
                args.join(" "),
                bound.as_secs()
            )
        })?
        .map_err(|e| format!("cannot run {}: {e}", docker.display()))?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    if o.status.success() {
        Ok(out)
    } else {
        Err(format!("{}{}", out, String::from_utf8_lossy(&o.stderr))
            .trim()
            .to_string())
    }
}

/// What finding a builder learned (its driver and the engine behind it,
/// if its images land in one), kept for the process: preflight and the
/// run connect to the same builder, and the docker CLI calls are the slow
/// part of a no-op run.
type Found = (Inspected, Option<String>);

fn discovered() -> &'static std::sync::Mutex<std::collections::HashMap<BuilderSpec, Found>> {
    static MEMO: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<BuilderSpec, Found>>,
    > = std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// `buildx` missing from the docker CLI (its own message for an unknown
/// command or plugin).
fn no_buildx(text: &str) -> bool {
    text.contains("is not a docker command") || text.contains("unknown command")
}

fn buildx_missing(docker: &std::path::Path, detail: &str) -> EngineError {
    EngineError::Tool(format!(
        "buildx is not available ({} buildx: {detail}); install the docker-buildx plugin (Debian and Ubuntu: the docker-buildx package; or Docker's buildx release) into $DOCKER_CONFIG/cli-plugins or ~/.docker/cli-plugins",
        docker.display()
    ))
}

/// Finds the builder: a docker context is a docker-driver builder (buildx
/// lists every context as one), answered by `docker context inspect`
/// alone; any other name is asked of `docker buildx inspect`.
async fn discover(b: &BuilderSpec) -> Result<Found, EngineError> {
    if let Some(f) = discovered().lock().ok().and_then(|m| m.get(b).cloned()) {
        return Ok(f);
    }
    let host_of = |context: String| async move {
        docker_output(
            &b.docker,
            &[
                "context",
                "inspect",
                &context,
                "--format",
                "{{.Endpoints.docker.Host}}",
            ],
            false,
        )
        .await
        .map(|h| h.trim().to_string())
    };
    // The docker CLI keeps each context in its store as
    // `contexts/meta/<sha256 of the name>/meta.json`; reading it answers
    // without starting a process (a no-op run's slowest step otherwise).
    // Anything unexpected asks the CLI.
    if let Some(host) = context_host_from_store(&b.name) {
        return Ok(remember(
            b,
            (
                Inspected {
                    driver: "docker".into(),
                    endpoint: Some(b.name.clone()),
                    ..Inspected::default()
                },
                Some(host),
            ),
        ));
    }
    let first = host_of(b.name.clone()).await;
    if let Err(e) = &first
        && e.starts_with("cannot run ")
    {
        return Err(EngineError::Tool(format!(
            "{e}; kiln runs buildx through the docker CLI ($KILN_DOCKER, default `docker` on the PATH)"
        )));
    }
    let found = match first {
        Ok(host) if !host.is_empty() => (
            Inspected {
                driver: "docker".into(),
                endpoint: Some(b.name.clone()),
                ..Inspected::default()
            },
            Some(host),
        ),
        _ => {
            let text = docker_output(&b.docker, &["buildx", "inspect", &b.name], false)
                .await
                .map_err(|e| {
                    if no_buildx(&e) {
                        buildx_missing(&b.docker, &e)
                    } else {
                        EngineError::Input(format!(
                            "no buildx builder {} ({e}); `docker buildx ls` lists the builders, `docker buildx create` or `docker context create` makes one",
                            b.name
                        ))
                    }
                })?;
            let inspected = Inspected::parse(&text).ok_or_else(|| {
                EngineError::Tool(format!(
                    "cannot read `docker buildx inspect {}`: {text:?}",
                    b.name
                ))
            })?;
            if !inspected.keeps_images() {
                // Its endpoint is a BuildKit address (or the engine a
                // builder container runs on), never where its images are.
                return Ok(remember(b, (inspected, None)));
            }
            let context = inspected.endpoint.clone().unwrap_or_else(|| b.name.clone());
            let host = host_of(context.clone()).await.map_err(|e| {
                EngineError::Tool(format!(
                    "buildx builder {} names the docker context {context}, which `docker context inspect` cannot read: {e}",
                    b.name
                ))
            })?;
            (
                Inspected {
                    endpoint: Some(context),
                    ..inspected
                },
                Some(host),
            )
        }
    };
    Ok(remember(b, found))
}

/// The docker endpoint of context `name` from the docker CLI's context
/// store (`$DOCKER_CONFIG`, else `~/.docker`), when it is there and plain:
/// a context with TLS material is left to the CLI.
fn context_host_from_store(name: &str) -> Option<String> {
    let config = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".docker")))?;
    let id = crate::identity::sha256_hex(name.as_bytes());
    let contexts = config.join("contexts");
    if contexts.join("tls").join(&id).exists() {
        return None;
    }
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(contexts.join("meta").join(&id).join("meta.json")).ok()?,
    )
    .ok()?;
    if meta.get("Name").and_then(|n| n.as_str()) != Some(name) {
        return None;
    }
    meta.pointer("/Endpoints/docker/Host")
        .and_then(|h| h.as_str())
        .filter(|h| h.starts_with("unix://") || h.starts_with("tcp://"))
        .map(String::from)
}

fn remember(b: &BuilderSpec, found: Found) -> Found {
    if let Ok(mut m) = discovered().lock() {
        m.insert(b.clone(), found.clone());
    }
    found
}

impl BuildxDriver {
    /// Finds the builder and the engine behind it (no buildx process for a
    /// docker context). An unknown builder is bad input, a missing buildx
    /// an environment failure; both say what to do.
    pub async fn connect(b: &BuilderSpec) -> Result<BuildxDriver, EngineError> {
        let (inspected, host) = discover(b).await?;
        let engine = match host {
            Some(host) => Some(
                crate::local::LocalEngine::connect(crate::spec::Endpoint {
                    host,
                    docker_cli: std::env::var_os("KILN_DOCKER_CLI")
                        .map(Into::into)
                        .unwrap_or_else(|| "/usr/bin/docker".into()),
                })
                .await?,
            ),
            None => None,
        };
        let registry = crate::registry::Registry::new(std::time::Duration::from_secs(30))
            .map_err(|e| EngineError::Tool(e.to_string()))?;
        Ok(BuildxDriver {
            builder: b.clone(),
            version: tokio::sync::OnceCell::new(),
            inspected,
            engine,
            registry,
        })
    }

    /// Whether the builder's images land in an engine kiln reads.
    pub fn keeps_images(&self) -> bool {
        self.engine.is_some()
    }

    /// Whether the builder still answers: its engine does (docker
    /// driver), or `docker buildx inspect` reaches its BuildKit and says
    /// it runs.
    pub async fn answers(&self) -> bool {
        if let Some(e) = &self.engine {
            return e.answers().await;
        }
        match docker_output(
            &self.builder.docker,
            &["buildx", "inspect", &self.builder.name],
            false,
        )
        .await
        {
            Ok(text) => Inspected::parse(&text)
                .and_then(|i| i.status)
                .is_some_and(|s| s == "running"),
            Err(_) => false,
        }
    }

    /// The platform the builder builds by default (its first).
    pub fn native_platform(&self) -> String {
        match &self.engine {
            Some(e) => e.platform.clone(),
            None => self
                .inspected
                .platforms
                .first()
                .cloned()
                .unwrap_or_else(|| "linux/amd64".into()),
        }
    }

    /// Points `to` at the image `from` (`repo@digest`) in the registry,
    /// without pulling it anywhere: through kiln's registry access (the
    /// same transport, CAs and login as its reads) when both are one
    /// repository, else `docker buildx imagetools create` (which knows
    /// neither certs.d nor insecure registries).
    pub async fn retag(&self, from: &str, to: &str) -> Result<(), EngineError> {
        match self.registry.retag(from, to).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => {
                return Err(EngineError::Build(format!(
                    "cannot point {to} at {from} in the registry ({e})"
                )));
            }
        }
        docker_output(
            &self.builder.docker,
            &[
                "buildx",
                "imagetools",
                "create",
                "--builder",
                &self.builder.name,
                "--tag",
                to,
                from,
            ],
            false,
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            EngineError::Build(format!("cannot point {to} at {from} in the registry ({e})"))
        })
    }

    /// The buildx version (`docker buildx version`, asked once); a buildx
    /// that is missing or older than [`Version::OLDEST`] is an error that
    /// says what to install.
    pub async fn version(&self) -> Result<Version, EngineError> {
        let docker = &self.builder.docker;
        self.version
            .get_or_try_init(|| async {
                let v = docker_output(docker, &["buildx", "version"], false)
                    .await
                    .map_err(|e| buildx_missing(docker, &e))?;
                let version = Version::parse(&v).ok_or_else(|| {
                    EngineError::Tool(format!("cannot read the buildx version from {v:?}"))
                })?;
                if version < Version::OLDEST {
                    return Err(EngineError::Tool(format!(
                        "buildx {}.{}.{} is too old: kiln hands dependencies over with --build-context, which buildx has from {}.{}; install a newer docker-buildx plugin",
                        version.0,
                        version.1,
                        version.2,
                        Version::OLDEST.0,
                        Version::OLDEST.1
                    )));
                }
                Ok(version)
            })
            .await
            .copied()
    }

    /// A multi-platform target is one solve whose image is an index:
    /// it must be pushed (no engine holds it for kiln to find), the
    /// builder must hold an index (not the classic image store) and be one
    /// node (nodes would solve platforms apart and overwrite the one cache
    /// ref).
    fn check_multi_platform(&self, s: &BuildSpec) -> Result<(), EngineError> {
        let list = s.platforms.join(",");
        if !s.push || s.tags.is_empty() {
            return Err(EngineError::Input(format!(
                "target {}: {} platforms ({list}) make an image index, which kiln finds in a registry only, but the target pushes nowhere; give it a tag and build with --push (or --set {}.output=type=registry), or build one platform with --set {}.platform=...",
                s.name,
                s.platforms.len(),
                s.name,
                s.name
            )));
        }
        if self
            .engine
            .as_ref()
            .is_some_and(|e| e.image_store == crate::local::ImageStore::Classic)
        {
            return Err(EngineError::Input(format!(
                "target {}: {} platforms ({list}) on buildx builder {}, a docker driver on an engine with the classic image store, which cannot hold an image index; enable the containerd image store (\"features\": {{\"containerd-snapshotter\": true}} in daemon.json), use a docker-container or remote builder, or build one platform with --set {}.platform=...",
                s.name,
                s.platforms.len(),
                self.builder.name,
                s.name
            )));
        }
        if self.inspected.nodes > 1 {
            return Err(EngineError::Input(format!(
                "target {}: {} platforms ({list}) on buildx builder {}, which has {} nodes: buildx would solve the platforms on separate nodes, each overwriting the target's one cache ref; use a builder with one node for it, or build one platform per target with --set {}.platform=...",
                s.name,
                s.platforms.len(),
                self.builder.name,
                self.inspected.nodes,
                s.name
            )));
        }
        Ok(())
    }

    /// What kiln learned of the builder (for `kiln fleet`).
    pub async fn facts(&self) -> Result<BuilderFacts, EngineError> {
        let v = self.version().await?;
        let (engine, engine_version, image_store, platforms) = match &self.engine {
            Some(e) => (
                e.endpoint.host.clone(),
                e.version.clone(),
                match e.image_store {
                    crate::local::ImageStore::Classic => "classic",
                    crate::local::ImageStore::Containerd => "containerd",
                },
                vec![e.platform.clone()],
            ),
            None => (
                "none".into(),
                self.inspected
                    .buildkit
                    .clone()
                    .map(|b| format!("BuildKit {b}"))
                    .unwrap_or_else(|| "BuildKit (version not reported)".into()),
                "none",
                self.inspected.platforms.clone(),
            ),
        };
        Ok(BuilderFacts {
            builder: self.builder.name.clone(),
            driver: self.inspected.driver.clone(),
            buildx: format!("{}.{}.{}", v.0, v.1, v.2),
            progress: v.progress(),
            engine,
            engine_version,
            image_store,
            hand_over: if self.engine.is_some() {
                "engine"
            } else {
                "registry"
            },
            platforms,
            status: self.inspected.status.clone(),
        })
    }

    async fn build_target(&self, req: BuildRequest<'_>) -> BuildOutcome {
        let spec = req.spec;
        let version = self.version().await?;
        let dir = crate::docker_cli::TempDir::new(&spec.name)?;
        let tmp = dir.path();
        let metadata = tmp.join("metadata.json");
        let mut spec_run = spec.clone();
        if let Some(text) = &spec.dockerfile_inline {
            let df = tmp.join("Dockerfile");
            std::fs::write(&df, text).map_err(|e| EngineError::io(df.display().to_string(), e))?;
            spec_run.dockerfile = df;
            spec_run.dockerfile_inline = None;
        }
        let implicit = match req.jobs {
            Some(n) => vec![crate::jobs::write_secret(tmp, n)?],
            None => Vec::new(),
        };
        let pushes = spec.push && !spec.tags.is_empty();
        if self.engine.is_none() && !pushes {
            return Err(EngineError::Input(registry_only_needs_push(
                &self.builder.name,
                &self.inspected.driver,
                &spec.name,
            )));
        }
        // Nothing pushed: the image is named by the per-run tag in the
        // engine; pushed: by its first tag (a kiln.local/ tag cannot be
        // pushed).
        let build_tag = crate::driver::build_tag(spec, req.run_id);
        let local = if pushes {
            spec.tags[0].clone()
        } else {
            build_tag.clone()
        };
        let policy = spec.buildx_cache.clone().unwrap_or_else(no_cache_policy);
        let opts = BuildxOptions {
            builder: self.builder.name.clone(),
            docker: self.builder.docker.display().to_string(),
            metadata_file: Some(metadata.display().to_string()),
            // `default` is the engine DOCKER_HOST names: no --context, and
            // buildx's own default builder.
            // buildx's own default builder. Other drivers' endpoints are
            // BuildKit addresses, named by --builder.
            context: self
                .inspected
                .endpoint
                .clone()
                .filter(|c| c != "default" && self.inspected.keeps_images()),
            progress: version.progress().into(),
            implicit_secrets: implicit,
            extra_tags: if pushes { Vec::new() } else { vec![build_tag] },
            rewrite_timestamp: rewrite_applies(spec, self.engine.is_some()),
        };
        // buildx runs in the context directory; paths are shown from there.
        let argv = command(&spec_run, &policy, req.hand_over, &opts, &spec.context);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&spec.context)
            .env_remove("BUILDX_BUILDER");
        if opts.context.is_some() {
            cmd.env_remove("DOCKER_HOST").env_remove("DOCKER_CONTEXT");
        }
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .map_err(|e| EngineError::Tool(format!("cannot run {}: {e}", argv[0])))?;
        // The CLI and the buildx plugin it runs stop together.
        let _group = crate::children::Group::new(child.id());
        let mut log = crate::driver::LogFile::create(req.log);
        let mut tracker = crate::steps::StepTracker::new(&spec.name);
        let mut raw = crate::steps::RawJsonParser::default();
        let mut plain = crate::steps::PlainParser::default();
        let mut tail = crate::steps::ClientTail::default();
        let rawjson = opts.progress == "rawjson";
        if let Some(err) = child.stderr.take() {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log.line(&line);
                let texts = if rawjson {
                    let o = raw.line(&mut tracker, &line);
                    for e in &o.events {
                        req.reporter.event(e);
                    }
                    o.text
                } else {
                    for e in plain.line(&mut tracker, &line) {
                        req.reporter.event(&e);
                    }
                    vec![line]
                };
                for t in texts {
                    tail.push(t);
                }
            }
        }
        let status = child
            .wait()
            .await
            .map_err(|e| EngineError::io("waiting for docker buildx", e))?;
        drop(log);
        let meta: Option<serde_json::Value> = std::fs::read(&metadata)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        drop(dir);
        if !status.success() {
            let (step, message, log_tail) = tail.failure(&tracker, || {
                format!("docker buildx build exited with {status}")
            });
            let failed = Failed {
                message,
                step,
                log_tail,
                steps: tracker.counts(),
                cache: tracker.cache_ops(),
            };
            let alive = self.answers().await;
            return crate::driver::lost_or_failed(alive, &self.describe(), spec, failed);
        }
        let digest = meta
            .as_ref()
            .and_then(|m| m.get("containerimage.digest"))
            .and_then(|d| d.as_str())
            .filter(|d| d.starts_with("sha256:"))
            .map(String::from);
        if pushes && digest.is_none() {
            return Err(EngineError::Build(format!(
                "target {}: buildx pushed, but its metadata file names no digest (containerimage.digest)",
                spec.name
            )));
        }
        let built = crate::local::Built {
            image_id: String::new(),
            steps: tracker.counts(),
            cache: tracker.cache_ops(),
            retries: Vec::new(),
        };
        match &self.engine {
            // A multi-platform image is an index, identified in the
            // registry whatever the builder keeps.
            Some(engine) if !spec.multi_platform() => {
                crate::driver::finish(
                    engine,
                    spec,
                    &local,
                    built,
                    digest.filter(|_| pushes),
                    req.reporter,
                )
                .await
            }
            _ => {
                let digest = digest.unwrap_or_default();
                self.finish_in_registry(spec, built, &digest, req.reporter)
                    .await
            }
        }
    }

    /// After a build on a builder that keeps no image, or of several
    /// platforms: its identity read from the config blob of what it pushed
    /// (`repo@digest`; of each platform's, combined, for several), every
    /// tag reported as pushed at that digest (buildx pushes them all).
    async fn finish_in_registry(
        &self,
        spec: &BuildSpec,
        mut built: crate::local::Built,
        digest: &str,
        reporter: &dyn crate::events::Reporter,
    ) -> BuildOutcome {
        let at = format!("{}@{digest}", kiln_plan::repository_name(&spec.tags[0]));
        let platforms = if spec.platforms.is_empty() {
            vec![self.native_platform()]
        } else {
            spec.platforms.clone()
        };
        let mut ids = Vec::new();
        for platform in &platforms {
            match self.registry.identity(&at, platform).await {
                Ok(Some(id)) => ids.push(id),
                Ok(None) => {
                    return Err(EngineError::Build(format!(
                        "target {}: buildx pushed {at}, but the registry holds no {platform} image config there to identify it by",
                        spec.name
                    )));
                }
                Err(e) => {
                    return Err(EngineError::Build(format!(
                        "target {}: buildx pushed {at}, but reading it back failed ({e})",
                        spec.name
                    )));
                }
            }
        }
        built.image_id = match ids.as_slice() {
            [one] => one.clone(),
            _ => crate::identity::composite(&ids),
        };
        let mut pushed = Vec::new();
        for t in &spec.tags {
            reporter.event(&crate::events::Event::Pushed {
                target: spec.name.clone(),
                reference: t.clone(),
                digest: digest.to_string(),
            });
            pushed.push((t.clone(), digest.to_string()));
        }
        Ok(Ok((built, pushed)))
    }

    /// How messages name this builder.
    pub fn describe(&self) -> String {
        format!(
            "buildx builder {} ({} driver)",
            self.builder.name, self.inspected.driver
        )
    }
}

/// Why a target that does not push cannot be built on a builder that keeps
/// no image store, and what to do.
pub(crate) fn registry_only_needs_push(builder: &str, driver: &str, target: &str) -> String {
    format!(
        "target {target}: buildx builder {builder} ({driver} driver) keeps no image store kiln can read, so every image it builds is handed over and kept in a registry; give {target} a tag in a registry and run with --push (or set push on its output), or build on a docker-driver builder"
    )
}

impl crate::driver::Driver for BuildxDriver {
    fn engine(&self) -> Option<&crate::local::LocalEngine> {
        self.engine.as_ref()
    }

    fn platform(&self) -> String {
        self.native_platform()
    }

    fn describe(&self) -> String {
        BuildxDriver::describe(self)
    }

    fn retag<'a>(
        &'a self,
        from: &'a str,
        to: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(BuildxDriver::retag(self, from, to))
    }

    fn kind(&self, _spec: &BuildSpec, _jobs_secret: bool) -> &'static str {
        "buildx"
    }

    fn check(&self, specs: &[BuildSpec]) -> Result<(), EngineError> {
        for s in specs {
            if s.multi_platform() {
                self.check_multi_platform(s)?;
            }
            if self.engine.is_none() && (!s.push || s.tags.is_empty()) {
                return Err(EngineError::Input(registry_only_needs_push(
                    &self.builder.name,
                    &self.inspected.driver,
                    &s.name,
                )));
            }
        }
        Ok(())
    }

    /// A build whose push the registry failed with a 5xx answer or a
    /// broken connection is run again after 1 s and 3 s (saying so): the
    /// layer cache makes the second run a push only, and a push is
    /// idempotent. A distribution registry on its filesystem driver
    /// answers 500 to a tag read that races a write under load.
    fn build<'a>(
        &'a self,
        req: BuildRequest<'a>,
    ) -> futures_util::future::BoxFuture<'a, BuildOutcome> {
        Box::pin(async move {
            let mut delays = [1u64, 3].into_iter();
            let mut retries = Vec::new();
            loop {
                let start = std::time::Instant::now();
                let mut r = self.build_target(req).await;
                if let Ok(Ok((built, _))) = &mut r {
                    built.retries = std::mem::take(&mut retries);
                }
                let Ok(Err(f)) = &r else { return r };
                if !failed_push_is_transient(f) {
                    return r;
                }
                let Some(s) = delays.next() else { return r };
                retries.push(crate::local::Retry {
                    message: f.message.clone(),
                    start,
                    end: std::time::Instant::now(),
                });
                req.reporter.event(&crate::events::Event::Warning {
                    target: req.spec.name.clone(),
                    message: format!(
                        "{}; the registry failed the push, building (and pushing) again in {s} s",
                        f.message
                    ),
                });
                tokio::time::sleep(std::time::Duration::from_secs(s)).await;
            }
        })
    }
}

/// Whether a failed buildx build failed in its push, in a way another try
/// may not (a 5xx answer, a broken connection): never a failed step.
fn failed_push_is_transient(f: &Failed) -> bool {
    let pushing = f
        .step
        .as_deref()
        .is_some_and(|s| s.starts_with("pushing") || s.starts_with("exporting"))
        || f.message.contains("HEAD request")
        || f.message.contains("/manifests/")
        || f.message.contains("/blobs/");
    pushing && crate::local::transient_registry_failure(&f.message)
}

/// Flags of `docker buildx build` that take no value.
const SWITCHES: [&str; 3] = ["--no-cache", "--push", "--load"];

/// A shell-quoted rendering of an argv for humans: the command on the first
/// line, then one flag (with its value) per line, the context last.
pub fn render(argv: &[String]) -> String {
    let q = |s: &str| {
        let plain = !s.is_empty()
            && s.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '@' | '+')
            });
        if plain {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let head = argv.len().min(3);
    let mut out = argv[..head]
        .iter()
        .map(|w| q(w))
        .collect::<Vec<_>>()
        .join(" ");
    let mut i = head;
    while i < argv.len() {
        let w = &argv[i];
        let takes_value =
            w.starts_with("--") && !SWITCHES.contains(&w.as_str()) && i + 1 < argv.len();
        if takes_value {
            out.push_str(&format!(" \\\n  {} {}", w, q(&argv[i + 1])));
            i += 2;
        } else {
            out.push_str(&format!(" \\\n  {}", q(w)));
            i += 1;
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {

    /// A docker CLI call that never finishes is an error within its bound,
    /// and the process is killed.
    #[tokio::test]
    async fn a_tool_call_that_never_finishes_is_bounded() {
        let t0 = std::time::Instant::now();
        let r = super::docker_output_within(
            std::path::Path::new("sleep"),
            &["30"],
            false,
            std::time::Duration::from_secs(1),
        )
        .await;
        assert!(t0.elapsed().as_secs() < 10);
        let e = r.unwrap_err();
        assert!(e.contains("did not finish within 1s"), "{e}");
    }

    use super::*;
    use kiln_plan::cache::{CacheSettings, CacheTarget, Driver, policy};

    fn spec() -> BuildSpec {
        BuildSpec {
            name: "app".into(),
            context: "/w".into(),
            dockerfile: "/w/docker/Dockerfile.app".into(),
            args: [
                ("BASE_IMAGE".to_string(), "base-img".to_string()),
                ("VERSION".to_string(), "1.0".to_string()),
            ]
            .into(),
            tags: vec!["reg:5000/app:1".into()],
            contexts: [(
                "base-img".to_string(),
                ContextSource::Target {
                    name: "base".into(),
                },
            )]
            .into(),
            secrets: vec![crate::spec::SecretSpec {
                id: "tok".into(),
                src: None,
                env: Some("TOKEN".into()),
            }],
            network: Some("host".into()),
            push: true,
            ..BuildSpec::default()
        }
    }

    #[test]
    fn buildx_versions_from_upstream_and_distribution_builds() {
        let v = |t: &str| Version::parse(t);
        assert_eq!(
            v("github.com/docker/buildx v0.15.1 1c1dbb2"),
            Some(Version(0, 15, 1))
        );
        assert_eq!(
            v("github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3"),
            Some(Version(0, 13, 1))
        );
        assert_eq!(v("github.com/docker/buildx v0.20"), Some(Version(0, 20, 0)));
        assert_eq!(v("buildx"), None);
        assert_eq!(v("github.com/docker/buildx dev"), None);
        assert_eq!(Version(0, 13, 1).progress(), "rawjson");
        assert_eq!(Version(0, 12, 9).progress(), "plain");
        assert!(Version(0, 7, 1) < Version::OLDEST);
        assert!(Version(0, 13, 1) >= Version::OLDEST);
    }

    #[test]
    fn buildx_inspect_output_gives_the_driver_and_endpoint() {
        let docker = "Name:          kiln\nDriver:        docker\nLast Activity: 2026-12-01 22:43:39 +0000 UTC\n\nNodes:\nName:             kiln\nEndpoint:         kiln\nStatus:           running\nBuildKit version: v0.0.0+unknown\nPlatforms:        linux/amd64\n";
        assert_eq!(
            Inspected::parse(docker),
            Some(Inspected {
                driver: "docker".into(),
                endpoint: Some("kiln".into()),
                status: Some("running".into()),
                buildkit: Some("v0.0.0+unknown".into()),
                platforms: vec!["linux/amd64".into()],
                nodes: 1,
            })
        );
        assert!(Inspected::parse(docker).unwrap().keeps_images());
        // An appended node is counted (one `Endpoint:` each).
        let two = "Name: b\nDriver: docker-container\n\nNodes:\nName: b0\nEndpoint: unix:///a.sock\nStatus: running\nPlatforms: linux/amd64\n\nName: b1\nEndpoint: ssh://arm\nStatus: running\nPlatforms: linux/arm64\n";
        assert_eq!(Inspected::parse(two).unwrap().nodes, 2);
        let remote = "Name:          kiln-remote\nDriver:        remote\nLast Activity: 2026-12-02 03:02:37 +0000 UTC\n\nNodes:\nName:             kiln-remote0\nEndpoint:         unix:///w/.kiln/dev-env/buildkit.sock\nStatus:           running\nBuildKit version: v0.13.2\nPlatforms:        linux/amd64*, linux/amd64/v2, linux/amd64/v3\nLabels:\n org.mobyproject.buildkit.worker.executor:             containerd\n";
        let r = Inspected::parse(remote).unwrap();
        assert_eq!(r.driver, "remote");
        assert!(!r.keeps_images());
        assert_eq!(r.buildkit.as_deref(), Some("v0.13.2"));
        assert_eq!(
            r.platforms,
            ["linux/amd64", "linux/amd64/v2", "linux/amd64/v3"]
        );
        // buildx before 0.11 printed `Buildkit:`.
        let old = "Name: b\nDriver: docker-container\n\nNodes:\nName: b0\nEndpoint: unix:///var/run/docker.sock\nStatus: running\nBuildkit: v0.10.6\nPlatforms: linux/arm64\n";
        let o = Inspected::parse(old).unwrap();
        assert_eq!(o.buildkit.as_deref(), Some("v0.10.6"));
        assert!(!o.keeps_images());
        let container = "Name:   ci\nDriver: docker-container\n\nNodes:\nName:      ci0\nEndpoint:  unix:///var/run/docker.sock\nStatus:    inactive\n";
        assert_eq!(
            Inspected::parse(container).unwrap().driver,
            "docker-container"
        );
        assert_eq!(Inspected::parse("no builder here"), None);
    }

    #[test]
    fn a_docker_driver_builder_is_named_by_its_context_and_secrets_follow() {
        let s = spec();
        let opts = BuildxOptions {
            context: Some("kiln-node1".into()),
            progress: "plain".into(),
            implicit_secrets: vec![crate::spec::SecretSpec {
                id: "kiln-jobs".into(),
                src: Some("/tmp/b/kiln-jobs".into()),
                env: None,
            }],
            extra_tags: vec!["kiln.local/app:run-1".into()],
            ..BuildxOptions::default()
        };
        let argv = command(
            &BuildSpec { push: false, ..s },
            &no_cache_policy(),
            &[(
                "reg:5000/base:1".to_string(),
                "kiln.local/base:abcd".to_string(),
            )]
            .into(),
            &opts,
            Path::new("/w"),
        );
        let line = argv.join(" ");
        assert!(
            line.starts_with("docker --context kiln-node1 buildx build --progress plain"),
            "{line}"
        );
        assert!(!line.contains("--builder"), "{line}");
        assert!(
            line.contains("--secret id=tok,env=TOKEN --secret id=kiln-jobs,src=/tmp/b/kiln-jobs"),
            "{line}"
        );
        assert!(line.contains("--tag kiln.local/app:run-1"), "{line}");
        // A dependency's tag named directly becomes a named context.
        assert!(
            line.contains("--build-context reg:5000/base:1=docker-image://kiln.local/base:abcd"),
            "{line}"
        );
        assert!(!line.contains("--push"), "{line}");
    }

    #[test]
    fn a_target_becomes_one_buildx_command_with_the_cache_policy() {
        let s = spec();
        let p = &policy(
            &CacheTarget {
                name: &s.name,
                tags: &s.tags,
                push: true,
                ..CacheTarget::default()
            },
            &CacheSettings::default(),
            Driver::Buildx,
        )[0];
        let hand: BTreeMap<String, String> = [(
            "base-img".to_string(),
            "reg:5000/base@sha256:aaaa".to_string(),
        )]
        .into();
        let argv = command(
            &s,
            p,
            &hand,
            &BuildxOptions {
                builder: "fleet".into(),
                ..BuildxOptions::default()
            },
            Path::new("/w"),
        );
        let line = argv.join(" ");
        assert!(line.starts_with("docker buildx build --builder fleet --progress rawjson --file docker/Dockerfile.app"), "{line}");
        assert!(
            line.contains("--build-context base-img=docker-image://reg:5000/base@sha256:aaaa"),
            "{line}"
        );
        assert!(line.contains("--cache-to type=registry,ref=reg:5000/app:buildcache-app-native,mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true"), "{line}");
        assert!(
            line.contains("--cache-from type=registry,ref=reg:5000/app:1"),
            "{line}"
        );
        assert!(line.contains("--secret id=tok,env=TOKEN"), "{line}");
        assert!(!line.contains("BUILDKIT_INLINE_CACHE"), "{line}");
        assert!(line.ends_with("--push ."), "{line}");
        let text = render(&argv);
        assert!(text.contains(" \\\n  --cache-to "), "{text}");
    }
    #[test]
    fn a_push_the_registry_failed_is_tried_again_a_failed_step_is_not() {
        let failed = |message: &str, step: Option<&str>| Failed {
            message: message.into(),
            step: step.map(String::from),
            log_tail: Vec::new(),
            steps: Default::default(),
            cache: Vec::new(),
        };
        assert!(failed_push_is_transient(&failed(
            "unexpected status from HEAD request to http://127.0.0.1:5001/v2/t/p/manifests/1: 500 Internal Server Error",
            Some("pushing 127.0.0.1:5001/t/p:1 with docker"),
        )));
        assert!(failed_push_is_transient(&failed(
            "failed to push 127.0.0.1:5000/t/p:1: unexpected status from HEAD request to http://127.0.0.1:5000/v2/t/p/blobs/sha256:aa: 503 Service Unavailable",
            None,
        )));
        // The race of concurrent pushes of one layer, as buildkitd 0.32
        // reports it at the export.
        assert!(failed_push_is_transient(&failed(
            "failed to push registry.test:5000/hidden/os:1: failed commit on ref \"manifest-sha256:1f\": unexpected status from PUT request to http://registry.test:5000/v2/hidden/os/manifests/1: 400 Bad Request: blob unknown to registry - sha256:73acc",
            Some("exporting to image"),
        )));
        // dockerd 26's BuildKit (containerd 1.7) drops the reason, and
        // kiln's message wraps it.
        assert!(failed_push_is_transient(&failed(
            "target os: the push to 127.0.0.1:38399 failed; the image was built but not pushed, and nothing was recorded (failed to push 127.0.0.1:38399/e2e-reg/os:1: failed commit on ref \"manifest-sha256:6f\": unexpected status from PUT request to http://127.0.0.1:38399/v2/e2e-reg/os/manifests/sha256:6f: 400 Bad Request)",
            Some("exporting to image"),
        )));
        // A RUN step whose output mentions an unknown blob is still a
        // failed step.
        assert!(!failed_push_is_transient(&failed(
            "process \"/bin/sh -c ./fetch\" did not complete successfully: exit code: 1: blob unknown to registry",
            Some("[2/2] RUN ./fetch"),
        )));
        // A step that failed, a refusal, or a registry that is not there.
        assert!(!failed_push_is_transient(&failed(
            "process \"/bin/sh -c make\" did not complete successfully: exit code: 1",
            Some("[2/2] RUN make"),
        )));
        assert!(!failed_push_is_transient(&failed(
            "unexpected status from HEAD request to http://r/v2/t/p/manifests/1: 401 Unauthorized",
            Some("pushing r/t/p:1 with docker"),
        )));
        assert!(!failed_push_is_transient(&failed(
            "process \"/bin/sh -c curl -f http://x\" did not complete successfully: exit code: 22: 500 Internal Server Error",
            Some("[2/2] RUN curl -f http://x"),
        )));
    }

    #[test]
    fn layer_times_are_rewritten_where_buildkit_can() {
        let mut s = spec();
        s.push = true;
        s.args.insert("SOURCE_DATE_EPOCH".into(), "0".into());
        // A builder that keeps no image store: rewritten, when pushed with
        // an epoch.
        assert!(rewrite_applies(&s, false));
        // A docker-driver builder unpacks into its engine, which BuildKit
        // refuses with rewrite-timestamp.
        assert!(!rewrite_applies(&s, true));
        let mut no_epoch = s.clone();
        no_epoch.args.remove("SOURCE_DATE_EPOCH");
        assert!(!rewrite_applies(&no_epoch, false));
        let mut unpushed = s.clone();
        unpushed.push = false;
        assert!(!rewrite_applies(&unpushed, false));

        let p = no_cache_policy();
        let argv = command(
            &s,
            &p,
            &BTreeMap::new(),
            &BuildxOptions {
                rewrite_timestamp: true,
                ..BuildxOptions::default()
            },
            Path::new("/w"),
        );
        let line = argv.join(" ");
        assert!(
            line.ends_with("--output type=registry,rewrite-timestamp=true ."),
            "{line}"
        );
        assert!(!line.contains("--push"), "{line}");
        assert!(line.contains("--build-arg SOURCE_DATE_EPOCH=0"), "{line}");
    }
}
