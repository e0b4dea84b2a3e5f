//! The `.dockerignore` matcher: read the input as a `.dockerignore` file,
//! compile its patterns, and match fixed paths plus paths derived from the
//! input (its patterns with the glob characters replaced, its lines as given)
//! with every matching mode the docker CLI uses.
//!
//! Input: UTF-8 text (invalid bytes replaced).
#![no_main]

use kiln_dockerfile::ignore::{MatchInfo, PatternMatcher, read_dockerignore};
use libfuzzer_sys::fuzz_target;

const PATHS: &[&str] = &[
    "Dockerfile",
    ".dockerignore",
    "a",
    "a/b",
    "a/b/c.txt",
    "src/main.rs",
    "node_modules/x/index.js",
    ".git/HEAD",
    "dir/.hidden",
    "x y/z",
    "ünï/cødé",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let patterns = read_dockerignore(&text);
    let Ok(pm) = PatternMatcher::new(&patterns) else {
        return;
    };
    let _ = pm.exclusions();
    for p in pm.patterns() {
        let _ = (p.as_str(), p.is_exclusion(), p.match_type(), p.go_regex());
        let _ = p.to_string();
    }

    let mut paths: Vec<String> = PATHS.iter().map(|s| s.to_string()).collect();
    for p in patterns.iter().take(8) {
        let p = p.trim_start_matches('!');
        paths.push(p.to_string());
        paths.push(p.replace(['*', '?'], "x").replace(['[', ']', '\\'], ""));
        paths.push(format!("{}/child", p.replace("**", "a/b")));
    }
    for l in text.lines().take(4) {
        paths.push(l.to_string());
    }

    // The free functions compile the patterns on every call (regex building
    // dominates the run time): a few paths only.
    for f in paths.iter().rev().take(2) {
        let _ = kiln_dockerfile::ignore::matches(f, &patterns);
        let _ = kiln_dockerfile::ignore::matches_or_parent_matches(f, &patterns);
    }
    for f in &paths {
        let _ = pm.matches(f);
        let _ = pm.matches_exact(f);
        let _ = pm.matches_or_parent_matches(f);
        // The context walker's way: each path component with its parent's result.
        let mut info = MatchInfo::default();
        let mut prefix = String::new();
        for c in f.split('/').filter(|c| !c.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(c);
            match pm.matches_using_parent_results(&prefix, &info) {
                Ok((_, next)) => info = next,
                Err(_) => break,
            }
        }
    }
});
