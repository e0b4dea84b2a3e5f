//! kiln's context walk against the docker CLI itself.
//!
//! `tests/data/dockerignore-oracle.json` holds, for each `.dockerignore` case, the tar
//! headers `docker build` (CLI 28.2.2, legacy builder) uploaded for a known tree; see
//! `tests/oracle/gen.sh` for the method. This test rebuilds each tree in a temporary
//! directory and requires `read_dockerignore` + `walk_context` to list the same entries
//! (path, kind, mode, size, link target) in the same order, or the same failure.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use kiln_dockerfile::ignore::{
    ContextEntry, EntryKind, WalkOptions, read_dockerignore, walk_context_with,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Oracle {
    version: u32,
    docker_cli: String,
    trees: std::collections::BTreeMap<String, Vec<TreeEntry>>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct TreeEntry {
    path: String,
    kind: String,
    mode: u32,
    content: Option<String>,
    target: Option<String>,
}

#[derive(Deserialize)]
struct Case {
    id: u32,
    tree: String,
    dockerignore: String,
    /// The `-f` path inside the context, when not the default `Dockerfile`.
    dockerfile: Option<String>,
    sent: Option<Vec<SentEntry>>,
    error: Option<String>,
    image_files: Option<Vec<String>>,
}

#[derive(Deserialize, Debug, PartialEq, Eq, Clone)]
struct SentEntry {
    path: String,
    kind: String,
    mode: u32,
    size: u64,
    link_target: Option<String>,
}

/// Cases where kiln knowingly differs from the CLI, by id, with the reason (also listed in
/// the crate README under KNOWN DIFFERENCES). Empty: the port agrees on every case.
const KNOWN_DIFFERENCES: &[(u32, &str)] = &[];

/// The research trial's 33 pattern files are cases 1..=33; the rest are kiln's edge cases.
const RESEARCH_CASES: u32 = 33;

fn load() -> Oracle {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dockerignore-oracle.json");
    let text = fs::read_to_string(&path).expect("oracle file");
    let oracle: Oracle = serde_json::from_str(&text).expect("oracle JSON");
    assert_eq!(oracle.version, 1);
    oracle
}

fn build_tree(root: &Path, spec: &[TreeEntry]) {
    fs::create_dir_all(root).unwrap();
    for e in spec {
        let path = root.join(&e.path);
        match e.kind.as_str() {
            "dir" => fs::create_dir(&path).unwrap(),
            "file" => fs::write(&path, e.content.as_deref().unwrap()).unwrap(),
            "symlink" => symlink(e.target.as_deref().unwrap(), &path).unwrap(),
            "hardlink" => fs::hard_link(root.join(e.target.as_deref().unwrap()), &path).unwrap(),
            other => panic!("unknown tree entry kind {other}"),
        }
        if matches!(e.kind.as_str(), "dir" | "file") {
            fs::set_permissions(&path, fs::Permissions::from_mode(e.mode)).unwrap();
        }
    }
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
        EntryKind::Hardlink => "hardlink",
        EntryKind::Fifo => "fifo",
        EntryKind::CharDevice => "chardevice",
        EntryKind::BlockDevice => "blockdevice",
    }
}

fn as_sent(e: &ContextEntry) -> SentEntry {
    SentEntry {
        path: e.path.clone(),
        kind: kind_name(e.kind).to_owned(),
        mode: e.mode,
        size: e.size,
        link_target: e.link_target.clone(),
    }
}

fn scratch(id: u32) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "dockerignore-oracle-{id:03}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Compare one case; `Err` describes the difference.
fn check(oracle: &Oracle, case: &Case) -> Result<(), String> {
    let root = scratch(case.id);
    build_tree(&root, &oracle.trees[&case.tree]);
    fs::write(root.join(".dockerignore"), &case.dockerignore).unwrap();
    fs::set_permissions(
        root.join(".dockerignore"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();

    let patterns = read_dockerignore(&case.dockerignore);
    let options = WalkOptions {
        dockerfile: case.dockerfile.clone(),
        ..WalkOptions::default()
    };
    let got = walk_context_with(&root, &patterns, &options);
    // The listing a key reads (names and kinds only) names the same entries in the
    // same order, a hard link as a file.
    let light = walk_context_with(
        &root,
        &patterns,
        &WalkOptions {
            names_only: true,
            ..options.clone()
        },
    );
    let _ = fs::remove_dir_all(&root);
    if let Ok(full) = &got {
        let project = |e: &ContextEntry| {
            let kind = match e.kind {
                EntryKind::Hardlink => EntryKind::File,
                k => k,
            };
            let target = (kind == EntryKind::Symlink).then(|| e.link_target.clone());
            (e.path.clone(), kind, target)
        };
        let want: Vec<_> = full.iter().map(project).collect();
        match &light {
            Ok(l) if l.iter().map(project).collect::<Vec<_>>() == want => {}
            Ok(l) => {
                return Err(format!(
                    "the names-only walk differs: {:?}",
                    l.iter().map(project).collect::<Vec<_>>()
                ));
            }
            Err(e) => return Err(format!("the names-only walk fails: {e}")),
        }
    }

    match (got, &case.sent, &case.error) {
        (Ok(entries), Some(sent), _) => {
            let got: Vec<SentEntry> = entries.iter().map(as_sent).collect();
            if &got == sent {
                return Ok(());
            }
            let missing: Vec<_> = sent.iter().filter(|e| !got.contains(e)).collect();
            let extra: Vec<_> = got.iter().filter(|e| !sent.contains(e)).collect();
            Err(format!(
                "entries differ\n  missing (the CLI sends them): {missing:?}\n  extra (the CLI does not): {extra:?}{}",
                if missing.is_empty() && extra.is_empty() {
                    "\n  (order differs)"
                } else {
                    ""
                }
            ))
        }
        (Err(_), None, Some(_)) => Ok(()),
        (Ok(entries), None, Some(err)) => Err(format!(
            "the CLI fails ({err}) but kiln lists {} entries",
            entries.len()
        )),
        (Err(e), Some(_), _) => Err(format!("kiln fails ({e}) but the CLI sends a context")),
        (_, None, None) => Err("oracle case has neither `sent` nor `error`".to_owned()),
    }
}

#[test]
fn walk_context_agrees_with_the_docker_cli() {
    let oracle = load();
    let mut failures = Vec::new();
    let (mut research_ok, mut edge_ok, mut edge_total) = (0, 0, 0);
    for case in &oracle.cases {
        let result = check(&oracle, case);
        let known = KNOWN_DIFFERENCES.iter().any(|(id, _)| *id == case.id);
        if case.id <= RESEARCH_CASES {
            research_ok += usize::from(result.is_ok());
        } else {
            edge_total += 1;
            edge_ok += usize::from(result.is_ok());
        }
        match result {
            Ok(()) if known => failures.push(format!(
                "case {} now agrees; drop it from KNOWN_DIFFERENCES",
                case.id
            )),
            Err(why) if !known => {
                failures.push(format!("case {} ({:?}): {why}", case.id, case.dockerignore))
            }
            _ => {}
        }
    }
    println!(
        "oracle ({}): research cases {research_ok}/{RESEARCH_CASES}, edge cases {edge_ok}/{edge_total}",
        oracle.docker_cli
    );
    assert_eq!(
        oracle
            .cases
            .iter()
            .filter(|c| c.id <= RESEARCH_CASES)
            .count(),
        RESEARCH_CASES as usize
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The oracle's two recordings agree: a real dockerd's image holds what the CLI sent,
/// except the Dockerfile and .dockerignore, which the 20.10 legacy builder deletes when
/// .dockerignore excludes them.
#[test]
fn oracle_capture_matches_the_daemon_build() {
    let oracle = load();
    for case in &oracle.cases {
        let (Some(sent), Some(image)) = (&case.sent, &case.image_files) else {
            continue;
        };
        let mut sent: Vec<&str> = sent
            .iter()
            .filter(|e| e.kind != "dir")
            .map(|e| e.path.as_str())
            .collect();
        sent.sort_unstable();
        let patterns = read_dockerignore(&case.dockerignore);
        let dockerfile = case.dockerfile.as_deref().unwrap_or("Dockerfile");
        for name in [dockerfile, ".dockerignore"] {
            if kiln_dockerfile::ignore::matches(name, &patterns).unwrap_or(false) {
                sent.retain(|p| *p != name);
            }
        }
        assert_eq!(sent, *image, "case {} ({:?})", case.id, case.dockerignore);
    }
}
