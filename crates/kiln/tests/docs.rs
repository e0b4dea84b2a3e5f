//! The project's own documentation reads on any screen: no line of the
//! README, the changelog, the architecture notes or a page under `docs/` is
//! over 100 characters (prose is wrapped at 80; a table keeps its cells
//! short and leaves the detail to the page it points to).

use std::path::{Path, PathBuf};

const MAX: usize = 100;

/// The Markdown files of the documentation, below `root`.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "README.md",
        "CHANGELOG.md",
        "ARCHITECTURE.md",
        "crates/README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_documentation_line_is_over_100_characters() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut long = Vec::new();
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, line) in text.lines().enumerate() {
            let n = line.chars().count();
            if n > MAX {
                let shown = page.strip_prefix(&root).unwrap_or(&page).display();
                long.push(format!("{shown}:{}: {n} characters", i + 1));
            }
        }
    }
    assert!(
        long.is_empty(),
        "{} line(s) of the documentation are over {MAX} characters; wrap prose at 80 \
         columns, keep table cells short (detail goes on the page the cell points to), \
         break long sample lines:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// The GitHub anchor of a heading: lower case, spaces to dashes, only
/// letters, digits, `-` and `_` kept.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The relative links of a Markdown text: `(target, anchor)` of each
/// `](target#anchor)` that is not a web address.
fn relative_links(text: &str) -> Vec<(usize, String, Option<String>)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let link = &rest[..end];
            rest = &rest[end..];
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            let (path, frag) = match link.split_once('#') {
                Some((p, f)) => (p.to_string(), Some(f.to_string())),
                None => (link.to_string(), None),
            };
            out.push((i + 1, path, frag));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_documentation_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut broken = Vec::new();
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let shown = page
            .strip_prefix(&root)
            .unwrap_or(&page)
            .display()
            .to_string();
        for (line, path, frag) in relative_links(&text) {
            let target = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(&path)
            };
            if !target.exists() {
                broken.push(format!("{shown}:{line}: `{path}` does not exist"));
                continue;
            }
            let Some(frag) = frag else { continue };
            if target.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let body = std::fs::read_to_string(&target).unwrap();
            let found = body
                .lines()
                .filter_map(|l| l.strip_prefix('#'))
                .map(|h| anchor(h.trim_start_matches('#')))
                .any(|a| a == frag);
            if !found {
                broken.push(format!("{shown}:{line}: no heading `#{frag}` in `{path}`"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} relative link(s) of the documentation point nowhere; fix the path or the \
         heading:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(anchor(" The record store"), "the-record-store");
    assert_eq!(anchor(" `kiln build` --push"), "kiln-build---push");
    let links = relative_links("see [a](docs/a.md#x-y) and [b](https://e.org/b) [c](#top)");
    assert_eq!(
        links,
        vec![
            (1, "docs/a.md".to_string(), Some("x-y".to_string())),
            (1, String::new(), Some("top".to_string())),
        ]
    );
}
