//! Edge cases of the context walk and the readers, beyond the CLI oracle.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use kiln_dockerfile::ignore::{
    ContextEntry, EntryKind, IgnoreError, PatternMatcher, WalkOptions, read_dockerignore,
    walk_context, walk_context_with,
};

/// A fresh directory under cargo's per-target temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dockerignore-walk-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn tree(name: &str, files: &[&str]) -> Scratch {
    let root = scratch(name);
    write(&root, "Dockerfile", "FROM scratch\n");
    for f in files {
        write(&root, f, f);
    }
    root
}

fn paths(entries: &[ContextEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.path.as_str()).collect()
}

fn walk(root: &Path, dockerignore: &str) -> Result<Vec<ContextEntry>, IgnoreError> {
    walk_context(root, &read_dockerignore(dockerignore))
}

#[test]
fn double_star_alone_keeps_only_the_build_files() {
    let root = tree("double-star", &["a.txt", "d/b.txt", ".dockerignore"]);
    let entries = walk(&root, "**").unwrap();
    assert_eq!(paths(&entries), [".dockerignore", "Dockerfile"]);
}

#[test]
fn bang_alone_is_an_error() {
    let root = tree("bang", &["a.txt"]);
    assert!(matches!(
        walk(&root, "a.txt\n!\n"),
        Err(IgnoreError::IllegalExclusion)
    ));
    assert!(matches!(
        walk(&root, "! \n"),
        Err(IgnoreError::IllegalExclusion)
    ));
}

#[test]
fn trailing_slash_is_the_same_pattern() {
    let root = tree("slash", &["dir/a", "dir/sub/b", "dirx/c", "dir.txt"]);
    let plain = walk(&root, "dir").unwrap();
    assert_eq!(walk(&root, "dir/").unwrap(), plain);
    assert_eq!(walk(&root, "/dir/").unwrap(), plain);
    assert_eq!(walk(&root, "./dir//").unwrap(), plain);
    assert_eq!(paths(&plain), ["Dockerfile", "dir.txt", "dirx", "dirx/c"]);
}

#[test]
fn unicode_and_spaces() {
    let root = tree(
        "unicode",
        &[
            "ünï/çødé.txt",
            "日本.md",
            "sp ace/f.txt",
            "tab\there",
            "a b",
        ],
    );
    let entries = walk(&root, "日本.md\nsp\\ ace\n*\\\t*\nünï/ç*").unwrap();
    assert_eq!(paths(&entries), ["Dockerfile", "a b", "ünï"]);
}

#[test]
fn names_sort_by_component_like_the_cli() {
    // Go walks each directory in byte order, depth first: "a" < "a-c", and "a/b" comes
    // right after "a", although "a-c" < "a/b" as plain strings.
    let root = tree("order", &["a/b", "a-c", "B", "é", "_"]);
    let entries = walk(&root, "").unwrap();
    assert_eq!(
        paths(&entries),
        ["B", "Dockerfile", "_", "a", "a/b", "a-c", "é"]
    );
}

#[test]
fn excluded_directory_is_pruned_unless_an_exclusion_reaches_into_it() {
    let root = tree(
        "prune",
        &["src/main.rs", "src/lib/mod.rs", "src/lib/deep/x.rs"],
    );
    // The docker CLI quirk: `src/lib` is pruned because `src/**/*.rs` does not start
    // with `src/lib/`, although the pattern would match files below it.
    let entries = walk(&root, "**\n!src/**/*.rs").unwrap();
    assert_eq!(paths(&entries), ["Dockerfile", "src/main.rs"]);
    // Naming the directory in an exclusion opens it; the excluded directories themselves
    // are never listed.
    let entries = walk(&root, "**\n!src/lib/deep/x.rs").unwrap();
    assert_eq!(paths(&entries), ["Dockerfile", "src/lib/deep/x.rs"]);
    // Without exclusions an excluded directory is always pruned.
    let entries = walk(&root, "src").unwrap();
    assert_eq!(paths(&entries), ["Dockerfile"]);
}

#[test]
fn symlinks_are_listed_never_followed() {
    let outside = tree("outside", &["secret.txt"]);
    let root = tree("links", &["dir/a.txt"]);
    symlink(&*outside, root.join("out")).unwrap();
    symlink("dir", root.join("link-dir")).unwrap();
    symlink("../../../etc/passwd", root.join("escape")).unwrap();
    let entries = walk(&root, "").unwrap();
    assert_eq!(
        paths(&entries),
        [
            "Dockerfile",
            "dir",
            "dir/a.txt",
            "escape",
            "link-dir",
            "out"
        ]
    );
    let out = entries.iter().find(|e| e.path == "out").unwrap();
    assert_eq!(out.kind, EntryKind::Symlink);
    assert_eq!(out.link_target.as_deref(), outside.to_str());
    assert_eq!(out.size, 0);
    // A pattern through a symlinked directory finds nothing below it.
    let entries = walk(&root, "link-dir/**\nout/*").unwrap();
    assert!(paths(&entries).contains(&"link-dir"));
}

#[test]
fn entries_carry_mode_size_and_hard_links() {
    let root = tree("meta", &["run.sh", "data.bin"]);
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o4755)).unwrap();
    fs::write(root.join("data.bin"), [0u8; 1234]).unwrap();
    fs::hard_link(root.join("data.bin"), root.join("data2.bin")).unwrap();
    let entries = walk(&root, "").unwrap();
    let get = |p: &str| entries.iter().find(|e| e.path == p).unwrap().clone();
    assert_eq!(get("run.sh").mode, 0o4755);
    assert_eq!(get("data.bin").size, 1234);
    assert_eq!(get("data.bin").kind, EntryKind::File);
    let second = get("data2.bin");
    assert_eq!(second.kind, EntryKind::Hardlink);
    assert_eq!(second.link_target.as_deref(), Some("data.bin"));
    assert_eq!(second.size, 0);
    // Excluding the first name makes the second one the file.
    let entries = walk(&root, "data.bin").unwrap();
    let second = entries.iter().find(|e| e.path == "data2.bin").unwrap();
    assert_eq!(second.kind, EntryKind::File);
    assert_eq!(second.size, 1234);
}

/// The listing a content key reads names the same entries, in the same order, with
/// their kinds (a hard link as a file, a symlink with its target), and skips sockets.
#[test]
fn a_names_only_walk_lists_the_same_entries() {
    let root = tree(
        "names-only",
        &["src/a.rs", "src/b.tmp", "data.bin", "x/y/z"],
    );
    fs::hard_link(root.join("data.bin"), root.join("data2.bin")).unwrap();
    symlink("src/a.rs", root.join("link")).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    let patterns = read_dockerignore("**/*.tmp\nx/y\n");
    let full = walk_context_with(&root, &patterns, &WalkOptions::default()).unwrap();
    let light = walk_context_with(
        &root,
        &patterns,
        &WalkOptions {
            names_only: true,
            ..WalkOptions::default()
        },
    )
    .unwrap();
    let project = |e: &ContextEntry| {
        let kind = match e.kind {
            EntryKind::Hardlink => EntryKind::File,
            k => k,
        };
        (
            e.path.clone(),
            kind,
            (kind == EntryKind::Symlink).then(|| e.link_target.clone()),
        )
    };
    assert_eq!(
        light.iter().map(project).collect::<Vec<_>>(),
        full.iter().map(project).collect::<Vec<_>>()
    );
    assert!(paths(&light).contains(&"data2.bin"));
    assert!(!paths(&light).contains(&"sock"));
    assert!(!paths(&light).contains(&"src/b.tmp"));
    let link = light.iter().find(|e| e.path == "link").unwrap();
    assert_eq!(link.link_target.as_deref(), Some("src/a.rs"));
}

#[test]
fn sockets_are_skipped() {
    let root = tree("socket", &["a"]);
    let _listener = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    assert_eq!(paths(&walk(&root, "").unwrap()), ["Dockerfile", "a"]);
}

#[test]
fn build_files_are_re_included() {
    let root = tree(
        "build-files",
        &["a", ".dockerignore", "sub/Dockerfile.prod", "sub/x"],
    );
    assert_eq!(
        paths(&walk(&root, "*").unwrap()),
        [".dockerignore", "Dockerfile"]
    );
    // With -f the named file comes back instead, from inside an excluded directory.
    let options = WalkOptions {
        dockerfile: Some("sub/Dockerfile.prod".to_owned()),
        ..WalkOptions::default()
    };
    let entries = walk_context_with(&root, &read_dockerignore("*\n"), &options).unwrap();
    assert_eq!(paths(&entries), [".dockerignore", "sub/Dockerfile.prod"]);
    // The lowercase default is used when only it exists.
    fs::rename(root.join("Dockerfile"), root.join("dockerfile")).unwrap();
    assert_eq!(
        paths(&walk(&root, "*").unwrap()),
        [".dockerignore", "dockerfile"]
    );
}

#[test]
fn symlinked_dockerfile_resolves_to_its_target() {
    let root = tree("df-link", &["docker/prod.Dockerfile", "a"]);
    fs::remove_file(root.join("Dockerfile")).unwrap();
    symlink("docker/prod.Dockerfile", root.join("Dockerfile")).unwrap();
    let entries = walk(&root, "docker\nDockerfile").unwrap();
    assert_eq!(paths(&entries), ["a", "docker/prod.Dockerfile"]);
}

#[test]
fn pattern_errors_surface() {
    let root = tree("bad", &["a"]);
    assert!(matches!(
        walk(&root, "a["),
        Err(IgnoreError::BadPattern { .. })
    ));
    // Accepted by Go's filepath.Match, rejected when Go compiles the regex.
    assert!(matches!(
        walk(&root, "[z-a]"),
        Err(IgnoreError::BadPattern { .. })
    ));
    let err = walk(&root, "[Local-Only]/").unwrap_err().to_string();
    assert!(
        err.contains("`[Local-Only]`") && err.contains("hint:"),
        "{err}"
    );
}

#[test]
fn not_a_directory() {
    let root = tree("notdir", &["file"]);
    assert!(matches!(
        walk(&root.join("file"), ""),
        Err(IgnoreError::NotADirectory { .. })
    ));
    assert!(matches!(
        walk(&root.join("missing"), ""),
        Err(IgnoreError::Io { .. })
    ));
}

#[test]
fn unreadable_entries_name_their_path() {
    let root = tree("unreadable", &["locked.txt", "closed/x"]);
    fs::set_permissions(root.join("locked.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    if fs::File::open(root.join("locked.txt")).is_ok() {
        // Running with CAP_DAC_OVERRIDE (root): permissions cannot make a file unreadable.
        eprintln!("skipped: the test process can read mode-000 files");
        return;
    }
    let err = walk(&root, "").unwrap_err();
    assert!(
        matches!(&err, IgnoreError::Io { path, .. } if path.ends_with("locked.txt")),
        "{err}"
    );
    assert!(err.to_string().contains("locked.txt"));
    // Excluded, it is not read.
    fs::set_permissions(root.join("closed"), fs::Permissions::from_mode(0o000)).unwrap();
    assert!(walk(&root, "locked.txt\nclosed").is_ok());
    let err = walk(&root, "locked.txt").unwrap_err();
    assert!(matches!(&err, IgnoreError::Io { path, .. } if path.ends_with("closed")));
    fs::set_permissions(root.join("closed"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn read_dockerignore_edge_cases() {
    assert_eq!(read_dockerignore("\u{FEFF}a\r\nb\r\n"), ["a", "b"]);
    // Only the first line loses a byte-order mark.
    assert_eq!(read_dockerignore("a\n\u{FEFF}b"), ["a", "\u{FEFF}b"]);
    // `#` starts a comment only in the first column.
    assert_eq!(read_dockerignore("#x\n  #y\n"), ["#y"]);
    assert_eq!(read_dockerignore("!  /foo/../bar/\n"), ["!bar"]);
    assert_eq!(read_dockerignore("/\n//\n/..\n"), ["/", "/", "/"]);
    assert_eq!(
        read_dockerignore(".\n./\n..\n../x\n"),
        [".", ".", "..", "../x"]
    );
    assert_eq!(read_dockerignore("\u{A0}a\u{3000}\n"), ["a"]);
    assert_eq!(read_dockerignore("a\\ \n"), ["a\\"]);
}

#[test]
fn matcher_does_not_drop_a_leading_slash() {
    // ignorefile.ReadAll drops it; PatternMatcher::new, like moby's New, does not.
    let pm = PatternMatcher::new(&["/a"]).unwrap();
    assert!(!pm.matches_or_parent_matches("a").unwrap());
    let pm = PatternMatcher::new(&read_dockerignore("/a")).unwrap();
    assert!(pm.matches_or_parent_matches("a").unwrap());
}

/// A walk limited to a reach lists what the whole walk lists at or below
/// the reached paths and the directories leading to them, with the same
/// `.dockerignore` verdicts (a re-included file under an excluded
/// directory included), and does not go where nothing is reached: a name
/// that is not UTF-8 there (an error for the whole walk) is never read.
#[test]
fn a_walk_limited_to_a_reach_lists_only_that_part_and_walks_nothing_else() {
    use std::os::unix::ffi::OsStrExt;
    let root = tree(
        "reach",
        &[
            "src/a/x.c",
            "src/a/x.tmp",
            "src/a/keep.tmp",
            "src/b/y.c",
            "docs/z.md",
            "setup.cfg",
            ".git/objects/ab/cdef",
        ],
    );
    let patterns = read_dockerignore("**/*.tmp\n!src/a/keep.tmp\n");
    let reach = vec!["setup.cfg".to_string(), "src/a".to_string()];
    let options = |reach: Option<Vec<String>>| WalkOptions {
        names_only: true,
        reach,
        ..WalkOptions::default()
    };
    let whole = walk_context_with(&root, &patterns, &options(None)).unwrap();
    let part = walk_context_with(&root, &patterns, &options(Some(reach.clone()))).unwrap();
    let under = |p: &str, dir: &str| {
        p.strip_prefix(dir)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    let expected: Vec<&str> = paths(&whole)
        .into_iter()
        .filter(|e| reach.iter().any(|r| under(e, r) || under(r, e)))
        .collect();
    assert_eq!(paths(&part), expected);
    assert_eq!(
        paths(&part),
        ["setup.cfg", "src", "src/a", "src/a/keep.tmp", "src/a/x.c"]
    );
    // A name no walk can list, where nothing is reached.
    fs::write(
        root.join(".git/objects")
            .join(std::ffi::OsStr::from_bytes(b"\xff\xfe")),
        "x",
    )
    .unwrap();
    assert!(matches!(
        walk_context_with(&root, &patterns, &options(None)),
        Err(IgnoreError::NonUtf8Path { .. })
    ));
    let again = walk_context_with(&root, &patterns, &options(Some(reach))).unwrap();
    assert_eq!(paths(&again), paths(&part));
    // Nothing reached: nothing listed.
    assert!(
        walk_context_with(&root, &patterns, &options(Some(Vec::new())))
            .unwrap()
            .is_empty()
    );
}
