//! The build context as the docker CLI sends it: a port of the walk in
//! `archive.TarWithOptions` (moby `pkg/archive`, now `github.com/moby/go-archive`) with
//! the CLI's handling of the Dockerfile and `.dockerignore`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::IgnoreError;
use super::gopath;
use super::matcher::{MatchInfo, PatternMatcher, matches};

/// One entry of the build context, as the docker CLI would put it in the tar it uploads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextEntry {
    /// The path relative to the context root, `/`-separated, without a trailing `/`.
    pub path: String,
    /// What the entry is.
    pub kind: EntryKind,
    /// Permission bits, with setuid, setgid and sticky (`st_mode & 0o7777`).
    pub mode: u32,
    /// The size in bytes of a regular file; 0 for everything else (hard links included,
    /// as in tar).
    pub size: u64,
    /// A symlink's target, verbatim (never followed); for a [`EntryKind::Hardlink`], the
    /// path of the first entry with the same inode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

/// The kind of a [`ContextEntry`]. Sockets are never part of a context (tar cannot hold
/// them; the CLI skips them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A further name of a file already listed (same device and inode).
    Hardlink,
    /// A named pipe.
    Fifo,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

/// Options for [`walk_context_with`].
#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    /// The Dockerfile's path relative to the context root (`/`-separated), as given with
    /// `-f`. `None` means the CLI's default: `Dockerfile`, or `dockerfile` when only that
    /// exists, with a symlink resolved to its target inside the context.
    pub dockerfile: Option<String>,
    /// Names and kinds only: what a content key needs of a listing. The kind comes from
    /// the directory entry itself (`d_type`; `lstat` only where the file system does not
    /// say), so the walk makes no `lstat` per entry, opens no file to check it can be
    /// read (a build's own walk does), and does not tell hard links apart (each is
    /// listed as a [`EntryKind::File`]); `mode` and `size` are 0. The same entries are
    /// listed, in the same order, as without it.
    pub names_only: bool,
    /// Only these paths (`/`-separated, relative to the root), what is below
    /// them and the directories that lead to them: what a content key reads
    /// when it knows which paths its sources can reach. Everything else is
    /// neither listed nor walked into. `None`: everything.
    pub reach: Option<Vec<String>>,
}

/// List what `docker build` would send for the context directory `root`, given the
/// `.dockerignore` patterns (from [`read_dockerignore`](super::read_dockerignore)) and
/// the default Dockerfile. See [`walk_context_with`].
///
/// # Errors
///
/// As [`walk_context_with`].
pub fn walk_context<S: AsRef<str>>(
    root: &Path,
    patterns: &[S],
) -> Result<Vec<ContextEntry>, IgnoreError> {
    walk_context_with(root, patterns, &WalkOptions::default())
}

/// List what `docker build` would send for the context directory `root`.
///
/// The semantics are the docker CLI's, ported from its legacy-builder path
/// (`build.TrimBuildFilesFromExcludes` then `archive.TarWithOptions`):
///
/// - the Dockerfile and `.dockerignore` are re-included by appending `!Dockerfile` and
///   `!.dockerignore` when the patterns exclude them
///   ([`trim_build_files_from_excludes`]);
/// - entries are visited depth first, each directory's names in byte order (so the list
///   is sorted by path, component by component), and tested with
///   [`PatternMatcher::matches_using_parent_results`];
/// - an excluded file is left out; an excluded directory is left out and *pruned* (its
///   contents are never looked at) unless some exclusion pattern's text, plus `/`, starts
///   with the directory's path plus `/`: then the walk goes on below it, and children the
///   patterns re-include are listed while the directory entry itself is not. So `**` then
///   `!src/**/*.rs` keeps `src/main.rs` but not `src/lib/mod.rs`: `src/lib/` is pruned,
///   because `src/**/*.rs` does not start with `src/lib/`;
/// - symlinks are listed with their target and never followed; sockets are skipped.
///
/// # Errors
///
/// [`IgnoreError::NotADirectory`] when `root` is not a directory; the pattern errors of
/// [`PatternMatcher::new`] and its match methods; [`IgnoreError::Io`] naming the path
/// when a directory the walk must read, or a regular file it would send, cannot be read
/// (the CLI checks readability up front too); [`IgnoreError::NonUtf8Path`] for a name or
/// symlink target that is not UTF-8.
pub fn walk_context_with<S: AsRef<str>>(
    root: &Path,
    patterns: &[S],
    options: &WalkOptions,
) -> Result<Vec<ContextEntry>, IgnoreError> {
    let meta = fs::metadata(root).map_err(|e| io_error(root, e))?;
    if !meta.is_dir() {
        return Err(IgnoreError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    // The CLI validates the user's patterns before adding its own.
    PatternMatcher::new(patterns)?;
    let patterns: Vec<String> = patterns.iter().map(|p| p.as_ref().to_owned()).collect();
    let dockerfile = match &options.dockerfile {
        Some(path) => Some(gopath::clean(path)),
        None => default_dockerfile(root),
    };
    let excludes = trim_build_files_from_excludes(&patterns, dockerfile.as_deref());
    let mut walker = Walker {
        matcher: PatternMatcher::new(&excludes)?,
        out: Vec::new(),
        inodes: HashMap::new(),
        names_only: options.names_only,
        reach: options.reach.clone(),
    };
    walker.walk_dir(root, "", &MatchInfo::default())?;
    Ok(walker.out)
}

/// The Dockerfile the CLI would send for a walk of `root` (`dockerfile` as in
/// [`WalkOptions`]), cleaned, when `patterns` exclude it, and `None` when they do not:
/// the only way the Dockerfile changes what [`walk_context_with`] finds. Two walks of the
/// same root with the same patterns and the same answer here find the same entries.
pub fn excluded_dockerfile<S: AsRef<str>>(
    root: &Path,
    patterns: &[S],
    dockerfile: Option<&str>,
) -> Option<String> {
    // A pattern that does not compile excludes nothing, as in the CLI.
    let matcher = PatternMatcher::new(patterns).ok()?;
    excluded_dockerfile_by(&matcher, root, dockerfile)
}

/// [`excluded_dockerfile`] with the patterns compiled once by the caller
/// (`PatternMatcher::new` of the same patterns): the targets of a bake file
/// that share a context ask it once each, and compiling the regular
/// expressions of a `.dockerignore` is most of the cost.
pub fn excluded_dockerfile_by(
    matcher: &PatternMatcher,
    root: &Path,
    dockerfile: Option<&str>,
) -> Option<String> {
    let dockerfile = match dockerfile {
        Some(path) => gopath::clean(path),
        None => default_dockerfile(root)?,
    };
    // moby's free `Matches`: the file cleaned, and `.` itself never excluded.
    let file = gopath::clean(&dockerfile);
    if file == "." {
        return None;
    }
    matcher
        .matches(&file)
        .unwrap_or(false)
        .then_some(dockerfile)
}

/// The docker CLI's `TrimBuildFilesFromExcludes`: append `!.dockerignore` and
/// `!DOCKERFILE` when the patterns exclude them (tested with moby's deprecated
/// [`matches`](super::matches)), so the daemon receives both. A pattern error counts as
/// "not excluded", as in the CLI.
pub fn trim_build_files_from_excludes(
    excludes: &[String],
    dockerfile: Option<&str>,
) -> Vec<String> {
    let mut out = excludes.to_vec();
    if matches(".dockerignore", &out).unwrap_or(false) {
        out.push("!.dockerignore".to_owned());
    }
    if let Some(dockerfile) = dockerfile
        && matches(dockerfile, &out).unwrap_or(false)
    {
        out.push(format!("!{dockerfile}"));
    }
    out
}

/// The CLI's default Dockerfile: `Dockerfile`, else `dockerfile` if only that exists,
/// symlinks resolved. `None` when it resolves outside the context (the CLI then sends it
/// separately) or cannot be resolved (the CLI then fails; the walk still lists the rest).
fn default_dockerfile(root: &Path) -> Option<String> {
    let mut name = "Dockerfile";
    if fs::symlink_metadata(root.join(name)).is_err()
        && fs::symlink_metadata(root.join("dockerfile")).is_ok()
    {
        name = "dockerfile";
    }
    let path = root.join(name);
    let meta = fs::symlink_metadata(&path).ok()?;
    if !meta.file_type().is_symlink() {
        return Some(name.to_owned());
    }
    let target = fs::canonicalize(&path).ok()?;
    let root = fs::canonicalize(root).ok()?;
    let rel = target.strip_prefix(&root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

struct Walker {
    matcher: PatternMatcher,
    out: Vec<ContextEntry>,
    /// (device, inode) of multiply-linked non-directories already listed.
    inodes: HashMap<(u64, u64), String>,
    /// [`WalkOptions::names_only`].
    names_only: bool,
    /// [`WalkOptions::reach`].
    reach: Option<Vec<String>>,
}

/// Whether the `/`-separated `path` is `dir` or below it.
fn at_or_below(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl Walker {
    fn walk_dir(&mut self, dir: &Path, rel: &str, parent: &MatchInfo) -> Result<(), IgnoreError> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
            let entry = entry.map_err(|e| io_error(dir, e))?;
            // The directory entry's own type, when only names and kinds are wanted.
            let kind = if self.names_only {
                Some(entry.file_type().map_err(|e| io_error(&entry.path(), e))?)
            } else {
                None
            };
            names.push((entry.file_name(), kind));
        }
        // Go's os.ReadDir sorts by name, byte-wise; so does OsString on Unix.
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let path = dir.join(&name);
            let Some(name) = name.to_str() else {
                return Err(IgnoreError::NonUtf8Path { path });
            };
            let child = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            if let Some(reach) = &self.reach
                && !reach
                    .iter()
                    .any(|p| at_or_below(&child, p) || at_or_below(p, &child))
            {
                continue;
            }
            let meta = match kind {
                Some(ft) => Listed::Kind(ft),
                None => Listed::Meta(fs::symlink_metadata(&path).map_err(|e| io_error(&path, e))?),
            };
            let is_dir = meta.file_type().is_dir();
            let (skip, info) = self.matcher.matches_using_parent_results(&child, parent)?;
            if skip {
                if is_dir && self.must_descend(&child) {
                    self.walk_dir(&path, &child, &info)?;
                }
                continue;
            }
            self.emit(&path, child.clone(), &meta)?;
            if is_dir {
                self.walk_dir(&path, &child, &info)?;
            }
        }
        Ok(())
    }

    /// Whether an excluded directory must still be walked: some exclusion pattern could
    /// re-include something below it (moby's prefix test on the pattern text).
    fn must_descend(&self, dir: &str) -> bool {
        if !self.matcher.exclusions() {
            return false;
        }
        let dir_slash = format!("{dir}/");
        self.matcher
            .patterns()
            .iter()
            .filter(|p| p.is_exclusion())
            .any(|p| format!("{}/", p.as_str()).starts_with(&dir_slash))
    }

    fn emit(&mut self, path: &Path, rel: String, listed: &Listed) -> Result<(), IgnoreError> {
        let ft = listed.file_type();
        let (mut kind, mut link_target) = if ft.is_dir() {
            (EntryKind::Dir, None)
        } else if ft.is_symlink() {
            let target = fs::read_link(path).map_err(|e| io_error(path, e))?;
            let Some(target) = target.to_str() else {
                return Err(IgnoreError::NonUtf8Path {
                    path: path.to_path_buf(),
                });
            };
            (EntryKind::Symlink, Some(target.to_owned()))
        } else if ft.is_file() {
            (EntryKind::File, None)
        } else {
            match special_kind(&ft) {
                Some(kind) => (kind, None),
                None => return Ok(()), // a socket
            }
        };
        let Listed::Meta(meta) = listed else {
            self.out.push(ContextEntry {
                path: rel,
                kind,
                mode: 0,
                size: 0,
                link_target,
            });
            return Ok(());
        };
        let mut size = if kind == EntryKind::File {
            meta.len()
        } else {
            0
        };
        if let Some(key) = hardlink_key(meta) {
            if let Some(first) = self.inodes.get(&key) {
                kind = EntryKind::Hardlink;
                link_target = Some(first.clone());
                size = 0;
            } else {
                self.inodes.insert(key, rel.clone());
            }
        }
        if kind == EntryKind::File {
            fs::File::open(path).map_err(|e| io_error(path, e))?;
        }
        self.out.push(ContextEntry {
            path: rel,
            kind,
            mode: mode_bits(meta),
            size,
            link_target,
        });
        Ok(())
    }
}

/// What the walk knows of an entry: its full `lstat`, or only its kind.
enum Listed {
    Meta(fs::Metadata),
    Kind(fs::FileType),
}

impl Listed {
    fn file_type(&self) -> fs::FileType {
        match self {
            Listed::Meta(m) => m.file_type(),
            Listed::Kind(k) => *k,
        }
    }
}

fn io_error(path: &Path, source: std::io::Error) -> IgnoreError {
    IgnoreError::Io {
        path: PathBuf::from(path),
        source,
    }
}

#[cfg(unix)]
fn special_kind(ft: &fs::FileType) -> Option<EntryKind> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        Some(EntryKind::Fifo)
    } else if ft.is_char_device() {
        Some(EntryKind::CharDevice)
    } else if ft.is_block_device() {
        Some(EntryKind::BlockDevice)
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_kind(_: &fs::FileType) -> Option<EntryKind> {
    None
}

#[cfg(unix)]
fn mode_bits(meta: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_bits(meta: &fs::Metadata) -> u32 {
    match (meta.is_dir(), meta.permissions().readonly()) {
        (true, _) => 0o755,
        (false, true) => 0o444,
        (false, false) => 0o644,
    }
}

#[cfg(unix)]
fn hardlink_key(meta: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    (!meta.is_dir() && meta.nlink() > 1).then(|| (meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn hardlink_key(_: &fs::Metadata) -> Option<(u64, u64)> {
    None
}
