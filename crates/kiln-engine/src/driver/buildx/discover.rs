//! Finding a buildx builder and what it is: `docker buildx version`,
//! `docker buildx inspect` (or `docker context inspect` for a docker
//! context, which buildx lists as a docker-driver builder), parsed into
//! [`Version`] and [`Inspected`], remembered for the process; and the
//! bounded docker CLI call they go through.
//!
//! Must never: build, tag or push anything.

use crate::error::EngineError;

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

/// Runs the docker CLI; its stdout, or stdout+stderr on failure.
/// `env_clean` removes `DOCKER_HOST` and `DOCKER_CONTEXT`. Bounded (four
/// times the engine request bound, 120 s by default): a builder or engine
/// that never answers is an error that says so, and the CLI is killed.
pub(super) async fn docker_output(
    docker: &std::path::Path,
    args: &[&str],
    env_clean: bool,
) -> Result<String, String> {
    let bound = crate::driver::local::request_bound().saturating_mul(4);
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
    // passes (crate::proc); both streams are read as they come.
    let _group = crate::proc::Group::new(child.id());
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
/// if its images land in one, and whether it was recalled rather than
/// asked: [`super::remembered`]), kept for the process: preflight and the
/// run connect to the same builder, and the docker CLI calls are the slow
/// part of a no-op run.
pub(super) type Found = (Inspected, Option<String>, Recalled);

/// Whether a builder's facts were recalled without asking buildx (to be
/// confirmed before its first build) or asked now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Recalled {
    Yes,
    No,
}

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

pub(super) fn buildx_missing(docker: &std::path::Path, detail: &str) -> EngineError {
    EngineError::Tool(format!(
        "buildx is not available ({} buildx: {detail}); install the docker-buildx plugin (Debian and Ubuntu: the docker-buildx package; or Docker's buildx release) into $DOCKER_CONFIG/cli-plugins or ~/.docker/cli-plugins",
        docker.display()
    ))
}

/// Finds the builder: a docker context is a docker-driver builder (buildx
/// lists every context as one), answered by `docker context inspect`
/// alone; any other name is asked of `docker buildx inspect`, unless its
/// platforms are known without it ([`super::remembered`]).
pub(super) async fn discover(b: &BuilderSpec) -> Result<Found, EngineError> {
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
                Recalled::No,
            ),
        ));
    }
    // A builder of another driver, defined in buildx's instance store,
    // whose platforms were given at its creation or inspected while it was
    // defined as it is now: no process either.
    let defined = super::remembered::defined(&b.name).filter(|d| !d.inspected.keeps_images());
    if let Some(d) = &defined {
        let known = if d.inspected.platforms.is_empty() {
            super::remembered::recall(&b.name, &d.sha)
        } else {
            Some((d.inspected.platforms.clone(), None))
        };
        if let Some((platforms, buildkit)) = known {
            let inspected = Inspected {
                platforms,
                buildkit,
                ..d.inspected.clone()
            };
            return Ok(remember(b, (inspected, None, Recalled::Yes)));
        }
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
            Recalled::No,
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
                if let Some(d) = &defined {
                    super::remembered::keep(&b.name, &d.sha, &inspected);
                }
                // Its endpoint is a BuildKit address (or the engine a
                // builder container runs on), never where its images are.
                return Ok(remember(b, (inspected, None, Recalled::No)));
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
                Recalled::No,
            )
        }
    };
    Ok(remember(b, found))
}

/// The docker endpoint of context `name` from the docker CLI's context
/// store (`$DOCKER_CONFIG`, else `~/.docker`), when it is there and plain:
/// a context with TLS material is left to the CLI.
fn context_host_from_store(name: &str) -> Option<String> {
    let config = super::remembered::docker_config()?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
