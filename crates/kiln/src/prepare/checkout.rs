//! The state of a git checkout read from its files, so that the stamps of
//! a run with nothing to build cost no git process: the commit `HEAD`
//! names (`.git/HEAD`, loose refs, `packed-refs`, linked worktrees), and
//! whether git's last answer about the work tree still holds — the index
//! file is the one git left, and every tracked file's `lstat` matches what
//! the index recorded of it, which is git's own test for "unchanged" (an
//! entry as new as the index itself, "racily clean" in git's words, is
//! not trusted). What git said last is kept in `.kiln/git-stamps.json`.
//!
//! Anything this reader does not follow (`$GIT_DIR` and friends, index
//! version 4, a SHA-256 repository, an unreadable file) is `None`: git is
//! asked, as before.
//!
//! Must never: change the checkout, or answer differently from git.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where a checkout's git files are.
#[derive(Debug, PartialEq)]
pub struct GitDirs {
    /// The work tree's root (the directory holding `.git`).
    pub work_tree: PathBuf,
    /// The git dir of this work tree (`.git`, or `.git/worktrees/NAME`
    /// for a linked worktree): `HEAD` and `index`.
    pub git_dir: PathBuf,
    /// The common dir: refs and `packed-refs`.
    pub common: PathBuf,
}

/// What `dir` is in.
#[derive(Debug, PartialEq)]
pub enum Found {
    /// No `.git` in `dir` or above it: not a checkout.
    None,
    Checkout(GitDirs),
    /// Something this reader does not follow: ask git.
    AskGit,
}

/// Finds the checkout `dir` is in, without git.
pub fn find(dir: &Path) -> Found {
    const GIT_ENV: [&str; 4] = [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_INDEX_FILE",
    ];
    if GIT_ENV.iter().any(|v| std::env::var_os(v).is_some()) {
        return Found::AskGit;
    }
    let mut at = Some(dir);
    while let Some(d) = at {
        let dot = d.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(m) if m.is_dir() => {
                return Found::Checkout(GitDirs {
                    work_tree: d.to_path_buf(),
                    common: dot.clone(),
                    git_dir: dot,
                });
            }
            Ok(m) if m.is_file() => return linked(d, &dot).map_or(Found::AskGit, Found::Checkout),
            Ok(_) => return Found::AskGit,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => at = d.parent(),
            Err(_) => return Found::AskGit,
        }
    }
    Found::None
}

/// A `.git` file (`gitdir: PATH`): a linked worktree or a submodule.
fn linked(work_tree: &Path, dot: &Path) -> Option<GitDirs> {
    let text = std::fs::read_to_string(dot).ok()?;
    let rel = text.trim().strip_prefix("gitdir:")?.trim();
    let git_dir = work_tree.join(rel);
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => git_dir.join(c.trim()),
        Err(_) => git_dir.clone(),
    };
    Some(GitDirs {
        work_tree: work_tree.to_path_buf(),
        git_dir,
        common,
    })
}

/// The commit `HEAD` names (40 hex digits), `None` when it cannot be read
/// from the files (an unborn branch, a symbolic ref this reader does not
/// follow, a SHA-256 repository).
pub fn head(dirs: &GitDirs) -> Option<String> {
    let text = std::fs::read_to_string(dirs.git_dir.join("HEAD")).ok()?;
    let text = text.trim();
    let Some(name) = text.strip_prefix("ref:").map(str::trim) else {
        return is_sha1(text).then(|| text.to_string());
    };
    if !name.starts_with("refs/") || name.contains("..") {
        return None;
    }
    // A ref lives in the worktree's own dir only for per-worktree refs;
    // branches are in the common dir, loose first, then packed.
    for base in [&dirs.git_dir, &dirs.common] {
        if let Ok(v) = std::fs::read_to_string(base.join(name)) {
            let v = v.trim();
            return is_sha1(v).then(|| v.to_string());
        }
    }
    let packed = std::fs::read_to_string(dirs.common.join("packed-refs")).ok()?;
    packed.lines().find_map(|l| {
        let (sha, r) = l.split_once(' ')?;
        (r == name && is_sha1(sha)).then(|| sha.to_string())
    })
}

fn is_sha1(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The index file's identity: git replaces it (a new file renamed in
/// place) whenever it writes it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexStamp {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

/// The index file's stamp, and whether every tracked file is as the index
/// recorded it (git's "unchanged" test on `lstat`: mtime, ctime, size,
/// inode, and no entry as new as the index). `None` when the index cannot
/// be read this way (missing, version 4, SHA-256 entries, malformed).
pub fn index_state(dirs: &GitDirs) -> Option<(IndexStamp, bool)> {
    let path = dirs.git_dir.join("index");
    let meta = std::fs::metadata(&path).ok()?;
    let bytes = std::fs::read(&path).ok()?;
    let stamp = IndexStamp {
        ino: meta.ino(),
        size: meta.len(),
        mtime_ns: mtime_ns(&meta),
    };
    let entries = entries(&bytes)?;
    let index_mtime = mtime_ns(&meta);
    let unchanged = entries.iter().all(|e| {
        // Racily clean: written in the same instant as the index, so a
        // change within that instant would not show in the stat data.
        if e.mtime_ns >= index_mtime {
            return false;
        }
        match std::fs::symlink_metadata(dirs.work_tree.join(&e.path)) {
            Ok(m) => {
                mtime_ns(&m) == e.mtime_ns
                    && i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())
                        == e.ctime_ns
                    && m.size() as u32 == e.size
                    && m.ino() as u32 == e.ino
            }
            Err(_) => false,
        }
    });
    Some((stamp, unchanged))
}

/// One index entry's stat data (git keeps 32 bits of each).
#[derive(Debug, PartialEq)]
struct Entry {
    ctime_ns: i128,
    mtime_ns: i128,
    ino: u32,
    size: u32,
    path: String,
}

/// The entries of an index file, version 2 or 3 with SHA-1 object names
/// (`Documentation/gitformat-index.txt`). Gitlinks (submodules) and
/// entries past stage 0 make it `None`: git decides those.
fn entries(b: &[u8]) -> Option<Vec<Entry>> {
    let u32_at =
        |i: usize| -> Option<u32> { Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?)) };
    if b.get(0..4)? != b"DIRC" {
        return None;
    }
    let version = u32_at(4)?;
    if version != 2 && version != 3 {
        return None;
    }
    let count = u32_at(8)? as usize;
    let mut out = Vec::with_capacity(count.min(1 << 20));
    let mut i = 12;
    for _ in 0..count {
        let start = i;
        let ctime_ns = i128::from(u32_at(i)?) * 1_000_000_000 + i128::from(u32_at(i + 4)?);
        let mtime_ns = i128::from(u32_at(i + 8)?) * 1_000_000_000 + i128::from(u32_at(i + 12)?);
        let ino = u32_at(i + 20)?;
        let mode = u32_at(i + 24)?;
        let size = u32_at(i + 36)?;
        // 40 bytes of stat data, 20 of object name, 2 of flags.
        let flags = u16::from_be_bytes(b.get(i + 60..i + 62)?.try_into().ok()?);
        i += 62;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return None;
            }
            let extended = u16::from_be_bytes(b.get(i..i + 2)?.try_into().ok()?);
            // skip-worktree / intent-to-add: git decides.
            if extended != 0 {
                return None;
            }
            i += 2;
        }
        let stage = (flags >> 12) & 0x3;
        // A gitlink (a submodule's commit) or a conflict: git decides.
        if mode & 0o170000 == 0o160000 || stage != 0 {
            return None;
        }
        let nul = b.get(i..)?.iter().position(|&c| c == 0)?;
        let path = std::str::from_utf8(&b[i..i + nul]).ok()?.to_string();
        i += nul;
        // NUL-padded to a multiple of eight bytes, at least one NUL.
        let len = i - start;
        i = start + (len + 8) / 8 * 8;
        out.push(Entry {
            ctime_ns,
            mtime_ns,
            ino,
            size,
            path,
        });
    }
    Some(out)
}

/// What git said of a checkout, kept between runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Remembered {
    pub commit: String,
    /// The commit's own time (`git show -s --format=%cI`).
    pub date: Option<String>,
    /// The index git left when it said whether the tree was dirty.
    pub index: IndexStamp,
    pub dirty: bool,
}

pub fn recall(file: &Path) -> Option<Remembered> {
    serde_json::from_slice(&std::fs::read(file).ok()?).ok()
}

/// Keeps what git said (best effort).
pub fn keep(file: &Path, r: &Remembered) {
    if let Ok(text) = serde_json::to_vec_pretty(r) {
        kiln_engine::user_cache::replace(file, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_read_and_malformed_ones_are_refused() {
        // One entry "a" (version 2), as git writes it.
        let mut b = b"DIRC".to_vec();
        b.extend(2u32.to_be_bytes());
        b.extend(1u32.to_be_bytes());
        let stat: [u32; 10] = [5, 6, 7, 8, 0, 99, 0o100644, 0, 0, 3];
        for v in stat {
            b.extend(v.to_be_bytes());
        }
        b.extend([0u8; 20]);
        b.extend(1u16.to_be_bytes());
        b.extend(b"a");
        while b.len() % 8 != 4 || b.len() < 12 + 62 + 2 {
            b.push(0);
        }
        let e = entries(&b).unwrap();
        assert_eq!(
            e,
            [Entry {
                ctime_ns: 5_000_000_006,
                mtime_ns: 7_000_000_008,
                ino: 99,
                size: 3,
                path: "a".into()
            }]
        );
        // Truncated anywhere: no answer, no panic.
        for n in 0..b.len() {
            let _ = entries(&b[..n]);
        }
        assert_eq!(entries(&b[..70]), None);
        let mut v4 = b.clone();
        v4[7] = 4;
        assert_eq!(entries(&v4), None, "version 4 is left to git");
    }
}
