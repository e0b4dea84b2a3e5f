//! `kiln lint` through the real binary: the three formats on the fixtures of
//! `crates/kiln-lint/tests/fixtures`, and the exit codes (0 clean or
//! warnings only, 1 an error-level finding, 2 bad usage).

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kiln-lint/tests/fixtures")
        .join(rel)
}

/// Runs `kiln` in `dir` with a cleared environment.
fn kiln(dir: &Path, args: &[&str]) -> Output {
    common::kiln_clean(dir, args)
}

use common::{stderr, stdout};

#[test]
fn seed000_text_exits_1() {
    let o = kiln(&fixture("seed000"), &["lint"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim(),
        "error: kiln lint found 9 error-level findings"
    );
    insta::assert_snapshot!("lint_seed000_text", stdout(&o));
}

#[test]
fn seed000_json_contract() {
    let o = kiln(&fixture("seed000"), &["lint", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    insta::assert_snapshot!("lint_seed000_json", stdout(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["errors"], 9);
    assert_eq!(v["summary"]["files_checked"], 2);
    let f = &v["findings"][0];
    for key in [
        "rule", "severity", "file", "line", "column", "message", "why", "fix",
    ] {
        assert!(!f[key].is_null(), "missing {key}: {f}");
    }
}

#[test]
fn clean_project_sarif_exits_0() {
    let o = kiln(&fixture("clean"), &["lint", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    insta::assert_snapshot!("lint_clean_sarif", stdout(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"][0]["results"].as_array().unwrap().len(), 0);
}

#[test]
fn seed000_sarif_locations() {
    let o = kiln(&fixture("seed000"), &["lint", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["runs"][0]["results"][0];
    assert_eq!(r["ruleId"], "cache-from-self");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        ".github/workflows/build-core-image-reusable.yml"
    );
    assert_eq!(loc["region"]["startLine"], 58);
    assert_eq!(loc["region"]["startColumn"], 25);
}

#[test]
fn warnings_only_exit_0() {
    let o = kiln(&fixture("early-volatile-arg/bad"), &["lint", "Dockerfile"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("lint_warning_text", stdout(&o));
}

#[test]
fn clean_text_says_so() {
    let o = kiln(&fixture("clean"), &["lint", "."]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "no findings (4 files checked)\n");
}

#[test]
fn parse_errors_are_findings() {
    let o = kiln(&fixture("parse-error/bad"), &["lint"]);
    assert_eq!(o.status.code(), Some(1));
    insta::assert_snapshot!("lint_parse_errors", stdout(&o));
}

#[test]
fn missing_path_exits_2() {
    let o = kiln(&fixture("clean"), &["lint", "no-such-dir"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no-such-dir: no such file or directory"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "");
    let o = kiln(&fixture("clean"), &["lint", "--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A kiln project's bake file has no cache-to because kiln applies the
/// cache policy: `--kiln` says so, and only the other rules remain.
#[test]
fn kiln_built_bake_files_need_no_hand_written_cache() {
    let twin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/twin");
    // Judged as buildx bake builds it: the missing export is an error.
    let o = kiln(&twin, &["lint", "--buildx", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"no-cache-export\""), "{}", stdout(&o));
    // No workflow runs bake on the twin: by default it is judged as kiln
    // builds it, like --kiln, and the summary says what was set aside.
    let o = kiln(&twin, &["lint", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["summary"]["set_aside"].as_u64().unwrap() > 0, "{v}");
    let o = kiln(&twin, &["lint", "--kiln", "--buildx"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = kiln(&twin, &["lint", "--kiln", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(!rules.is_empty(), "the other rules still run");
    for r in [
        "no-cache-export",
        "cache-from-self",
        "cache-per-commit-only",
    ] {
        assert!(!rules.contains(&r), "{r} in {rules:?}");
    }
}
