//! End-to-end builds against the real dockerd and registry that
//! `scripts/dev-env up` starts. Without an engine these tests say so and
//! pass, so `cargo test` works offline; with `KILN_E2E=1` (set by `.ci/run`)
//! a missing engine is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `(DOCKER_HOST, KILN_REGISTRY)` from the dev environment, if it is up.
fn engine() -> Option<(String, String)> {
    let out = Command::new(repo().join("scripts/dev-env"))
        .arg("env")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")).map(String::from))
    };
    match (
        out.status.success(),
        get("DOCKER_HOST"),
        get("KILN_REGISTRY"),
    ) {
        (true, Some(h), Some(r)) => Some((h, r)),
        _ => {
            assert!(
                std::env::var("KILN_E2E").as_deref() != Ok("1"),
                "KILN_E2E=1 but the dev environment is not up: run scripts/dev-env up"
            );
            eprintln!(
                "skipped: no engine (run `scripts/dev-env up` to run the end-to-end build tests)"
            );
            None
        }
    }
}

fn workspace(files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kiln-e2e-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn kiln(dir: &Path, host: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"));
    c.args(args).current_dir(dir).env("DOCKER_HOST", host);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run kiln")
}

/// `kiln build --progress plain --format json ARGS...` in `dir`.
fn build_json(dir: &Path, host: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["build", "--progress", "plain", "--format", "json"];
    all.extend_from_slice(args);
    kiln(dir, host, &all, env)
}

fn summary(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON summary ({e}); stderr:\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn target<'a>(s: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    s["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {s}"))
}

fn docker(host: &str, args: &[&str]) -> String {
    let o = Command::new("/usr/bin/docker")
        .arg("-H")
        .arg(host)
        .args(args)
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

const BAKE: &str = r#"
variable "REG" { default = "127.0.0.1:5000" }
group "default" { targets = ["app"] }
target "_c" { network = "host" }
target "base" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.base"
  tags = ["${REG}/e2e/base:1"]
}
target "app" {
  inherits = ["_c"]
  contexts = { base = "target:base" }
  args = { MSG = "hello" }
  tags = ["${REG}/e2e/app:1"]
}
target "broken" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.broken"
}
target "after-broken" {
  inherits = ["_c"]
  contexts = { b = "target:broken" }
  dockerfile = "Dockerfile.after"
}
target "indep" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.indep"
}
target "sec" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.sec"
  secret = ["id=tok,env=E2E_TOKEN"]
}
group "mixed" { targets = ["after-broken", "indep", "app"] }
"#;

fn fixture(tag_salt: &str) -> PathBuf {
    workspace(&[
        ("docker-bake.hcl", BAKE),
        (
            "Dockerfile.base",
            &format!("FROM kiln/busybox:latest\nRUN echo base-{tag_salt} > /base.txt\n"),
        ),
        (
            "Dockerfile",
            "FROM base\nARG MSG\nRUN echo \"$MSG\" > /msg\nCOPY src/ /src/\nRUN cat /base.txt /src/* > /all\n",
        ),
        ("src/a.txt", "A\n"),
        ("src/junk.tmp", "ignored\n"),
        (".dockerignore", "**/*.tmp\n"),
        (
            "Dockerfile.broken",
            "FROM kiln/busybox:latest\nRUN echo about to fail && exit 3\n",
        ),
        ("Dockerfile.after", "FROM b\nRUN true\n"),
        (
            "Dockerfile.indep",
            &format!("FROM kiln/busybox:latest\nRUN echo indep-{tag_salt} > /i\n"),
        ),
        (
            "Dockerfile.sec",
            &format!(
                "FROM kiln/busybox:latest\nRUN --mount=type=secret,id=tok test -s /run/secrets/tok && echo \"token bytes: $(wc -c < /run/secrets/tok) {tag_salt}\" && echo present > /present\n"
            ),
        ),
    ])
}

#[test]
fn builds_in_order_and_second_build_is_fully_cached() {
    let Some((host, reg)) = engine() else { return };
    let salt = format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let dir = fixture(&salt);
    let o = kiln(
        &dir,
        &host,
        &[
            "build",
            "--progress",
            "json",
            "--format",
            "json",
            "--var",
            &format!("REG={reg}"),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&o);
    let names: Vec<&str> = s["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base", "app"], "the dependency first");
    let app = target(&s, "app");
    assert_eq!(app["status"], "built");
    let image = app["image"].as_str().unwrap();
    assert!(image.starts_with("kiln.local/app:"), "{image}");
    // The image runs and holds what the dependency produced (handed over by reference).
    let out = docker(
        &host,
        &["run", "--rm", "--network", "host", image, "cat", "/all"],
    );
    assert!(out.contains(&format!("base-{salt}")), "{out}");
    assert!(out.contains('A'), "{out}");
    // .dockerignore kept the junk out of the context.
    let ls = docker(
        &host,
        &["run", "--rm", "--network", "host", image, "ls", "/src"],
    );
    assert!(!ls.contains("junk.tmp"), "{ls}");
    // Progress events were JSON lines on stderr.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("{\"event\":\"target-finished\"")),
        "{err}"
    );

    let o = build_json(&dir, &host, &["--var", &format!("REG={reg}")], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&o);
    for t in s["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "built");
        assert!(t["steps"]["total"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            t["steps"]["cached"], t["steps"]["total"],
            "second build fully cached: {t}"
        );
    }
    assert_eq!(
        target(&s, "app")["image"].as_str(),
        Some(image),
        "same image"
    );

    // A changed file rebuilds only the steps from its COPY on.
    std::fs::write(dir.join("src/a.txt"), "B\n").unwrap();
    let o = build_json(&dir, &host, &["--var", &format!("REG={reg}")], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&o);
    assert_eq!(
        target(&s, "base")["steps"]["cached"],
        target(&s, "base")["steps"]["total"]
    );
    let app = target(&s, "app");
    assert_eq!(app["steps"]["total"], 3, "{app}");
    assert_eq!(
        app["steps"]["cached"], 1,
        "RUN before the COPY stays cached: {app}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failure_skips_dependents_and_lets_independent_targets_finish() {
    let Some((host, reg)) = engine() else { return };
    let dir = fixture(&format!("f{}", std::process::id()));
    let o = build_json(&dir, &host, &["--var", &format!("REG={reg}"), "mixed"], &[]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = summary(&o);
    assert_eq!(target(&s, "broken")["status"], "failed");
    assert_eq!(target(&s, "after-broken")["status"], "skipped");
    assert!(
        target(&s, "after-broken")["reason"]
            .as_str()
            .unwrap()
            .contains("broken")
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(target(&s, "indep")["status"], "built", "{s}\n{err}");
    assert_eq!(target(&s, "app")["status"], "built", "{s}\n{err}");
    assert!(
        err.contains("step: [2/2] RUN echo about to fail && exit 3"),
        "{err}"
    );
    assert!(
        err.contains("| about to fail"),
        "the log tail is shown: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn secrets_reach_the_run_step_and_nothing_else() {
    let Some((host, reg)) = engine() else { return };
    let salt = format!(
        "s{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let dir = fixture(&salt);
    let secret = format!(
        "e2e-secret-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let o = build_json(
        &dir,
        &host,
        &["--var", &format!("REG={reg}"), "sec"],
        &[("E2E_TOKEN", &secret)],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&o);
    let t = target(&s, "sec");
    assert_eq!(t["driver"], "docker-cli");
    let image = t["image"].as_str().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("token bytes: {}", secret.len())),
        "the RUN step read it: {stderr}"
    );
    assert!(!stderr.contains(&secret), "not in the logs");
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains(&secret),
        "not in the summary"
    );
    assert!(
        !docker(&host, &["history", "--no-trunc", image]).contains(&secret),
        "not in history"
    );
    assert!(
        !docker(&host, &["inspect", image]).contains(&secret),
        "not in the image config"
    );
    assert!(docker(&host, &["run", "--rm", image, "cat", "/present"]).contains("present"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn push_lands_in_the_registry_with_its_digest() {
    let Some((host, reg)) = engine() else { return };
    let dir = fixture(&format!("p{}", std::process::id()));
    let o = kiln(
        &dir,
        &host,
        &[
            "build",
            "--push",
            "--progress",
            "plain",
            "--format",
            "json",
            "--var",
            &format!("REG={reg}"),
            "base",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&o);
    let digest = target(&s, "base")["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");
    let manifest = Command::new("curl")
        .args([
            "-sfI",
            "-H",
            "Accept: application/vnd.docker.distribution.manifest.v2+json",
            &format!("http://{reg}/v2/e2e/base/manifests/1"),
        ])
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&manifest.stdout).to_ascii_lowercase();
    assert!(
        head.contains(&format!("docker-content-digest: {digest}")),
        "{head}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreachable_engine_is_exit_3_with_a_hint() {
    let dir = fixture("u");
    let o = kiln(
        &dir,
        "unix:///nonexistent/docker.sock",
        &["build", "base"],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("unix:///nonexistent/docker.sock"), "{e}");
    assert!(e.contains("scripts/dev-env up"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dockerfile_syntax_errors_name_file_and_line() {
    let Some((host, _)) = engine() else { return };
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"bad\" {\n  network = \"host\"\n}\n",
        ),
        ("Dockerfile", "FROM kiln/busybox:latest\nCOPYY a b\n"),
    ]);
    let o = kiln(&dir, &host, &["build", "--progress", "plain", "bad"], &[]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("Dockerfile:2: unknown instruction: COPYY"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_base_image_names_image_and_target() {
    let Some((host, _)) = engine() else { return };
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"nobase\" {\n  network = \"host\"\n}\n",
        ),
        ("Dockerfile", "FROM kiln/does-not-exist:1\nRUN true\n"),
    ]);
    let o = kiln(
        &dir,
        &host,
        &["build", "--progress", "plain", "nobase"],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("target nobase"), "{e}");
    assert!(e.contains("kiln/does-not-exist"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole twin (examples/twin), copied to a temporary directory so that
/// editing a source file does not touch the repository.
fn twin_copy() -> PathBuf {
    let dst = std::env::temp_dir().join(format!(
        "kiln-twin-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dst);
    let st = Command::new("cp")
        .arg("-a")
        .arg(repo().join("examples/twin"))
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    dst
}

#[test]
fn the_twin_builds_then_is_fully_cached_and_a_source_change_rebuilds_only_its_dependents() {
    let Some((host, reg)) = engine() else { return };
    let dir = twin_copy();
    let env = [("PIP_TOKEN", "twin-e2e-token")];
    let args = [
        "build",
        "--progress",
        "plain",
        "--format",
        "json",
        "--var",
        &format!("REGISTRY={reg}"),
        "default",
        "pytorch-run",
    ];
    let o = kiln(&dir, &host, &args, &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&o);
    assert_eq!(
        s["targets"].as_array().unwrap().len(),
        15,
        "default (14) + pytorch-run"
    );

    let o = kiln(&dir, &host, &args, &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let second = summary(&o);
    for t in second["targets"].as_array().unwrap() {
        assert_eq!(
            t["steps"]["cached"], t["steps"]["total"],
            "fully cached: {t}"
        );
    }

    // A change in nixl-wheel's sources: nixl-wheel and what consumes it rebuild;
    // targets that do not depend on it keep their images.
    let victim = dir.join("src/nixl-wheel/nixl/src/core/nixl_agent.cpp");
    let mut text = std::fs::read_to_string(&victim).unwrap();
    // Unique per run: the engine's cache may hold an earlier run's edit.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    text.push_str(&format!(
        "\n# changed by the e2e test {} {stamp}\n",
        std::process::id()
    ));
    std::fs::write(&victim, text).unwrap();
    let o = kiln(&dir, &host, &args, &env);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let third = summary(&o);
    let img = |s: &serde_json::Value, n: &str| target(s, n)["image"].as_str().unwrap().to_string();
    for unchanged in [
        "rocm-runtime",
        "pytorch-base",
        "pytorch",
        "triton-wheel",
        "cupy-wheel",
        "aiter-wheel",
        "torchvision-wheel",
    ] {
        assert_eq!(
            img(&second, unchanged),
            img(&third, unchanged),
            "{unchanged} must not change"
        );
        assert_eq!(
            target(&third, unchanged)["steps"]["cached"],
            target(&third, unchanged)["steps"]["total"]
        );
    }
    let nixl = target(&third, "nixl-wheel");
    assert!(
        nixl["steps"]["cached"].as_u64() < nixl["steps"]["total"].as_u64(),
        "{nixl}"
    );
    assert_ne!(img(&second, "nixl-wheel"), img(&third, "nixl-wheel"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_twin_gpu_test_fails_and_the_rest_still_builds() {
    let Some((host, reg)) = engine() else { return };
    let dir = twin_copy();
    let o = build_json(
        &dir,
        &host,
        &[
            "--var",
            &format!("REGISTRY={reg}"),
            "pytorch-test",
            "torchvision-wheel",
        ],
        &[("PIP_TOKEN", "x")],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = summary(&o);
    assert_eq!(target(&s, "pytorch-test")["status"], "failed");
    assert_eq!(target(&s, "torchvision-wheel")["status"], "built");
    assert_eq!(target(&s, "pytorch")["status"], "built");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stage_labels_no_cache_platforms_and_fail_fast() {
    let Some((host, _)) = engine() else { return };
    let salt = format!(
        "o{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let bake = r#"
target "_c" { network = "host" }
target "staged" {
  inherits = ["_c"]
  target = "first"
  labels = { "org.example.kind" = "staged" }
}
target "nc" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.nc"
  no-cache = true
}
target "arm" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.nc"
  platforms = ["linux/arm64"]
}
target "two" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.nc"
  platforms = ["linux/amd64", "linux/arm64"]
}
target "fails" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.fail"
}
target "slow" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.slow"
}
target "after-slow" {
  inherits = ["_c"]
  contexts = { s = "target:slow" }
  dockerfile = "Dockerfile.after"
}
group "ff" { targets = ["fails", "after-slow"] }
"#;
    let dir = workspace(&[
        ("docker-bake.hcl", bake),
        (
            "Dockerfile",
            &format!(
                "FROM kiln/busybox:latest AS first\nRUN echo first-{salt} > /stage\nFROM first AS second\nRUN echo second > /stage\n"
            ),
        ),
        (
            "Dockerfile.nc",
            &format!("FROM kiln/busybox:latest\nRUN echo nc-{salt} > /nc\n"),
        ),
        ("Dockerfile.fail", "FROM kiln/busybox:latest\nRUN exit 7\n"),
        (
            "Dockerfile.slow",
            &format!("FROM kiln/busybox:latest\nRUN sleep 3 && echo {salt} > /slow\n"),
        ),
        ("Dockerfile.after", "FROM s\nRUN true\n"),
    ]);
    // The stage and the labels reach the build.
    let o = build_json(&dir, &host, &["staged"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let image = target(&summary(&o), "staged")["image"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        docker(&host, &["run", "--rm", &image, "cat", "/stage"]).contains("first-"),
        "built the `first` stage"
    );
    assert!(docker(&host, &["inspect", &image]).contains("\"org.example.kind\": \"staged\""));
    // no-cache: a second build reruns the step.
    for _ in 0..2 {
        let o = build_json(&dir, &host, &["nc"], &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(target(&summary(&o), "nc")["steps"]["cached"], 0);
    }
    // Platforms the engine cannot build are refused before anything runs.
    for t in ["arm", "two"] {
        let o = kiln(&dir, &host, &["build", "--progress", "plain", t], &[]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("platform"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // --fail-fast stops the rest at the first failure.
    let o = build_json(&dir, &host, &["--fail-fast", "ff"], &[]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = summary(&o);
    assert_eq!(target(&s, "fails")["status"], "failed");
    assert_eq!(target(&s, "after-slow")["status"], "skipped");
    assert_ne!(
        target(&s, "slow")["status"],
        "built",
        "the running build was stopped: {s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
