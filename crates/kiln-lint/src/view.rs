//! Whose build a bake file is judged as: kiln's or `docker buildx bake`'s.
//!
//! `kiln build` applies its own cache policy to every bake target
//! (docs/cache-policy.md: a commit-independent registry ref per target,
//! imported with the per-commit one and exported with `mode=max`), so the
//! rules that ask for such refs — [`KILN_POLICY`]: `cache-from-self`,
//! `cache-per-commit-only`, `no-cache-export` — are moot for a bake file
//! kiln builds, and right for one that `docker buildx bake` builds.
//!
//! The default ([`View::Auto`]) decides per bake file set, from the
//! repository's CI: a set is judged as `docker buildx bake` builds it when a
//! GitHub Actions workflow of its repository runs bake on one of its files
//! (a `run:` step's `docker buildx bake` / `docker bake`, or a
//! `docker/bake-action` step); otherwise as kiln builds it. The workflows
//! are those of the nearest directory at or above the bake file's that has
//! `.github/workflows` (the search stops at a directory holding `.git`),
//! whether or not they are among the paths linted, so the answer does not
//! depend on how `kiln lint` was called. `--kiln` ([`View::Kiln`]) and
//! `--buildx` ([`View::Buildx`]) decide for every bake file.
//!
//! [`KILN_POLICY`]: crate::rules::KILN_POLICY

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::workflow::BakeCall;
use crate::{Collector, display_path};

/// How bake files are judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum View {
    /// Per bake file set: as `docker buildx bake` builds it when a workflow
    /// of its repository runs bake on it, else as kiln builds it.
    #[default]
    Auto,
    /// Every bake file as kiln builds it (`kiln lint --kiln`).
    Kiln,
    /// Every bake file as `docker buildx bake` builds it
    /// (`kiln lint --buildx`).
    Buildx,
}

/// Whose build a bake file set was judged as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Judged {
    /// kiln applies its cache policy: the [`crate::rules::KILN_POLICY`]
    /// findings are set aside.
    Kiln,
    /// Built as written: every rule applies.
    Buildx,
}

/// One bake file set (merged as bake merges it) and how it was judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BakeSet {
    /// The files, as shown in findings.
    pub files: Vec<String>,
    #[serde(rename = "judged_as")]
    pub judged: Judged,
    /// Why: `--kiln`, `--buildx`, ``.github/workflows/ci.yml:19 runs
    /// `docker buildx bake` on it``, or `no workflow of its repository runs
    /// bake on it`.
    pub because: String,
}

/// The `.github/workflows` directory of the repository `dir` is in: the
/// nearest at or above `dir`, not above a directory holding `.git`. Spelled
/// from `dir` as given (`../.github/workflows` above a relative one), so
/// that findings show it as they show the bake file.
fn workflows_dir(dir: &Path) -> Option<PathBuf> {
    let mut d = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir.to_path_buf()
    };
    for _ in 0..64 {
        let wf = d.join(".github").join("workflows");
        if wf.is_dir() {
            return Some(wf);
        }
        if d.join(".git").exists() {
            return None;
        }
        // Stop at the root; else one level up.
        std::fs::canonicalize(&d).ok()?.parent()?;
        d = match d.components().next_back() {
            Some(std::path::Component::Normal(_)) => {
                d.pop();
                if d.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    d
                }
            }
            Some(std::path::Component::CurDir) => PathBuf::from(".."),
            _ => d.join(".."),
        };
    }
    None
}

/// Judges bake file sets; reads each workflows directory once.
#[derive(Debug, Default)]
pub struct Judge {
    view: View,
    calls: HashMap<PathBuf, Vec<BakeCall>>,
}

impl Judge {
    #[must_use]
    pub fn new(view: View) -> Judge {
        Judge {
            view,
            calls: HashMap::new(),
        }
    }

    /// The bake calls of the workflows in `wf_dir`.
    fn calls(&mut self, wf_dir: &Path) -> &[BakeCall] {
        let key = std::fs::canonicalize(wf_dir).unwrap_or_else(|_| wf_dir.to_path_buf());
        self.calls.entry(key).or_insert_with(|| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(wf_dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.is_file())
                        .filter(|p| {
                            p.file_name()
                                .is_some_and(|n| crate::discover::is_yaml(&n.to_string_lossy()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            // Read with a scratch collector: only the bake calls are kept
            // (the workflows are linted only if they are among the paths).
            let mut scratch = Collector::default();
            for f in files {
                crate::workflow::lint(&f, &mut scratch);
            }
            scratch.bake_calls
        })
    }

    /// How the bake file set `files` is judged.
    pub fn judge(&mut self, files: &[PathBuf]) -> BakeSet {
        let shown_files: Vec<String> = files.iter().map(|f| display_path(f)).collect();
        let set = |judged, because: &str| BakeSet {
            files: shown_files.clone(),
            judged,
            because: because.to_string(),
        };
        match self.view {
            View::Kiln => set(Judged::Kiln, "--kiln"),
            View::Buildx => set(Judged::Buildx, "--buildx"),
            View::Auto => {
                let dir = files
                    .first()
                    .and_then(|f| f.parent())
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let call = workflows_dir(dir).and_then(|wf| {
                    self.calls(&wf)
                        .iter()
                        .find(|c| files.iter().any(|f| c.reads(f)))
                        .cloned()
                });
                match call {
                    Some(c) => set(
                        Judged::Buildx,
                        &format!("{}:{} runs `{}` on it", c.loc.file, c.loc.line, c.what),
                    ),
                    None => set(
                        Judged::Kiln,
                        "no workflow of its repository runs bake on it",
                    ),
                }
            }
        }
    }
}
