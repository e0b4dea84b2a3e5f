//! The docker CLI driver: builds through the Debian docker CLI's built-in
//! BuildKit client (`DOCKER_BUILDKIT=1 docker build`), used for targets with
//! secrets, which the Engine API's `/build` cannot carry. The CLI applies
//! `.dockerignore` itself and streams `--progress=plain`, parsed into the
//! same events as the Engine API driver. Secret values are read by the CLI
//! from the files or environment variables the bake file names; kiln never
//! reads, logs or stores them. The one secret kiln makes itself, the job
//! count (`crate::jobs`), is written to a private file in the build's
//! temporary directory and removed with it.
//!
//! Must never: read the value of a bake file's secret (only its id and its
//! `src=` or `env=` reach the command line), or push or record the image
//! it builds (the engine driver and the scheduler do).

use std::collections::BTreeMap;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::driver::{Built, Failed};
use crate::error::EngineError;
use crate::events::Reporter;
use crate::proc::TempDir;
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
    if spec.pull {
        a.push("--pull".into());
    }
    for c in &spec.cache_from {
        a.extend(["--cache-from".into(), c.clone()]);
    }
    a.push(spec.context.display().to_string());
    a
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
    let mut log = crate::proc::LogFile::create(log);
    let dir = TempDir::new(&spec.name)?;
    let tmp = dir.path();
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
    // The CLI and the buildx plugin it runs stop together (crate::proc).
    let _group = crate::proc::Group::new(child.id());
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

    /// Whatever count a build is handed, its key is the same: the count
    /// reaches the build only as a file behind `--secret id=kiln-jobs,src=`,
    /// never as a build arg, and the manifest names no implicit secret.
    #[test]
    fn the_job_count_never_reaches_the_key() {
        use crate::hashing::StatCache;
        use crate::inputs::gather_for_build;
        use crate::spec::Endpoint;

        let dir = std::env::temp_dir().join(format!("kiln-jobs-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
        let spec = BuildSpec {
            name: "compile".into(),
            context: dir.clone(),
            dockerfile: dir.join("Dockerfile"),
            dockerfile_inline: Some(
                "FROM b\nCOPY main.c /src/\nRUN --mount=type=secret,id=kiln-jobs make -j\"$(cat /run/secrets/kiln-jobs 2>/dev/null || nproc)\" -C /src\n"
                    .into(),
            ),
            args: [("A".to_string(), "x".to_string())].into(),
            ..BuildSpec::default()
        };
        let ep = Endpoint {
            host: "unix:///tmp/d.sock".into(),
            docker_cli: "/usr/bin/docker".into(),
        };
        let cache = StatCache::default();
        let none = BTreeMap::new();
        let key = |s: &BuildSpec| {
            let g = gather_for_build(s, "linux/amd64", &none, &none, &cache).unwrap();
            assert!(g.jobs_secret);
            assert!(g.manifest.secrets.is_empty(), "{:?}", g.manifest.secrets);
            g.manifest.key()
        };
        let first = key(&spec);
        for n in [1u32, 3, 64] {
            let d = dir.join(format!("run-{n}"));
            std::fs::create_dir_all(&d).unwrap();
            let secret = crate::jobs::write_secret(&d, n).unwrap();
            let argv = args(
                &ep,
                &spec,
                "/tmp/Dockerfile",
                &spec.args,
                "kiln.local/compile:run",
                "/tmp/iid",
                std::slice::from_ref(&secret),
            );
            let src = secret.src.clone().unwrap();
            let want = format!("id={},src={}", crate::jobs::SECRET_ID, src.display());
            assert!(
                argv.windows(2).any(|w| w[0] == "--secret" && w[1] == want),
                "{argv:?}"
            );
            assert!(
                !argv.iter().any(|a| a.contains(&format!("={n}"))),
                "the count is no argument: {argv:?}"
            );
            assert_eq!(std::fs::read_to_string(&src).unwrap(), format!("{n}\n"));
            assert_eq!(key(&spec), first, "{n} jobs, same key");
        }
        // The mount itself is part of the Dockerfile text, so it counts.
        let plain = BuildSpec {
            dockerfile_inline: Some(
                "FROM b\nCOPY main.c /src/\nRUN make -j\"$(nproc)\" -C /src\n".into(),
            ),
            ..spec.clone()
        };
        let g = gather_for_build(&plain, "linux/amd64", &none, &none, &cache).unwrap();
        assert!(!g.jobs_secret);
        assert_ne!(g.manifest.key(), first);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
