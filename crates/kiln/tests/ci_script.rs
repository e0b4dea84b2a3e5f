//! `.ci/run` itself, run against stand-ins for the scripts it calls: it
//! stops only what it started. A quick-start environment that was already up
//! in the checkout is used and left up; what the script started is stopped,
//! also when the tests fail. And the GitHub workflow that runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of `.ci/run` in a scratch checkout whose `scripts/` are stand-ins
/// that log every call. `up` names the environments that answer `env` as
/// already running: `default`, `legacy`, `stores`, `registries`, and
/// `nodes` (the default environment's fleet nodes too). `tests_fail` makes
/// `scripts/test` exit 1.
fn scratch_checkout(name: &str, up: &[&str], tests_fail: bool) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("kiln-ci-script-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".ci")).unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::copy(root.join(".ci/run"), dir.join(".ci/run")).unwrap();
    let log = dir.join("calls.log");
    // dev-env tells the legacy environment by KILN_DEV_ENV_DIR.
    let env_up = |which: &str| if up.contains(&which) { "0" } else { "1" };
    let dev_env = format!(
        r#"#!/usr/bin/env bash
which=default; [[ -n ${{KILN_DEV_ENV_DIR:-}} ]] && which=legacy
echo "dev-env:$which:$*" >> {log}
case $1 in
  env) if [[ $which == default ]]; then
         [[ {d} == 0 ]] && echo "KILN_REGISTRY=127.0.0.1:1" && {n}
         exit {d}
       fi
       exit {l} ;;
  up) echo "KILN_REGISTRY=127.0.0.1:1" ;;
esac
exit 0
"#,
        log = log.display(),
        d = env_up("default"),
        l = env_up("legacy"),
        n = if up.contains(&"nodes") {
            "echo KILN_FLEET=/x/fleet.toml"
        } else {
            "true"
        },
    );
    let stores = format!(
        r#"#!/usr/bin/env bash
echo "store-servers:$*" >> {log}
case $1 in
  env) exit {s} ;;
  up) echo "KILN_TEST_WEBDAV=http://127.0.0.1:1" ;;
esac
exit 0
"#,
        log = log.display(),
        s = env_up("stores"),
    );
    let registries = format!(
        r#"#!/usr/bin/env bash
echo "registries:$*:${{KILN_REGISTRIES_TOKEN_SCHEME:-}}" >> {log}
case $1 in
  env) exit {r} ;;
  up) echo "KILN_TEST_REGISTRY_HTTP=registry.test:1" ;;
esac
exit 0
"#,
        log = log.display(),
        r = env_up("registries"),
    );
    let test = format!(
        "#!/usr/bin/env bash\necho \"test:$KILN_E2E:$CARGO_TARGET_DIR\" >> {}\nexit {}\n",
        log.display(),
        if tests_fail { 1 } else { 0 }
    );
    let browser = format!(
        "#!/usr/bin/env bash\necho browser >> {}\necho KILN_CHROMIUM=/bin/true\n",
        log.display()
    );
    let legacy = format!(
        "#!/usr/bin/env bash\necho test-legacy >> {}\n",
        log.display()
    );
    for (file, text) in [
        ("dev-env", dev_env),
        ("store-servers", stores),
        ("registries", registries),
        ("test", test),
        ("test-legacy", legacy),
        ("browser", browser),
    ] {
        let p = dir.join("scripts").join(file);
        std::fs::write(&p, text).unwrap();
        Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    }
    dir
}

/// Runs the copied `.ci/run`; its exit code and the logged calls.
fn run_ci(dir: &Path) -> (i32, Vec<String>) {
    let out = Command::new("bash")
        .arg(".ci/run")
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("KILN_DEV_ENV_DIR")
        .output()
        .unwrap();
    let log = std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default();
    (
        out.status.code().unwrap_or(-1),
        log.lines().map(str::to_string).collect(),
    )
}

fn downs(calls: &[String]) -> Vec<&str> {
    calls
        .iter()
        .filter(|c| {
            c.ends_with(":down")
                || c.ends_with(":down --nodes")
                || c.starts_with("registries:down:")
        })
        .map(String::as_str)
        .collect()
}

#[test]
fn ci_stops_what_it_started_and_nothing_else() {
    let dir = scratch_checkout("none-up", &[], false);
    let (code, calls) = run_ci(&dir);
    assert_eq!(code, 0, "{calls:?}");
    assert_eq!(
        downs(&calls),
        [
            "dev-env:default:down",
            "dev-env:legacy:down",
            "store-servers:down",
            "registries:down:"
        ],
        "{calls:?}"
    );
    // The registries' token service is plain HTTP (docs/registries.md).
    assert!(calls.iter().any(|c| c == "registries:up:http"), "{calls:?}");
    // The tests ran with the end-to-end tests required, into a target
    // directory of CI's own (a script that assumes target/ fails there).
    let test = calls.iter().find(|c| c.starts_with("test:")).unwrap();
    assert!(test.starts_with("test:1:"), "{test}");
    assert!(test.ends_with("/target/ci"), "{test}");
    assert!(calls.iter().any(|c| c == "test-legacy"), "{calls:?}");
    // The browser of the report tests is made ready before the tests.
    let at = |what: &str| calls.iter().position(|c| c.starts_with(what));
    assert!(at("browser") < at("test:"), "{calls:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ci_leaves_an_environment_that_was_already_up_running() {
    let dir = scratch_checkout(
        "all-up",
        &["default", "nodes", "legacy", "stores", "registries"],
        false,
    );
    let (code, calls) = run_ci(&dir);
    assert_eq!(code, 0, "{calls:?}");
    assert!(downs(&calls).is_empty(), "{calls:?}");
    // It still used them: up answers with their variables.
    assert!(
        calls.iter().any(|c| c == "dev-env:default:up --nodes 3"),
        "{calls:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    let dir = scratch_checkout("default-up", &["default"], false);
    let (code, calls) = run_ci(&dir);
    assert_eq!(code, 0, "{calls:?}");
    // The base environment was up without its nodes: the nodes this run
    // started are stopped, the base environment is left up.
    assert_eq!(
        downs(&calls),
        [
            "dev-env:default:down --nodes",
            "dev-env:legacy:down",
            "store-servers:down",
            "registries:down:"
        ],
        "{calls:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ci_fails_when_the_tests_fail_and_still_stops_what_it_started() {
    let dir = scratch_checkout("tests-fail", &["stores"], true);
    let (code, calls) = run_ci(&dir);
    assert_ne!(code, 0, "{calls:?}");
    // The legacy smoke never ran, so its environment was never started;
    // stopping it is harmless, and the default one must go.
    assert!(downs(&calls).contains(&"dev-env:default:down"), "{calls:?}");
    assert!(!downs(&calls).contains(&"store-servers:down"), "{calls:?}");
    assert!(!calls.iter().any(|c| c == "test-legacy"), "{calls:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The project's own GitHub Actions workflow runs the same `.ci/run`, as
/// root in a Debian 12 container that may start dockerds, within the time
/// CI allows, on the toolchain `Cargo.toml` names; and kiln's own linter
/// finds nothing in it.
#[test]
fn the_github_workflow_runs_ci_run_as_ci_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let wf = std::fs::read_to_string(root.join(".github/workflows/ci.yml")).unwrap();
    let has = |s: &str| wf.lines().any(|l| l.trim() == s);
    assert!(has("run: bash .ci/run"), "the workflow runs .ci/run:\n{wf}");
    assert!(
        has("image: debian:12"),
        "Debian 12, as .ci/run expects:\n{wf}"
    );
    assert!(
        has("options: --privileged"),
        "dockerds need a privileged container"
    );
    for trigger in ["push:", "pull_request:"] {
        assert!(has(trigger), "a fork gets CI on {trigger}");
    }
    let minutes: u32 = wf
        .lines()
        .find_map(|l| l.trim().strip_prefix("timeout-minutes: "))
        .and_then(|m| m.parse().ok())
        .expect("a timeout");
    assert!(minutes <= 90, "CI allows 90 minutes, not {minutes}");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rust = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        has(&format!("toolchain: {rust}")),
        "the workflow's toolchain is Cargo.toml's rust-version {rust}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["lint", ".github"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("no findings"),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
