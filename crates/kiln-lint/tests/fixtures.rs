//! The rules against their fixtures: every rule fires on its `bad/` project
//! (and nothing else does), stays quiet on its `good/` one; seed 000's
//! workflow and Dockerfile trigger exactly the rules its root causes name;
//! the clean project and the seed's suggested fix yield nothing. Positions
//! inside `run:` blocks are checked to the column.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kiln_lint::{Finding, RULES, Report};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn lint(rel: &str) -> Report {
    kiln_lint::lint(&[fixture(rel)]).expect("fixture exists")
}

fn rules(r: &Report) -> BTreeSet<&'static str> {
    r.findings.iter().map(|f| f.rule).collect()
}

fn show(r: &Report) -> String {
    r.findings
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{} {} {}",
                f.file, f.line, f.column, f.rule, f.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The finding's file relative to the fixture directory.
fn at<'a>(r: &'a Report, rule: &str) -> Vec<(&'a str, usize, usize)> {
    r.findings
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f: &Finding| {
            let rel = f.file.split("tests/fixtures/").nth(1).unwrap_or(&f.file);
            (rel, f.line, f.column)
        })
        .collect()
}

#[test]
fn every_rule_fires_on_bad_and_not_on_good() {
    for rule in RULES {
        let bad = lint(&format!("{}/bad", rule.id));
        assert_eq!(
            rules(&bad),
            BTreeSet::from([rule.id]),
            "{}/bad should trigger only {}:\n{}",
            rule.id,
            rule.id,
            show(&bad)
        );
        let good = lint(&format!("{}/good", rule.id));
        assert!(
            good.findings.is_empty(),
            "{}/good should be clean:\n{}",
            rule.id,
            show(&good)
        );
    }
}

#[test]
fn seed000_triggers_the_rules_its_root_causes_name() {
    let r = lint("seed000");
    assert_eq!(
        rules(&r),
        BTreeSet::from([
            "cache-from-self",
            "cache-per-commit-only",
            "no-cache-export",
            "inline-cache-under-buildx",
            "cache-mode-min-multistage",
        ]),
        "{}",
        show(&r)
    );
    let wf = "seed000/.github/workflows/build-core-image-reusable.yml";
    // Root cause 1: the core build's only cache source is the tag it pushes
    // (the `--cache-from` inside the guarded assignment, line 58).
    assert_eq!(at(&r, "cache-from-self"), [(wf, 58, 25)]);
    // Root cause 2: both builds rely on the inline-cache build arg.
    assert_eq!(
        at(&r, "inline-cache-under-buildx"),
        [(wf, 64, 13), (wf, 81, 13)]
    );
    assert_eq!(at(&r, "no-cache-export"), [(wf, 60, 11), (wf, 78, 11)]);
    // Root cause 3: the builder stages are discarded; inline is min mode.
    let min = r
        .findings
        .iter()
        .find(|f| f.rule == "cache-mode-min-multistage")
        .unwrap();
    for stage in [
        "build_python",
        "build_rocm",
        "build_torch_stack",
        "ffmpeg_builder",
    ] {
        assert!(min.message.contains(stage), "{}", min.message);
    }
    assert!(r.has_errors());
}

#[test]
fn seed000_with_the_suggested_fix_is_clean() {
    let r = lint("seed000-fixed");
    assert!(r.findings.is_empty(), "{}", show(&r));
}

#[test]
fn clean_project_has_no_findings() {
    let r = lint("clean");
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(
        r.files_checked, 4,
        "bake file, two Dockerfiles, one workflow"
    );
}

#[test]
fn workflow_positions_point_at_the_flag() {
    let r = lint("inline-cache-under-buildx/bad");
    assert_eq!(
        at(&r, "inline-cache-under-buildx"),
        [(
            "inline-cache-under-buildx/bad/.github/workflows/build.yml",
            11,
            13
        )]
    );
    let r = lint("no-cache-export/bad");
    assert_eq!(
        at(&r, "no-cache-export"),
        [("no-cache-export/bad/.github/workflows/build.yml", 10, 11)]
    );
}

#[test]
fn bake_positions_point_at_the_attribute_or_key() {
    let r = lint("jobs-arg-in-key/bad");
    assert!(
        at(&r, "jobs-arg-in-key").contains(&("jobs-arg-in-key/bad/docker-bake.hcl", 2, 18)),
        "{}",
        show(&r)
    );
    let r = lint("duplicate-cache-ref/bad");
    assert_eq!(
        at(&r, "duplicate-cache-ref"),
        [("duplicate-cache-ref/bad/docker-bake.hcl", 16, 16)]
    );
}

/// `missing-dockerfile` points at `dockerfile` (at the target when it is
/// the default), and a missing context is reported as such at `context`,
/// not as a missing Dockerfile under it; an inline Dockerfile needs no file
/// but its context is still checked.
#[test]
fn missing_dockerfile_points_at_dockerfile_target_or_context() {
    let r = lint("missing-dockerfile/bad");
    let f = "missing-dockerfile/bad/docker-bake.hcl";
    assert_eq!(
        at(&r, "missing-dockerfile"),
        [(f, 11, 16), (f, 16, 1), (f, 24, 16), (f, 31, 23)],
        "{}",
        show(&r)
    );
    let msg: Vec<&str> = r.findings.iter().map(|f| f.message.as_str()).collect();
    assert!(
        msg[0].starts_with("Dockerfile ")
            && msg[0].ends_with(
                "missing-dockerfile/bad/docker/Dockerfile.app of target \"app\" does not exist \
                 (dockerfile \"docker/Dockerfile.app\", relative to the context \".\")"
            ),
        "{}",
        msg[0]
    );
    assert!(
        msg[1].ends_with(
            "missing-dockerfile/bad/svc/Dockerfile of target \"svc\" does not exist (no \
             dockerfile set: the default Dockerfile in the context \"svc\")"
        ),
        "{}",
        msg[1]
    );
    for (m, name) in [(msg[2], "tools"), (msg[3], "generated")] {
        assert!(
            m.starts_with("build context ")
                && m.ends_with(&format!(
                    "missing-dockerfile/bad/{name} of target \"{name}\" does not exist \
                     (context \"{name}\", relative to the bake file's directory)"
                )),
            "{m}"
        );
    }
    assert!(r.has_errors());
    // `kiln build` refuses these targets whoever else would build them:
    // the rule is not one kiln's cache policy answers.
    assert!(
        r.set_aside.iter().all(|f| f.rule != "missing-dockerfile"),
        "{:?}",
        r.set_aside
    );
}

#[test]
fn missing_path_is_an_error() {
    assert!(kiln_lint::lint(&[fixture("does-not-exist")]).is_err());
}
