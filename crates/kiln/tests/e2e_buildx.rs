//! End-to-end builds on the current engine (dockerd 26 with the containerd
//! image store) and through kiln's buildx driver, against the real daemons
//! and registry `scripts/dev-env up` starts. Without an engine these tests
//! say so and pass; with `KILN_E2E=1` (set by `.ci/run`) a missing engine
//! is a failure. On the legacy engine (no buildx) the buildx tests say they
//! are skipped.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::e2e::*;

/// The current engine's buildx environment: `DOCKER_CONFIG` (buildx
/// plugin, one docker context per engine) and the builder of the main
/// engine, from `scripts/dev-env env`; `None` (after saying so) on the
/// legacy engine.
fn buildx_env() -> Option<(String, String)> {
    let vars = dev_env().1;
    match (vars.get("DOCKER_CONFIG"), vars.get("KILN_BUILDER")) {
        (Some(c), Some(b)) => Some((c.clone(), b.clone())),
        _ => {
            eprintln!("skipped: the engine is the legacy one, which has no buildx");
            None
        }
    }
}

/// `kiln ARGS` in `dir` with the buildx environment.
fn kiln_bx(dir: &Path, host: &str, config: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all: Vec<(&str, &str)> = vec![("DOCKER_CONFIG", config)];
    all.extend_from_slice(env);
    kiln(dir, host, args, &all)
}

/// `kiln build --driver buildx --progress plain --format json EXTRA...`
/// in `dir` with the buildx environment.
fn build_bx(dir: &Path, host: &str, config: &str, extra: &[&str]) -> Output {
    let mut a = vec![
        "build",
        "--driver",
        "buildx",
        "--progress",
        "plain",
        "--format",
        "json",
    ];
    a.extend_from_slice(extra);
    kiln_bx(dir, host, config, &a, &[])
}

/// The layer-cache exports a target's summary lists.
fn cache_exports(t: &serde_json::Value) -> Vec<&serde_json::Value> {
    t["cache"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "export")
        .collect()
}

/// kiln commands on one buildx builder for one project, with its `--var`s.
struct Bx<'a> {
    dir: &'a Path,
    host: &'a str,
    config: &'a str,
    builder: &'a str,
    vars: [String; 2],
}

impl Bx<'_> {
    /// `kiln CMD --driver buildx --builder B [--progress plain] --format
    /// json --var ... EXTRA...`.
    fn run(&self, cmd: &str, extra: &[&str]) -> Output {
        let mut a = vec![cmd, "--driver", "buildx", "--builder", self.builder];
        if cmd == "build" {
            a.extend(["--progress", "plain"]);
        }
        a.extend(["--format", "json"]);
        for v in &self.vars {
            a.extend(["--var", v.as_str()]);
        }
        a.extend_from_slice(extra);
        kiln_bx(self.dir, self.host, self.config, &a, &[])
    }
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `docker --context CONTEXT ARGS` with `DOCKER_CONFIG`: stdout+stderr.
fn docker_ctx(config: &str, context: &str, args: &[&str]) -> String {
    let o = Command::new("docker")
        .args(["--context", context])
        .args(args)
        .env("DOCKER_CONFIG", config)
        .env_remove("DOCKER_HOST")
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

const BAKE: &str = r#"
variable "REG" { default = "127.0.0.1:5000" }
variable "U" { default = "x" }
target "_c" { network = "host" }
target "base" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.base"
  tags = ["${REG}/e2e-bx-${U}/base:1"]
}
target "app" {
  inherits = ["_c"]
  contexts = { base = "target:base" }
  tags = ["${REG}/e2e-bx-${U}/app:1"]
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
target "lost-export" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.lost"
  cache-to = ["type=registry,ref=127.0.0.1:1/nowhere:cache,mode=max,ignore-error=true"]
}
target "jobs" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.jobs"
}
group "default" { targets = ["app"] }
group "mixed" { targets = ["after-broken", "app"] }
"#;

fn fixture(salt: &str) -> PathBuf {
    fixture_from(salt, "kiln/busybox:latest")
}

/// The fixture with every Dockerfile built `FROM` the base image `from`.
fn fixture_from(salt: &str, from: &str) -> PathBuf {
    let files: [(&str, &str); 8] = [
        ("docker-bake.hcl", BAKE),
        (
            "Dockerfile.base",
            &format!(
                "FROM {from} AS build\nRUN echo built-{salt} > /out\nFROM {from}\nCOPY --from=build /out /base.txt\n"
            ),
        ),
        (
            "Dockerfile",
            "FROM base\nCOPY src/ /src/\nRUN cat /base.txt /src/* > /all\n",
        ),
        ("src/a.txt", "A\n"),
        (
            "Dockerfile.broken",
            "FROM {from}\nRUN echo about to fail && exit 3\n",
        ),
        ("Dockerfile.after", "FROM b\nRUN true\n"),
        (
            "Dockerfile.jobs",
            &format!(
                "FROM {from}\nRUN --mount=type=secret,id=kiln-jobs cp /run/secrets/kiln-jobs /jobs && echo {salt} > /salt\n"
            ),
        ),
        (
            "Dockerfile.lost",
            &format!("FROM {from}\nRUN echo lost-{salt} > /lost\n"),
        ),
    ];
    let files: Vec<(&str, String)> = files
        .into_iter()
        .map(|(n, t)| (n, t.replace("{from}", from)))
        .collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    workspace(&refs)
}

/// The buildx driver builds, hands over, records and skips like the
/// engine driver: a second run starts no buildx at all; a failure names
/// its step (never a cache import), blocks its dependents and lets the
/// rest finish; a failed cache export is reported although
/// `ignore-error=true` kept the build going.
#[test]
fn the_buildx_driver_builds_skips_and_reports_what_went_wrong() {
    let Some((host, reg)) = engine() else { return };
    let Some((config, builder)) = buildx_env() else {
        return;
    };
    let salt = unique("");
    let dir = fixture(&salt);
    let vars = [
        "--var",
        &format!("REG={reg}"),
        "--var",
        &format!("U={salt}"),
    ];
    let build = |extra: &[&str]| {
        let mut a = vars.to_vec();
        a.extend_from_slice(extra);
        build_bx(&dir, &host, &config, &a)
    };
    let o = build(&["--push"]);
    ok(&o);
    let s = summary(&o);
    for n in ["base", "app"] {
        let t = target(&s, n);
        assert_eq!(t["status"], "built", "{t}");
        assert_eq!(t["driver"], "buildx", "{t}");
        assert_eq!(t["node"], builder.as_str(), "{t}");
        assert!(t["digest"].as_str().unwrap().starts_with("sha256:"), "{t}");
        // The registry cache: imported (a first build finds nothing) and
        // exported with mode=max.
        let exports = cache_exports(t);
        assert_eq!(exports.len(), 1, "{t}");
        assert_eq!(exports[0]["outcome"], "ok", "{t}");
        assert!(Path::new(t["log"].as_str().unwrap()).is_file(), "{t}");
    }
    // app got base by its unique reference on the same engine and holds
    // what base built.
    let app = target(&s, "app");
    assert!(
        app["handed"]["base"]
            .as_str()
            .unwrap()
            .starts_with("kiln.local/base:"),
        "{app}"
    );
    let all = docker(
        &host,
        &[
            "run",
            "--rm",
            "--network",
            "host",
            app["image"].as_str().unwrap(),
            "cat",
            "/all",
        ],
    );
    assert!(all.contains(&format!("built-{salt}")), "{all}");

    // A no-op run: both skipped by key, buildx never started (no logs).
    let o = build(&["--push"]);
    ok(&o);
    let s2 = summary(&o);
    for n in ["base", "app"] {
        let t = target(&s2, n);
        assert_eq!(t["status"], "skipped", "{t}");
        assert!(
            t["reason"].as_str().unwrap().starts_with("up to date"),
            "{t}"
        );
        assert!(t.get("log").is_none(), "no build ran: {t}");
        assert_eq!(t["image"], target(&s, n)["image"], "{t}");
    }

    // A failure: its step, its log, dependents blocked, the rest built.
    let o = build(&["mixed"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    let s = summary(&o);
    let b = target(&s, "broken");
    assert_eq!(b["status"], "failed", "{b}");
    assert!(
        b["failed_step"]
            .as_str()
            .unwrap()
            .contains("RUN echo about to fail"),
        "{b}"
    );
    assert!(b["error"].as_str().unwrap().contains("exit code: 3"), "{b}");
    assert_eq!(target(&s, "after-broken")["status"], "blocked");
    assert!(matches!(
        target(&s, "app")["status"].as_str(),
        Some("skipped" | "built")
    ));

    // A cache export that fails: reported, the image still built.
    let o = build(&["lost-export"]);
    ok(&o);
    let s = summary(&o);
    let t = target(&s, "lost-export");
    assert_eq!(t["status"], "built", "{t}");
    let failed: Vec<_> = t["cache"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "export" && c["outcome"] == "error")
        .collect();
    assert_eq!(failed.len(), 1, "{t}");
    let err = stderr_of(&o);
    assert!(err.contains("layer-cache export failed"), "{err}");

    // The compile-job count reaches the RUN step as the secret kiln-jobs.
    let o = build(&["jobs"]);
    ok(&o);
    let s = summary(&o);
    let t = target(&s, "jobs");
    assert_eq!(t["status"], "built", "{t}");
    let jobs = t["jobs"].as_u64().unwrap_or_else(|| panic!("no jobs: {t}"));
    assert!(jobs >= 1, "{t}");
    let held = docker(
        &host,
        &[
            "run",
            "--rm",
            "--network",
            "host",
            t["image"].as_str().unwrap(),
            "cat",
            "/jobs",
        ],
    );
    assert_eq!(
        held,
        format!("{jobs}\n"),
        "the image holds the summary's count"
    );

    // A builder that does not exist: bad input, nothing built.
    let o = kiln_bx(
        &dir,
        &host,
        &config,
        &[
            "build",
            "--driver",
            "buildx",
            "--builder",
            "no-such-builder",
            vars[0],
            vars[1],
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.contains("no buildx builder no-such-builder"), "{err}");
    assert!(err.contains("docker buildx ls"), "{err}");
    // buildx missing: a run that builds nothing never starts buildx, so
    // it does not notice; one that builds is an environment failure that
    // says what to install.
    // (A DOCKER_CONFIG with the docker contexts and no cli-plugins.)
    let bare = dir.join("config-without-buildx");
    std::fs::create_dir_all(&bare).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(Path::new(&config).join("contexts"))
        .arg(&bare)
        .status()
        .unwrap();
    assert!(st.success());
    let bare = bare.to_str().unwrap();
    let no_buildx: [(&str, &str); 0] = [];
    let o = kiln_bx(
        &dir,
        &host,
        bare,
        &[
            "build", "--driver", "buildx", "--format", "json", vars[0], vars[1], vars[2], vars[3],
        ],
        &no_buildx,
    );
    ok(&o);
    assert!(
        summary(&o)["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "skipped"),
        "{}",
        stderr_of(&o)
    );
    let o = kiln_bx(
        &dir,
        &host,
        bare,
        &[
            "build", "--driver", "buildx", "--force", vars[0], vars[1], vars[2], vars[3],
        ],
        &no_buildx,
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("buildx is not available"),
        "{}",
        stderr_of(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An image recorded on one engine and pushed is reused on another engine
/// (pulled by digest, never rebuilt), and `kiln plan` said so first: plan
/// and build agree on every target.
#[test]
fn a_target_recorded_on_one_engine_is_pulled_on_another_and_plan_agrees() {
    let Some((_, reg)) = engine() else { return };
    let Some(fleet) = fleet_file() else { return };
    let nodes: Vec<String> = std::fs::read_to_string(&fleet)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v = l.trim().strip_prefix("endpoint")?.trim_start();
            Some(v.strip_prefix('=')?.trim().trim_matches('"').to_string())
        })
        .collect();
    assert!(nodes.len() >= 2, "{nodes:?}");
    let salt = unique("");
    let dir = fixture(&salt);
    let vars = [
        "--var",
        &format!("REG={reg}"),
        "--var",
        &format!("U={salt}"),
    ];
    let store = dir.join("shared-store");
    let store = store.to_str().unwrap();
    let mut a = vec![
        "build",
        "--push",
        "--progress",
        "plain",
        "--format",
        "json",
        "--store",
        store,
    ];
    a.extend_from_slice(&vars);
    let o = kiln(&dir, &nodes[0], &a, &[]);
    ok(&o);
    let first = summary(&o);
    let mut p = vec!["plan", "--format", "json", "--store", store];
    p.extend_from_slice(&vars);
    let o = kiln(&dir, &nodes[1], &p, &[]);
    ok(&o);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = kiln(&dir, &nodes[1], &a, &[]);
    ok(&o);
    let second = summary(&o);
    for t in plan["targets"].as_array().unwrap() {
        let n = t["name"].as_str().unwrap();
        assert_eq!(t["action"], "skip", "{t}");
        assert!(
            t["reason"]
                .as_str()
                .unwrap()
                .contains("will be pulled from"),
            "{t}"
        );
        let b = target(&second, n);
        assert_eq!(b["status"], "skipped", "plan said skip: {b}");
        assert!(b["reason"].as_str().unwrap().contains("pulled"), "{b}");
        // The same image by identity on both engines.
        assert_eq!(b["image"], target(&first, n)["image"], "{n}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A private current-engine environment of this test's own (its own
/// dockerd, registry and docker contexts): a builder the test may wipe.
struct OwnEnv {
    dir: PathBuf,
    host: String,
    registry: String,
    config: String,
}

impl OwnEnv {
    fn up() -> OwnEnv {
        let dir = std::env::temp_dir().join(unique("kiln-seed000-env-"));
        let o = Command::new(repo().join("scripts/dev-env"))
            .arg("up")
            .env("KILN_DEV_ENV_DIR", &dir)
            .env_remove("KILN_REGISTRY_PORT")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr_of(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")).map(String::from))
                .unwrap_or_else(|| panic!("{k} in {text}"))
        };
        OwnEnv {
            host: get("DOCKER_HOST"),
            registry: get("KILN_REGISTRY"),
            config: get("DOCKER_CONFIG"),
            dir,
        }
    }
}

impl Drop for OwnEnv {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/dev-env"))
            .args(["down", "--purge"])
            .env("KILN_DEV_ENV_DIR", &self.dir)
            .output();
    }
}

/// Seed 000's verification protocol on the twin, whose expensive work
/// sits in discarded builder stages (`COPY --from`, `RUN --mount from=`):
/// build everything with the buildx driver and push; wipe the builder (its
/// build cache and every image it built: a cold CI runner); build again
/// with `--force`, so BuildKit must solve: every step is CACHED from the
/// registry import, and the summary and `kiln diagnose` on the saved logs
/// say so; then change one upstream input: only what consumes it rebuilds.
#[test]
fn seed_000_verification_protocol_on_a_wiped_builder() {
    let Some(_) = engine() else { return };
    let Some(_) = buildx_env() else { return };
    let env = OwnEnv::up();
    let dir = twin_copy();
    let reg_var = format!("REGISTRY={}", env.registry);
    let pip = [("PIP_TOKEN", "seed000-token")];
    let build = |extra: &[&str]| {
        let mut a = vec![
            "build",
            "--driver",
            "buildx",
            "--builder",
            "kiln",
            "--push",
            "--progress",
            "plain",
            "--format",
            "json",
            "--var",
            &reg_var,
        ];
        a.extend_from_slice(extra);
        a.extend(["default", "pytorch-run"]);
        let o = kiln_bx(&dir, &env.host, &env.config, &a, &pip);
        ok(&o);
        summary(&o)
    };
    let first = build(&[]);
    for t in first["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "built", "{t}");
        let export = t["cache"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "export");
        assert_eq!(export.map(|e| &e["outcome"]), Some(&"ok".into()), "{t}");
    }

    // Wipe the builder: its build cache and the images it built.
    let pruned = docker_ctx(&env.config, "kiln", &["buildx", "prune", "-af"]);
    assert!(pruned.contains("Total"), "{pruned}");
    let images = docker_ctx(
        &env.config,
        "kiln",
        &["images", "--format", "{{.Repository}}:{{.Tag}}"],
    );
    for i in images
        .lines()
        .filter(|i| !i.starts_with("kiln/") && !i.contains("<none>"))
    {
        docker_ctx(&env.config, "kiln", &["rmi", "-f", i]);
    }
    docker_ctx(&env.config, "kiln", &["image", "prune", "-f"]);
    let left = docker_ctx(
        &env.config,
        "kiln",
        &["images", "--format", "{{.Repository}}"],
    );
    assert!(
        left.lines().all(|l| l.starts_with("kiln/")),
        "only the base images stay: {left}"
    );

    let second = build(&["--force"]);
    for t in second["targets"].as_array().unwrap() {
        let n = t["name"].as_str().unwrap();
        assert_eq!(t["status"], "built", "--force solves: {t}");
        let steps = &t["steps"];
        assert!(steps["total"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            steps["cached"], steps["total"],
            "every step from the registry cache: {t}"
        );
        let stable = format!("buildcache-{n}-");
        let import = t["cache"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "import" && c["ref"].as_str().unwrap().contains(&stable));
        assert_eq!(import.map(|i| &i["outcome"]), Some(&"ok".into()), "{t}");
        // kiln diagnose reads the saved log the same way.
        let log = t["log"].as_str().unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["diagnose", log, "--format", "json"])
            .output()
            .unwrap();
        ok(&o);
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(d["verdict"], "healthy", "{n}: {d}");
        assert_eq!(d["steps"]["cached"], d["steps"]["total"], "{n}: {d}");
        assert!(
            d["imports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["outcome"] == "ok"),
            "{n}: {d}"
        );
        assert!(
            d["exports"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["outcome"] == "ok"),
            "{n}: {d}"
        );
    }
    // The twin's discarded builder stages were among the cached steps.
    let nixl_log = target(&second, "nixl-wheel")["log"]
        .as_str()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(&nixl_log).unwrap();
    assert!(
        text.contains("[ucx "),
        "the ucx builder stage ran through the log"
    );

    // One upstream input changes: only nixl-wheel and what consumes it.
    touch_unique(
        &dir.join("src/nixl-wheel/ucx/src/ucs/sys/sys.c"),
        "seed 000 change",
    );
    let third = build(&[]);
    expect(
        &third,
        &[
            "nixl-wheel",
            "lmcache",
            "lmcache-wheel",
            "vllm",
            "vllm-wheel",
        ],
        &[],
        "one upstream input changed",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The engine, its registry, the buildx configuration and the remote
/// builder; `None` (after saying so) where there is no remote builder.
fn remote_env() -> Option<(String, String, String, String)> {
    let (host, reg) = engine()?;
    let (config, _) = buildx_env()?;
    let remote = remote_builder()?;
    Some((host, reg, config, remote))
}

/// The dev environment's builder that keeps no image store (buildx's
/// `remote` driver, `KILN_REMOTE_BUILDER`); `None` (after saying so) on
/// the legacy engine.
fn remote_builder() -> Option<String> {
    let vars = dev_env().1;
    if !vars.contains_key("KILN_BUILDER") {
        eprintln!("skipped: the engine is the legacy one, which has no buildx");
        return None;
    }
    Some(
        vars.get("KILN_REMOTE_BUILDER")
            .cloned()
            .expect("scripts/dev-env up starts a remote-driver builder on the current engine"),
    )
}

/// A builder that keeps no image store (buildx's docker-container, remote
/// and kubernetes drivers; here a real `remote`-driver builder): every
/// target is pushed and handed over by `repo@digest`, identities are read
/// from the registry's config blobs (the same as an engine's inspect of
/// the same image), skips need nothing but the registry (plan agrees),
/// a tag moved in the registry is pointed back without a build, and a
/// target that does not push is refused before anything builds.
#[test]
fn a_builder_that_keeps_no_image_works_through_the_registry_alone() {
    let Some((host, reg, config, remote)) = remote_env() else {
        return;
    };
    let salt = unique("");
    // The base image comes from the registry: a builder without an image
    // store has nowhere else to get it.
    let dir = fixture_from(&salt, &format!("{reg}/kiln/busybox:latest"));
    let bx = Bx {
        dir: &dir,
        host: &host,
        config: &config,
        builder: &remote,
        vars: [format!("REG={reg}"), format!("U={salt}")],
    };
    let run = |cmd: &str, extra: &[&str]| bx.run(cmd, extra);

    // Not pushed (no tags): refused before anything builds, saying what
    // to do.
    let o = run("build", &["jobs"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.contains("keeps no image store"), "{err}");
    assert!(err.contains("--push"), "{err}");
    assert!(!err.contains("] building ("), "nothing built: {err}");
    // --load asks for the image in the engine, which this builder cannot
    // give: refused before anything builds, never silently not loaded.
    let o = run("build", &["--push", "--load"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(
        err.contains("--load") && err.contains("keeps no image store"),
        "{err}"
    );
    assert!(!err.contains("] building ("), "nothing built: {err}");

    let o = run("build", &["--push"]);
    ok(&o);
    let s = summary(&o);
    let repo = |n: &str| format!("{reg}/e2e-bx-{salt}/{n}");
    for n in ["base", "app"] {
        let t = target(&s, n);
        assert_eq!(t["status"], "built", "{t}");
        assert_eq!(t["driver"], "buildx", "{t}");
        let digest = t["digest"].as_str().unwrap();
        // The image is the registry digest: there is no local tag.
        assert_eq!(t["image"], format!("{}@{digest}", repo(n)), "{t}");
        assert_eq!(registry_digest(&format!("{}:1", repo(n))), digest);
        let exports = cache_exports(t);
        assert_eq!(exports.len(), 1, "{t}");
        assert_eq!(exports[0]["outcome"], "ok", "{t}");
    }
    let app = target(&s, "app");
    let base = target(&s, "base");
    // Hand-over on the same builder is by digest too.
    assert_eq!(app["handed"]["base"], base["image"], "{app}");
    // What app consumed is what base built.
    let app_image = app["image"].as_str().unwrap();
    let all = docker(
        &host,
        &["run", "--rm", "--network", "host", app_image, "cat", "/all"],
    );
    assert!(all.contains(&format!("built-{salt}")), "{all}");

    // The identity kiln read from the registry is the one an engine's
    // inspect of the same image gives (the image was pulled just now).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine_identity = rt
        .block_on(async {
            let e = kiln_engine::driver::local::LocalEngine::connect(kiln_engine::Endpoint {
                host: host.clone(),
                docker_cli: "/usr/bin/docker".into(),
            })
            .await
            .unwrap();
            e.image_id(app_image).await
        })
        .expect("the engine shows the pulled image");
    assert!(
        records_name(&dir, &engine_identity),
        "a record of app names the identity the engine sees ({engine_identity})"
    );

    // plan, with nothing but the registry to look in, says skip for both;
    // the no-op build agrees and starts no buildx.
    let o = run("plan", &[]);
    ok(&o);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for t in plan["targets"].as_array().unwrap() {
        assert_eq!(t["action"], "skip", "{t}");
        assert!(
            t["reason"].as_str().unwrap().contains("in the registry as"),
            "{t}"
        );
    }
    // A tag moved in the registry (someone pushed over app:1) is pointed
    // back at the recorded image without a build.
    let moved = Command::new("docker")
        .args([
            "buildx",
            "imagetools",
            "create",
            "--builder",
            &remote,
            "--tag",
        ])
        .arg(format!("{}:1", repo("app")))
        .arg(base["image"].as_str().unwrap())
        .env("DOCKER_CONFIG", &config)
        .output()
        .unwrap();
    assert!(moved.status.success(), "{}", stderr_of(&moved));
    assert_ne!(
        registry_digest(&format!("{}:1", repo("app"))),
        app["digest"].as_str().unwrap()
    );
    let o = run("build", &["--push"]);
    ok(&o);
    let s2 = summary(&o);
    for n in ["base", "app"] {
        let t = target(&s2, n);
        assert_eq!(t["status"], "skipped", "{t}");
        assert!(t.get("log").is_none(), "no build ran: {t}");
        assert_eq!(t["image"], target(&s, n)["image"], "{t}");
    }
    assert!(
        target(&s2, "app")["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("(restored {}:1)", repo("app"))),
        "{}",
        target(&s2, "app")
    );
    assert_eq!(
        registry_digest(&format!("{}:1", repo("app"))),
        app["digest"].as_str().unwrap(),
        "the tag points at the recorded image again"
    );

    // An input change rebuilds only what consumes it; base is handed over
    // from the registry by its recorded digest.
    std::fs::write(dir.join("src/a.txt"), "B\n").unwrap();
    let o = run("build", &["--push"]);
    ok(&o);
    let s3 = summary(&o);
    assert_eq!(target(&s3, "base")["status"], "skipped");
    let app3 = target(&s3, "app");
    assert_eq!(app3["status"], "built", "{app3}");
    assert_eq!(app3["handed"]["base"], base["image"], "{app3}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether a record file under the workspace's store names `identity`.
fn records_name(dir: &Path, identity: &str) -> bool {
    fn walk(p: &Path, id: &str) -> bool {
        let Ok(rd) = std::fs::read_dir(p) else {
            return std::fs::read_to_string(p).is_ok_and(|t| t.contains(id));
        };
        rd.flatten().any(|e| walk(&e.path(), id))
    }
    walk(&dir.join(".kiln"), identity)
}

/// A local-directory named context (`contexts = { vendor = "./vendor" }`)
/// builds through buildx and is in the key by its content: a no-op run
/// skips, a changed file in it rebuilds with the new content. The engine
/// driver, whose BuildKit client has no named contexts, refuses it and
/// says which driver builds it.
#[test]
fn a_local_directory_named_context_is_built_and_keyed_by_its_content() {
    let Some((host, _)) = engine() else { return };
    let Some((config, _)) = buildx_env() else {
        return;
    };
    let salt = unique("");
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            r#"
target "vendored" {
  network = "host"
  contexts = { vendor = "./vendor" }
}
group "default" { targets = ["vendored"] }
"#,
        ),
        (
            "Dockerfile",
            &format!(
                "FROM kiln/busybox:latest\nCOPY --from=vendor a.txt /v\nRUN echo {salt} > /salt\n"
            ),
        ),
        ("vendor/a.txt", "first\n"),
    ]);
    let build = |extra: &[&str]| build_bx(&dir, &host, &config, extra);
    let cat = |image: &str| {
        docker(
            &host,
            &["run", "--rm", "--network", "host", image, "cat", "/v"],
        )
    };
    let o = build(&[]);
    ok(&o);
    let s = summary(&o);
    let t = target(&s, "vendored");
    assert_eq!(t["status"], "built", "{t}");
    assert_eq!(cat(t["image"].as_str().unwrap()), "first\n");
    let o = build(&[]);
    ok(&o);
    let t = target(&summary(&o), "vendored").clone();
    assert_eq!(t["status"], "skipped", "{t}");
    std::fs::write(dir.join("vendor/a.txt"), "second\n").unwrap();
    let o = build(&[]);
    ok(&o);
    let t = target(&summary(&o), "vendored").clone();
    assert_eq!(
        t["status"], "built",
        "a changed file in the named context rebuilds: {t}"
    );
    assert_eq!(cat(t["image"].as_str().unwrap()), "second\n");
    // The engine driver refuses it, naming the driver that builds it.
    let o = kiln(&dir, &host, &["build", "--progress", "plain"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.contains("named context vendor"), "{err}");
    assert!(err.contains("--driver buildx"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

const MULTI_BAKE: &str = r#"
variable "REG" { default = "127.0.0.1:5000" }
variable "U" { default = "x" }
target "_c" {
  network = "host"
  platforms = ["linux/amd64", "linux/arm64"]
}
target "files" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.files"
  tags = ["${REG}/e2e-mp-${U}/files:1"]
}
target "both" {
  inherits = ["_c"]
  contexts = { files = "target:files" }
  dockerfile = "Dockerfile.both"
  tags = ["${REG}/e2e-mp-${U}/both:1"]
}
target "unpushed" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.files"
}
group "default" { targets = ["both"] }
"#;

/// `GET` of a registry path as JSON (`Accept`: OCI index and manifest).
fn registry_json(host: &str, path: &str) -> serde_json::Value {
    let o = Command::new("curl")
        .args(["-sf", "-H"])
        .arg("Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
        .arg(format!("http://{host}/v2/{path}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "GET {path}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A project with `bake` and the files of its two-platform targets: `files`
/// copies `src/${TARGETARCH}.txt` (each platform reads its own), `both`
/// is `FROM files` plus `extra.txt`.
fn two_platforms(bake: &str, salt: &str) -> PathBuf {
    workspace(&[
        ("docker-bake.hcl", bake),
        (
            "Dockerfile.files",
            "FROM scratch\nARG TARGETARCH\nCOPY src/${TARGETARCH}.txt /arch.txt\n",
        ),
        ("Dockerfile.both", "FROM files\nCOPY extra.txt /extra.txt\n"),
        ("src/amd64.txt", &format!("amd64 {salt}\n")),
        ("src/arm64.txt", &format!("arm64 {salt}\n")),
        ("extra.txt", "extra\n"),
        (
            "Dockerfile.ext",
            "ARG BASE\nFROM ${BASE}\nCOPY extra.txt /ext.txt\n",
        ),
    ])
}

/// The identity of the multi-platform image `repo@digest`, computed here
/// from the registry's own index and config blobs: one identity per
/// platform manifest (attestations left out), combined.
fn index_identity(host: &str, repo: &str, digest: &str) -> (Vec<String>, String) {
    let index = registry_json(host, &format!("{repo}/manifests/{digest}"));
    let mut platforms = Vec::new();
    let mut ids = Vec::new();
    for m in index["manifests"].as_array().unwrap() {
        let p = &m["platform"];
        if p["os"] == "unknown" {
            continue;
        }
        platforms.push(format!(
            "{}/{}",
            p["os"].as_str().unwrap(),
            p["architecture"].as_str().unwrap()
        ));
        let man = registry_json(
            host,
            &format!("{repo}/manifests/{}", m["digest"].as_str().unwrap()),
        );
        let blob = registry_json(
            host,
            &format!("{repo}/blobs/{}", man["config"]["digest"].as_str().unwrap()),
        );
        ids.push(kiln_engine::identity::from_config_blob(&blob).unwrap());
    }
    platforms.sort();
    (platforms, kiln_engine::identity::composite(&ids))
}

/// On a docker-driver builder (containerd image store), which cannot push
/// by digest, a target of several platforms is one solve pushed as an
/// image index (said in a note): its identity combines every platform's
/// (so a change to one platform's input rebuilds it), its one cache ref
/// names the platform set, a multi-platform dependent is handed the index
/// by digest, plan and a no-op build skip through the registry, and a
/// target that pushes nowhere is refused before anything builds. (Other
/// builders build each platform as a unit: the next test.)
#[test]
fn a_multi_platform_target_is_one_index_keyed_and_skipped_by_all_its_platforms() {
    let Some((host, reg)) = engine() else { return };
    let Some((config, docker_builder)) = buildx_env() else {
        return;
    };
    {
        let builder = docker_builder;
        let salt = unique("");
        let dir = two_platforms(MULTI_BAKE, &salt);
        let bx = Bx {
            dir: &dir,
            host: &host,
            config: &config,
            builder: &builder,
            vars: [format!("REG={reg}"), format!("U={salt}")],
        };
        let run = |cmd: &str, extra: &[&str]| bx.run(cmd, extra);
        let repo = |n: &str| format!("e2e-mp-{salt}/{n}");

        // Pushed nowhere: refused, saying what to do.
        let o = run("build", &["unpushed"]);
        assert_eq!(o.status.code(), Some(2), "{builder}: {}", stderr_of(&o));
        let err = stderr_of(&o);
        assert!(
            err.contains("image index") && err.contains("--push"),
            "{err}"
        );
        assert!(!err.contains("] building ("), "nothing built: {err}");

        let o = run("build", &["--push"]);
        ok(&o);
        assert!(
            stderr_of(&o).contains(&format!(
                "note: target files builds its 2 platforms in one solve on one node (builder {builder} is a docker-driver builder"
            )),
            "{}",
            stderr_of(&o)
        );
        let s = summary(&o);
        let mut identities = std::collections::HashMap::new();
        for n in ["files", "both"] {
            let t = target(&s, n);
            assert_eq!(t["status"], "built", "{builder}: {t}");
            let digest = t["digest"].as_str().unwrap();
            assert_eq!(registry_digest(&format!("{reg}/{}:1", repo(n))), digest);
            assert_eq!(t["image"], format!("{reg}/{}@{digest}", repo(n)), "{t}");
            let (platforms, identity) = index_identity(&reg, &repo(n), digest);
            assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{builder}: {t}");
            assert!(
                records_name(&dir, &identity),
                "{builder}: a record of {n} names the identity of both platforms ({identity})"
            );
            identities.insert(n, identity);
            let exports = cache_exports(t);
            assert_eq!(exports.len(), 1, "{t}");
            assert_eq!(exports[0]["outcome"], "ok", "{t}");
            // The one cache ref names the platform set.
            registry_digest(&format!(
                "{reg}/{}:buildcache-{n}-linux-amd64-linux-arm64",
                repo(n)
            ));
        }
        // The dependent was handed the index by digest.
        let (files, both) = (target(&s, "files"), target(&s, "both"));
        assert_eq!(both["handed"]["files"], files["image"], "{both}");

        // plan and a no-op build skip both through the registry.
        let o = run("plan", &[]);
        ok(&o);
        let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for t in plan["targets"].as_array().unwrap() {
            assert_eq!(t["action"], "skip", "{builder}: {t}");
            assert!(
                t["reason"].as_str().unwrap().contains("in the registry as"),
                "{builder}: {t}"
            );
        }
        let o = run("build", &["--push"]);
        ok(&o);
        let s = summary(&o);
        for n in ["files", "both"] {
            assert_eq!(target(&s, n)["status"], "skipped", "{builder}: {s}");
        }
        assert!(!stderr_of(&o).contains("] building ("), "{}", stderr_of(&o));

        // An input of one platform only changes the index's identity:
        // files rebuilds, and so does its dependent.
        std::fs::write(dir.join("src/arm64.txt"), format!("arm64 changed {salt}\n")).unwrap();
        let o = run("plan", &[]);
        ok(&o);
        let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(target(&plan, "files")["action"], "build", "{plan}");
        let o = run("build", &["--push"]);
        ok(&o);
        let s = summary(&o);
        let files = target(&s, "files");
        assert_eq!(files["status"], "built", "{builder}: {files}");
        let (_, changed) = index_identity(&reg, &repo("files"), files["digest"].as_str().unwrap());
        assert_ne!(changed, identities["files"], "{builder}");
        assert_eq!(target(&s, "both")["status"], "built", "{builder}: {s}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

const UNITS_BAKE: &str = r#"
variable "REG" { default = "127.0.0.1:5000" }
variable "U" { default = "x" }
target "_c" {
  platforms = ["linux/amd64", "linux/arm64"]
}
target "files" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.files"
  tags = ["${REG}/e2e-pu-${U}/files:1", "${REG}/e2e-pu-${U}/files:latest"]
}
target "both" {
  inherits = ["_c"]
  contexts = { files = "target:files" }
  dockerfile = "Dockerfile.both"
  tags = ["${REG}/e2e-pu-${U}/both:1"]
}
target "pick" {
  contexts = { files = "target:files" }
  dockerfile = "Dockerfile.both"
  platforms = ["linux/amd64"]
  tags = ["${REG}/e2e-pu-${U}/pick:1"]
}
target "ext" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.ext"
  args = { BASE = "${REG}/e2e-pu-${U}/files:ext" }
  tags = ["${REG}/e2e-pu-${U}/ext:1"]
}
group "default" { targets = ["both", "pick"] }
"#;

/// Puts the manifest `repo:from` under `repo:to` in the registry at
/// `host` (what another pipeline pushing a base image does).
fn copy_tag(host: &str, repo: &str, from: &str, to: &str) {
    let accept = "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json";
    let o = Command::new("curl")
        .args(["-sf", "-H", accept])
        .arg(format!("http://{host}/v2/{repo}/manifests/{from}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "GET {repo}:{from}");
    let media = serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["mediaType"]
        .as_str()
        .unwrap()
        .to_string();
    let tmp = std::env::temp_dir().join(unique("manifest"));
    std::fs::write(&tmp, &o.stdout).unwrap();
    let put = Command::new("curl")
        .args(["-sf", "-X", "PUT", "-H"])
        .arg(format!("Content-Type: {media}"))
        .arg("--data-binary")
        .arg(format!("@{}", tmp.display()))
        .arg(format!("http://{host}/v2/{repo}/manifests/{to}"))
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&tmp);
    assert!(put.status.success(), "PUT {repo}:{to}");
}

/// The platform manifests of the index `repo:reference`, by platform
/// (attestations left out).
fn index_platforms(host: &str, repo: &str, reference: &str) -> BTreeMap<String, String> {
    let index = registry_json(host, &format!("{repo}/manifests/{reference}"));
    index["manifests"]
        .as_array()
        .unwrap_or_else(|| panic!("not an index: {index}"))
        .iter()
        .filter(|m| m["platform"]["os"] != "unknown")
        .map(|m| {
            (
                format!(
                    "{}/{}",
                    m["platform"]["os"].as_str().unwrap(),
                    m["platform"]["architecture"].as_str().unwrap()
                ),
                m["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// On a builder that can push by digest (here buildx's remote driver), a
/// target of several platforms is built as one unit per platform, each
/// with its own key, record and cache ref, pushed by digest and joined
/// into one index under the target's tags (its identity combines the
/// units'). A dependent's unit of a platform is handed the same platform's
/// unit, and a one-platform dependent the matching unit. `kiln plan` shows
/// a row per unit. A no-op run skips all of them; a change to an arm64-only
/// file rebuilds only the arm64 units and makes the indexes anew around
/// the unchanged amd64 manifests. Both cache refs import on a forced
/// rebuild.
#[test]
fn a_multi_platform_target_is_built_as_platform_units_joined_into_one_index() {
    let Some((host, reg, config, remote)) = remote_env() else {
        return;
    };
    let salt = unique("");
    let dir = two_platforms(UNITS_BAKE, &salt);
    let bx = Bx {
        dir: &dir,
        host: &host,
        config: &config,
        builder: &remote,
        vars: [format!("REG={reg}"), format!("U={salt}")],
    };
    let run = |cmd: &str, extra: &[&str]| bx.run(cmd, extra);
    let repo = |n: &str| format!("e2e-pu-{salt}/{n}");
    let (amd, arm) = ("linux/amd64", "linux/arm64");
    let unit = |n: &str, p: &str| format!("{n}@{p}");

    let o = run("build", &["--push"]);
    ok(&o);
    let s = summary(&o);
    let names: Vec<&str> = s["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for n in ["files", "both"] {
        for p in [amd, arm] {
            let u = target(&s, &unit(n, p));
            assert_eq!(u["status"], "built", "{u}");
            // Pushed by digest into the target's repository, no tag.
            let digest = u["digest"].as_str().unwrap();
            assert_eq!(u["image"], format!("{reg}/{}@{digest}", repo(n)), "{u}");
            // Its own cache ref, of its one platform.
            let exports = cache_exports(u);
            assert_eq!(exports.len(), 1, "{u}");
            assert_eq!(exports[0]["outcome"], "ok", "{u}");
            // (BuildKit's progress names no ref for an export: the
            // registry holds the unit's own.)
            let slug = p.replace('/', "-");
            registry_digest(&format!("{reg}/{}:buildcache-{n}-{slug}", repo(n)));
        }
        // The join: one index of both units under every tag, identified by
        // both platforms' identities.
        let t = target(&s, n);
        assert_eq!(t["status"], "built", "{t}");
        let digest = t["digest"].as_str().unwrap();
        assert_eq!(registry_digest(&format!("{reg}/{}:1", repo(n))), digest);
        let platforms = index_platforms(&reg, &repo(n), "1");
        assert_eq!(
            platforms.keys().map(String::as_str).collect::<Vec<_>>(),
            [amd, arm],
            "{t}"
        );
        for p in [amd, arm] {
            let u = target(&s, &unit(n, p));
            assert_eq!(
                platform_manifest(&reg, &repo(n), u["digest"].as_str().unwrap()),
                platforms[p],
                "{n} {p}: the index holds the unit's manifest"
            );
        }
        let (_, identity) = index_identity(&reg, &repo(n), digest);
        assert!(
            records_name(&dir, &identity),
            "{n}: the join's record names {identity}"
        );
        // Units come just before their join.
        let at = names.iter().position(|x| *x == n).unwrap();
        assert_eq!(names[at - 2..at], [unit(n, amd), unit(n, arm)], "{names:?}");
    }
    assert_eq!(
        index_platforms(&reg, &repo("files"), "latest"),
        index_platforms(&reg, &repo("files"), "1")
    );
    // Each unit of both is handed files' unit of its platform; the
    // amd64-only pick, files' amd64 unit.
    for p in [amd, arm] {
        assert_eq!(
            target(&s, &unit("both", p))["handed"]["files"],
            target(&s, &unit("files", p))["image"],
            "{p}"
        );
    }
    assert_eq!(
        target(&s, "pick")["handed"]["files"],
        target(&s, &unit("files", amd))["image"]
    );

    // The run report lists each target's units just after it, as its.
    let o = kiln_bx(&dir, &host, &config, &["report", "--format", "json"], &[]);
    ok(&o);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let listed: Vec<(String, Option<String>)> = r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["unit_of"].as_str().map(String::from),
            )
        })
        .collect();
    let at = listed.iter().position(|(n, _)| n == "files").unwrap();
    assert_eq!(
        listed[at + 1..at + 3],
        [
            (unit("files", amd), Some("files".to_string())),
            (unit("files", arm), Some("files".to_string()))
        ],
        "{listed:?}"
    );
    // The metadata file names targets only, as bake's does.
    let meta = dir.join("meta.json");
    let o = run(
        "build",
        &["--push", "--metadata-file", meta.to_str().unwrap()],
    );
    ok(&o);
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    let mut keys: Vec<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["both", "files", "pick"], "{m}");

    // A two-platform target FROM an outside base image (files' index,
    // pushed again as files:ext by "another pipeline").
    copy_tag(&reg, &repo("files"), "1", "ext");
    let o = run("build", &["--push", "ext"]);
    ok(&o);
    let s = summary(&o);
    for p in [amd, arm] {
        assert_eq!(target(&s, &unit("ext", p))["status"], "built", "{s}");
    }
    // plan: a row per unit, and a no-op run skips every one.
    let plan_rows = |extra: &[&str]| -> BTreeMap<String, String> {
        let o = run("plan", extra);
        ok(&o);
        let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        plan["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    t["action"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let rows = plan_rows(&[]);
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert!(rows.values().all(|a| a == "skip"), "{rows:?}");
    let o = run("build", &["--push"]);
    ok(&o);
    let s = summary(&o);
    for t in s["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "skipped", "{t}");
    }
    let before = index_platforms(&reg, &repo("files"), "1");

    // A file only arm64 reads: only the arm64 units build, and the indexes
    // are made anew around the unchanged amd64 manifests.
    std::fs::write(dir.join("src/arm64.txt"), format!("arm64 changed {salt}\n")).unwrap();
    let rows = plan_rows(&[]);
    assert_eq!(rows[&unit("files", amd)], "skip", "{rows:?}");
    assert_eq!(rows[&unit("files", arm)], "build", "{rows:?}");
    // why: the target's units, and a unit by its name.
    let o = run("why", &["files"]);
    ok(&o);
    let why: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let units = why["units"].as_array().unwrap();
    assert_eq!(units.len(), 2, "{why}");
    assert_eq!(
        (units[0]["target"].as_str(), units[0]["action"].as_str()),
        (Some("files@linux/amd64"), Some("skip"))
    );
    assert_eq!(units[1]["action"], "build", "{why}");
    assert!(
        units[1]["changes"].to_string().contains("src/arm64.txt"),
        "{why}"
    );
    let o = run("why", &[&unit("files", arm)]);
    ok(&o);
    let why: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(why["status"], "changed", "{why}");
    let o = run("why", &["files@linux/s390x"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("files has no platform unit linux/s390x"),
        "{}",
        stderr_of(&o)
    );
    let o = run("build", &["--push"]);
    ok(&o);
    let s = summary(&o);
    let status = |n: &str| target(&s, n)["status"].as_str().unwrap().to_string();
    for (n, want) in [
        (unit("files", amd), "skipped"),
        (unit("files", arm), "built"),
        ("files".into(), "built"),
        (unit("both", amd), "skipped"),
        (unit("both", arm), "built"),
        ("both".into(), "built"),
        ("pick".into(), "skipped"),
    ] {
        assert_eq!(status(&n), want, "{n}: {s}");
    }
    let after = index_platforms(&reg, &repo("files"), "1");
    assert_eq!(after[amd], before[amd]);
    assert_ne!(after[arm], before[arm]);
    // The outside base moves to the new index, whose amd64 image is the
    // same: only ext's arm64 unit reads a changed base.
    copy_tag(&reg, &repo("files"), "1", "ext");
    let rows = plan_rows(&["ext"]);
    assert_eq!(rows[&unit("ext", amd)], "skip", "{rows:?}");
    assert_eq!(rows[&unit("ext", arm)], "build", "{rows:?}");
    let o = run("build", &["--push", "ext"]);
    ok(&o);
    let s = summary(&o);
    assert_eq!(target(&s, &unit("ext", amd))["status"], "skipped", "{s}");
    assert_eq!(target(&s, &unit("ext", arm))["status"], "built", "{s}");
    assert_eq!(target(&s, "ext")["status"], "built", "{s}");

    // Both platforms' cache refs import on a forced rebuild.
    let o = run("build", &["--push", "--force", "files"]);
    ok(&o);
    let s = summary(&o);
    for p in [amd, arm] {
        let u = target(&s, &unit("files", p));
        let stable = format!("buildcache-files-{}", p.replace('/', "-"));
        let import = u["cache"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "import" && c["ref"].as_str().unwrap().ends_with(&stable));
        assert_eq!(import.map(|i| &i["outcome"]), Some(&"ok".into()), "{u}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The image manifest of the one platform of `repo@digest` (an index
/// with an attestation, as buildx pushes it, or a manifest).
fn platform_manifest(host: &str, repo: &str, digest: &str) -> String {
    let m = registry_json(host, &format!("{repo}/manifests/{digest}"));
    match m["manifests"].as_array() {
        None => digest.to_string(),
        Some(list) => list
            .iter()
            .find(|x| x["platform"]["os"] != "unknown")
            .and_then(|x| x["digest"].as_str())
            .unwrap_or_else(|| panic!("no platform manifest in {m}"))
            .to_string(),
    }
}

/// Reproducible images: every target builds with a SOURCE_DATE_EPOCH
/// (kiln's constant 0 when nothing sets one), and on a builder that keeps
/// no image store its pushed layers' file times are rewritten to it. A
/// forced cold rebuild (`--force`, no layer cache) of the unchanged twin
/// then pushes byte-identical image manifests for every target, and after
/// a cold rebuild of the root alone, early cutoff keeps every dependent.
#[test]
fn a_cold_rebuild_of_the_unchanged_twin_is_byte_identical_on_a_registry_only_builder() {
    let Some((host, reg, config, remote)) = remote_env() else {
        return;
    };
    let dir = twin_copy();
    // The remote builder reads its base image from the registry.
    for e in std::fs::read_dir(dir.join("docker")).unwrap() {
        let p = e.unwrap().path();
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(
            &p,
            t.replace("kiln/busybox:latest", &format!("{reg}/kiln/busybox:latest")),
        )
        .unwrap();
    }
    let env = [("PIP_TOKEN", "repro-token")];
    let build = |extra: &[&str]| {
        let mut a = vec![
            "build",
            "--driver",
            "buildx",
            "--builder",
            &remote,
            "--push",
            "--progress",
            "plain",
            "--format",
            "json",
        ];
        a.extend_from_slice(extra);
        let o = kiln_bx(&dir, &host, &config, &a, &env);
        ok(&o);
        summary(&o)
    };
    let manifests = |s: &serde_json::Value| -> BTreeMap<String, String> {
        s["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let image = t["image"].as_str().unwrap();
                let (repo, digest) = image.split_once('@').unwrap();
                let repo = repo.split_once('/').unwrap().1;
                (
                    t["name"].as_str().unwrap().to_string(),
                    platform_manifest(&reg, repo, digest),
                )
            })
            .collect()
    };
    let first = build(&[]);
    let cold = build(&["--force", "--set", "*.no-cache=true"]);
    for t in cold["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "built", "{t}");
        // Nothing came from the layer cache: every step ran again.
        let steps = &t["steps"];
        assert_eq!(steps["cached"], 0, "{t}");
    }
    let (a, b) = (manifests(&first), manifests(&cold));
    let same = a.iter().filter(|(n, d)| b.get(*n) == Some(d)).count();
    eprintln!(
        "byte-identical cold rebuilds on {remote}: {same} of {} targets",
        a.len()
    );
    assert_eq!(a, b, "every target rebuilds into the same image manifest");
    assert_eq!(a.len(), 14);

    // A real rebuild of the root: the same image, so no dependent builds.
    let root = build(&[
        "--force",
        "--set",
        "rocm-runtime.no-cache=true",
        "rocm-runtime",
    ]);
    assert_eq!(root["targets"][0]["status"], "built");
    let all = build(&[]);
    for t in all["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "skipped", "{t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a builder that keeps no image store, a run where every key is
/// recorded starts no process: the builder is found in buildx's instance
/// store and its platforms recalled from kiln's cache of what `docker
/// buildx inspect` said (asked once, by the run that built), and each
/// pushed tag is checked in the registry (`verified`).
#[test]
fn a_no_op_run_on_a_remote_builder_starts_no_process() {
    let Some((host, reg, config, remote)) = remote_env() else {
        return;
    };
    let salt = unique("noop-");
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            &format!(
                "group \"default\" {{\n  targets = [\"os\", \"app\"]\n}}\ntarget \"os\" {{\n  network = \"host\"\n  dockerfile = \"Dockerfile.os\"\n  tags = [\"{reg}/e2e-{salt}/os:1\"]\n}}\ntarget \"app\" {{\n  network = \"host\"\n  contexts = {{ os = \"target:os\" }}\n  tags = [\"{reg}/e2e-{salt}/app:1\", \"{reg}/e2e-{salt}/app:latest\"]\n}}\n"
            ),
        ),
        (
            "Dockerfile.os",
            &format!("FROM {reg}/kiln/busybox:latest\nRUN echo {salt} > /salt\n"),
        ),
        ("Dockerfile", "FROM os\nRUN cat /salt > /app\n"),
    ]);
    let cache = dir.join("xdg-cache");
    let cache_s = cache.display().to_string();
    let env = [
        ("DOCKER_CONFIG", config.as_str()),
        ("XDG_CACHE_HOME", &cache_s),
    ];
    let args = [
        "build",
        "--driver",
        "buildx",
        "--builder",
        &remote,
        "--push",
        "--progress",
        "plain",
        "--format",
        "json",
    ];
    let o = kiln(&dir, &host, &args, &env);
    ok(&o);
    assert!(
        cache.join("kiln/builders.json").exists(),
        "what buildx said of the builder is kept"
    );
    let (o, started) = kiln_traced(&dir, &host, &args, &env);
    ok(&o);
    let s = summary(&o);
    for n in ["os", "app"] {
        assert_eq!(target(&s, n)["status"], "skipped", "{s}");
    }
    assert_eq!(
        started,
        Vec::<String>::new(),
        "processes started by a no-op"
    );
    let err = stderr_of(&o);
    assert!(
        err.contains(&format!(
            "[app] verified {reg}/e2e-{salt}/app:latest@sha256:"
        )),
        "{err}"
    );
    assert!(!err.contains("] pushed "), "{err}");

    // What was recalled is confirmed before the first build: a builder
    // remembered as another platform than it builds stops the run (its
    // keys were computed for the remembered one), and the cache is
    // corrected, so the next run builds.
    let file = cache.join("kiln/builders.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (_, e) in v.as_object_mut().unwrap().iter_mut() {
        e["platforms"] = serde_json::json!(["linux/s390x"]);
    }
    std::fs::write(&file, v.to_string()).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM os\nRUN cat /salt > /app && echo changed >> /app\n",
    )
    .unwrap();
    let o = kiln(&dir, &host, &args, &env);
    let err = stderr_of(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("but kiln remembered linux/s390x for it") && err.contains("run again"),
        "{err}"
    );
    let o = kiln(&dir, &host, &args, &env);
    ok(&o);
    assert_eq!(target(&summary(&o), "app")["status"], "built");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `docker buildx create --name NAME --driver remote --platform P ENDPOINT`
/// in `config`, made anew; removed when dropped.
struct PlatformBuilder<'a> {
    config: &'a str,
    name: String,
}

impl<'a> PlatformBuilder<'a> {
    fn create(config: &'a str, name: String, platform: &str, endpoint: &str) -> Self {
        let docker = |args: &[&str]| {
            Command::new("docker")
                .env("DOCKER_CONFIG", config)
                .args(args)
                .output()
                .unwrap()
        };
        let _ = docker(&["buildx", "rm", &name]);
        let o = docker(&[
            "buildx",
            "create",
            "--name",
            &name,
            "--driver",
            "remote",
            "--platform",
            platform,
            endpoint,
        ]);
        assert!(o.status.success(), "buildx create: {}", stderr_of(&o));
        PlatformBuilder { config, name }
    }
}

impl Drop for PlatformBuilder<'_> {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .env("DOCKER_CONFIG", self.config)
            .args(["buildx", "rm", &self.name])
            .output();
    }
}

/// Nodes know their platforms from their builders: two remote builders
/// created with `--platform linux/amd64` and `--platform linux/arm64` form
/// a fleet whose file states no platforms. A target of one platform goes
/// to the node that builds it natively (the pushed image is that
/// platform's), `kiln fleet` shows each node's platforms and where they
/// come from, and `kiln schedule` splits a two-platform target into one
/// unit per node.
#[test]
fn a_fleet_places_each_platform_on_the_node_that_builds_it_natively() {
    let Some((host, reg, config, remote)) = remote_env() else {
        return;
    };
    // The remote builder's BuildKit, from buildx's instance store.
    let endpoint = builder_endpoint(&config, &remote).expect("the remote builder's endpoint");
    let salt = unique("");
    let amd = PlatformBuilder::create(
        &config,
        format!("kiln-amd-{salt}"),
        "linux/amd64",
        &endpoint,
    );
    let arm = PlatformBuilder::create(
        &config,
        format!("kiln-arm-{salt}"),
        "linux/arm64",
        &endpoint,
    );
    let fleet = format!(
        "[[node]]\nname = \"amd\"\nendpoint = \"{}\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 1000\n\n\
         [[node]]\nname = \"arm\"\nendpoint = \"{}\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 1000\n",
        amd.name, arm.name
    );
    let bake = format!(
        r#"target "_" {{
  dockerfile = "Dockerfile"
}}
target "board" {{
  inherits = ["_"]
  platforms = ["linux/arm64"]
  tags = ["{reg}/kiln-e2e/plat-{salt}/board:1"]
}}
target "server" {{
  inherits = ["_"]
  platforms = ["linux/amd64"]
  tags = ["{reg}/kiln-e2e/plat-{salt}/server:1"]
}}
target "both" {{
  inherits = ["_"]
  platforms = ["linux/amd64", "linux/arm64"]
  tags = ["{reg}/kiln-e2e/plat-{salt}/both:1"]
}}
target "odd" {{
  dockerfile = "Dockerfile.odd"
  platforms = ["linux/riscv64"]
  tags = ["{reg}/kiln-e2e/plat-{salt}/odd:1"]
}}
"#
    );
    let dir = workspace(&[
        ("fleet.toml", &fleet),
        ("docker-bake.hcl", &bake),
        (
            "Dockerfile",
            "FROM scratch\nARG TARGETARCH\nCOPY only-${TARGETARCH}.txt /\n",
        ),
        ("only-amd64.txt", "amd64\n"),
        ("only-arm64.txt", "arm64\n"),
        ("Dockerfile.odd", "FROM scratch\nCOPY only-amd64.txt /\n"),
    ]);
    // `kiln build --driver buildx --fleet fleet.toml TARGETS`, which must
    // succeed.
    let fleet_build = |targets: &[&str]| {
        let mut a = vec![
            "build",
            "--driver",
            "buildx",
            "--fleet",
            "fleet.toml",
            "--progress",
            "plain",
            "--format",
            "json",
        ];
        a.extend_from_slice(targets);
        let o = kiln_bx(&dir, &host, &config, &a, &[]);
        ok(&o);
        o
    };
    // The nodes' platforms, from their builders' definitions.
    let o = kiln_bx(
        &dir,
        &host,
        &config,
        &["fleet", "--fleet", "fleet.toml", "--format", "json"],
        &[],
    );
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (i, p) in [(0, "linux/amd64"), (1, "linux/arm64")] {
        let n = &v["nodes"][i];
        assert_eq!(n["platforms"], serde_json::json!([p]), "{n}");
        assert_eq!(n["platforms_from"], "builder", "{n}");
    }
    // The two-platform target is a unit per platform, each on its node.
    let o = kiln_bx(
        &dir,
        &host,
        &config,
        &[
            "schedule",
            "--simulate",
            "--fleet",
            "fleet.toml",
            "--format",
            "json",
            "both",
        ],
        &[],
    );
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let placed: BTreeMap<String, String> = v["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["target"].as_str().unwrap().into(),
                a["node"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        BTreeMap::from([
            ("both@linux/amd64".to_string(), "amd".to_string()),
            ("both@linux/arm64".to_string(), "arm".to_string()),
        ])
    );
    // A fleet build puts each one-platform target on its native node.
    let o = fleet_build(&["board", "server"]);
    let s = summary(&o);
    let node_of = |t: &str| {
        s["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == t)
            .and_then(|x| x["node"].as_str())
            .unwrap_or_else(|| panic!("{t}: {s}"))
            .to_string()
    };
    assert_eq!(
        (node_of("board"), node_of("server")),
        ("arm".into(), "amd".into())
    );
    // The pushed image is the platform's own.
    let repo = format!("kiln-e2e/plat-{salt}/board");
    let digest = platform_manifest(&reg, &repo, "1");
    let man = registry_json(&reg, &format!("{repo}/manifests/{digest}"));
    let blob = registry_json(
        &reg,
        &format!("{repo}/blobs/{}", man["config"]["digest"].as_str().unwrap()),
    );
    assert_eq!(blob["architecture"], "arm64", "{blob}");
    // A two-platform target: each unit built on its native node, one index
    // of both under the target's tag.
    let o = fleet_build(&["both"]);
    let s = summary(&o);
    let node_of = |t: &str| target(&s, t)["node"].as_str().unwrap().to_string();
    assert_eq!(
        (node_of("both@linux/amd64"), node_of("both@linux/arm64")),
        ("amd".into(), "arm".into())
    );
    let platforms = index_platforms(&reg, &format!("kiln-e2e/plat-{salt}/both"), "1");
    assert_eq!(
        platforms.keys().map(String::as_str).collect::<Vec<_>>(),
        ["linux/amd64", "linux/arm64"]
    );
    // A platform no node builds natively: built under emulation, said.
    let o = fleet_build(&["odd"]);
    assert!(
        stderr_of(&o).contains("note: odd goes to node amd under emulation: no node of the fleet builds linux/riscv64 natively"),
        "{}",
        stderr_of(&o)
    );
    drop((amd, arm));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The endpoint of buildx builder `name` in `config`, from buildx's
/// instance store; `None` when there is no such builder.
fn builder_endpoint(config: &str, name: &str) -> Option<String> {
    let text = std::fs::read(Path::new(config).join("buildx/instances").join(name)).ok()?;
    let instance: serde_json::Value = serde_json::from_slice(&text).ok()?;
    instance["Nodes"][0]["Endpoint"].as_str().map(String::from)
}

/// The twin and a two-platform target beside it (its kernels: the SDK
/// tree and a file per architecture, `FROM scratch`, so arm64 needs no
/// emulation) on a fleet of two BuildKits, one declared `linux/amd64` and
/// one `linux/arm64`: the twin's fourteen targets and the amd64 unit build
/// on the amd64 node, the arm64 unit on the arm64 node, the summary says
/// which, and the index under the target's tag holds both. Then the fleet
/// is swapped (each platform on the BuildKit that never built it: a cold
/// builder for that unit) and a forced rebuild takes every step of each
/// unit from that unit's own registry cache ref: the two refs are distinct
/// and neither overwrote the other (docker/buildx#1044).
#[test]
fn the_twin_with_a_two_platform_target_builds_it_natively_and_imports_cache_cold() {
    let Some((host, reg, config, remote)) = remote_env() else {
        return;
    };
    let Some(other) = builder_endpoint(&config, "kiln-remote-node1") else {
        eprintln!("skipped: no builder kiln-remote-node1 (scripts/dev-env up --nodes 1)");
        return;
    };
    let main = builder_endpoint(&config, &remote).expect("the remote builder's endpoint");
    let salt = unique("");
    let dir = twin_copy();
    for e in std::fs::read_dir(dir.join("docker")).unwrap() {
        let p = e.unwrap().path();
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(
            &p,
            t.replace("kiln/busybox:latest", &format!("{reg}/kiln/busybox:latest")),
        )
        .unwrap();
    }
    let bake = dir.join("docker-bake.hcl");
    let mut text = std::fs::read_to_string(&bake).unwrap();
    text.push_str(
        r#"
target "rocm-kernels" {
  inherits   = ["_common"]
  dockerfile = "docker/Dockerfile.rocm-kernels"
  platforms  = ["linux/amd64", "linux/arm64"]
  tags       = [tag("rocm-kernels", ROCM_VERSION)]
}
"#,
    );
    std::fs::write(&bake, text).unwrap();
    std::fs::write(
        dir.join("docker/Dockerfile.rocm-kernels"),
        "FROM scratch\nARG TARGETARCH\nCOPY src/rocm-runtime/sdk/ /opt/rocm/\n\
         COPY src/rocm-kernels/${TARGETARCH}/ /opt/rocm/lib/kernels/\n",
    )
    .unwrap();
    for arch in ["amd64", "arm64"] {
        let d = dir.join("src/rocm-kernels").join(arch);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("kernels.txt"), format!("{arch} {salt}\n")).unwrap();
    }
    let builders = |amd_at: &str, arm_at: &str, tag: &str| {
        (
            PlatformBuilder::create(
                &config,
                format!("kiln-twin-amd-{tag}-{salt}"),
                "linux/amd64",
                amd_at,
            ),
            PlatformBuilder::create(
                &config,
                format!("kiln-twin-arm-{tag}-{salt}"),
                "linux/arm64",
                arm_at,
            ),
        )
    };
    let fleet = |amd: &PlatformBuilder, arm: &PlatformBuilder| {
        format!(
            "[[node]]\nname = \"amd\"\nendpoint = \"{}\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 1000\n\n\
             [[node]]\nname = \"arm\"\nendpoint = \"{}\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 1000\n",
            amd.name, arm.name
        )
    };
    let reg_var = format!("REGISTRY={reg}");
    let build = |fleet_file: &str, extra: &[&str], targets: &[&str]| {
        let mut a = vec![
            "build",
            "--driver",
            "buildx",
            "--fleet",
            fleet_file,
            "--push",
            "--progress",
            "plain",
            "--format",
            "json",
            "--var",
            &reg_var,
        ];
        a.extend_from_slice(extra);
        a.extend_from_slice(targets);
        let o = kiln_bx(&dir, &host, &config, &a, &[("PIP_TOKEN", "platform-token")]);
        ok(&o);
        summary(&o)
    };
    let (amd, arm) = ("linux/amd64", "linux/arm64");
    let unit = |p: &str| format!("rocm-kernels@{p}");

    let (b_amd, b_arm) = builders(&main, &other, "a");
    std::fs::write(dir.join("fleet.toml"), fleet(&b_amd, &b_arm)).unwrap();
    let s = build("fleet.toml", &[], &["default", "rocm-kernels"]);
    let node_of =
        |s: &serde_json::Value, t: &str| target(s, t)["node"].as_str().unwrap().to_string();
    let targets = s["targets"].as_array().unwrap();
    // 14 twin targets, the two-platform target and its two units.
    assert_eq!(targets.len(), 17, "{s}");
    for t in targets {
        let n = t["name"].as_str().unwrap();
        if n == "rocm-kernels" {
            continue;
        }
        let want = if n == unit(arm) { "arm" } else { "amd" };
        assert_eq!(t["node"], want, "{n}: {t}");
    }
    // The tag, as bake evaluates it.
    let o = kiln_bx(
        &dir,
        &host,
        &config,
        &["print", "--var", &reg_var, "rocm-kernels"],
        &[],
    );
    ok(&o);
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tagged = printed["target"]["rocm-kernels"]["tags"][0]
        .as_str()
        .unwrap()
        .to_string();
    let (at, tag) = tagged.rsplit_once(':').unwrap();
    let repo = at.split_once('/').unwrap().1;
    let digest = target(&s, "rocm-kernels")["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let digest = digest.as_str();
    assert_eq!(registry_digest(&tagged), digest);
    let platforms = index_platforms(&reg, repo, tag);
    assert_eq!(
        platforms.keys().map(String::as_str).collect::<Vec<_>>(),
        [amd, arm]
    );
    for p in [amd, arm] {
        let u = target(&s, &unit(p));
        assert_eq!(
            platform_manifest(&reg, repo, u["digest"].as_str().unwrap()),
            platforms[p],
            "{p}: the index holds the unit's manifest"
        );
    }
    // Each unit exported its own cache ref, and the two differ.
    let mut caches = Vec::new();
    for p in [amd, arm] {
        let e = cache_exports(target(&s, &unit(p)));
        assert_eq!(e.len(), 1, "{p}: {s}");
        assert_eq!(e[0]["outcome"], "ok", "{p}: {s}");
        let slug = p.replace('/', "-");
        caches.push(registry_digest(&format!(
            "{reg}/{repo}:buildcache-rocm-kernels-{slug}"
        )));
    }
    assert_ne!(caches[0], caches[1], "one cache ref per platform");
    drop((b_amd, b_arm));

    // Swapped: each unit on the BuildKit that never built it.
    let (b_amd, b_arm) = builders(&other, &main, "b");
    std::fs::write(dir.join("swapped.toml"), fleet(&b_amd, &b_arm)).unwrap();
    let s = build("swapped.toml", &["--force"], &["rocm-kernels"]);
    for p in [amd, arm] {
        let u = target(&s, &unit(p));
        assert_eq!(u["status"], "built", "{u}");
        let steps = &u["steps"];
        assert!(steps["total"].as_u64().unwrap() > 0, "{u}");
        assert_eq!(
            steps["cached"], steps["total"],
            "{p}: every step from its own cache ref on a cold builder: {u}"
        );
        let stable = format!("buildcache-rocm-kernels-{}", p.replace('/', "-"));
        let import = u["cache"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "import" && c["ref"].as_str().unwrap().ends_with(&stable));
        assert_eq!(import.map(|i| &i["outcome"]), Some(&"ok".into()), "{u}");
    }
    assert_eq!(
        (node_of(&s, &unit(amd)), node_of(&s, &unit(arm))),
        ("amd".into(), "arm".into())
    );
    // The same content on other BuildKits: the same image for each
    // platform (the index itself differs: each unit's provenance
    // attestation records when it was built).
    let again = target(&s, "rocm-kernels")["digest"].as_str().unwrap();
    assert_eq!(registry_digest(&tagged), again);
    assert_eq!(index_platforms(&reg, repo, again), platforms);
    drop((b_amd, b_arm));
    let _ = std::fs::remove_dir_all(&dir);
}
