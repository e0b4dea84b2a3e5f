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

mod argv;
mod discover;
mod remembered;

pub use argv::{BuildxOptions, command, render, rewrite_applies};
pub use discover::{BuilderFacts, BuilderSpec, Inspected, Version};
pub use remembered::{native_platforms, pushes_by_digest};

use crate::driver::{BuildOutcome, BuildRequest, Failed};
use crate::error::EngineError;
use crate::spec::BuildSpec;
use argv::no_cache_policy;
use discover::{Recalled, buildx_missing, discover, docker_output};

/// The buildx driver: one builder.
pub struct BuildxDriver {
    builder: BuilderSpec,
    /// The buildx version, asked when the first build starts: a run that
    /// builds nothing starts no buildx process at all.
    version: tokio::sync::OnceCell<Version>,
    inspected: Inspected,
    /// Whether `inspected` was recalled without asking buildx: it is
    /// confirmed before the first build (`confirm`).
    recalled: Recalled,
    confirmed: tokio::sync::OnceCell<()>,
    /// The engine whose image store holds what the builder builds (a
    /// docker-driver builder); `None` for a builder that keeps no image
    /// store, whose every build is pushed and read back from the registry.
    engine: Option<crate::driver::local::LocalEngine>,
    /// Reads what a registry-only builder pushed.
    registry: crate::registry::Registry,
}

impl BuildxDriver {
    /// Finds the builder and the engine behind it (no buildx process for a
    /// docker context). An unknown builder is bad input, a missing buildx
    /// an environment failure; both say what to do.
    pub async fn connect(b: &BuilderSpec) -> Result<BuildxDriver, EngineError> {
        let (inspected, host, recalled) = discover(b).await?;
        let engine = match host {
            Some(host) => Some(
                crate::driver::local::LocalEngine::connect(crate::spec::Endpoint {
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
            recalled,
            confirmed: tokio::sync::OnceCell::new(),
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

    /// Before the first build on a builder whose platforms were recalled
    /// ([`remembered`]), asks `docker buildx inspect` once: a builder that
    /// now builds another platform by default is an error (the run's keys
    /// were computed for the recalled one), and the cache is corrected
    /// for the next run.
    async fn confirm(&self) -> Result<(), EngineError> {
        if self.recalled == Recalled::No {
            return Ok(());
        }
        self.confirmed
            .get_or_try_init(|| async {
                let text = docker_output(
                    &self.builder.docker,
                    &["buildx", "inspect", &self.builder.name],
                    false,
                )
                .await
                .map_err(|e| {
                    EngineError::Tool(format!(
                        "buildx builder {} does not answer `docker buildx inspect`: {e}",
                        self.builder.name
                    ))
                })?;
                let Some(now) = Inspected::parse(&text) else {
                    return Ok(());
                };
                if let Some(d) = remembered::defined(&self.builder.name) {
                    remembered::keep(&self.builder.name, &d.sha, &now);
                }
                let was = self.native_platform();
                match now.platforms.first() {
                    Some(native) if *native != was => {
                        Err(EngineError::Tool(format!(
                            "buildx builder {} builds {native} by default now, but kiln remembered {was} for it and keyed this run's targets for {was}; run again (kiln has corrected what it remembers)",
                            self.builder.name
                        )))
                    }
                    _ => Ok(()),
                }
            })
            .await
            .map(|_| ())
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
            .is_some_and(|e| e.image_store == crate::driver::local::ImageStore::Classic)
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
        // What was recalled has no status: `kiln fleet` asks.
        let asked;
        let inspected = match self.recalled {
            Recalled::No => &self.inspected,
            Recalled::Yes => {
                asked = docker_output(
                    &self.builder.docker,
                    &["buildx", "inspect", &self.builder.name],
                    false,
                )
                .await
                .ok()
                .and_then(|t| Inspected::parse(&t))
                .unwrap_or_else(|| self.inspected.clone());
                &asked
            }
        };
        let (engine, engine_version, image_store, platforms) = match &self.engine {
            Some(e) => (
                e.endpoint.host.clone(),
                e.version.clone(),
                match e.image_store {
                    crate::driver::local::ImageStore::Classic => "classic",
                    crate::driver::local::ImageStore::Containerd => "containerd",
                },
                vec![e.platform.clone()],
            ),
            None => (
                "none".into(),
                inspected
                    .buildkit
                    .clone()
                    .map(|b| format!("BuildKit {b}"))
                    .unwrap_or_else(|| "BuildKit (version not reported)".into()),
                "none",
                inspected.platforms.clone(),
            ),
        };
        Ok(BuilderFacts {
            builder: self.builder.name.clone(),
            driver: inspected.driver.clone(),
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
            status: inspected.status.clone(),
        })
    }

    async fn build_target(&self, req: BuildRequest<'_>) -> BuildOutcome {
        let spec = req.spec;
        // A join builds nothing: its units' images become one index.
        if !spec.join.is_empty() {
            return self.join(req).await;
        }
        self.confirm().await?;
        let version = self.version().await?;
        let dir = crate::proc::TempDir::new(&spec.name)?;
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
        let pushes = spec.pushes();
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
        let build_tag = crate::naming::build_tag(spec, req.run_id);
        let local = match (pushes, spec.tags.first()) {
            (true, Some(t)) => t.clone(),
            (true, None) => spec.push_repository().unwrap_or_default(),
            (false, _) => build_tag.clone(),
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
        let _group = crate::proc::Group::new(child.id());
        let mut log = crate::proc::LogFile::create(req.log);
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
        let built = crate::driver::Built {
            image_id: String::new(),
            steps: tracker.counts(),
            cache: tracker.cache_ops(),
            retries: Vec::new(),
        };
        match &self.engine {
            // A multi-platform image is an index, identified in the
            // registry whatever the builder keeps.
            Some(engine) if !spec.registry_only() => {
                crate::driver::engine::finish(
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
        mut built: crate::driver::Built,
        digest: &str,
        reporter: &dyn crate::events::Reporter,
    ) -> BuildOutcome {
        let at = format!("{}@{digest}", spec.push_repository().unwrap_or_default());
        let platforms = if spec.platforms.is_empty() {
            vec![self.native_platform()]
        } else {
            spec.platforms.clone()
        };
        let mut ids = Vec::new();
        for platform in &platforms {
            ids.push(self.identify(spec, &at, platform, "").await?);
        }
        built.image_id = match ids.as_slice() {
            [one] => one.clone(),
            _ => crate::identity::composite(&ids),
        };
        // A platform unit has no tag: it is pushed as its repository at
        // the digest.
        let names = match &spec.unit {
            Some(u) => vec![u.repository.clone()],
            None => spec.tags.clone(),
        };
        let mut pushed = Vec::new();
        for t in names {
            reporter.event(&crate::events::Event::Pushed {
                target: spec.name.clone(),
                reference: t.clone(),
                digest: digest.to_string(),
            });
            pushed.push((t, digest.to_string()));
        }
        Ok(Ok((built, pushed)))
    }

    /// The identity of the `platform` image pushed as `at` (`repo@digest`)
    /// for `spec`, read from its config blob in the registry; `what` adds to
    /// messages what `at` is.
    async fn identify(
        &self,
        spec: &BuildSpec,
        at: &str,
        platform: &str,
        what: &str,
    ) -> Result<String, EngineError> {
        match self.registry.identity(at, platform).await {
            Ok(Some(id)) => Ok(id),
            Ok(None) => Err(EngineError::Build(format!(
                "target {}: the registry holds no {platform} image config at {at}{what} to identify it by",
                spec.name
            ))),
            Err(e) => Err(EngineError::Build(format!(
                "target {}: reading {at}{what} back from the registry failed ({e})",
                spec.name
            ))),
        }
    }

    /// The image index of a multi-platform target built as platform units
    /// (`spec.join`): its units' pushed images, handed over by digest, made
    /// into one index in the registry and put under every tag; its identity
    /// combines theirs, as a one-solve build of all platforms would.
    async fn join(&self, req: BuildRequest<'_>) -> BuildOutcome {
        let spec = req.spec;
        let mut units = Vec::new();
        let mut ids = Vec::new();
        for (platform, unit) in &spec.join {
            let Some(at) = req.hand_over.get(unit) else {
                return Err(EngineError::Build(format!(
                    "target {}: its platform unit {unit} was not handed over by digest",
                    spec.name
                )));
            };
            ids.push(
                self.identify(spec, at, platform, &format!(" ({unit})"))
                    .await?,
            );
            units.push((platform.clone(), at.clone()));
        }
        let digest = self
            .registry
            .join_index(&units, &spec.tags)
            .await
            .map_err(|e| {
                EngineError::Build(format!(
                    "target {}: making the image index of its platforms failed ({e})",
                    spec.name
                ))
            })?;
        let built = crate::driver::Built {
            image_id: crate::identity::composite(&ids),
            steps: Default::default(),
            cache: Vec::new(),
            retries: Vec::new(),
        };
        let mut pushed = Vec::new();
        for t in &spec.tags {
            req.reporter.event(&crate::events::Event::Pushed {
                target: spec.name.clone(),
                reference: t.clone(),
                digest: digest.clone(),
            });
            pushed.push((t.clone(), digest.clone()));
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
    fn engine(&self) -> Option<&crate::driver::local::LocalEngine> {
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
            // A join builds nothing on the builder.
            if s.multi_platform() && s.join.is_empty() {
                self.check_multi_platform(s)?;
            }
            if self.engine.is_none() && s.load {
                return Err(EngineError::Input(format!(
                    "target {}: --load (an output type=docker) asks for the image in the Docker engine, but buildx builder {} ({} driver) keeps no image store, and kiln hands its images over through the registry; drop --load and pull the pushed digest (--metadata-file names it), or build on a docker-driver builder or with --driver engine",
                    s.name, self.builder.name, self.inspected.driver
                )));
            }
            if self.engine.is_none() && !s.pushes() {
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
                retries.push(crate::driver::Retry {
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
    pushing && crate::driver::local::transient_registry_failure(&f.message)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
