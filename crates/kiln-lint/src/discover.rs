//! Which files `kiln lint` reads: bake files (`docker-bake.{hcl,json}`, the
//! `.override.` variants, `*.bake.hcl`, `*-bake.hcl`), Dockerfiles
//! (`Dockerfile`, `Dockerfile.*`, `*.Dockerfile`) and CI workflows
//! (`.github/workflows/*.y{a,}ml`). Directories are searched recursively in
//! name order, skipping `.git`, `target`, `.kiln`, `node_modules` and other
//! hidden directories but `.github`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What was found, in a stable order.
#[derive(Debug, Default)]
pub struct Found {
    /// Bake file sets: the default names of one directory are one set (bake
    /// merges them), any other bake file is a set of its own.
    pub bake: Vec<Vec<PathBuf>>,
    pub workflows: Vec<PathBuf>,
    pub dockerfiles: Vec<PathBuf>,
}

const SKIP_DIRS: &[&str] = &[".git", "target", ".kiln", "node_modules"];
/// Directories nested deeper than this are not searched.
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bake,
    Workflow,
    Dockerfile,
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn is_default_bake(name: &str) -> bool {
    kiln_bake::DEFAULT_FILES.contains(&name)
}

fn is_bake_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    let ext = l.ends_with(".hcl") || l.ends_with(".json");
    is_default_bake(name)
        || (ext
            && (l.starts_with("docker-bake.")
                || l.ends_with(".bake.hcl")
                || l.ends_with(".bake.json")
                || l.ends_with("-bake.hcl")
                || l.ends_with("-bake.json")))
}

fn is_dockerfile_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l == "dockerfile" || l.starts_with("dockerfile.") || l.ends_with(".dockerfile")
}

pub(crate) fn is_yaml(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.ends_with(".yml") || l.ends_with(".yaml")
}

fn in_workflows_dir(p: &Path) -> bool {
    let parent = p.parent();
    parent
        .and_then(Path::file_name)
        .is_some_and(|n| n == "workflows")
        && parent
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|n| n == ".github")
}

/// The kind of a file met while searching a directory.
fn kind_in_dir(p: &Path) -> Option<Kind> {
    let name = name_of(p);
    if is_bake_name(&name) {
        Some(Kind::Bake)
    } else if is_dockerfile_name(&name) {
        Some(Kind::Dockerfile)
    } else if is_yaml(&name) && in_workflows_dir(p) {
        Some(Kind::Workflow)
    } else {
        None
    }
}

/// The kind of a file named on the command line: by name, else YAML is a
/// workflow, `.hcl`/`.json` a bake file, anything else a Dockerfile.
fn kind_given(p: &Path) -> Kind {
    let name = name_of(p);
    if let Some(k) = kind_in_dir(p) {
        return k;
    }
    let l = name.to_ascii_lowercase();
    if is_yaml(&name) {
        Kind::Workflow
    } else if l.ends_with(".hcl") || l.ends_with(".json") {
        Kind::Bake
    } else {
        Kind::Dockerfile
    }
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, Kind)>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let name = name_of(&p);
        // `symlink_metadata`: a link to a directory is not followed (no loops).
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            if SKIP_DIRS.contains(&name.as_str()) || (name.starts_with('.') && name != ".github") {
                continue;
            }
            walk(&p, depth + 1, out);
        } else if let Some(k) = kind_in_dir(&p) {
            out.push((p, k));
        }
    }
}

/// Finds the files to lint under `paths` (default `.`).
///
/// # Errors
/// A path that does not exist.
pub fn discover(paths: &[PathBuf]) -> Result<Found, String> {
    let default = [PathBuf::from(".")];
    let paths = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    let mut files: Vec<(PathBuf, Kind)> = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, 0, &mut files);
        } else if p.exists() {
            files.push((p.clone(), kind_given(p)));
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    let mut found = Found::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut default_sets: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for (p, k) in files {
        if !seen.insert(p.clone()) {
            continue;
        }
        match k {
            Kind::Bake if is_default_bake(&name_of(&p)) => {
                let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
                default_sets.entry(dir).or_default().push(p);
            }
            Kind::Bake => found.bake.push(vec![p]),
            Kind::Workflow => found.workflows.push(p),
            Kind::Dockerfile => found.dockerfiles.push(p),
        }
    }
    for (_, mut set) in default_sets {
        let order = |p: &PathBuf| {
            let n = name_of(p);
            kiln_bake::DEFAULT_FILES
                .iter()
                .position(|d| *d == n)
                .unwrap_or(usize::MAX)
        };
        set.sort_by_key(order);
        found.bake.push(set);
    }
    found.bake.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_bake_name("docker-bake.hcl"));
        assert!(is_bake_name("docker-bake.override.json"));
        assert!(is_bake_name("rocm-bake.hcl"));
        assert!(is_bake_name("ci.bake.hcl"));
        assert!(!is_bake_name("main.hcl"));
        assert!(is_dockerfile_name("Dockerfile"));
        assert!(is_dockerfile_name("Dockerfile.ci"));
        assert!(is_dockerfile_name("app.Dockerfile"));
        assert!(!is_dockerfile_name("Dockerfile-notes.md"));
        assert!(in_workflows_dir(Path::new("x/.github/workflows/b.yml")));
        assert!(!in_workflows_dir(Path::new("x/workflows/b.yml")));
    }
}
