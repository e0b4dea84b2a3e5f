//! End-to-end tests of the real `kiln` binary: output snapshots, error
//! messages with positions and hints, and exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

static N: AtomicUsize = AtomicUsize::new(0);

/// A fresh temporary workspace with the given files.
fn workspace(files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kiln-cli-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// Runs `kiln` in `dir` with a cleared environment.
fn kiln(dir: &Path, args: &[&str]) -> Output {
    common::kiln_clean(dir, args)
}

use common::{stderr, stdout};

const STACK: &str = r#"variable "TAG" { default = "dev" }
group "default" { targets = ["app"] }
target "_common" {
  labels = { "org.opencontainers.image.source" = "https://example.invalid/app" }
}
target "base" {
  inherits = ["_common"]
  dockerfile = "Dockerfile.base"
  tags = ["registry.local/base:${TAG}"]
}
target "app" {
  inherits = ["_common"]
  contexts = { base = "target:base" }
  args = { BASE = "base" }
  tags = ["registry.local/app:${TAG}"]
  platforms = ["linux/amd64"]
}
target "run" {
  contexts = { app = "docker-image://registry.local/app:${TAG}" }
}
"#;

#[test]
fn print_matches_bake_print_form() {
    let dir = workspace(&[("docker-bake.hcl", STACK)]);
    let o = kiln(&dir, &["print"]);
    assert!(o.status.success(), "{}", stderr(&o));
    insta::assert_snapshot!("print_default", stdout(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["target"]["base"]["output"][0]["type"], "cacheonly",
        "linked targets are cache-only"
    );
}

#[test]
fn print_with_set_and_var() {
    let dir = workspace(&[("docker-bake.hcl", STACK)]);
    let o = kiln(
        &dir,
        &[
            "print",
            "--var",
            "TAG=1.0",
            "--set",
            "app.args.EXTRA=1",
            "--set",
            "*.platform=linux/arm64",
            "app",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"]["app"]["tags"][0], "registry.local/app:1.0");
    assert_eq!(v["target"]["app"]["args"]["EXTRA"], "1");
    assert_eq!(v["target"]["app"]["platforms"][0], "linux/arm64");
}

/// Content keys replaced by a placeholder (they depend on file modes).
fn redact_keys(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("k1:") {
        out.push_str(&rest[..i]);
        let hex = rest[i + 3..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        if hex == 64 {
            out.push_str("k1:[key]");
        } else {
            out.push_str(&rest[i..i + 3 + hex]);
        }
        rest = &rest[i + 3 + hex..];
    }
    out.push_str(rest);
    out
}

const NO_ENGINE: &str = "unix:///nonexistent/docker.sock";

#[test]
fn plan_text_json_and_graphs() {
    let dir = workspace(&[
        ("docker-bake.hcl", STACK),
        ("Dockerfile.base", "FROM scratch\nCOPY base.txt /\n"),
        ("Dockerfile", "FROM base\nARG BASE\nRUN echo $BASE\n"),
        ("base.txt", "base\n"),
    ]);
    let o = kiln(&dir, &["plan", "--host", NO_ENGINE, "run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every target is predicted to build"),
        "{}",
        stderr(&o)
    );
    insta::assert_snapshot!("plan_text", redact_keys(&stdout(&o)));
    let o = kiln(
        &dir,
        &["plan", "--host", NO_ENGINE, "--format", "json", "run"],
    );
    insta::assert_snapshot!("plan_json", redact_keys(&stdout(&o)));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["base", "app", "run"],
        "dependencies come first; `run` reaches `app` through its tag"
    );
    let o = kiln(&dir, &["plan", "--graph", "mermaid", "run"]);
    insta::assert_snapshot!("plan_mermaid", stdout(&o));
    let o = kiln(&dir, &["plan", "--graph", "dot", "run"]);
    insta::assert_snapshot!("plan_dot", stdout(&o));
}

#[test]
fn unknown_target_suggests_and_exits_2() {
    let dir = workspace(&[("docker-bake.hcl", STACK)]);
    let o = kiln(&dir, &["plan", "apq"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty(), "errors never go to stdout");
    insta::assert_snapshot!("err_unknown_target", stderr(&o));
}

#[test]
fn evaluation_error_has_position_and_caret() {
    let dir = workspace(&[(
        "docker-bake.hcl",
        "target \"a\" {\n  tags = [\"x\", nope]\n}\n",
    )]);
    let o = kiln(&dir, &["print", "a"]);
    assert_eq!(o.status.code(), Some(2));
    insta::assert_snapshot!("err_unknown_variable", stderr(&o));
}

#[test]
fn syntax_error_has_position() {
    let dir = workspace(&[("docker-bake.hcl", "target \"a\" {\n  tags = [\"x\"\n}\n")]);
    let o = kiln(&dir, &["print", "a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("docker-bake.hcl:3:1"), "{}", stderr(&o));
}

#[test]
fn cycle_is_reported_with_path_and_position() {
    let bake = r#"target "a" {
  tags = ["r/a:1"]
  args = { BASE = "r/b:1" }
}
target "b" {
  tags = ["r/b:1"]
  contexts = { a = "docker-image://r/a:1" }
}
"#;
    let dir = workspace(&[("docker-bake.hcl", bake)]);
    let o = kiln(&dir, &["plan", "a"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("a -> b -> a") || e.contains("b -> a -> b"),
        "{e}"
    );
    assert!(e.contains("docker-bake.hcl:"), "{e}");
    insta::assert_snapshot!("err_cycle", e);
}

#[test]
fn target_context_loop_is_an_error() {
    let bake = "target \"a\" {\n  contexts = { x = \"target:b\" }\n}\ntarget \"b\" {\n  contexts = { y = \"target:a\" }\n}\n";
    let dir = workspace(&[("docker-bake.hcl", bake)]);
    let o = kiln(&dir, &["plan", "a"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("infinite loop from"), "{e}");
    assert!(
        e.contains("docker-bake.hcl:5:20"),
        "points at the contexts entry closing the loop: {e}"
    );
}

#[test]
fn missing_file_and_no_file() {
    let dir = workspace(&[]);
    let o = kiln(&dir, &["plan"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("couldn't find a bake definition"),
        "{}",
        stderr(&o)
    );
    let o = kiln(&dir, &["plan", "-f", "nope.hcl"]);
    assert_eq!(o.status.code(), Some(2));
    insta::assert_snapshot!("err_missing_file", stderr(&o));
}

/// A bake, fleet or costs file that is not UTF-8 is bad input (exit 2) at
/// the line and column where it stops being text, not an environment
/// failure; a mistyped store location is an error, not a new directory.
#[test]
fn files_that_are_not_utf8_and_mistyped_stores_are_bad_input() {
    let dir = workspace(&[("Dockerfile", "FROM scratch\n")]);
    std::fs::write(
        dir.join("docker-bake.hcl"),
        b"target \"a\" {\n  args = { X = \"caf\xe9\" }\n}\n",
    )
    .unwrap();
    let o = kiln(&dir, &["print"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("docker-bake.hcl:2:20: not UTF-8 text (byte 0xe9)"),
        "{e}"
    );
    std::fs::write(dir.join("docker-bake.hcl"), "target \"a\" {}\n").unwrap();
    std::fs::write(dir.join("fleet.toml"), b"[[node]]\nname = \"n\xff\"\n").unwrap();
    for args in [
        &["fleet", "--fleet", "fleet.toml"][..],
        &["schedule", "--simulate", "--fleet", "fleet.toml", "a"][..],
    ] {
        let o = kiln(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("fleet.toml:2:10: not UTF-8 text (byte 0xff)"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    for store in ["oci:/127.0.0.1:5000/records", "127.0.0.1:5000/records"] {
        let o = kiln(&dir, &["plan", "--store", store, "a"]);
        assert_eq!(o.status.code(), Some(2), "{store}: {}", stderr(&o));
        assert!(stderr(&o).contains("oci://"), "{store}: {}", stderr(&o));
        assert!(!dir.join(store).exists() && !dir.join("127.0.0.1:5000").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An engine socket that accepts and never answers (a wedged dockerd) is a
/// clear error within the request bound, naming the engine: never a hang.
#[test]
fn a_wedged_engine_is_an_error_in_bounded_time() {
    let dir = workspace(&[
        ("docker-bake.hcl", "target \"a\" {}\n"),
        ("Dockerfile", "FROM busybox:1\n"),
        (
            "fleet.toml",
            "[[node]]\nname = \"w\"\nendpoint = \"unix://wedged.sock\"\ncores = 2\nmemory_gb = 8\nlink_mbps = 100\n",
        ),
    ]);
    let sock = dir.join("wedged.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    // Accepts every connection and keeps it open, saying nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let host = format!("unix://{}", sock.display());
    for args in [
        vec!["build", "--host", &host, "a"],
        vec!["preflight", "--host", &host, "a"],
        vec!["fleet", "--fleet", "fleet.toml"],
    ] {
        let t0 = std::time::Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(&args)
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("KILN_ENGINE_TIMEOUT", "2")
            .output()
            .unwrap();
        let took = t0.elapsed();
        // `kiln fleet` reports each node on stdout, then fails.
        let e = format!("{}{}", stdout(&o), stderr(&o));
        assert!(took.as_secs() < 30, "{args:?} took {took:?}: {e}");
        assert!(e.contains("did not answer within 2s"), "{args:?}: {e}");
        assert!(e.contains("wedged.sock"), "{args:?}: {e}");
        assert_eq!(o.status.code(), Some(3), "{args:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compose_files_are_rejected_clearly() {
    let dir = workspace(&[("compose.yaml", "services:\n  app:\n    build: .\n")]);
    let o = kiln(&dir, &["plan"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("Compose files are not supported"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn json_bake_files_and_stdin() {
    let dir = workspace(&[(
        "docker-bake.json",
        r#"{"variable": {"T": {"default": "x"}}, "target": {"app": {"tags": ["r/app:${T}"]}}}"#,
    )]);
    let o = kiln(&dir, &["print", "app"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"]["app"]["tags"][0], "r/app:x");

    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["print", "-f", "-", "app"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"target \"app\" {\n  tags = [\"r/app:stdin\"]\n}\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"]["app"]["tags"][0], "r/app:stdin");
}

#[test]
fn usage_errors_exit_2() {
    let dir = workspace(&[]);
    let o = kiln(&dir, &["plan", "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let o = kiln(&dir, &["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = kiln(&dir, &["--help"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn list_targets_and_variables() {
    let dir = workspace(&[("docker-bake.hcl", STACK)]);
    let o = kiln(&dir, &["print", "--list", "targets"]);
    assert!(o.status.success());
    let s = stdout(&o);
    assert!(s.starts_with("TARGET"), "{s}");
    assert!(!s.contains("_common"), "hidden targets are not listed: {s}");
    let o = kiln(&dir, &["print", "--list", "variables"]);
    assert!(stdout(&o).contains("TAG"));
}

#[test]
fn unknown_link_points_at_the_context() {
    let bake = "target \"base\" {}\ntarget \"app\" {\n  contexts = { b = \"target:bsae\" }\n}\n";
    let dir = workspace(&[("docker-bake.hcl", bake)]);
    let o = kiln(&dir, &["plan", "app"]);
    assert_eq!(o.status.code(), Some(2));
    insta::assert_snapshot!("err_unknown_link", stderr(&o));
}

#[test]
fn nothing_to_do_by_default_says_what_to_name() {
    let dir = workspace(&[(
        "docker-bake.hcl",
        "target \"a\" {}\ntarget \"_hidden\" {}\n",
    )]);
    let o = kiln(&dir, &["plan"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("no `default` group or target"), "{e}");
    assert!(e.contains("hint: name what to build, e.g. `a`"), "{e}");
}

#[test]
fn build_refuses_what_the_local_engine_cannot_honour() {
    let bake = "target \"a\" {\n  output = [\"type=local,dest=out\"]\n  ssh = [\"default\"]\n}\n";
    let dir = workspace(&[("docker-bake.hcl", bake)]);
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--host", "unix:///nonexistent.sock", "a"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "refused before contacting the engine"
    );
    let e = stderr(&o);
    assert!(e.contains("cannot honour output type=local, ssh"), "{e}");
}

#[test]
fn build_reports_a_missing_dockerfile_with_its_position() {
    let bake = "target \"a\" {\n  dockerfile = \"docker/Dockerfile.a\"\n}\n";
    let dir = workspace(&[("docker-bake.hcl", bake)]);
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["build", "--host", "unix:///nonexistent.sock", "a"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("Dockerfile.a does not exist"), "{e}");
    assert!(e.contains("docker-bake.hcl:2:16"), "{e}");
}

/// A fleet run hands every target over through the registry, so a target
/// without a tag is refused before anything starts, saying how to fix it.
#[test]
fn fleet_build_refuses_an_untagged_target() {
    let dir = workspace(&[
        ("docker-bake.hcl", "target \"app\" {}\n"),
        ("Dockerfile", "FROM scratch\n"),
        (
            "fleet.toml",
            "[[node]]\nname = \"n1\"\nendpoint = \"unix:///nonexistent/kiln.sock\"\ncores = 2\nmemory_gb = 4\nlink_mbps = 100\n",
        ),
    ]);
    let o = kiln(&dir, &["build", "--fleet", "fleet.toml", "app"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("target app: a fleet run hands every target"),
        "{e}"
    );
    assert!(e.contains("--set app.tags="), "{e}");
}

/// With --driver buildx, a fleet node given as an engine address is
/// refused before anything starts, saying how to name a builder.
#[test]
fn buildx_fleet_refuses_an_engine_address_node() {
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"app\" { tags = [\"r/app:1\"] }\n",
        ),
        ("Dockerfile", "FROM scratch\n"),
        (
            "fleet.toml",
            "[[node]]\nname = \"b1\"\nendpoint = \"kiln-node1\"\ncores = 2\nmemory_gb = 4\nlink_mbps = 100\n\n[[node]]\nname = \"n1\"\nendpoint = \"unix:///nonexistent/kiln.sock\"\ncores = 2\nmemory_gb = 4\nlink_mbps = 100\n",
        ),
    ]);
    let o = kiln(
        &dir,
        &[
            "build",
            "--driver",
            "buildx",
            "--fleet",
            "fleet.toml",
            "app",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("node n1: --driver buildx builds through buildx builders"),
        "{e}"
    );
    assert!(e.contains("unix:///nonexistent/kiln.sock"), "{e}");
    assert!(e.contains("docker buildx ls"), "{e}");
}

/// `kiln fleet` with no node answering: each is listed as down with the
/// reason, and the exit code says infrastructure (3).
#[test]
fn fleet_with_every_node_down_is_exit_3() {
    let dir = workspace(&[(
        "fleet.toml",
        "[[node]]\nname = \"n1\"\nendpoint = \"unix:///nonexistent/a.sock\"\ncores = 2\nmemory_gb = 4\nlink_mbps = 100\n\n[[node]]\nname = \"n2\"\nendpoint = \"unix:///nonexistent/b.sock\"\ncores = 2\nmemory_gb = 4\nlink_mbps = 100\n",
    )]);
    let o = kiln(&dir, &["fleet", "--fleet", "fleet.toml"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("n1    down") && out.contains("n2    down"),
        "{out}"
    );
    assert!(
        stderr(&o).contains("no node of the fleet answers"),
        "{}",
        stderr(&o)
    );
    let o = kiln(&dir, &["fleet", "--fleet", "missing.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read the fleet file missing.toml"),
        "{}",
        stderr(&o)
    );
}

/// `kiln help COMMAND` is the same help as `kiln COMMAND --help`.
#[test]
fn help_subcommand_shows_a_commands_help() {
    let dir = std::env::temp_dir();
    let o = kiln(&dir, &["help", "build"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Usage: kiln build"), "{text}");
    let flag = kiln(&dir, &["build", "--help"]);
    assert_eq!(text, String::from_utf8_lossy(&flag.stdout));
}

/// What cannot be built as the files say is bad input before anything
/// builds, at the line that says it: a COPY of a path the context does
/// not hold (with its Dockerfile line), a missing Dockerfile, a missing
/// context directory (not "a missing Dockerfile" under it), in `kiln plan`
/// (exit 2, the plan still printed) as in `kiln build`.
#[test]
fn missing_sources_dockerfiles_and_contexts_are_bad_input_before_a_build() {
    let nohost = ["--host", "unix:///nonexistent/kiln.sock"];
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"copy\" {}\ntarget \"nodf\" {\n  dockerfile = \"Dockerfile.none\"\n}\ntarget \"noctx\" {\n  context = \"nope\"\n}\n",
        ),
        (
            "Dockerfile",
            "FROM scratch\nCOPY present.txt /p\nCOPY src/missing.sh /m\n",
        ),
        ("present.txt", "x\n"),
    ]);
    let plan = |t: &str| {
        let mut a = vec!["plan"];
        a.extend(nohost);
        a.push(t);
        kiln(&dir, &a)
    };
    let o = plan("copy");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(
            "Dockerfile:3: COPY src/missing.sh: no such file or directory in the build context"
        ),
        "{e}"
    );
    // A plan of files without their Dockerfiles is still printed (a
    // reference stack), but it is bad input as in `kiln build`; the graph
    // alone is not.
    let o = plan("nodf");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stdout(&o).contains("nodf"), "the plan is printed");
    let e = stderr(&o);
    assert!(e.contains("Dockerfile.none does not exist"), "{e}");
    assert!(e.contains("kiln build stops on the same"), "{e}");
    assert!(
        e.contains("--graph"),
        "says how to get the graph alone: {e}"
    );
    let mut a = vec!["plan", "--graph", "dot"];
    a.extend(nohost);
    a.push("nodf");
    let o = kiln(&dir, &a);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = plan("noctx");
    let e = stderr(&o);
    assert!(
        e.contains("the build context") && e.contains("nope is not a directory"),
        "{e}"
    );
    assert!(!e.contains("Dockerfile does not exist"), "{e}");
    // A path .dockerignore leaves out is missing too, and says why.
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/missing.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(dir.join(".dockerignore"), "src\n").unwrap();
    let o = plan("copy");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(".dockerignore leaves it out"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(dir.join(".dockerignore")).unwrap();
    let o = plan("copy");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What buildx accepts and ignores prints normally, with a warning on
/// stderr naming it and where it is.
#[test]
fn unknown_attributes_print_with_a_warning() {
    let dir = workspace(&[(
        "docker-bake.hcl",
        "target \"a\" {\n  provenance = false\n}\n",
    )]);
    let o = kiln(&dir, &["print", "a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"a\""), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains("warning: Ignored unknown attribute \"provenance\""),
        "{e}"
    );
    assert!(e.contains("docker-bake.hcl:2:3"), "{e}");
}

/// Preflight asks a registry only for the cache refs `kiln plan` shows: a
/// tag that never leaves the machine (no push) is not probed on docker.io.
#[test]
fn preflight_does_not_probe_cache_refs_of_tags_that_are_not_pushed() {
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "target \"base\" {\n  tags = [\"myproj/base:latest\"]\n}\n",
        ),
        ("Dockerfile", "FROM scratch\n"),
    ]);
    let o = kiln(
        &dir,
        &[
            "preflight",
            "--host",
            "unix:///nonexistent/kiln.sock",
            "base",
        ],
    );
    let e = stderr(&o);
    assert!(!e.contains("docker.io"), "{e}");
    assert!(!e.contains("cannot probe cache refs"), "{e}");
}

/// The reference stack's variables document is generated from its bake
/// file and current (CI fails when one drifts from the other).
#[test]
fn the_reference_stack_documents_its_variables() {
    let dir = common::root().join("stacks/rocm");
    let o = kiln(&dir, &["vars", "check"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("up to date"), "{}", stderr(&o));
    // Every variable of the bake file is in it.
    let listed = kiln(&dir, &["vars", "--format", "json"]);
    let vars: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let doc = std::fs::read_to_string(dir.join("VARIABLES.md")).unwrap();
    for v in vars.as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        assert!(doc.contains(&format!("| `{name}` |")), "{name}");
    }
}

/// `kiln vars`: where each value came from; `doc` writes the tables
/// between markers and leaves the rest of the file; `check` fails with the
/// diff after the bake file changes, and passes once `doc` ran again; a
/// document whose markers were damaged is bad input.
#[test]
fn vars_list_doc_and_check() {
    let bake = "# ----------------\n# Versions\n# ----------------\nvariable \"ROCM_VERSION\" {\n  default = \"7.0\"\n  description = \"ROCm release.\"\n}\nvariable \"ARCHS\" {\n  type = list(string)\n  default = [\"gfx942\"]\n}\nvariable \"TAG\" { default = \"dev\" }\ntarget \"t\" {\n  args = { ROCM_VERSION = ROCM_VERSION }\n}\n";
    let dir = workspace(&[
        ("docker-bake.hcl", bake),
        ("VARIABLES.md", "# Variables\n\nWritten by hand, kept.\n"),
    ]);
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["vars", "--format", "json", "--var", "TAG=v1"])
        .current_dir(&dir)
        .env_clear()
        .env("ROCM_VERSION", "7.1")
        .env("ARCHS_JSON", "[\"gfx950\"]")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let vars: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let get = |n: &str| {
        vars.as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (
            get("ROCM_VERSION")["value"].clone(),
            get("ROCM_VERSION")["source"].clone()
        ),
        ("7.1".into(), "env".into())
    );
    assert_eq!(get("ARCHS")["value"], serde_json::json!(["gfx950"]));
    assert_eq!(get("ARCHS")["source"], "env-json");
    assert_eq!(
        (get("TAG")["value"].clone(), get("TAG")["source"].clone()),
        ("v1".into(), "var".into())
    );
    assert_eq!(get("ROCM_VERSION")["group"], "Versions");
    assert_eq!(get("ROCM_VERSION")["declared"], "docker-bake.hcl:4:10");

    // Before doc: check says what to do.
    let o = kiln(&dir, &["vars", "check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("kiln vars doc"), "{}", stderr(&o));
    let o = kiln(&dir, &["vars", "doc"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = std::fs::read_to_string(dir.join("VARIABLES.md")).unwrap();
    assert!(
        doc.starts_with("# Variables\n\nWritten by hand, kept.\n"),
        "{doc}"
    );
    // Defaults, not this shell's overrides.
    assert!(
        doc.contains("| `ROCM_VERSION` | `7.0` |  | ROCm release. |"),
        "{doc}"
    );
    let o = kiln(&dir, &["vars", "check"]);
    assert!(o.status.success(), "{}", stderr(&o));

    std::fs::write(
        dir.join("docker-bake.hcl"),
        bake.replace("\"7.0\"", "\"7.2\""),
    )
    .unwrap();
    let o = kiln(&dir, &["vars", "check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let diff = stdout(&o);
    assert!(
        diff.contains("-| `ROCM_VERSION` | `7.0` |")
            && diff.contains("+| `ROCM_VERSION` | `7.2` |"),
        "{diff}"
    );
    assert!(stderr(&o).contains("drifted"), "{}", stderr(&o));
    assert!(kiln(&dir, &["vars", "doc"]).status.success());
    assert!(kiln(&dir, &["vars", "check"]).status.success());

    let damaged = std::fs::read_to_string(dir.join("VARIABLES.md"))
        .unwrap()
        .replace("<!-- kiln vars: end -->", "");
    std::fs::write(dir.join("VARIABLES.md"), damaged).unwrap();
    let o = kiln(&dir, &["vars", "check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("markers"), "{}", stderr(&o));

    // An arg set like a variable is told, with what was meant.
    let o = kiln(&dir, &["print", "--set", "*.args.ROCM_VERSION=7.3", "t"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("--var ROCM_VERSION="), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

use common::git_repo;

/// The pin of `variable` in `kiln versions --format json`'s output.
fn pin(pins: &serde_json::Value, variable: &str) -> serde_json::Value {
    pins.as_array()
        .unwrap()
        .iter()
        .find(|p| p["variable"] == variable)
        .unwrap_or_else(|| panic!("no pin {variable}: {pins}"))
        .clone()
}

/// `kiln versions`: each `*_REF`/`*_VERSION` pin is asked of its
/// repository (from a `*_REPO` variable, or from how a Dockerfile clones
/// it), and reported as a tag, a commit or a branch with the newest release
/// tag; a branch pin exits 1; a pin whose repository does not answer
/// exits 3.
#[test]
fn versions_tell_tags_from_branches_and_find_the_newest_release() {
    let dir = workspace(&[]);
    let aiter = git_repo(&dir, "aiter", &["v0.1.9", "v0.1.29", "v0.1.30-rc1"], &[]);
    let ucx = git_repo(&dir, "ucx", &["v1.22.0", "v1.23.0"], &["dev"]);
    let bake = format!(
        "variable \"AITER_REF\" {{ default = \"v0.1.9\" }}\nvariable \"AITER_REPO\" {{ default = \"{aiter}\" }}\nvariable \"UCX_REF\" {{ default = \"v1.22.0\" }}\nvariable \"PYTHON_VERSION\" {{ default = \"3.14\" }}\ntarget \"t\" {{\n  args = {{ UCX_REF = UCX_REF }}\n}}\n"
    );
    std::fs::write(dir.join("docker-bake.hcl"), &bake).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!("FROM scratch\nARG UCX_REF\nRUN git clone --branch ${{UCX_REF}} {ucx} /ucx\n"),
    )
    .unwrap();
    let o = kiln(&dir, &["versions", "--format", "json"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let get = |v: &str| pin(&pins, v);
    assert_eq!(get("AITER_REF")["kind"], "tag");
    assert_eq!(
        get("AITER_REF")["newest"],
        "v0.1.29",
        "numbers, not text; no -rc"
    );
    assert_eq!(get("AITER_REF")["found_by"], "variable AITER_REPO");
    assert_eq!(get("UCX_REF")["kind"], "tag");
    assert_eq!(get("UCX_REF")["newest"], "v1.23.0");
    assert_eq!(get("UCX_REF")["repository"], ucx.as_str());
    assert_eq!(get("PYTHON_VERSION")["kind"], "no-upstream");

    // A branch pin fails the check, saying why.
    std::fs::write(
        dir.join("docker-bake.hcl"),
        bake.replace("\"v1.22.0\"", "\"dev\""),
    )
    .unwrap();
    let o = kiln(&dir, &["versions"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("UCX_REF") && stdout(&o).contains("branch"),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("layer cache forever"), "{}", stderr(&o));

    // A repository that does not answer is an infrastructure failure.
    std::fs::write(
        dir.join("docker-bake.hcl"),
        bake.replace(&aiter, &format!("file://{}/nowhere.git", dir.display())),
    )
    .unwrap();
    let o = kiln(&dir, &["versions"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("AITER_REF"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pin in a repository the size of PyTorch's (5,000 tags, 2,000 pull
/// request refs: `git ls-remote` lists about 500 KB, far more than a
/// pipe holds): `kiln versions` reads the listing while git runs and
/// answers with the right kind and newest release, well within its 60 s
/// bound (it hung until then when it read git's output only after git
/// exited).
#[test]
fn versions_answer_for_a_repository_with_thousands_of_refs() {
    let dir = workspace(&[]);
    let (url, newest, _) = common::upstream_sized_repo(&dir, "big", 5000, 2000);
    std::fs::write(
        dir.join("docker-bake.hcl"),
        format!(
            "variable \"BIG_REF\" {{ default = \"v0.3.7\" }}\nvariable \"BIG_REPO\" {{ default = \"{url}\" }}\nvariable \"REL_REF\" {{ default = \"release/2.10\" }}\nvariable \"REL_REPO\" {{ default = \"{url}\" }}\ntarget \"t\" {{}}\n"
        ),
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    let o = kiln(&dir, &["versions", "--format", "json"]);
    let took = t0.elapsed();
    // REL_REF is a branch: exit 1, and the listing was read in full.
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let get = |v: &str| pin(&pins, v);
    assert_eq!(get("BIG_REF")["kind"], "tag", "{pins}");
    assert_eq!(get("BIG_REF")["newest"], newest.as_str(), "{pins}");
    assert_eq!(newest, "v0.49.99");
    assert_eq!(get("REL_REF")["kind"], "branch", "{pins}");
    eprintln!("kiln versions on 5,000 tags and 2,000 pull refs: {took:?}");
    assert!(
        took < std::time::Duration::from_secs(30),
        "kiln versions took {took:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SOURCE_DATE_EPOCH: every planned target gets one (its own arg, else
/// `--source-date-epoch`, else $SOURCE_DATE_EPOCH, else kiln's constant
/// 0), and it is part of the key; `kiln print` stays bake's view.
#[test]
fn every_target_builds_with_a_source_date_epoch_that_keys_it() {
    let dir = workspace(&[
        (
            "docker-bake.hcl",
            "group \"default\" { targets = [\"a\", \"own\"] }\ntarget \"a\" {}\ntarget \"own\" {\n  args = { SOURCE_DATE_EPOCH = \"1700000000\" }\n}\n",
        ),
        ("Dockerfile", "FROM scratch\nCOPY f /f\n"),
        ("f", "x"),
    ]);
    let key = |args: &[&str], env: &[(&str, &str)]| {
        let mut a = vec!["plan", "--format", "json"];
        a.extend_from_slice(args);
        let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"));
        c.args(&a)
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DOCKER_HOST", "unix:///nonexistent.sock");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let get = |n: &str| {
            v["targets"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == n)
                .unwrap()["key"]
                .as_str()
                .unwrap_or_else(|| panic!("a key for {n}: {v}"))
                .to_string()
        };
        (get("a"), get("own"))
    };
    let (default, own) = key(&[], &[]);
    assert_eq!(
        key(&["--source-date-epoch", "0"], &[]),
        (default.clone(), own.clone())
    );
    let (five, own5) = key(&["--source-date-epoch", "5"], &[]);
    assert_ne!(five, default, "the epoch is part of the key");
    assert_eq!(own5, own, "a target's own epoch wins");
    assert_eq!(
        key(&[], &[("SOURCE_DATE_EPOCH", "5")]).0,
        five,
        "as bake reads it"
    );
    let (none, _) = key(&["--source-date-epoch", "none"], &[]);
    assert_ne!(none, default);
    // A value that is not an epoch is refused.
    let o = kiln(&dir, &["plan", "--source-date-epoch", "yesterday"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--source-date-epoch"), "{}", stderr(&o));
    // print is bake's view: no epoch unless one is given.
    let o = kiln(&dir, &["print", "a"]);
    assert!(!stdout(&o).contains("SOURCE_DATE_EPOCH"), "{}", stdout(&o));
    let o = kiln(&dir, &["print", "--source-date-epoch", "9", "a"]);
    assert!(
        stdout(&o).contains("\"SOURCE_DATE_EPOCH\": \"9\""),
        "{}",
        stdout(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recorded run with every outcome, two nodes (one lost mid-run, with a
/// lost attempt on it), names that need escaping, a failure with its log.
fn synthetic_run() -> serde_json::Value {
    let t = |name: &str,
             outcome: &str,
             node: Option<&str>,
             slot: Option<u64>,
             s: Option<f64>,
             e: Option<f64>,
             deps: &[&str]| {
        serde_json::json!({
            "name": name, "outcome": outcome, "node": node, "slot": slot,
            "start_s": s, "end_s": e,
            "duration_s": match (s, e) { (Some(s), Some(e)) => e - s, _ => 0.0 },
            "expected_s": if slot.is_some() { Some(10.0) } else { None },
            "planned": slot.map(|k| serde_json::json!({"node": node, "slot": k, "start_s": s, "end_s": e})),
            "deps": deps, "critical": false, "image": null, "digest": null, "tags": [],
            "reason": format!("{outcome} for a reason"), "why": [],
            "steps": {"total": 4, "cached": 1},
            "stages": [{"name": "build", "total": 4, "cached": 1}],
            "longest_steps": [{"name": "[build 2/4] RUN make", "duration_s": 3.5, "cached": false}],
            "cache": [{"direction": "import", "ref": "type=registry,ref=r/c:x", "outcome": "error", "detail": "not found"}],
            "verdict": {"code": "import-failed", "summary": "the cache import failed"},
            "error": if outcome == "failed" { Some("exit code 2") } else { None },
            "failed_step": if outcome == "failed" { Some("[build 3/4] RUN make test") } else { None },
            "log_tail": if outcome == "failed" { vec!["tests <failed> & stopped"] } else { vec![] },
            "attempts": [], "pushed_bytes": null, "compiler_cache": null
        })
    };
    let mut targets = vec![
        t(
            "base",
            "built",
            Some("n1"),
            Some(0),
            Some(0.0),
            Some(10.0),
            &[],
        ),
        t(
            "skipme",
            "skipped",
            Some("n1"),
            None,
            Some(0.0),
            Some(0.1),
            &[],
        ),
        t(
            "pulled",
            "pulled",
            Some("n2"),
            None,
            Some(0.0),
            Some(2.0),
            &[],
        ),
        t(
            "cut",
            "cutoff",
            Some("n1"),
            None,
            Some(10.0),
            Some(10.2),
            &["base"],
        ),
        t(
            "a<b>&\"c\"",
            "built",
            Some("n1"),
            Some(1),
            Some(10.0),
            Some(25.0),
            &["base"],
        ),
        t(
            "moved",
            "built",
            Some("n1"),
            Some(0),
            Some(12.0),
            Some(30.0),
            &["base"],
        ),
        t(
            "tests",
            "failed",
            Some("n1"),
            Some(1),
            Some(25.0),
            Some(31.0),
            &["a<b>&\"c\""],
        ),
        t("after", "blocked", None, None, None, None, &["tests"]),
    ];
    targets[5]["attempts"] = serde_json::json!([{"node": "n2", "slot": 0, "start_s": 10.0, "end_s": 12.0, "outcome": "lost"}]);
    // What skipping saved: learned costs, each at most its last build.
    for (i, last, saved) in [(1, 4.0, 3.0), (2, 5.0, 2.5), (3, 1.0, 0.5)] {
        targets[i]["last_build_s"] = serde_json::json!(last);
        targets[i]["saved_s"] = serde_json::json!(saved);
    }
    serde_json::json!({
        "format": "kiln-run-report-v1",
        "run": {"id": "r-1", "project": "synthetic", "started_at": "2026-12-02T10:00:00Z",
                "finished_at": "2026-12-02T10:00:31Z", "wall_s": 31.0, "planned_makespan_s": 28.0,
                "lower_bound_s": 25.0, "planned_guessed": 0, "failed": true, "driver": "fleet of 2"},
        "nodes": [{"name": "n1", "slots": 2, "speed": 1.0, "lost": false},
                  {"name": "n2", "slots": 1, "speed": 1.5, "lost": true}],
        "targets": targets,
        "totals": {"targets": 8, "built": 3, "skipped": 1, "cutoff": 1, "pulled": 1, "failed": 1,
                   "blocked": 1, "saved_s": 6.0, "pushed_bytes": 0, "steps": 32, "steps_cached": 8}
    })
}

/// A project whose last recorded run is `run`.
fn project_with_run(run: &serde_json::Value) -> PathBuf {
    let dir = workspace(&[]);
    let runs = dir.join(".kiln/runs");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::write(runs.join("r-1.json"), serde_json::to_string(run).unwrap()).unwrap();
    std::fs::write(runs.join("last"), "r-1.json\n").unwrap();
    dir
}

#[test]
fn a_recorded_run_renders_in_a_browser_with_every_outcome_lane_and_lost_attempt() {
    let run = synthetic_run();
    let dir = project_with_run(&run);
    let o = kiln(&dir, &["report", "-o", "report.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "report.html");
    // JSON and text are the same facts.
    let o = kiln(&dir, &["report", "--format", "json"]);
    let back: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(back["targets"], run["targets"]);
    let text = stdout(&kiln(&dir, &["report", "--format", "text"]));
    assert!(
        text.contains("n2/0 (lost): moved [lost 10.0s–12.0s]"),
        "{text}"
    );
    assert!(text.contains("tests failed: exit code 2\n  step: [build 3/4] RUN make test\n  | tests <failed> & stopped"), "{text}");
    let Some(browser) = common::browser::chromium() else {
        return;
    };
    let page = common::browser::open(&browser, &dir.join("report.html"), "report-synthetic");
    common::browser::check_report(&page, &run);
    // The lost node's lane says so; the escaped name is text, not markup.
    assert!(page.dom.contains("(lost)"));
    assert!(page.dom.contains("a&lt;b&gt;&amp;"));
    assert!(!page.dom.contains("<b>&"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The socket one engine is recorded under (the page calls it `engine`).
const SOCKET: &str = "unix:///tmp/kiln-dev-env-with-a-long-path/docker.sock";

/// A recorded run on one engine (named by its socket, as kiln records
/// it). `targets`: (name, outcome, slot, start, end, task time, planned
/// start and end, deps); a target's task time is longer than its bar (it
/// waited for its slot), as the engine reports it.
#[allow(clippy::type_complexity)]
fn engine_run(
    id: &str,
    targets: &[(
        &str,
        &str,
        Option<u64>,
        Option<(f64, f64)>,
        f64,
        Option<(f64, f64)>,
        &[&str],
    )],
    plan: (Option<f64>, Option<f64>, usize),
    wall_s: f64,
) -> serde_json::Value {
    let ts: Vec<serde_json::Value> = targets
        .iter()
        .map(|(name, outcome, slot, bar, task, planned, deps)| {
            let ran = slot.is_some();
            serde_json::json!({
                "name": name, "outcome": outcome,
                "node": if *outcome == "blocked" { None } else { Some(SOCKET) },
                "slot": slot, "start_s": bar.map(|b| b.0), "end_s": bar.map(|b| b.1),
                "duration_s": task, "expected_s": null,
                "planned": planned.map(|(s, e)| serde_json::json!(
                    {"node": SOCKET, "slot": slot.unwrap_or(0), "start_s": s, "end_s": e})),
                "deps": deps, "critical": false, "image": null, "digest": null, "tags": [],
                "reason": if ran { "built" } else { "up to date" }, "why": [],
                "steps": {"total": 3, "cached": 0}, "stages": [], "longest_steps": [],
                "cache": [],
                // What diagnose says of an engine build: no import, no export.
                "verdict": if ran { Some(serde_json::json!(
                    {"code": "no-cache-import", "summary": "no cache import was attempted"})) } else { None },
                "error": if *outcome == "failed" { Some("exit code 1") } else { None },
                "failed_step": null, "log_tail": [], "attempts": [],
                "pushed_bytes": null, "compiler_cache": null
            })
        })
        .collect();
    let count = |o: &str| targets.iter().filter(|t| t.1 == o).count();
    let failed = count("failed") + count("blocked") > 0;
    serde_json::json!({
        "format": "kiln-run-report-v1",
        "run": {"id": id, "project": "engine-runs", "started_at": "2026-12-02T10:00:00Z",
                "finished_at": "2026-12-02T10:00:08Z", "wall_s": wall_s,
                "planned_makespan_s": plan.0, "lower_bound_s": plan.1, "planned_guessed": plan.2,
                "failed": failed, "driver": "docker-cli"},
        "nodes": [{"name": SOCKET, "slots": 2, "speed": 1.0, "lost": false}],
        "targets": ts,
        "totals": {"targets": targets.len(), "built": count("built"), "skipped": count("skipped"),
                   "cutoff": 0, "pulled": 0, "failed": count("failed"), "blocked": count("blocked"),
                   "saved_s": 0.0, "pushed_bytes": 0, "steps": 3 * targets.len(), "steps_cached": 0}
    })
}

/// A twin-like first run: no history, so all three targets were planned
/// with the default cost (10 min each).
fn first_run(id: &str) -> serde_json::Value {
    engine_run(
        id,
        &[
            (
                "base",
                "built",
                Some(0),
                Some((0.0, 2.0)),
                2.3,
                Some((0.0, 600.0)),
                &[],
            ),
            (
                "lib",
                "built",
                Some(0),
                Some((2.0, 7.0)),
                5.2,
                Some((600.0, 1200.0)),
                &["base"],
            ),
            // Waited for its slot: 2.6 s of task, a 0.7 s build.
            (
                "app",
                "built",
                Some(1),
                Some((7.0, 7.7)),
                2.6,
                Some((1200.0, 1800.0)),
                &["lib"],
            ),
        ],
        (Some(1800.0), Some(1800.0), 3),
        7.7,
    )
}

/// Writes recorded runs into a new project, oldest first (distinct file
/// times); `last` names the newest.
fn project_with_runs(runs: &[&serde_json::Value]) -> PathBuf {
    let dir = workspace(&[]);
    let dir_runs = dir.join(".kiln/runs");
    std::fs::create_dir_all(&dir_runs).unwrap();
    for (i, run) in runs.iter().enumerate() {
        let id = run["run"]["id"].as_str().unwrap();
        let p = dir_runs.join(format!("{id}.json"));
        std::fs::write(&p, serde_json::to_string(run).unwrap()).unwrap();
        let t = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(1_800_000_000 + i as u64);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(t)
            .unwrap();
        std::fs::write(dir_runs.join("last"), format!("{id}.json\n")).unwrap();
    }
    dir
}

/// The page of `id` in `dir`, opened in chromium and checked against the
/// recorded run (its numbers among them); `None` without a browser.
fn page_of(dir: &Path, id: &str, name: &str) -> Option<(serde_json::Value, common::browser::Page)> {
    let o = kiln(dir, &["report", id, "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let html = format!("{name}.html");
    let o = kiln(dir, &["report", id, "-o", &html]);
    assert!(o.status.success(), "{}", stderr(&o));
    let browser = common::browser::chromium()?;
    let page = common::browser::open(&browser, &dir.join(&html), name);
    common::browser::check_report(&page, &run);
    Some((run, page))
}

/// A first run, every cost guessed: the plan is said to be a guess and
/// drawn as an order, not against the run's seconds; a build's bar is its
/// time and its details say the same; lanes are `engine/0`, `engine/1`;
/// no verdict that means nothing on the engine.
#[test]
fn a_first_run_with_guessed_costs_has_numbers_that_agree() {
    let dir = project_with_runs(&[&first_run("first")]);
    let text = stdout(&kiln(&dir, &["report", "--format", "text"]));
    assert!(
        text.contains("makespan 7.7s; no plan to compare: 3 of 3"),
        "{text}"
    );
    assert!(text.contains("  engine/1: app [built 7.0s–7.7s]"), "{text}");
    assert!(
        !text.contains("30m") && !text.contains("no-cache-import"),
        "{text}"
    );
    let Some((run, page)) = page_of(&dir, "first", "report-first-run-guessed") else {
        return;
    };
    assert_eq!(run["nodes"][0]["name"], "engine");
    let app = run["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "app")
        .unwrap();
    assert_eq!(app["duration_s"], 0.7, "one figure: the bar");
    assert!(!page.dom.contains("no-cache-import"));
    assert!(!page.dom.contains("lower bound 30m") && !page.dom.contains("planned 30m"));
    assert!(page.dom.contains(">engine/0<") && page.dom.contains(">engine/1<"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run that built nothing: its page says `nothing to do`, and `kiln
/// report` with no run shows the last run that built something, saying
/// which and that the later run built nothing.
#[test]
fn a_no_op_run_is_a_short_page_and_the_default_report_is_the_last_run_that_built() {
    let mut noop = engine_run(
        "noop",
        &[
            ("base", "skipped", None, Some((0.0, 0.01)), 0.01, None, &[]),
            (
                "lib",
                "skipped",
                None,
                Some((0.0, 0.01)),
                0.01,
                None,
                &["base"],
            ),
            (
                "app",
                "skipped",
                None,
                Some((0.0, 0.01)),
                0.01,
                None,
                &["lib"],
            ),
        ],
        (None, None, 0),
        0.01,
    );
    for (i, last, saved) in [(0, 2.0, 2.0), (1, 5.0, 4.1), (2, 0.7, 0.7)] {
        noop["targets"][i]["last_build_s"] = serde_json::json!(last);
        noop["targets"][i]["saved_s"] = serde_json::json!(saved);
    }
    noop["totals"]["saved_s"] = serde_json::json!(6.8);
    let dir = project_with_runs(&[&first_run("first"), &noop]);
    let o = kiln(&dir, &["report", "-o", "default.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("showing run first, the last run that built something")
            && e.contains("later run (noop) built nothing"),
        "{e}"
    );
    let page = std::fs::read_to_string(dir.join("default.html")).unwrap();
    assert!(
        page.contains("<title>kiln run first"),
        "the page of the run that built"
    );
    let text = stdout(&kiln(&dir, &["report", "noop", "--format", "text"]));
    assert!(
        text.contains("nothing to do: 3 targets up to date"),
        "{text}"
    );
    // A CI's summary and test results are of the run that just ran: the
    // no-op, its three targets skipped.
    let junit = kiln(&dir, &["report", "--format", "junit"]);
    assert!(junit.status.success(), "{}", stderr(&junit));
    let xml = stdout(&junit);
    assert!(
        xml.contains("id=\"noop\"") && xml.matches("<skipped message=").count() == 3,
        "{xml}"
    );
    let md = stdout(&kiln(&dir, &["report", "--format", "markdown"]));
    assert!(md.starts_with("### kiln run `noop` of "), "{md}");
    assert!(md.contains("3 targets: 0 built, 3 skipped"), "{md}");
    let Some((_, page)) = page_of(&dir, "noop", "report-no-op") else {
        return;
    };
    assert!(page.dom.contains("nothing to do: 3 targets up to date"));
    assert!(!page.dom.contains("0 bars on"), "no empty timeline");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failure on one engine, planned from learned costs: plan and bound on
/// the run's time scale, the bound under the makespan, the failed build's
/// bar its time, its details open.
#[test]
fn a_failed_run_has_numbers_that_agree() {
    let run = engine_run(
        "failed",
        &[
            (
                "base",
                "built",
                Some(0),
                Some((0.0, 3.0)),
                3.4,
                Some((0.0, 3.5)),
                &[],
            ),
            (
                "tests",
                "failed",
                Some(0),
                Some((3.0, 8.0)),
                6.0,
                Some((3.5, 9.0)),
                &["base"],
            ),
            ("app", "blocked", None, None, 0.0, None, &["tests"]),
        ],
        (Some(9.0), Some(6.0), 0),
        8.0,
    );
    let dir = project_with_runs(&[&run]);
    let text = stdout(&kiln(&dir, &["report", "--format", "text"]));
    assert!(
        text.contains("makespan 8.0s, planned 9.0s, lower bound 6.0s"),
        "{text}"
    );
    let Some((_, page)) = page_of(&dir, "failed", "report-failed-engine") else {
        return;
    };
    let d = common::browser::elements(&page.dom, "details");
    let tests = d
        .iter()
        .find(|d| d.get("data-target").map(String::as_str) == Some("tests"));
    assert!(
        tests.is_some_and(|t| t.contains_key("open") && t["data-duration"] == "5"),
        "{tests:?}"
    );
    assert!(
        page.dom.contains("vs lower bound <b>6s</b>"),
        "the bound, on the run's scale"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_browser_check_sees_a_page_that_asks_the_network_or_logs() {
    let Some(browser) = common::browser::chromium() else {
        return;
    };
    let dir = workspace(&[(
        "bad.html",
        "<html><body data-ready=\"1\"><img src=\"http://127.0.0.1:9/x.png\"><script>console.error('boom')</script></body></html>",
    )]);
    let page = common::browser::open(&browser, &dir.join("bad.html"), "browser-check-bad-page");
    assert_eq!(page.requests, ["http://127.0.0.1:9/x.png"]);
    assert!(
        page.console.iter().any(|l| l.contains("boom")),
        "{:?}",
        page.console
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_and_history_say_what_to_do_when_nothing_is_recorded() {
    let dir = workspace(&[]);
    let o = kiln(&dir, &["report"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("no run is recorded in") && e.contains("kiln build"),
        "{e}"
    );
    let o = kiln(&dir, &["report", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let o = kiln(&dir, &["history"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no build history at"), "{}", stderr(&o));
    std::fs::create_dir_all(dir.join(".kiln/runs")).unwrap();
    std::fs::write(dir.join(".kiln/runs/r.json"), "{\"format\": 3}").unwrap();
    let o = kiln(&dir, &["report", "r"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("r.json: not a recorded kiln run"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `docker buildx bake --help`'s flags (buildx v0.36), each with a value
/// when it takes one. `kiln build` must accept every one or refuse it with
/// a reason and a hint.
const BAKE_FLAGS: &[(&str, Option<&str>)] = &[
    ("--allow", Some("network.host")),
    ("--builder", Some("default")),
    ("--call", Some("check")),
    ("--check", None),
    ("--debug", None),
    ("-D", None),
    ("--file", Some("docker-bake.hcl")),
    ("-f", Some("docker-bake.hcl")),
    ("--list", Some("targets")),
    ("--load", None),
    ("--metadata-file", Some("meta.json")),
    ("--no-cache", None),
    ("--print", None),
    ("--progress", Some("quiet")),
    ("--provenance", Some("mode=max")),
    ("--pull", None),
    ("--push", None),
    ("--sbom", Some("true")),
    ("--set", Some("*.args.X=1")),
    ("--var", Some("TAG=1")),
];

#[test]
fn every_flag_of_bake_is_taken_or_refused_with_a_reason() {
    let dir = workspace(&[("docker-bake.hcl", STACK), ("Dockerfile", "FROM scratch\n")]);
    for (flag, value) in BAKE_FLAGS {
        let mut args = vec!["build", flag];
        args.extend(value.iter());
        // --print ends a build that takes the flag before anything builds.
        if *flag != "--print" {
            args.push("--print");
        }
        let o = kiln(&dir, &args);
        let err = stderr(&o);
        match o.status.code() {
            Some(0) => assert!(
                stdout(&o).contains("\"target\"") || stdout(&o).starts_with("TARGET"),
                "{flag}: taken, but --print (or --list) printed no targets:\n{}",
                stdout(&o)
            ),
            Some(2) => assert!(
                err.contains(flag.trim_start_matches('-')) && err.contains("hint:"),
                "{flag}: refused without naming it or saying what to do:\n{err}"
            ),
            other => panic!("{flag}: exit {other:?}\n{err}"),
        }
    }
    // The installed buildx, when there is one, has no flag the table lacks
    // (a newer buildx that adds one fails here until kiln answers it).
    let help = Command::new("docker")
        .args(["buildx", "bake", "--help"])
        .output();
    let help = help.ok().filter(|h| {
        h.status.success() && String::from_utf8_lossy(&h.stdout).contains("buildx bake")
    });
    if let Some(h) = help {
        let text = String::from_utf8_lossy(&h.stdout).to_string();
        // The command's own options: from "Options:" to the blank line
        // (the docker CLI's global options follow under another heading).
        let own = text
            .lines()
            .skip_while(|l| l.trim() != "Options:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty());
        for line in own {
            let mut words = line.split_whitespace().map(|w| w.trim_end_matches(','));
            let first = words.next().unwrap_or("");
            let flag = if first.starts_with("--") {
                first
            } else {
                words.next().unwrap_or("")
            };
            if flag.starts_with("--") && flag.len() > 2 {
                assert!(
                    BAKE_FLAGS.iter().any(|(f, _)| *f == flag) || flag == "--help",
                    "docker buildx bake has {flag}, which the table of kiln's answers lacks"
                );
            }
        }
    }
}

#[test]
fn bake_shorthands_become_overrides_as_in_bake() {
    let dir = workspace(&[("docker-bake.hcl", STACK), ("Dockerfile", "FROM scratch\n")]);
    let o = kiln(
        &dir,
        &[
            "build",
            "--load",
            "--no-cache",
            "--pull",
            "--sbom",
            "true",
            "--provenance",
            "mode=max",
            "--print",
            "app",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let app = &v["target"]["app"];
    assert_eq!(app["no-cache"], true, "{app}");
    assert_eq!(app["pull"], true, "{app}");
    assert_eq!(app["output"][0]["type"], "docker", "{app}");
    assert_eq!(
        app["attest"],
        serde_json::json!([
            {"type": "sbom", "disabled": false},
            {"type": "provenance", "mode": "max"}
        ]),
        "{app}"
    );
    let list = kiln(&dir, &["build", "--list", "type=targets"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(stdout(&list).contains("app"), "{}", stdout(&list));
}

#[test]
fn what_the_engine_cannot_honour_is_refused_before_anything_builds() {
    let bake = r#"target "app" {
  entitlements = ["security.insecure"]
}
target "signed" {
  attest = ["type=provenance,mode=max"]
}
"#;
    let dir = workspace(&[("docker-bake.hcl", bake), ("Dockerfile", "FROM scratch\n")]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["build", "app"],
            "entitlement security.insecure, which this run does not grant",
        ),
        (
            &["build", "--allow", "security.insecure", "app"],
            "build API cannot grant the entitlement security.insecure",
        ),
        (
            &["build", "signed"],
            "attestations (type=provenance,mode=max) need a buildx builder",
        ),
        (
            &["build", "--call", "outline", "app"],
            "--call outline: kiln builds",
        ),
        (
            &["build", "--progress", "rawjson", "app"],
            "raw solve status",
        ),
        (
            &["build", "--progress", "tty", "app"],
            "stderr is not a terminal",
        ),
        (&["build", "-D", "app"], "no debug log of its own"),
        (
            &["build", "--list", "type=targets,format=json"],
            "as a table only",
        ),
    ];
    for (args, want) in cases {
        let o = kiln(&dir, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("hint:"), "{args:?}: {}", stderr(&o));
    }
}

/// The executable is linked at a fixed address (crates/kiln/build.rs): a
/// position-independent one is relocated at every start, ~1 ms of a run
/// that changes nothing. ELF `e_type` (bytes 16-17): 2 is a fixed-address
/// executable, 3 a position-independent one (or a shared object).
#[cfg(target_os = "linux")]
#[test]
fn the_executable_is_linked_at_a_fixed_address() {
    use std::io::Read;
    let mut header = [0u8; 18];
    std::fs::File::open(env!("CARGO_BIN_EXE_kiln"))
        .and_then(|mut f| f.read_exact(&mut header))
        .unwrap();
    assert_eq!(&header[..4], b"\x7fELF");
    assert_eq!(
        u16::from_le_bytes([header[16], header[17]]),
        2,
        "kiln is a position-independent executable: its relocations cost every start"
    );
}
