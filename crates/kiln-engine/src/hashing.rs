//! Content hashing of build-context files for content keys: blake3 over
//! each file's bytes, in parallel, streaming, with a stat cache so that an
//! unchanged file is never read again.
//!
//! A cache entry is trusted only when the file's size, modification time
//! (nanoseconds), change time, inode and mode are all unchanged; anything
//! else re-reads the file. The cache file is versioned (`stat-cache-v1`) and
//! written atomically (temporary file + rename); an unreadable or foreign
//! cache is ignored, never trusted.
//!
//! Must never: follow a symbolic link (a link is hashed by the path it
//! points to), change a file it hashes, or choose which files a key covers
//! (the caller passes the paths).

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::EngineError;

const CACHE_VERSION: &str = "stat-cache-v1";

/// What a file is, for hashing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// One hashed entry: what a content key records about a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHash {
    /// `/`-separated path relative to the root.
    pub path: String,
    pub kind: Kind,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    pub size: u64,
    /// `blake3:<hex>` of the content (files), of the link target (symlinks),
    /// or empty (directories).
    pub digest: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    mode: u32,
    digest: String,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata, digest: String) -> Stamp {
        Stamp {
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            ino: meta.ino(),
            mode: meta.mode(),
            digest,
        }
    }
    fn matches(&self, meta: &std::fs::Metadata) -> bool {
        let now = Stamp::of(meta, String::new());
        self.size == now.size
            && self.mtime_ns == now.mtime_ns
            && self.ctime_ns == now.ctime_ns
            && self.ino == now.ino
            && self.mode == now.mode
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    version: String,
    entries: HashMap<PathBuf, Stamp>,
}

/// The stat cache: absolute path → (stat fields, digest).
#[derive(Debug, Default)]
pub struct StatCache {
    entries: Mutex<HashMap<PathBuf, Stamp>>,
    dirty: std::sync::atomic::AtomicBool,
}

impl StatCache {
    /// Loads a cache file; a missing, unreadable or other-version file gives
    /// an empty cache.
    pub fn load(path: &Path) -> StatCache {
        let entries = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<CacheFile>(&b).ok())
            .filter(|c| c.version == CACHE_VERSION)
            .map(|c| c.entries)
            .unwrap_or_default();
        StatCache {
            entries: Mutex::new(entries),
            dirty: Default::default(),
        }
    }

    /// The cache file at `path`, loaded once per process: the keys a run
    /// gathers ahead of it and the run's own read and fill the same one.
    pub fn shared(path: &Path) -> std::sync::Arc<StatCache> {
        // Loaded under the lock: two callers at once share one cache.
        type Loaded = HashMap<PathBuf, std::sync::Arc<StatCache>>;
        static LOADED: Mutex<Option<Loaded>> = Mutex::new(None);
        match LOADED.lock() {
            Ok(mut m) => m
                .get_or_insert_with(Default::default)
                .entry(path.to_path_buf())
                .or_insert_with(|| std::sync::Arc::new(StatCache::load(path)))
                .clone(),
            Err(_) => std::sync::Arc::new(StatCache::load(path)),
        }
    }

    /// Writes the cache atomically if anything changed.
    pub fn save(&self, path: &Path) -> Result<(), EngineError> {
        if !self.dirty.load(Ordering::Relaxed) {
            return Ok(());
        }
        let entries = self.entries.lock().map(|e| e.clone()).unwrap_or_default();
        let file = CacheFile {
            version: CACHE_VERSION.into(),
            entries,
        };
        let bytes = serde_json::to_vec(&file)
            .map_err(|e| EngineError::Input(format!("encoding the stat cache: {e}")))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| EngineError::io(dir.display().to_string(), e))?;
        }
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(|e| EngineError::io(tmp.display().to_string(), e))?;
        std::fs::rename(&tmp, path).map_err(|e| EngineError::io(path.display().to_string(), e))
    }

    fn get(&self, p: &Path, meta: &std::fs::Metadata) -> Option<String> {
        let map = self.entries.lock().ok()?;
        map.get(p)
            .filter(|s| s.matches(meta))
            .map(|s| s.digest.clone())
    }

    fn put(&self, p: PathBuf, meta: &std::fs::Metadata, digest: &str) {
        if let Ok(mut map) = self.entries.lock() {
            map.insert(p, Stamp::of(meta, digest.to_string()));
            self.dirty.store(true, Ordering::Relaxed);
        }
    }
}

/// Counters of one hashing pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HashStats {
    pub files: u64,
    /// Files whose content was read (cache misses).
    pub read_files: u64,
    /// Bytes of content read.
    pub read_bytes: u64,
}

/// Below this much uncached content, hashing stays on the calling thread:
/// starting workers (each with its own read buffer and allocator heap)
/// costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 8 << 20;

/// Hashes `paths` (relative to `root`) with up to `threads` workers. The
/// result is in the order of `paths`.
///
/// A first pass on the calling thread answers directories, symlinks and
/// files the stat cache knows; only the rest is read, in parallel when it
/// is large. A no-op pass therefore starts no thread and reads nothing.
pub fn hash_paths(
    root: &Path,
    paths: &[String],
    cache: &StatCache,
    threads: usize,
) -> Result<(Vec<FileHash>, HashStats), EngineError> {
    let read_files = AtomicU64::new(0);
    let read_bytes = AtomicU64::new(0);
    let mut done: Vec<Option<FileHash>> = Vec::with_capacity(paths.len());
    let mut misses: Vec<usize> = Vec::new();
    let mut miss_bytes = 0u64;
    for (i, rel) in paths.iter().enumerate() {
        match known(root, rel, cache)? {
            Known::Done(h) => done.push(Some(h)),
            Known::Read(size) => {
                done.push(None);
                misses.push(i);
                miss_bytes += size;
            }
        }
    }
    let threads = threads.clamp(1, 64).min(misses.len().max(1));
    if misses.is_empty() {
        // Everything known: no buffer, no thread.
    } else if threads == 1 || miss_bytes < PARALLEL_MIN_BYTES {
        let mut buf = vec![0u8; 256 << 10];
        for &i in &misses {
            done[i] = Some(hash_one(
                root,
                &paths[i],
                cache,
                &mut buf,
                &read_files,
                &read_bytes,
            )?);
        }
    } else {
        let next = AtomicU64::new(0);
        let results: Vec<Mutex<Option<Result<FileHash, EngineError>>>> =
            misses.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut buf = vec![0u8; 1 << 20];
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(&i) = misses.get(k) else { break };
                        let r =
                            hash_one(root, &paths[i], cache, &mut buf, &read_files, &read_bytes);
                        if let Ok(mut slot) = results[k].lock() {
                            *slot = Some(r);
                        }
                    }
                });
            }
        });
        for (slot, &i) in results.into_iter().zip(&misses) {
            match slot.into_inner().ok().flatten() {
                Some(Ok(h)) => done[i] = Some(h),
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(EngineError::Input(format!(
                        "hashing {} did not finish",
                        paths[i]
                    )));
                }
            }
        }
    }
    let out = done
        .into_iter()
        .zip(paths)
        .map(|(h, rel)| {
            h.ok_or_else(|| EngineError::Input(format!("hashing {rel} did not finish")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stats = HashStats {
        files: paths.len() as u64,
        read_files: read_files.into_inner(),
        read_bytes: read_bytes.into_inner(),
    };
    Ok((out, stats))
}

/// What the first pass knows about a path.
enum Known {
    Done(FileHash),
    /// A regular file the stat cache does not know: its size.
    Read(u64),
}

fn known(root: &Path, rel: &str, cache: &StatCache) -> Result<Known, EngineError> {
    let full = root.join(rel);
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|e| EngineError::io(format!("hashing {}", full.display()), e))?;
    let ft = meta.file_type();
    if ft.is_dir() || ft.is_symlink() {
        let mut none = [0u8; 0];
        let zero = AtomicU64::new(0);
        return hash_one(root, rel, cache, &mut none, &zero, &zero).map(Known::Done);
    }
    match cache.get(&full, &meta) {
        Some(d) => Ok(Known::Done(FileHash {
            path: rel.to_string(),
            kind: Kind::File,
            mode: meta.mode() & 0o7777,
            size: meta.len(),
            digest: d,
        })),
        None => Ok(Known::Read(meta.len())),
    }
}

fn hash_one(
    root: &Path,
    rel: &str,
    cache: &StatCache,
    buf: &mut [u8],
    read_files: &AtomicU64,
    read_bytes: &AtomicU64,
) -> Result<FileHash, EngineError> {
    let full = root.join(rel);
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|e| EngineError::io(format!("hashing {}", full.display()), e))?;
    let mode = meta.mode() & 0o7777;
    let ft = meta.file_type();
    if ft.is_dir() {
        return Ok(FileHash {
            path: rel.to_string(),
            kind: Kind::Dir,
            mode,
            size: 0,
            digest: String::new(),
        });
    }
    if ft.is_symlink() {
        let target = std::fs::read_link(&full)
            .map_err(|e| EngineError::io(format!("hashing {}", full.display()), e))?;
        let digest = format!(
            "blake3:{}",
            blake3::hash(target.as_os_str().as_encoded_bytes()).to_hex()
        );
        return Ok(FileHash {
            path: rel.to_string(),
            kind: Kind::Symlink,
            mode,
            size: 0,
            digest,
        });
    }
    if let Some(d) = cache.get(&full, &meta) {
        return Ok(FileHash {
            path: rel.to_string(),
            kind: Kind::File,
            mode,
            size: meta.len(),
            digest: d,
        });
    }
    let mut f = std::fs::File::open(&full)
        .map_err(|e| EngineError::io(format!("hashing {}", full.display()), e))?;
    let mut h = blake3::Hasher::new();
    let mut n = 0u64;
    loop {
        let k = f
            .read(buf)
            .map_err(|e| EngineError::io(format!("hashing {}", full.display()), e))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    read_files.fetch_add(1, Ordering::Relaxed);
    read_bytes.fetch_add(n, Ordering::Relaxed);
    let digest = format!("blake3:{}", h.finalize().to_hex());
    // A file modified while being read must not enter the cache with a stale digest.
    if let Ok(after) = std::fs::symlink_metadata(&full)
        && Stamp::of(&after, String::new()).matches(&meta)
    {
        cache.put(full, &meta, &digest);
    }
    Ok(FileHash {
        path: rel.to_string(),
        kind: Kind::File,
        mode,
        size: n,
        digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "kiln-hash-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn digests_modes_and_the_cache() {
        let d = dir();
        std::fs::write(d.join("a"), b"hello").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/b"), vec![7u8; 3 << 20]).unwrap();
        std::os::unix::fs::symlink("a", d.join("link")).unwrap();
        let paths: Vec<String> = ["a", "sub", "sub/b", "link"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let cache = StatCache::default();
        let (h, st) = hash_paths(&d, &paths, &cache, 2).unwrap();
        assert_eq!(
            h[0].digest,
            format!("blake3:{}", blake3::hash(b"hello").to_hex())
        );
        assert_eq!(h[1].kind, Kind::Dir);
        assert_eq!(h[2].size, 3 << 20);
        assert_eq!(h[3].kind, Kind::Symlink);
        assert_eq!(st.read_files, 2);
        // Second pass: nothing is read.
        let (h2, st2) = hash_paths(&d, &paths, &cache, 2).unwrap();
        assert_eq!(h, h2);
        assert_eq!(st2.read_bytes, 0);
        // A change (even with the same size) is seen.
        std::fs::write(d.join("a"), b"HELLO").unwrap();
        let (h3, st3) = hash_paths(&d, &paths, &cache, 2).unwrap();
        assert_ne!(h3[0].digest, h[0].digest);
        assert_eq!(st3.read_files, 1);
        // The cache survives a save/load round trip, and a foreign file is ignored.
        let cf = d.join("cache/stat.json");
        cache.save(&cf).unwrap();
        let loaded = StatCache::load(&cf);
        let (_, st4) = hash_paths(&d, &paths, &loaded, 2).unwrap();
        assert_eq!(st4.read_bytes, 0);
        std::fs::write(&cf, b"{\"version\":\"other\",\"entries\":{}}").unwrap();
        let (_, st5) = hash_paths(&d, &paths, &StatCache::load(&cf), 2).unwrap();
        assert_eq!(st5.read_files, 2);
        // Mode changes are part of the result.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("sub/b"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (h6, _) = hash_paths(&d, &paths, &cache, 1).unwrap();
        assert_eq!(h6[2].mode, 0o755);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn missing_files_are_errors_naming_the_path() {
        let d = dir();
        let e = hash_paths(&d, &["nope".to_string()], &StatCache::default(), 1).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
