//! Helpers shared by the integration tests that run the real binary on the
//! repository's stacks.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs kiln in the repository root with a clean environment and returns
/// its JSON output; fails the test if kiln fails.
pub fn kiln_json(bin: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut c = Command::new(bin);
    c.args(args)
        .current_dir(root())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run kiln");
    assert!(
        o.status.success(),
        "kiln {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

/// `kiln plan -f FILE default pytorch-run pytorch-test --format json` in
/// the file's directory: the graph's edges (dependency, dependent) and the
/// build order, every dependency checked to come first, and the plan's
/// success (every target's Dockerfile and sources are there).
pub fn plan_edges(
    bin: &str,
    file: &str,
    env: &[(&str, &str)],
) -> (BTreeSet<(String, String)>, Vec<String>) {
    // Contexts are relative to where kiln runs (as in bake): the file's
    // own directory.
    let path = root().join(file);
    let dir = path.parent().expect("a file in a directory");
    let name = path.file_name().and_then(|n| n.to_str()).expect("a name");
    let mut c = Command::new(bin);
    c.args([
        "plan",
        "-f",
        name,
        "--format",
        "json",
        "default",
        "pytorch-run",
        "pytorch-test",
    ])
    .current_dir(dir)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run kiln");
    let err = String::from_utf8_lossy(&o.stderr);
    // Both stacks ship every Dockerfile: a plan that cannot build a
    // target fails (exit 2), so success says every target is buildable.
    assert!(o.status.success(), "kiln plan -f {file} failed:\n{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let mut edges = BTreeSet::new();
    let mut order: Vec<String> = Vec::new();
    for t in v["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap().to_string();
        for d in t["deps"].as_array().unwrap() {
            let d = d.as_str().unwrap().to_string();
            assert!(order.contains(&d), "{d} after {name}");
            edges.insert((d, name.clone()));
        }
        order.push(name);
    }
    (edges, order)
}

/// Runs the real `kiln` in `dir` with a cleared environment (only `PATH`),
/// so nothing from the caller's shell leaks into snapshots.
pub fn kiln_clean(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run kiln")
}

/// A command's stdout as text.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's stderr as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The seed's 27 edges (`stacks/rocm/edges.txt`), dependency first.
pub fn seed_edges() -> BTreeSet<(String, String)> {
    std::fs::read_to_string(root().join("stacks/rocm/edges.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (a, b) = l.split_once("->").expect("edge line `from -> to`");
            (a.trim().to_string(), b.trim().to_string())
        })
        .collect()
}

/// End-to-end helpers: the dev environment's engine, temporary workspaces,
/// running the binary against the engine, reading its summary.
pub mod browser;
pub mod engine_proxy;

pub mod e2e {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub static N: AtomicUsize = AtomicUsize::new(0);

    /// `PREFIX<pid>-<n>`: a name no other test or test process uses.
    pub fn unique(prefix: &str) -> String {
        format!(
            "{prefix}{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        )
    }

    pub fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The lines `scripts/dev-env env` prints (`NAME` → value), and
    /// whether it succeeded (the environment is up).
    pub fn dev_env() -> (bool, BTreeMap<String, String>) {
        let Ok(out) = Command::new(repo().join("scripts/dev-env"))
            .arg("env")
            .output()
        else {
            return (false, BTreeMap::new());
        };
        let vars = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (out.status.success(), vars)
    }

    /// `(DOCKER_HOST, KILN_REGISTRY)` from the dev environment, if it is up.
    pub fn engine() -> Option<(String, String)> {
        // The main lines come whenever the main engine and the registry
        // are up, also while the fleet test has a node down.
        let (_, vars) = dev_env();
        match (
            vars.get("DOCKER_HOST").cloned(),
            vars.get("KILN_REGISTRY").cloned(),
        ) {
            (Some(h), Some(r)) => Some((h, r)),
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

    pub fn workspace(files: &[(&str, &str)]) -> PathBuf {
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

    pub fn kiln(dir: &Path, host: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"));
        c.args(args).current_dir(dir).env("DOCKER_HOST", host);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run kiln")
    }

    /// `kiln ARGS` in `dir` under `strace -f -e trace=execve`: its output
    /// and every program a process of it started (kiln itself excluded).
    pub fn kiln_traced(
        dir: &Path,
        host: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Vec<String>) {
        let log = std::env::temp_dir().join(unique("kiln-execve-"));
        let mut c = Command::new("strace");
        c.args(["-f", "-qq", "-e", "trace=execve", "-o"])
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_kiln"))
            .args(args)
            .current_dir(dir)
            .env("DOCKER_HOST", host);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c
            .output()
            .expect("run kiln under strace (apt-get install strace)");
        let trace = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        let kiln = env!("CARGO_BIN_EXE_kiln");
        let started = trace
            .lines()
            // A search of $PATH tries names that fail (`= -1 ENOENT`).
            .filter(|l| l.contains("execve(\"") && !l.contains("= -1 "))
            .filter_map(|l| l.split('"').nth(1))
            .filter(|prog| *prog != kiln)
            .map(String::from)
            .collect();
        (o, started)
    }

    /// `kiln build --progress plain --format json ARGS...` in `dir`.
    pub fn build_json(dir: &Path, host: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut all = vec!["build", "--progress", "plain", "--format", "json"];
        all.extend_from_slice(args);
        kiln(dir, host, &all, env)
    }

    /// A failed kiln run, for an assertion message: the exit code and the
    /// last lines of stderr first (where the error is; a CI log that
    /// shows only the start of a long message still shows them), then
    /// all of stderr.
    pub fn failure(o: &Output) -> String {
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        let tail = lines[lines.len().saturating_sub(25)..].join("\n");
        format!(
            "kiln exited with {:?}; the last lines of its stderr:\n{tail}\n---- all {} lines of stderr ----\n{err}",
            o.status.code(),
            lines.len()
        )
    }

    pub fn summary(o: &Output) -> serde_json::Value {
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("no JSON summary ({e}); {}", failure(o)))
    }

    pub fn target<'a>(s: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
        s["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {s}"))
    }

    /// Whether the engine at `host` keeps its images in the containerd
    /// store (`docker info`'s driver-type).
    pub fn containerd_store(host: &str) -> bool {
        docker(host, &["info", "--format", "{{json .DriverStatus}}"])
            .contains("io.containerd.snapshotter")
    }

    /// The driver kiln uses on `host` for a build without secrets: the
    /// Engine API on the classic image store, the docker CLI's session
    /// client on the containerd store (docs/engine-local.md).
    pub fn plain_driver(host: &str) -> &'static str {
        if containerd_store(host) {
            "docker-cli"
        } else {
            "engine-api"
        }
    }

    /// The digest a registry tag names now (`Docker-Content-Digest`).
    pub fn registry_digest(reference: &str) -> String {
        let (host_repo, tag) = reference.rsplit_once(':').unwrap();
        let (host, repo) = host_repo.split_once('/').unwrap();
        let o = Command::new("curl")
            .args(["-sfI", "-H"])
            .arg(
                "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json",
            )
            .arg(format!("http://{host}/v2/{repo}/manifests/{tag}"))
            .output()
            .unwrap();
        let head = String::from_utf8_lossy(&o.stdout).to_ascii_lowercase();
        head.lines()
            .find_map(|l| l.strip_prefix("docker-content-digest:"))
            .map(|d| d.trim().to_string())
            .unwrap_or_else(|| panic!("no digest for {reference}: {head}"))
    }

    pub fn docker(host: &str, args: &[&str]) -> String {
        let o = Command::new("/usr/bin/docker")
            .arg("-H")
            .arg(host)
            .args(args)
            .output()
            .expect("docker CLI");
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    }

    /// The whole twin (examples/twin), copied to a temporary directory so that
    /// editing a source file does not touch the repository.
    pub fn twin_copy() -> PathBuf {
        let dst = std::env::temp_dir().join(unique("kiln-twin-"));
        let _ = std::fs::remove_dir_all(&dst);
        let st = Command::new("cp")
            .arg("-a")
            .arg(repo().join("examples/twin"))
            .arg(&dst)
            .status()
            .unwrap();
        assert!(st.success());
        // Records and stat cache of earlier runs in the repository's copy stay out.
        let _ = std::fs::remove_dir_all(dst.join(".kiln"));
        // Each copy pushes to its own namespace of the shared registry:
        // tests running side by side never write the same tags.
        let bake = dst.join("docker-bake.hcl");
        let text = std::fs::read_to_string(&bake).unwrap();
        let own = format!(
            "default     = \"{}\"",
            dst.file_name().unwrap().to_string_lossy()
        );
        let renamed = text.replacen("default     = \"twin\"", &own, 1);
        assert_ne!(renamed, text, "the twin's REGISTRY_NAME default moved");
        std::fs::write(&bake, renamed).unwrap();
        dst
    }

    /// A copy of the twin whose root input is unique to this call, so
    /// that every image it builds is new (tests build the twin side by
    /// side on one engine).
    pub fn unique_twin(what: &str) -> PathBuf {
        let dir = twin_copy();
        touch_unique(&dir.join("src/rocm-runtime/sdk/lib/libamdhip64.so"), what);
        dir
    }

    /// Appends a line that is unique to this test run to a file.
    pub fn touch_unique(path: &Path, what: &str) {
        let mut text = std::fs::read_to_string(path).unwrap();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        text.push_str(&format!("\n# {what} {} {stamp}\n", std::process::id()));
        std::fs::write(path, text).unwrap();
    }

    /// Statuses and reasons by target.
    pub fn outcomes(s: &serde_json::Value) -> BTreeMap<String, (String, String)> {
        s["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    (
                        t["status"].as_str().unwrap().to_string(),
                        t["reason"].as_str().unwrap_or("").to_string(),
                    ),
                )
            })
            .collect()
    }

    /// Asserts that exactly `built` were built, `cutoff` skipped by early
    /// cutoff, and every other target skipped as up to date.
    pub fn expect(s: &serde_json::Value, built: &[&str], cutoff: &[&str], what: &str) {
        for (name, (status, reason)) in outcomes(s) {
            if built.contains(&name.as_str()) {
                assert_eq!(status, "built", "{what}: {name} ({reason})");
            } else if cutoff.contains(&name.as_str()) {
                assert_eq!(status, "skipped", "{what}: {name}");
                assert!(
                    reason.starts_with("early cutoff"),
                    "{what}: {name}: {reason}"
                );
            } else {
                assert_eq!(status, "skipped", "{what}: {name} should be up to date");
                assert!(reason.starts_with("up to date"), "{what}: {name}: {reason}");
            }
        }
    }

    /// The fleet file the dev environment wrote (`KILN_FLEET`), or with
    /// `KILN_FLEET_BUILDX` the same nodes as buildx builders.
    pub fn fleet_file_of(var: &str) -> Option<String> {
        let found = dev_env().1.get(var).cloned();
        if found.is_none() {
            assert!(
                std::env::var("KILN_E2E").as_deref() != Ok("1"),
                "KILN_E2E=1 but no fleet is up: run scripts/dev-env up --nodes 3"
            );
            eprintln!("skipped: no fleet (run `scripts/dev-env up --nodes 3`)");
        }
        found
    }

    pub fn fleet_file() -> Option<String> {
        fleet_file_of("KILN_FLEET")
    }
}

/// A bare repository at `dir/name.git` with the given tags and branches
/// (each on one commit).
pub fn git_repo(dir: &Path, name: &str, tags: &[&str], branches: &[&str]) -> String {
    let work = dir.join(format!("{name}-work"));
    std::fs::create_dir_all(&work).unwrap();
    let git = |args: &[&str], at: &Path| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(at)
            .env("GIT_AUTHOR_NAME", "k")
            .env("GIT_AUTHOR_EMAIL", "k@example.invalid")
            .env("GIT_COMMITTER_NAME", "k")
            .env("GIT_COMMITTER_EMAIL", "k@example.invalid")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    };
    git(&["init", "-q", "-b", "main"], &work);
    git(&["commit", "-q", "--allow-empty", "-m", "one"], &work);
    for t in tags {
        git(&["tag", t], &work);
    }
    for b in branches {
        git(&["branch", b], &work);
    }
    let bare = dir.join(format!("{name}.git"));
    git(
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
        dir,
    );
    format!("file://{}", bare.display())
}

/// A bare repository at `dir/name.git` shaped like a large upstream's
/// (PyTorch's and vLLM's have thousands of tags, and GitHub lists every
/// pull request's `refs/pull/N/head` and `refs/pull/N/merge`): `tags`
/// release tags `v0.M.P` (every twentieth annotated) over a chain of 64
/// commits, plus pre-release and CI tags, `pulls` refs under
/// `refs/pull/`, and branches `main` and `release/2.10`. Commit `i` holds
/// one file, `VERSION`, saying `i`. Returns the
/// `file://` URL, the newest release tag, and the commit of tag `v0.3.7`.
pub fn upstream_sized_repo(
    dir: &Path,
    name: &str,
    tags: usize,
    pulls: usize,
) -> (String, String, String) {
    use std::io::Write;
    let bare = dir.join(format!("{name}.git"));
    let git = |args: &[&str], input: Option<&str>| -> String {
        let mut c = std::process::Command::new("git");
        c.args(args)
            .current_dir(&bare)
            .env("GIT_AUTHOR_NAME", "k")
            .env("GIT_AUTHOR_EMAIL", "k@example.invalid")
            .env("GIT_COMMITTER_NAME", "k")
            .env("GIT_COMMITTER_EMAIL", "k@example.invalid")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let text = input.unwrap_or("").to_string();
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        let o = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    std::fs::create_dir_all(&bare).unwrap();
    git(&["init", "-q", "--bare", "-b", "main"], None);
    let mut commits: Vec<String> = Vec::new();
    for i in 0..64 {
        // One file, VERSION, that says which commit this is.
        let blob = git(&["hash-object", "-w", "--stdin"], Some(&format!("{i}\n")));
        let tree = git(&["mktree"], Some(&format!("100644 blob {blob}\tVERSION\n")));
        let mut args = vec!["commit-tree", tree.as_str(), "-m"];
        let msg = format!("commit {i}");
        args.push(&msg);
        let parent;
        if let Some(p) = commits.last() {
            parent = p.clone();
            args.extend(["-p", parent.as_str()]);
        }
        commits.push(git(&args, None));
    }
    let mut refs = String::new();
    let mut annotated = Vec::new();
    for i in 0..tags {
        let tag = format!("v0.{}.{}", i / 100, i % 100);
        let commit = &commits[i % commits.len()];
        if i % 20 == 7 {
            annotated.push((tag, commit.clone()));
        } else {
            refs.push_str(&format!("create refs/tags/{tag} {commit}\n"));
        }
    }
    let newest = format!("v0.{}.{}", (tags - 1) / 100, (tags - 1) % 100);
    let head = commits.last().unwrap();
    for extra in ["v9.0.0-rc1", "ciflow/trunk/123456", "nightly"] {
        refs.push_str(&format!("create refs/tags/{extra} {head}\n"));
    }
    for n in 0..pulls {
        let kind = if n % 2 == 0 { "head" } else { "merge" };
        let commit = &commits[n % commits.len()];
        refs.push_str(&format!("create refs/pull/{}/{kind} {commit}\n", n / 2 + 1));
    }
    refs.push_str(&format!("create refs/heads/main {head}\n"));
    refs.push_str(&format!("create refs/heads/release/2.10 {}\n", commits[40]));
    git(&["update-ref", "--stdin"], Some(&refs));
    // Annotated tags: a tag object each, made in one fast-import stream.
    let mut stream = String::new();
    for (tag, commit) in &annotated {
        let msg = format!("release {tag}");
        stream.push_str(&format!(
            "tag {tag}\nfrom {commit}\ntagger k <k@example.invalid> 1700000000 +0000\ndata {}\n{msg}\n",
            msg.len()
        ));
    }
    git(&["fast-import", "--quiet"], Some(&stream));
    git(&["pack-refs", "--all"], None);
    let pinned = git(&["rev-parse", "v0.3.7^{commit}"], None);
    (format!("file://{}", bare.display()), newest, pinned)
}
