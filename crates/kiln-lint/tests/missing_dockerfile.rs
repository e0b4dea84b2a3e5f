//! `missing-dockerfile` on throwaway projects: paths are resolved as bake
//! resolves them from the bake file's directory (`context` from there,
//! `dockerfile` from the context unless absolute or `cwd://`), whatever
//! directory lint runs in; an inherited attribute is reported at the parent
//! that declares it; a path of the wrong kind is reported as such.

use std::path::{Path, PathBuf};

use kiln_lint::{Report, output};

/// A throwaway project: `.git`, the given files (a path ending in `/` is a
/// directory) and `docker-bake.hcl`.
struct Project(PathBuf);

impl Project {
    fn new(name: &str, files: &[&str], bake: &str) -> Project {
        let dir = std::env::temp_dir().join(format!(
            "kiln-lint-missing-dockerfile-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        for f in files {
            let p = dir.join(f);
            if f.ends_with('/') {
                std::fs::create_dir_all(&p).unwrap();
            } else {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, "FROM alpine:3.20\nCOPY . /src\n").unwrap();
            }
        }
        std::fs::write(dir.join("docker-bake.hcl"), bake).unwrap();
        Project(dir)
    }

    fn lint(&self) -> Report {
        kiln_lint::lint(&[self.0.join("docker-bake.hcl")]).unwrap()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The rule's findings: (line, column, message).
fn found(r: &Report) -> Vec<(usize, usize, String)> {
    r.findings
        .iter()
        .filter(|f| f.rule == "missing-dockerfile")
        .map(|f| (f.line, f.column, f.message.clone()))
        .collect()
}

#[test]
fn present_files_and_inline_dockerfiles_are_quiet() {
    let p = Project::new(
        "present",
        &[
            "Dockerfile",
            "app/Dockerfile.app",
            "docker/Dockerfile.shared",
        ],
        "target \"root\" {}\n\
         target \"app\" {\n  context = \"app\"\n  dockerfile = \"Dockerfile.app\"\n}\n\
         target \"shared\" {\n  context = \"app\"\n  dockerfile = \"cwd://docker/Dockerfile.shared\"\n}\n\
         target \"cmd\" {\n  context = \"${BAKE_CMD_CONTEXT}\"\n}\n\
         target \"inline\" {\n  context = \"app\"\n  dockerfile-inline = \"FROM alpine:3.20\\n\"\n}\n\
         target \"git\" {\n  context = \"https://github.com/acme/x.git#aad2a60d958f945420c5c40936b37d411fb02e89\"\n  dockerfile = \"nowhere/Dockerfile\"\n}\n",
    );
    let r = p.lint();
    assert!(found(&r).is_empty(), "{}", output::text(&r));
}

#[test]
fn absolute_paths_are_taken_as_they_are() {
    let p = Project::new("absolute", &["ctx/", "elsewhere/Dockerfile"], "");
    let ctx = p.0.join("ctx");
    let df = p.0.join("elsewhere/Dockerfile");
    let bake = format!(
        "target \"ok\" {{\n  context = \"{}\"\n  dockerfile = \"{}\"\n}}\n\
         target \"gone\" {{\n  context = \"{}\"\n}}\n",
        ctx.display(),
        df.display(),
        p.0.join("gone").display()
    );
    std::fs::write(p.0.join("docker-bake.hcl"), bake).unwrap();
    let r = p.lint();
    let f = found(&r);
    assert_eq!(f.len(), 1, "{}", output::text(&r));
    assert_eq!((f[0].0, f[0].1), (6, 13));
    assert_eq!(
        f[0].2,
        format!(
            "build context {} of target \"gone\" does not exist",
            p.0.join("gone").display()
        )
    );
}

#[test]
fn cwd_dockerfile_is_not_under_the_context() {
    // `cwd://` is relative to the directory bake runs in: a Dockerfile that
    // exists only under the context is missing.
    let p = Project::new(
        "cwd",
        &["app/docker/Dockerfile"],
        "target \"app\" {\n  context = \"app\"\n  dockerfile = \"cwd://docker/Dockerfile\"\n}\n",
    );
    let r = p.lint();
    let f = found(&r);
    assert_eq!(f.len(), 1, "{}", output::text(&r));
    assert_eq!((f[0].0, f[0].1), (3, 16));
    assert!(
        f[0].2.ends_with(
            "/docker/Dockerfile of target \"app\" does not exist (dockerfile \
             \"cwd://docker/Dockerfile\", relative to the bake file's directory)"
        ),
        "{}",
        f[0].2
    );
}

#[test]
fn inherited_attributes_are_reported_at_the_parent() {
    let p = Project::new(
        "inherits",
        &["app/"],
        "target \"_common\" {\n  dockerfile = \"docker/Dockerfile\"\n}\n\
         target \"_ctx\" {\n  context = \"missing\"\n}\n\
         target \"a\" {\n  inherits = [\"_common\"]\n  context = \"app\"\n}\n\
         target \"b\" {\n  inherits = [\"_common\"]\n  context = \"app\"\n}\n\
         target \"c\" {\n  inherits = [\"_ctx\"]\n}\n",
    );
    let r = p.lint();
    let f = found(&r);
    assert_eq!(f.len(), 2, "{}", output::text(&r));
    // a and b share the parent's `dockerfile`: one finding, folded.
    assert_eq!((f[0].0, f[0].1), (2, 16));
    assert!(
        f[0].2.contains("of target \"a\" does not exist")
            && f[0].2.ends_with("(and 1 more at this position)"),
        "{}",
        f[0].2
    );
    assert_eq!((f[1].0, f[1].1), (5, 13));
    assert!(f[1].2.starts_with("build context "), "{}", f[1].2);
}

#[test]
fn a_path_of_the_wrong_kind_is_reported() {
    let p = Project::new(
        "kind",
        &["file-ctx", "app/Dockerfile/"],
        "target \"f\" {\n  context = \"file-ctx\"\n}\n\
         target \"d\" {\n  context = \"app\"\n}\n",
    );
    let r = p.lint();
    let f = found(&r);
    assert_eq!(f.len(), 2, "{}", output::text(&r));
    assert_eq!((f[0].0, f[0].1), (2, 13));
    assert!(
        f[0].2
            .contains("file-ctx of target \"f\" is not a directory"),
        "{}",
        f[0].2
    );
    // The default Dockerfile: reported at the target.
    assert_eq!((f[1].0, f[1].1), (4, 1));
    assert!(
        f[1].2
            .contains("/app/Dockerfile of target \"d\" is not a file (no dockerfile set"),
        "{}",
        f[1].2
    );
}

#[test]
fn the_base_is_the_bake_files_directory_not_where_lint_runs() {
    // The bake file lives in a subdirectory; its relative paths resolve from
    // there (lint is run from the test's working directory, elsewhere).
    let p = Project::new("subdir", &["stack/docker/Dockerfile.app"], "");
    std::fs::write(
        p.0.join("stack/docker-bake.hcl"),
        "target \"app\" {\n  dockerfile = \"docker/Dockerfile.app\"\n}\n\
         target \"gone\" {\n  dockerfile = \"docker/Dockerfile.gone\"\n}\n",
    )
    .unwrap();
    let r = kiln_lint::lint(&[p.0.join("stack")]).unwrap();
    let f = found(&r);
    assert_eq!(f.len(), 1, "{}", output::text(&r));
    let shown = Path::new(&r.findings[0].file);
    assert!(shown.ends_with("stack/docker-bake.hcl"), "{shown:?}");
    assert!(
        f[0].2
            .contains("stack/docker/Dockerfile.gone of target \"gone\""),
        "{}",
        f[0].2
    );
}
