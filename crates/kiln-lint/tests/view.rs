//! Whose build a bake file is judged as (docs/lint.md, "Bake files: kiln's
//! build or buildx's"): by default kiln's unless a workflow of the
//! repository runs bake on it; `--kiln` / `--buildx` decide for every file.
//! The findings kiln's cache policy answers are set aside on kiln's side,
//! and say how to get the other judgement on buildx's, as does the summary.

use std::path::{Path, PathBuf};

use kiln_lint::{Judged, Report, View, output};

fn twin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/twin")
}

fn rules(r: &Report) -> Vec<&'static str> {
    let mut v: Vec<_> = r.findings.iter().map(|f| f.rule).collect();
    v.dedup();
    v
}

fn count(r: &Report, rule: &str) -> usize {
    r.findings.iter().filter(|f| f.rule == rule).count()
}

/// The summary line of the text output.
fn summary(r: &Report) -> String {
    output::text(r)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// kiln's own example: no CI runs bake on it, kiln builds it. Before the
/// default was chosen per file, `kiln lint` failed it with 16
/// `no-cache-export` errors that said nothing of `--kiln`.
#[test]
fn twin_is_judged_as_kiln_builds_it_by_default() {
    let r = kiln_lint::lint(&[twin()]).unwrap();
    assert!(!r.has_errors(), "{}", output::text(&r));
    assert_eq!(rules(&r), ["jobs-arg-in-key"], "{}", output::text(&r));
    assert_eq!(r.bake.len(), 1);
    assert_eq!(r.bake[0].judged, Judged::Kiln);
    assert_eq!(
        r.bake[0].because,
        "no workflow of its repository runs bake on it"
    );
    // What kiln's policy answers is set aside, and the summary says how to
    // see it.
    assert_eq!(r.set_aside.len(), 16);
    assert!(r.set_aside.iter().all(|f| f.rule == "no-cache-export"));
    let s = summary(&r);
    assert!(
        s.starts_with("0 errors, 8 warnings, 0 notes in 8 files"),
        "{s}"
    );
    assert!(
        s.contains(
            " checked); 16 cache findings set aside: bake files judged as kiln builds them (no \
             workflow runs bake on "
        ) && s.ends_with(
            "examples/twin/docker-bake.hcl), and kiln applies its cache policy itself; \
             `kiln lint --buildx` reports them"
        ),
        "{s}"
    );
    let json: serde_json::Value = serde_json::from_str(&output::json(&r)).unwrap();
    assert_eq!(json["summary"]["set_aside"], 16);
    assert_eq!(json["summary"]["bake_files"][0]["judged_as"], "kiln");
    assert_eq!(json["summary"]["errors"], 0);
}

#[test]
fn twin_as_buildx_builds_it_says_how_to_get_kilns_view() {
    let r = kiln_lint::lint_as(&[twin()], View::Buildx).unwrap();
    assert!(r.has_errors());
    assert_eq!(count(&r, "no-cache-export"), 16, "{}", output::text(&r));
    assert!(r.set_aside.is_empty());
    assert_eq!(r.bake[0].judged, Judged::Buildx);
    for f in r.findings.iter().filter(|f| f.rule == "no-cache-export") {
        assert!(
            f.message.ends_with(
                "exports no layer cache (no cache-to); judged as `docker buildx bake` builds it \
                 (--buildx): if kiln builds it, kiln applies this cache policy itself, see \
                 `kiln lint --kiln`"
            ),
            "{}",
            f.message
        );
    }
    let s = summary(&r);
    assert!(
        s.ends_with(
            "; 16 cache findings on bake files judged as `docker buildx bake` builds them \
             (--buildx); `kiln lint --kiln` if kiln builds them"
        ),
        "{s}"
    );
}

#[test]
fn kiln_flag_keeps_its_meaning() {
    let r = kiln_lint::lint_with(&[twin()], &kiln_lint::Options { kiln: true }).unwrap();
    assert!(!r.has_errors());
    assert_eq!(r.set_aside.len(), 16);
    assert_eq!(r.bake[0].because, "--kiln");
    assert!(summary(&r).contains("(--kiln)"), "{}", summary(&r));
    // `kiln: false` is the default judgement, not buildx's.
    let r = kiln_lint::lint_with(&[twin()], &kiln_lint::Options::default()).unwrap();
    assert_eq!(r.bake[0].judged, Judged::Kiln);
}

/// A throwaway repository: `.git`, a bake file whose target has no cache
/// refs, and the given workflow (none when empty).
struct Repo(PathBuf);

impl Repo {
    fn new(name: &str, workflow: &str) -> Repo {
        let dir =
            std::env::temp_dir().join(format!("kiln-lint-view-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("docker")).unwrap();
        std::fs::write(
            dir.join("docker/Dockerfile"),
            "FROM alpine:3.20\nRUN true\n",
        )
        .unwrap();
        let bake = "target \"app\" {\n  dockerfile = \"docker/Dockerfile\"\n  tags = [\"ghcr.io/acme/app:latest\"]\n}\n";
        std::fs::write(dir.join("docker-bake.hcl"), bake).unwrap();
        std::fs::write(dir.join("other.hcl"), bake).unwrap();
        if !workflow.is_empty() {
            std::fs::create_dir_all(dir.join(".github/workflows")).unwrap();
            std::fs::write(dir.join(".github/workflows/ci.yml"), workflow).unwrap();
        }
        Repo(dir)
    }

    fn lint(&self, rel: &str) -> Report {
        kiln_lint::lint(&[self.0.join(rel)]).unwrap()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn workflow(steps: &str) -> String {
    format!(
        "on: push\njobs:\n  images:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n{steps}"
    )
}

#[test]
fn a_workflow_running_bake_on_the_file_makes_it_buildx_built() {
    let repo = Repo::new(
        "bake",
        &workflow("      - name: Build\n        run: docker buildx bake --push\n"),
    );
    // The same judgement whether the directory or only the bake file is
    // linted: the repository's workflows are read either way.
    for rel in [".", "docker-bake.hcl"] {
        let r = repo.lint(rel);
        let set = r
            .bake
            .iter()
            .find(|b| b.files[0].ends_with("/docker-bake.hcl"))
            .unwrap();
        assert_eq!(set.judged, Judged::Buildx, "{rel}");
        assert_eq!(
            set.because,
            format!(
                "{}/.github/workflows/ci.yml:8 runs `docker buildx bake` on it",
                repo.0.display()
            )
        );
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == "no-cache-export" && f.file.ends_with("/docker-bake.hcl"))
            .unwrap_or_else(|| panic!("{rel}: {}", output::text(&r)));
        assert!(f.message.contains("`kiln lint --kiln`"), "{}", f.message);
        assert!(
            summary(&r).contains("(a workflow runs bake on them); `kiln lint --kiln`"),
            "{}",
            summary(&r)
        );
    }
    // `other.hcl` is no default name: that bake call does not read it.
    let r = repo.lint("other.hcl");
    assert_eq!(r.bake[0].judged, Judged::Kiln);
    assert!(!r.has_errors(), "{}", output::text(&r));
    assert_eq!(r.set_aside.len(), 1);
}

#[test]
fn which_files_a_bake_call_reads() {
    let judged = |steps: &str, file: &str| {
        let repo = Repo::new("files", &workflow(steps));
        repo.lint(file).bake[0].judged
    };
    // `-f` names the file (relative to the working directory).
    let f_other = "      - run: docker buildx bake -f other.hcl --push\n";
    assert_eq!(judged(f_other, "other.hcl"), Judged::Buildx);
    assert_eq!(judged(f_other, "docker-bake.hcl"), Judged::Kiln);
    let in_docker =
        "      - working-directory: docker\n        run: docker buildx bake --file ../other.hcl\n";
    assert_eq!(judged(in_docker, "other.hcl"), Judged::Buildx);
    // Without `-f`, bake reads the default names of its working directory.
    let in_docker = "      - working-directory: docker\n        run: docker buildx bake\n";
    assert_eq!(judged(in_docker, "docker-bake.hcl"), Judged::Kiln);
    // A file kiln cannot know counts.
    let unknown = "      - run: docker buildx bake -f \"${{ inputs.bake-file }}\"\n";
    assert_eq!(judged(unknown, "other.hcl"), Judged::Buildx);
    // docker/bake-action: `files` relative to `workdir`, else the defaults.
    let action = "      - uses: docker/bake-action@v6\n        with:\n          push: true\n";
    assert_eq!(judged(action, "docker-bake.hcl"), Judged::Buildx);
    assert_eq!(judged(action, "other.hcl"), Judged::Kiln);
    let action = "      - uses: docker/bake-action@v6\n        with:\n          files: |\n            ./other.hcl\n";
    assert_eq!(judged(action, "other.hcl"), Judged::Buildx);
    // CI that runs kiln (or builds a Dockerfile) does not run bake.
    let kiln = "      - run: kiln build -f docker-bake.hcl\n      - run: docker buildx build -t x --push .\n";
    assert_eq!(judged(kiln, "docker-bake.hcl"), Judged::Kiln);
    // No workflows at all.
    assert_eq!(Repo::new("none", "").lint(".").bake[0].judged, Judged::Kiln);
}

#[test]
fn workflow_findings_are_not_affected() {
    // A workflow's own build is judged as written, whatever the view: it
    // is buildx CI.
    let repo = Repo::new(
        "wf",
        &workflow("      - run: docker buildx build -t ghcr.io/acme/app:x --push .\n"),
    );
    for view in [View::Auto, View::Kiln, View::Buildx] {
        let r = kiln_lint::lint_as(std::slice::from_ref(&repo.0), view).unwrap();
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == "no-cache-export" && f.file.ends_with("ci.yml"))
            .unwrap_or_else(|| panic!("{view:?}: {}", output::text(&r)));
        assert!(!f.message.contains("--kiln"), "{}", f.message);
    }
}
