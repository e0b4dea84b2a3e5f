//! Build contexts: the files of the context directory that `.dockerignore`
//! keeps (the docker CLI's rules, from `kiln-dockerfile`), packed into the
//! tar the Engine API expects, plus the Dockerfile kiln actually sends.
//!
//! Must never: write into the context directory, follow a symbolic link
//! (a link is packed as a link), or let kiln's state directory (`.kiln/`)
//! into a context or a key.

use std::io::Write;
use std::path::Path;

use crate::error::EngineError;

/// Where kiln puts the Dockerfile it sends inside the context tar.
pub const DOCKERFILE_IN_TAR: &str = ".kiln/Dockerfile";

/// One file-system entry of a context, relative to its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `/`-separated path relative to the context root.
    pub path: String,
    pub kind: EntryKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink(String),
}

/// The name of kiln's state directory (`.kiln/`), excluded from every
/// build context.
pub const STATE_DIR: &str = ".kiln";

/// The entries the docker CLI would send for `dir`, honouring `.dockerignore`
/// (`dockerfile_rel`: the Dockerfile's path inside the context, which the CLI
/// always sends), without kiln's state directory.
pub fn list(dir: &Path, dockerfile_rel: Option<&str>) -> Result<Vec<Entry>, EngineError> {
    walk(dir, dockerignore(dir)?, dockerfile_rel, false, None)
}

/// The patterns of `dir`'s `.dockerignore` (none when it has none).
fn dockerignore(dir: &Path) -> Result<Vec<String>, EngineError> {
    use kiln_dockerfile::ignore::read_dockerignore;
    let ignore_path = dir.join(".dockerignore");
    match std::fs::read_to_string(&ignore_path) {
        Ok(text) => Ok(read_dockerignore(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(EngineError::io(ignore_path.display().to_string(), e)),
    }
}

/// [`list`], limited to `reach` ([`kiln_plan::key::reach`]: the paths a
/// key's sources can read, and the directories leading to them; `None`:
/// all of it) and walked once per process for a context, what it excludes
/// and that reach: keys of targets that read the same part of a context
/// share one listing, and none walks what its sources cannot reach (a
/// `.git` that nothing copies). The Dockerfile changes the listing only
/// when the patterns exclude it (the CLI sends it anyway), so it is part
/// of the memo's key only then. For keys only: a build sends what [`list`]
/// finds at its start. A file that appears later in the run is in the
/// build but not the key, which then differs in the next run: a rebuild,
/// never a stale skip.
pub fn list_for_keys(
    dir: &Path,
    dockerfile_rel: Option<&str>,
    reach: Option<&[String]>,
) -> Result<std::sync::Arc<Vec<Entry>>, EngineError> {
    // One slot per listing: a caller that comes while another walks the
    // same part of a context (a key gathered ahead of the run) waits for
    // that walk instead of making its own. A failed walk is not kept.
    type Slot = std::sync::Arc<std::sync::OnceLock<std::sync::Arc<Vec<Entry>>>>;
    type Listed = std::collections::HashMap<
        (
            std::path::PathBuf,
            Vec<String>,
            Option<String>,
            Option<Vec<String>>,
        ),
        Slot,
    >;
    static LISTED: std::sync::OnceLock<std::sync::Mutex<Listed>> = std::sync::OnceLock::new();
    let memo = LISTED.get_or_init(Default::default);
    let patterns = dockerignore(dir)?;
    let excluded = matcher_for(&patterns)
        .and_then(|m| kiln_dockerfile::ignore::excluded_dockerfile_by(&m, dir, dockerfile_rel));
    let k = (
        dir.to_path_buf(),
        patterns,
        excluded,
        reach.map(<[String]>::to_vec),
    );
    let slot: Slot = match memo.lock() {
        Ok(mut m) => m.entry(k.clone()).or_default().clone(),
        Err(_) => Default::default(),
    };
    let mut failed = None;
    let entries = slot.get_or_init(
        || match walk(dir, k.1.clone(), dockerfile_rel, true, reach) {
            Ok(e) => std::sync::Arc::new(e),
            Err(e) => {
                failed = Some(e);
                std::sync::Arc::new(Vec::new())
            }
        },
    );
    if let Some(e) = failed {
        if let Ok(mut m) = memo.lock() {
            m.remove(&k);
        }
        return Err(e);
    }
    Ok(entries.clone())
}

/// `patterns` (and kiln's state directory) compiled once per process: the
/// targets of a run that share a context each ask whether their Dockerfile
/// is excluded, and compiling a `.dockerignore`'s regular expressions cost
/// more than the rest of the question (a profile of the twin's no-op: 7 %
/// of its CPU, once per target). `None` when a pattern does not compile:
/// then nothing is excluded, as in the CLI (the walk reports the error).
fn matcher_for(
    patterns: &[String],
) -> Option<std::sync::Arc<kiln_dockerfile::ignore::PatternMatcher>> {
    type Compiled = Option<std::sync::Arc<kiln_dockerfile::ignore::PatternMatcher>>;
    static COMPILED: kiln_util::Memo<Vec<String>, Compiled> = kiln_util::Memo::new();
    COMPILED.get_or_insert_with(patterns, || {
        kiln_dockerfile::ignore::PatternMatcher::new(&with_state_dir(patterns.to_vec()))
            .ok()
            .map(std::sync::Arc::new)
    })
}

/// Every entry of `dir` but kiln's state directory, `.dockerignore` or
/// not: what a key covers of a local-directory named context, whose
/// ignore rules differ between buildx and BuildKit versions (a key that
/// covers more than the build reads can only rebuild more, never less).
pub fn list_all(dir: &Path) -> Result<Vec<Entry>, EngineError> {
    walk(dir, Vec::new(), None, true, None)
}

/// `patterns` and, last (so nothing in `.dockerignore` re-includes it),
/// kiln's own state directory: its record store, stat cache and dev engine
/// never enter a build context or a key (they change with every run, and
/// files come and go in them while a context is being sent).
fn with_state_dir(mut patterns: Vec<String>) -> Vec<String> {
    patterns.extend([STATE_DIR.to_string(), format!("**/{STATE_DIR}")]);
    patterns
}

/// The entries of `dir` that `patterns` leave in; `names_only` for a listing that
/// only keys read ([`kiln_dockerfile::ignore::WalkOptions::names_only`]: no `lstat`
/// and no readability check per entry; a build's own listing makes both).
fn walk(
    dir: &Path,
    patterns: Vec<String>,
    dockerfile_rel: Option<&str>,
    names_only: bool,
    reach: Option<&[String]>,
) -> Result<Vec<Entry>, EngineError> {
    use kiln_dockerfile::ignore::{EntryKind as K, WalkOptions, walk_context_with};
    let patterns = with_state_dir(patterns);
    let opts = WalkOptions {
        dockerfile: dockerfile_rel.map(String::from),
        names_only,
        reach: reach.map(<[String]>::to_vec),
    };
    let entries = walk_context_with(dir, &patterns, &opts)
        .map_err(|e| EngineError::Input(format!("build context {}: {e}", dir.display())))?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let kind = match e.kind {
                K::Dir => EntryKind::Dir,
                K::Symlink => EntryKind::Symlink(e.link_target.clone().unwrap_or_default()),
                // Hard links are sent as their own copy of the content.
                K::File | K::Hardlink => EntryKind::File,
                // Pipes and devices cannot be part of a build context.
                _ => return None,
            };
            Some(Entry { path: e.path, kind })
        })
        .collect())
}

/// Packs `entries` of `dir` and the Dockerfile text into a tar (uid/gid 0,
/// modes and modification times kept, sorted, as the docker CLI sends it).
pub fn tar(dir: &Path, entries: &[Entry], dockerfile: &str) -> Result<Vec<u8>, EngineError> {
    write_tar(Vec::new(), dir, entries, dockerfile)
}

/// Writes the context tar to `w` (see [`tar`]).
pub fn write_tar<W: Write>(
    w: W,
    dir: &Path,
    entries: &[Entry],
    dockerfile: &str,
) -> Result<W, EngineError> {
    let mut b = tar::Builder::new(w);
    b.follow_symlinks(false);
    let io =
        |p: &str, e: std::io::Error| EngineError::io(format!("adding {p} to the build context"), e);
    for e in entries {
        let full = dir.join(&e.path);
        let meta = std::fs::symlink_metadata(&full).map_err(|x| io(&e.path, x))?;
        let mut h = tar::Header::new_gnu();
        h.set_metadata(&meta);
        h.set_uid(0);
        h.set_gid(0);
        match &e.kind {
            EntryKind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, format!("{}/", e.path), std::io::empty())
                    .map_err(|x| io(&e.path, x))?;
            }
            EntryKind::Symlink(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, &e.path, target)
                    .map_err(|x| io(&e.path, x))?;
            }
            EntryKind::File => {
                let f = std::fs::File::open(&full).map_err(|x| io(&e.path, x))?;
                b.append_data(&mut h, &e.path, f)
                    .map_err(|x| io(&e.path, x))?;
            }
        }
    }
    let mut h = tar::Header::new_gnu();
    h.set_size(dockerfile.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, DOCKERFILE_IN_TAR, dockerfile.as_bytes())
        .map_err(|x| io(DOCKERFILE_IN_TAR, x))?;
    let mut out = b.into_inner().map_err(|x| io("the context tar", x))?;
    out.flush().map_err(|x| io("the context tar", x))?;
    Ok(out)
}

/// Sends written bytes to a channel in chunks, from a blocking thread.
struct ChunkWriter {
    tx: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

const CHUNK: usize = 256 << 10;

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the engine stopped reading the build context",
            )
        })
    }
}

/// The context tar as a stream of chunks, produced by a background thread,
/// so a large context is never held in memory at once.
pub fn tar_stream(
    dir: std::path::PathBuf,
    entries: Vec<Entry>,
    dockerfile: String,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    std::thread::spawn(move || {
        let w = ChunkWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        if let Err(e) = write_tar(w, &dir, &entries, &dockerfile) {
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streamed_tar_equals_the_buffered_one() {
        let dir = std::env::temp_dir().join(format!("kiln-ctx-stream-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("d/big"), vec![5u8; 3 * CHUNK + 17]).unwrap();
        std::fs::write(dir.join("small"), b"s").unwrap();
        let entries = list(&dir, None).unwrap();
        let whole = tar(&dir, &entries, "FROM scratch\n").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let streamed: Vec<u8> = rt.block_on(async {
            use futures_util::StreamExt;
            let mut out = Vec::new();
            let mut s = Box::pin(tar_stream(
                dir.clone(),
                entries.clone(),
                "FROM scratch\n".into(),
            ));
            while let Some(chunk) = s.next().await {
                out.extend_from_slice(&chunk.unwrap());
            }
            out
        });
        assert_eq!(streamed, whole);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tar_contains_kept_files_and_the_dockerfile() {
        let dir = std::env::temp_dir().join(format!("kiln-ctx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/a.txt"), "a").unwrap();
        std::fs::write(dir.join("junk.tmp"), "x").unwrap();
        std::fs::write(dir.join(".dockerignore"), "*.tmp\n").unwrap();
        let entries = list(&dir, None).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert!(names.contains(&"src/a.txt"), "{names:?}");
        assert!(!names.contains(&"junk.tmp"), "{names:?}");
        let t = tar(&dir, &entries, "FROM scratch\n").unwrap();
        let mut ar = tar::Archive::new(&t[..]);
        let paths: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(paths.contains(&DOCKERFILE_IN_TAR.to_string()), "{paths:?}");
        assert!(paths.contains(&"src/a.txt".to_string()), "{paths:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// kiln's state directory never enters a context, even when
    /// .dockerignore tries to re-include it (so `COPY . .` cannot make a
    /// key change with every run).
    #[test]
    fn kiln_state_is_never_in_a_context() {
        let dir = std::env::temp_dir().join(format!("kiln-ctx-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".kiln/store")).unwrap();
        std::fs::create_dir_all(dir.join("sub/.kiln")).unwrap();
        std::fs::write(dir.join(".kiln/store/r.json"), "{}").unwrap();
        std::fs::write(dir.join("sub/.kiln/x"), "x").unwrap();
        std::fs::write(dir.join("sub/kept"), "k").unwrap();
        std::fs::write(dir.join(".dockerignore"), "!.kiln\n").unwrap();
        let entries = list(&dir, None).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert!(names.contains(&"sub/kept"), "{names:?}");
        assert!(
            names.iter().all(|n| !n.split('/').any(|c| c == STATE_DIR)),
            "{names:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Targets of one context with their own Dockerfiles share one walk
    /// for their keys; a Dockerfile that `.dockerignore` excludes gets its
    /// own (the CLI sends it anyway), and only it lists that Dockerfile.
    #[test]
    fn keys_of_one_context_share_its_walk_unless_their_dockerfile_is_ignored() {
        let dir = std::env::temp_dir().join(format!("kiln-ctx-memo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("docker")).unwrap();
        for f in [
            "docker/Dockerfile.a",
            "docker/Dockerfile.b",
            "docker/Dockerfile.hidden",
        ] {
            std::fs::write(dir.join(f), "FROM scratch\n").unwrap();
        }
        std::fs::write(dir.join(".dockerignore"), "**/*.hidden\n").unwrap();
        let a = list_for_keys(&dir, Some("docker/Dockerfile.a"), None).unwrap();
        let b = list_for_keys(&dir, Some("docker/Dockerfile.b"), None).unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b), "one walk for both");
        let hidden = list_for_keys(&dir, Some("docker/Dockerfile.hidden"), None).unwrap();
        let has = |l: &[Entry], p: &str| l.iter().any(|e| e.path == p);
        assert!(has(&hidden, "docker/Dockerfile.hidden"));
        assert!(!has(&a, "docker/Dockerfile.hidden"));
        assert_eq!(
            *hidden,
            list(&dir, Some("docker/Dockerfile.hidden")).unwrap()
        );
        assert_eq!(*a, list(&dir, Some("docker/Dockerfile.a")).unwrap());
        // The patterns were compiled once for the three questions.
        let p = dockerignore(&dir).unwrap();
        let (m1, m2) = (matcher_for(&p).unwrap(), matcher_for(&p).unwrap());
        assert!(std::sync::Arc::ptr_eq(&m1, &m2), "one compiled matcher");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
