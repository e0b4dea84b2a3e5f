//! Properties of `reach`: a listing cut down to what the sources can reach
//! selects exactly what the whole listing selects, so a key made from it
//! is the same key.

use kiln_dockerfile::dockerfile::{ContextSource, PathKind, SourceVia};
use kiln_plan::key::{is_at_or_below, reach, select_by};
use proptest::prelude::*;

/// Every path of a small tree: directories `a`, `b`, `.git` (nested two
/// deep) and files in each, as a listing names them (directories too).
fn listing() -> Vec<String> {
    let mut out = Vec::new();
    for d in ["a", "b", ".git"] {
        out.push(d.to_string());
        for f in ["x.c", "y.py", "z"] {
            out.push(format!("{d}/{f}"));
        }
        for e in ["a", "c"] {
            out.push(format!("{d}/{e}"));
            for f in ["x.c", "y.py"] {
                out.push(format!("{d}/{e}/{f}"));
            }
        }
    }
    out.extend(["Dockerfile".to_string(), "x.c".to_string()]);
    out.sort();
    out
}

/// What the walk keeps of `all` for `reach`: what lies at or below a
/// reached path, and the directories leading to one.
fn cut(all: &[String], reach: &Option<Vec<String>>) -> Vec<String> {
    match reach {
        None => all.to_vec(),
        Some(r) => all
            .iter()
            .filter(|e| {
                r.iter()
                    .any(|p| is_at_or_below(e, p) || is_at_or_below(p, e))
            })
            .cloned()
            .collect(),
    }
}

fn source() -> impl Strategy<Value = ContextSource> {
    let paths = prop::sample::select(vec![
        "a",
        "a/",
        "./a/c",
        "/b/x.c",
        "a/c/y.py",
        "missing",
        "a/missing/",
        ".",
        "./",
        "*.c",
        "a/*.c",
        "*/x.c",
        "b/c*",
        "a/[xy].py",
        "**/y.py",
        "a/**",
        ".git",
        "x.c",
        "a/../b",
        "$DIR/x",
        "b//c",
    ]);
    let kinds = prop::sample::select(vec![
        PathKind::Path,
        PathKind::Directory,
        PathKind::Glob,
        PathKind::Whole,
    ]);
    let excludes = prop::collection::vec(prop::sample::select(vec!["*.py", "a/c", "**/z"]), 0..2);
    (paths, kinds, excludes).prop_map(|(path, kind, excludes)| ContextSource {
        stage: 0,
        line: 1,
        via: SourceVia::Copy,
        path: path.to_string(),
        raw: path.to_string(),
        kind,
        excludes: excludes.into_iter().map(String::from).collect(),
    })
}

proptest! {
    #[test]
    fn a_listing_cut_to_the_reach_selects_what_the_whole_one_does(
        sources in prop::collection::vec(source(), 0..4)
    ) {
        let all = listing();
        let r = reach(&sources);
        let part = cut(&all, &r);
        let whole: Vec<&str> = select_by(&all, |p| p.as_str(), &sources)
            .into_iter()
            .map(|i| all[i].as_str())
            .collect();
        let from_part: Vec<&str> = select_by(&part, |p| p.as_str(), &sources)
            .into_iter()
            .map(|i| part[i].as_str())
            .collect();
        prop_assert_eq!(&whole, &from_part, "reach {:?}", r);
    }
}

#[test]
fn the_reach_of_plain_paths_and_globs_is_their_literal_directories() {
    let src = |path: &str, kind: PathKind| ContextSource {
        stage: 0,
        line: 1,
        via: SourceVia::Copy,
        path: path.into(),
        raw: path.into(),
        kind,
        excludes: Vec::new(),
    };
    let r = reach(&[
        src("./src/vllm/", PathKind::Directory),
        src("/setup.cfg", PathKind::Path),
        src("src/*/x.py", PathKind::Glob),
        src("src/vllm/", PathKind::Directory),
    ]);
    assert_eq!(
        r,
        Some(vec![
            "setup.cfg".to_string(),
            "src".to_string(),
            "src/vllm".to_string()
        ])
    );
    // No sources: nothing of the context is read.
    assert_eq!(reach(&[]), Some(Vec::new()));
    // The whole context, a glob at the top, an unexpanded variable or a
    // path that is not plain: anything may be read.
    for (path, kind) in [
        (".", PathKind::Whole),
        ("*.py", PathKind::Glob),
        ("$SRC/x", PathKind::Path),
        ("a/../b", PathKind::Path),
        ("a//b", PathKind::Directory),
    ] {
        assert_eq!(reach(&[src(path, kind)]), None, "{path}");
    }
}
