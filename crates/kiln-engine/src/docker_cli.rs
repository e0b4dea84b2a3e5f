//! The docker CLI driver: builds through the Debian docker CLI's built-in
//! BuildKit client (`DOCKER_BUILDKIT=1 docker build`), used for targets with
//! secrets, which the Engine API's `/build` cannot carry. The CLI applies
//! `.dockerignore` itself and streams `--progress=plain`, parsed into the
//! same events as the Engine API driver. Secret values are read by the CLI
//! from the files or environment variables the bake file names; kiln never
//! reads, logs or stores them. The one secret kiln makes itself, the job
//! count (`crate::jobs`), is written to a private file in the build's
//! temporary directory and removed with it.

use std::collections::BTreeMap;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::error::EngineError;
use crate::events::Reporter;
use crate::local::{Built, Failed};
use crate::spec::{BuildSpec, Endpoint, SecretSpec};
use crate::steps::{PlainParser, StepTracker};

/// The command line for one build (without the program), for tests and docs.
/// `implicit`: secrets kiln adds itself (the job count), after the bake
/// file's.
pub fn args(
    endpoint: &Endpoint,
    spec: &BuildSpec,
    dockerfile_path: &str,
    build_args: &BTreeMap<String, String>,
    build_tag: &str,
    iidfile: &str,
    implicit: &[SecretSpec],
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-H".into(),
        endpoint.host.clone(),
        "build".into(),
        "--progress=plain".into(),
    ];
    a.extend([
        "-f".into(),
        dockerfile_path.into(),
        "-t".into(),
        build_tag.into(),
        "--iidfile".into(),
        iidfile.into(),
    ]);
    for (k, v) in build_args {
        a.extend(["--build-arg".into(), format!("{k}={v}")]);
    }
    for (k, v) in &spec.labels {
        a.extend(["--label".into(), format!("{k}={v}")]);
    }
    for s in spec.secrets.iter().chain(implicit) {
        let mut v = format!("id={}", s.id);
        if let Some(src) = &s.src {
            v.push_str(&format!(",src={}", src.display()));
        } else if let Some(env) = &s.env {
            v.push_str(&format!(",env={env}"));
        }
        a.extend(["--secret".into(), v]);
    }
    if let Some(t) = &spec.target {
        a.extend(["--target".into(), t.clone()]);
    }
    if let Some(n) = &spec.network {
        a.extend(["--network".into(), n.clone()]);
    }
    if let Some(p) = spec.platforms.first() {
        a.extend(["--platform".into(), p.clone()]);
    }
    if spec.no_cache {
        a.push("--no-cache".into());
    }
    for c in &spec.cache_from {
        a.extend(["--cache-from".into(), c.clone()]);
    }
    a.push(spec.context.display().to_string());
    a
}

/// A private temporary directory (mode 0700), removed when dropped.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    pub fn new(name: &str) -> Result<TempDir, EngineError> {
        let path =
            std::env::temp_dir().join(format!("kiln-{}-{}-{}", std::process::id(), name, unique()));
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        b.create(&path)
            .map_err(|e| EngineError::io(path.display().to_string(), e))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds `spec` with the docker CLI; `jobs`, when set, is handed to the
/// build as the secret `kiln-jobs` (`crate::jobs`); the CLI's progress is
/// kept in `log` when given.
#[expect(
    clippy::too_many_arguments,
    reason = "one caller (the engine driver), each argument distinct"
)]
pub async fn build(
    endpoint: &Endpoint,
    spec: &BuildSpec,
    dockerfile: &str,
    build_args: &BTreeMap<String, String>,
    build_tag: &str,
    jobs: Option<u32>,
    reporter: &dyn Reporter,
    log: Option<&std::path::Path>,
) -> Result<Result<Built, Failed>, EngineError> {
    let mut log = crate::driver::LogFile::create(log);
    let dir = TempDir::new(&spec.name)?;
    let tmp = &dir.0;
    let df = tmp.join("Dockerfile");
    std::fs::write(&df, dockerfile).map_err(|e| EngineError::io(df.display().to_string(), e))?;
    let iid = tmp.join("iid");
    let implicit = match jobs {
        Some(n) => vec![crate::jobs::write_secret(tmp, n)?],
        None => Vec::new(),
    };
    let argv = args(
        endpoint,
        spec,
        &df.display().to_string(),
        build_args,
        build_tag,
        &iid.display().to_string(),
        &implicit,
    );
    let mut child = tokio::process::Command::new(&endpoint.docker_cli)
        .args(&argv)
        .env("DOCKER_BUILDKIT", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            EngineError::Input(format!(
                "cannot run the docker CLI {} (needed for targets with secrets): {e}",
                endpoint.docker_cli.display()
            ))
        })?;
    // The CLI and the buildx plugin it runs stop together (crate::children).
    let _group = crate::children::Group::new(child.id());
    let mut tracker = StepTracker::new(&spec.name);
    let mut parser = PlainParser::default();
    let mut tail = crate::steps::ClientTail::default();
    if let Some(err) = child.stderr.take() {
        let mut lines = BufReader::new(err).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            log.line(&line);
            for e in parser.line(&mut tracker, &line) {
                reporter.event(&e);
            }
            tail.push(line);
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|e| EngineError::io("waiting for the docker CLI", e))?;
    let image_id = std::fs::read_to_string(&iid)
        .ok()
        .map(|s| s.trim().to_string());
    drop(dir);
    match (status.success(), image_id) {
        (true, Some(id)) if !id.is_empty() => Ok(Ok(Built {
            image_id: id,
            steps: tracker.counts(),
            cache: tracker.cache_ops(),
            retries: Vec::new(),
        })),
        _ => {
            let (step, message, log_tail) =
                tail.failure(&tracker, || format!("docker build exited with {status}"));
            if message.contains("Cannot connect to the Docker daemon") {
                return Err(EngineError::Unreachable {
                    endpoint: endpoint.host.clone(),
                    detail: message,
                });
            }
            Ok(Err(Failed {
                message,
                step,
                log_tail,
                steps: tracker.counts(),
                cache: tracker.cache_ops(),
            }))
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SecretSpec;

    #[test]
    fn command_line_carries_secrets_by_reference_only() {
        let ep = Endpoint {
            host: "unix:///tmp/d.sock".into(),
            docker_cli: "/usr/bin/docker".into(),
        };
        let spec = BuildSpec {
            name: "app".into(),
            context: "/ctx".into(),
            network: Some("host".into()),
            secrets: vec![SecretSpec {
                id: "tok".into(),
                src: None,
                env: Some("PIP_TOKEN".into()),
            }],
            ..BuildSpec::default()
        };
        let a = args(
            &ep,
            &spec,
            "/tmp/Dockerfile",
            &[("A".to_string(), "1".to_string())].into(),
            "kiln.local/app:build",
            "/tmp/iid",
            &[],
        );
        let line = a.join(" ");
        assert!(line.contains("--secret id=tok,env=PIP_TOKEN"), "{line}");
        assert!(line.contains("--network host"), "{line}");
        assert!(line.contains("--build-arg A=1"), "{line}");
        assert!(line.ends_with("/ctx"), "{line}");
        // kiln's own secret (the job count) follows the bake file's, by file.
        let jobs = SecretSpec {
            id: "kiln-jobs".into(),
            src: Some("/tmp/b/kiln-jobs".into()),
            env: None,
        };
        let line = args(
            &ep,
            &spec,
            "/tmp/Dockerfile",
            &BTreeMap::new(),
            "kiln.local/app:build",
            "/tmp/iid",
            &[jobs],
        )
        .join(" ");
        assert!(
            line.contains(
                "--secret id=tok,env=PIP_TOKEN --secret id=kiln-jobs,src=/tmp/b/kiln-jobs"
            ),
            "{line}"
        );
    }
}
