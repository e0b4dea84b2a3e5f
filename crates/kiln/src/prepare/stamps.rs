//! Provenance stamps: `VCS_REF` (the commit, `-dirty` for a tree with
//! changes to tracked files) and `BUILD_DATE` (the commit's own time),
//! the bake variables seed 004's Makefile supplies. kiln fills them from
//! git when the files declare them and neither `--var` nor the
//! environment sets them, and keeps them out of every content key: a
//! target is keyed as if each stamp variable held a fixed stand-in, and
//! built with the real values. A commit that changes nothing a target
//! consumes therefore keeps its key and is skipped, and an image built at
//! a commit carries that commit's stamp. docs/stamps.md.
//!
//! Must never: override a stamp that `--var` or the environment sets,
//! change the checkout (git is only asked), or let a stamp reach what
//! decides a build: a stamp outside args, labels, tags, outputs,
//! annotations and cache refs is an error.

use std::collections::BTreeMap;
use std::path::Path;

use kiln_bake::Bake;

use crate::error::CliError;
use crate::settings::BakeSettings;

/// The stamp variables, by name.
pub const VARIABLES: [&str; 2] = ["VCS_REF", "BUILD_DATE"];

/// What every stamp variable holds in the key's evaluation: non-empty, so
/// that `VCS_REF != "" ? … : null` takes the same shape as with a stamp.
pub const STAND_IN: &str = "kiln-stamp";

/// What the files evaluate to with every stamp variable holding
/// `STAND_IN` (what is keyed), beside the evaluation with the stamps (what
/// is built, the [`load`]ed `Bake`).
pub struct Views {
    pub keyed: Bake,
    /// The stamp values this run builds with (from git or as set).
    pub values: BTreeMap<String, String>,
}

/// Reads and parses the bake files once, then evaluates them: with the
/// stamps filled in (from git unless `--var` or the environment sets them)
/// when the files declare stamp variables, and then also with stand-ins
/// (side by side). The views are `None` when the files declare no stamp
/// variable (or are read from stdin, which cannot be read twice): there is
/// nothing to keep out. Warnings of the evaluation are printed on stderr.
pub fn load(s: &BakeSettings) -> Result<(Bake, Option<Views>), CliError> {
    let parsed = kiln_bake::Parsed::read(&s.files).map_err(CliError::from)?;
    let declared: Vec<&str> = VARIABLES
        .iter()
        .copied()
        .filter(|v| parsed.declares_variable(v))
        .collect();
    if declared.is_empty() || s.files.iter().any(|f| f == "-") {
        let bake = parsed.evaluate(&s.opts).map_err(CliError::from)?;
        super::bake::warn(&bake, s);
        return Ok((bake, None));
    }
    let mut keyed_opts = s.opts.clone();
    for v in &declared {
        keyed_opts.vars.insert(v.to_string(), STAND_IN.to_string());
    }
    // The evaluation with stand-ins needs nothing of git's: it goes on
    // beside asking the checkout, then the real one.
    let (real, keyed) = std::thread::scope(|scope| {
        let keyed = scope.spawn(|| parsed.evaluate(&keyed_opts));
        let project = s.project_dir();
        let git = from_git(&project, Some(&project.join(REMEMBERED)));
        let mut real_opts = s.opts.clone();
        let mut values = BTreeMap::new();
        for v in &declared {
            let given = real_opts.vars.get(*v).cloned().or_else(|| {
                (!s.opts.disable_env_lookup)
                    .then(|| s.opts.env.get(*v).cloned())
                    .flatten()
            });
            match given {
                Some(g) => {
                    values.insert(v.to_string(), g);
                }
                None => {
                    if let Some(g) = git.get(*v) {
                        real_opts.vars.insert(v.to_string(), g.clone());
                        values.insert(v.to_string(), g.clone());
                    }
                }
            }
        }
        let real = parsed.evaluate(&real_opts).map(|r| (r, values));
        (real, keyed.join())
    });
    let (real, values) = real.map_err(CliError::from)?;
    super::bake::warn(&real, s);
    let keyed = match keyed {
        Ok(k) => k.map_err(CliError::from)?,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    Ok((real, Some(Views { keyed, values })))
}

/// Where what git said of the checkout is kept ([`super::checkout`]).
pub const REMEMBERED: &str = ".kiln/git-stamps.json";

/// `VCS_REF` and `BUILD_DATE` of the checkout `dir` is in; empty when it
/// is not in a git work tree (or git is missing). With `remember`, the
/// answer is read from the checkout's files when git's last answer (kept
/// there) still holds, and git is not started ([`super::checkout`]).
pub fn from_git(dir: &Path, remember: Option<&Path>) -> BTreeMap<&'static str, String> {
    use super::checkout::{self, Found};
    let dirs = match checkout::find(dir) {
        Found::None => return BTreeMap::new(),
        Found::Checkout(d) => Some(d),
        Found::AskGit => None,
    };
    let stamps = |rev: String, dirty: bool, date: Option<String>| {
        let mut out = BTreeMap::new();
        out.insert("VCS_REF", if dirty { format!("{rev}-dirty") } else { rev });
        if let Some(date) = date {
            out.insert("BUILD_DATE", date);
        }
        out
    };
    if let (Some(d), Some(file)) = (&dirs, remember)
        && let Some((commit, dirty, date)) = recalled(d, file)
    {
        return stamps(commit, dirty, date);
    }
    let git = |args: &[&str]| -> Option<String> {
        let o = kiln_engine::proc::output(
            std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args),
            std::time::Duration::from_secs(30),
            kiln_engine::proc::DEFAULT_MAX_OUTPUT,
        )
        .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(rev) = git(&["rev-parse", "HEAD"]).filter(|r| !r.is_empty()) else {
        return BTreeMap::new();
    };
    // Changes to tracked files make the tree dirty; untracked files (kiln's
    // own .kiln/, build outputs) do not.
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let date = git(&["show", "-s", "--format=%cI", "HEAD"]).filter(|d| !d.is_empty());
    // Kept with the index git left behind (status refreshes it), when the
    // files say the same commit git did.
    if let (Some(d), Some(file)) = (&dirs, remember)
        && checkout::head(d).as_deref() == Some(rev.as_str())
        && let Some((index, _)) = checkout::index_state(d)
    {
        checkout::keep(
            file,
            &checkout::Remembered {
                commit: rev.clone(),
                date: date.clone(),
                index,
                dirty,
            },
        );
    }
    stamps(rev, dirty, date)
}

/// git's last answer for the checkout `d` (kept in `file`), when it still
/// holds: the same commit, the same index, every tracked file as the
/// index recorded it. The commit, whether it was dirty, its date.
fn recalled(d: &super::checkout::GitDirs, file: &Path) -> Option<(String, bool, Option<String>)> {
    use super::checkout;
    let commit = checkout::head(d)?;
    let r = checkout::recall(file)?;
    let (index, unchanged) = checkout::index_state(d)?;
    (r.commit == commit && unchanged && index == r.index).then_some((commit, r.dirty, r.date))
}

/// The args and labels a target is keyed by, when stamps reach them: its
/// `keyed` resolution's. An error when a stamp reaches anything else that
/// decides what is built (its Dockerfile, context, stage, platforms,
/// contexts, secrets), which would make every commit a new build. Tags
/// may carry stamps: they are not part of the key.
pub fn key_view(
    name: &str,
    real: &kiln_bake::Target,
    keyed: &kiln_bake::Target,
) -> Result<Option<KeyView>, CliError> {
    let strip = |m: &Option<BTreeMap<String, Option<String>>>| -> BTreeMap<String, String> {
        m.clone()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect()
    };
    let (ra, ka) = (strip(&real.args), strip(&keyed.args));
    let (rl, kl) = (strip(&real.labels), strip(&keyed.labels));
    let mut r = real.clone();
    let mut k = keyed.clone();
    for t in [&mut r, &mut k] {
        t.args = None;
        t.labels = None;
        t.tags = None;
        t.output = None;
        t.cache_to = None;
        t.cache_from = None;
        t.annotations = None;
        t.description = None;
        t.attest = None;
        // How the target was reached (requested or linked), not what it is.
        t.linked = false;
    }
    if r != k {
        // Name what differs: the attributes that decide the build.
        let mut differs = Vec::new();
        macro_rules! field {
            ($($f:ident),*) => {$(
                if r.$f != k.$f {
                    differs.push(stringify!($f).replace('_', "-"));
                }
            )*};
        }
        field!(
            context,
            contexts,
            dockerfile,
            dockerfile_inline,
            target,
            platforms,
            secret,
            ssh,
            network,
            no_cache,
            no_cache_filter,
            pull,
            shm_size,
            ulimits,
            entitlements,
            extra_hosts,
            call,
            inherits,
            resources,
            policy
        );
        if differs.is_empty() {
            differs.push("an attribute".into());
        }
        return Err(CliError::usage(format!(
            "target {name}: a stamp variable ({}) reaches its {}; a stamp may reach only args, labels, tags, outputs, annotations and cache refs, elsewhere it would make every commit a different build",
            VARIABLES.join(", "),
            differs.join(", ")
        ))
        .with_hint("use VCS_REF and BUILD_DATE only in args, labels and tags; to key a target on the commit, give it a variable of another name"));
    }
    if ra == ka && rl == kl {
        return Ok(None);
    }
    Ok(Some(KeyView {
        args: ka,
        labels: kl,
    }))
}

pub use kiln_engine::KeyView;

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "k")
            .env("GIT_AUTHOR_EMAIL", "k@example.invalid")
            .env("GIT_COMMITTER_NAME", "k")
            .env("GIT_COMMITTER_EMAIL", "k@example.invalid")
            .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05+00:00")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    #[test]
    fn the_commit_dirty_when_tracked_files_changed_and_its_own_time() {
        let dir = std::env::temp_dir().join(format!("kiln-stamps-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(from_git(&dir, None).is_empty(), "not a checkout");
        git(&dir, &["init", "-q"]);
        std::fs::write(dir.join("f"), "1").unwrap();
        git(&dir, &["add", "f"]);
        git(&dir, &["commit", "-q", "-m", "one"]);
        let s = from_git(&dir, None);
        assert_eq!(s["VCS_REF"].len(), 40, "{s:?}");
        // git's strict ISO 8601 (`Z` or `+00:00`, by version).
        assert!(s["BUILD_DATE"].starts_with("2026-01-02T03:04:05"), "{s:?}");
        // Untracked files leave it clean; a change to a tracked one does not.
        std::fs::create_dir_all(dir.join(".kiln")).unwrap();
        std::fs::write(dir.join(".kiln/x"), "y").unwrap();
        assert!(!from_git(&dir, None)["VCS_REF"].ends_with("-dirty"));
        std::fs::write(dir.join("f"), "2").unwrap();
        assert_eq!(
            from_git(&dir, None)["VCS_REF"],
            format!("{}-dirty", s["VCS_REF"])
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With what git said kept, the checkout's files answer as git would
    /// (no git process when git's last answer holds), in a plain checkout
    /// and in a linked worktree, across commits, edits, staged changes and
    /// a packed branch.
    #[test]
    fn remembered_stamps_agree_with_git() {
        let root = std::env::temp_dir().join(format!("kiln-stamps-mem-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("repo");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        git(&dir, &["init", "-q"]);
        std::fs::write(dir.join("f"), "1").unwrap();
        std::fs::write(dir.join("sub/g"), "g").unwrap();
        git(&dir, &["add", "."]);
        git(&dir, &["commit", "-q", "-m", "one"]);
        let mem = root.join("mem.json");
        let check = |d: &Path, what: &str, from_files: bool| {
            // Past git's racy window: entries older than the index.
            std::thread::sleep(std::time::Duration::from_millis(20));
            let truth = from_git(d, None);
            let first = from_git(d, Some(&mem));
            assert_eq!(first, truth, "{what}: asked and kept");
            let kept = super::super::checkout::recall(&mem).unwrap();
            assert_eq!(
                truth["VCS_REF"],
                if kept.dirty {
                    format!("{}-dirty", kept.commit)
                } else {
                    kept.commit.clone()
                },
                "{what}"
            );
            let again = from_git(d, Some(&mem));
            assert_eq!(again, truth, "{what}: again");
            let super::super::checkout::Found::Checkout(dirs) = super::super::checkout::find(d)
            else {
                panic!("{what}: not found as a checkout")
            };
            assert_eq!(
                recalled(&dirs, &mem).is_some(),
                from_files,
                "{what}: answered from the files without git"
            );
        };
        check(&dir, "clean", true);
        std::fs::write(dir.join("sub/g"), "changed").unwrap();
        check(&dir, "edited", false);
        git(&dir, &["add", "sub/g"]);
        check(&dir, "staged", true);
        git(&dir, &["commit", "-q", "-m", "two"]);
        check(&dir, "new commit", true);
        git(&dir, &["pack-refs", "--all"]);
        check(&dir, "packed refs", true);
        // A kept answer for one commit never answers for another.
        std::fs::write(dir.join("f"), "3").unwrap();
        git(&dir, &["commit", "-q", "-am", "three"]);
        assert_eq!(from_git(&dir, Some(&mem)), from_git(&dir, None));
        // A linked worktree: HEAD in .git/worktrees/NAME, refs shared.
        let wt = root.join("wt");
        git(&dir, &["worktree", "add", "-q", wt.to_str().unwrap()]);
        check(&wt, "worktree", true);
        std::fs::write(wt.join("f"), "wt edit").unwrap();
        check(&wt, "worktree edited", false);
        let _ = std::fs::remove_dir_all(&root);
    }
}
