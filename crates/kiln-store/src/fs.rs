//! The local filesystem backend, the embedded default (under the project's
//! `.kiln/store` or a configured directory). The layout and protocol are
//! [`crate::objects`]; an object is a file under the root.
//!
//! Writes go to a temporary file in the same directory and then appear
//! atomically: `link(2)` for create-if-absent (fails if the name exists),
//! `rename(2)` to replace. A file that exists but cannot be read
//! (permissions, a directory in its place) is a miss naming the file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::StoreError;
use crate::objects::{Objects, Read};

/// A record store in a local directory.
#[derive(Clone, Debug)]
pub struct FsStore {
    root: PathBuf,
}

impl FsStore {
    pub fn new(root: impl Into<PathBuf>) -> FsStore {
        FsStore { root: root.into() }
    }

    fn unavailable(&self, what: &str, e: std::io::Error) -> StoreError {
        StoreError::Unavailable {
            location: self.root.display().to_string(),
            detail: format!("{what}: {e}"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Writes `bytes` to a unique temporary file next to `path`.
    fn temp(&self, path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(|e| self.unavailable("creating a directory", e))?;
        sweep(dir);
        // Writers in other containers sharing the directory may have the
        // same pid: the name also has the time, and is created only if
        // absent, so two writers never write one temporary file.
        let (tmp, mut f) = loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let tmp = dir.join(format!(
                ".tmp-{}-{nanos:x}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            match std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&tmp)
            {
                Ok(f) => break (tmp, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(self.unavailable("writing", e)),
            }
        };
        f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.unavailable("writing", e)
        })?;
        Ok(tmp)
    }
}

/// Makes the directory entry of `path` durable (the file's content was
/// synced before it was published): an acknowledged record survives a
/// power loss. Best effort: a file system that cannot sync a directory
/// loses nothing else by it.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
}

/// How old a temporary file must be before a writer in its directory
/// removes it: one a killed writer left (a live write takes milliseconds).
const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the `.tmp-*` files a killed writer left in `dir` (best effort;
/// they are never read either way).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(".tmp-")
            && e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TEMP);
        if stale {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Objects for FsStore {
    fn shown(&self) -> String {
        self.root.display().to_string()
    }

    fn on_local_disk(&self) -> bool {
        true
    }

    fn read(&self, name: &str) -> Result<Read, StoreError> {
        let path = self.path(name);
        match std::fs::read(&path) {
            Ok(b) => Ok(Read::Found(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Read::Missing),
            Err(e) => Ok(Read::Unreadable(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    fn create(&self, name: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let path = self.path(name);
        let tmp = self.temp(&path, bytes)?;
        let r = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match r {
            Ok(()) => {
                sync_dir(&path);
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(self.unavailable(&format!("publishing {}", path.display()), e)),
        }
    }

    fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path(name);
        let tmp = self.temp(&path, bytes)?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.unavailable(&format!("publishing {}", path.display()), e)
        })?;
        sync_dir(&path);
        Ok(())
    }

    fn exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.path(name).exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects;
    use crate::{FORMAT, Lookup, PutOutcome, Record, RecordStore, digest, payload_bytes};
    use std::sync::Arc;

    fn dir() -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "kiln-store-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn record(key: &str, inputs: &serde_json::Value) -> Record {
        Record {
            format: FORMAT.into(),
            key: key.into(),
            target: "app".into(),
            image_id: "sha256:abc".into(),
            image_ref: Some("kiln.local/app:abc".into()),
            digest: None,
            tags: vec!["r/app:1".into()],
            platform: Some("linux/amd64".into()),
            built_at: "2026-11-30T00:00:00Z".into(),
            node: "local".into(),
            duration_s: 1.5,
            steps_total: 3,
            steps_cached: 1,
            inputs_digest: digest(&payload_bytes(inputs)),
            check: None,
            signature: None,
        }
    }

    #[test]
    fn put_then_get_round_trips() {
        let s = FsStore::new(dir());
        let inputs = serde_json::json!({"files": {"a": "blake3:1"}});
        assert_eq!(s.get("k1:aa01").unwrap(), Lookup::Miss);
        assert_eq!(
            s.put(&record("k1:aa01", &inputs), &inputs, false).unwrap(),
            PutOutcome::Written
        );
        let Lookup::Hit(e) = s.get("k1:aa01").unwrap() else {
            panic!("hit expected")
        };
        assert_eq!(e.inputs, inputs);
        assert_eq!(e.record.steps_total, 3);
        let Lookup::Hit(l) = s.latest("app").unwrap() else {
            panic!("latest expected")
        };
        assert_eq!(l.record.key, "k1:aa01");
        // Create-if-absent: a second writer does not overwrite; force does.
        let mut other = record("k1:aa01", &inputs);
        other.image_id = "sha256:other".into();
        assert_eq!(
            s.put(&other, &inputs, false).unwrap(),
            PutOutcome::AlreadyPresent
        );
        let Lookup::Hit(e) = s.get("k1:aa01").unwrap() else {
            panic!()
        };
        assert_eq!(e.record.image_id, "sha256:abc");
        assert_eq!(s.put(&other, &inputs, true).unwrap(), PutOutcome::Replaced);
        let Lookup::Hit(e) = s.get("k1:aa01").unwrap() else {
            panic!()
        };
        assert_eq!(e.record.image_id, "sha256:other");
    }

    #[test]
    fn corruption_is_a_miss_with_a_reason() {
        let root = dir();
        let s = FsStore::new(&root);
        let inputs = serde_json::json!({"x": 1});
        s.put(&record("k1:bb02", &inputs), &inputs, false).unwrap();
        // A damaged payload.
        let blob = s.path(&objects::blob_name(&digest(&payload_bytes(&inputs))));
        std::fs::write(&blob, b"{\"x\": 2}").unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("digest")));
        // A missing payload.
        std::fs::remove_file(&blob).unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("missing")));
        // A truncated record.
        std::fs::write(s.path(&objects::record_name("k1:bb02")), b"{\"format\": ").unwrap();
        assert!(
            matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("not readable"))
        );
        // A record of another format version.
        let mut r = record("k1:bb02", &inputs);
        r.format = "kiln-record-v0".into();
        std::fs::write(
            s.path(&objects::record_name("k1:bb02")),
            serde_json::to_vec(&r).unwrap(),
        )
        .unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("format")));
        // A forced write repairs it.
        s.put(&record("k1:bb02", &inputs), &inputs, true).unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Hit(_)));
        // A damaged payload under an intact record is repaired by force too.
        std::fs::write(&blob, b"{\"x\": 3}").unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(_)));
        s.put(&record("k1:bb02", &inputs), &inputs, true).unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Hit(_)));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_repeated_put_writes_nothing() {
        let root = dir();
        let s = FsStore::new(&root);
        let inputs = serde_json::json!({"x": 1});
        let r = record("k1:cc03", &inputs);
        assert_eq!(s.put(&r, &inputs, false).unwrap(), PutOutcome::Written);
        let stamp = |p: &Path| {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(p).unwrap();
            (m.ino(), m.mtime_nsec(), m.mtime())
        };
        let files = walk(&root);
        let before: Vec<_> = files.iter().map(|p| stamp(p)).collect();
        assert_eq!(
            s.put(&r, &inputs, false).unwrap(),
            PutOutcome::AlreadyPresent
        );
        let after: Vec<_> = files.iter().map(|p| stamp(p)).collect();
        assert_eq!(before, after, "nothing rewritten");
        assert_eq!(walk(&root).len(), files.len(), "nothing added");
        // Another key for the target moves the pointer; going back moves it back.
        let r2 = record("k1:cc04", &inputs);
        s.put(&r2, &inputs, false).unwrap();
        assert!(matches!(s.latest("app").unwrap(), Lookup::Hit(e) if e.record.key == "k1:cc04"));
        s.put(&r, &inputs, false).unwrap();
        assert!(matches!(s.latest("app").unwrap(), Lookup::Hit(e) if e.record.key == "k1:cc03"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn interrupted_writes_are_never_read_and_inputs_must_match() {
        let root = dir();
        let s = FsStore::new(&root);
        let inputs = serde_json::json!({"y": true});
        // A leftover temporary file where a record would be.
        let p = s.path(&objects::record_name("k1:cc03"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p.parent().unwrap().join(".tmp-1-1"), b"garbage").unwrap();
        assert_eq!(s.get("k1:cc03").unwrap(), Lookup::Miss);
        // An old one is swept by the next writer in that directory; a fresh
        // one (a writer at work) is left alone.
        let old = p.parent().unwrap().join(".tmp-2-2");
        std::fs::write(&old, b"garbage").unwrap();
        let f = std::fs::File::options().write(true).open(&old).unwrap();
        f.set_modified(std::time::SystemTime::now() - 2 * STALE_TEMP)
            .unwrap();
        s.put(&record("k1:cc03", &inputs), &inputs, false).unwrap();
        assert!(!old.exists(), "a stale temporary file is swept");
        assert!(p.parent().unwrap().join(".tmp-1-1").exists());
        let mut bad = record("k1:cc03", &inputs);
        bad.inputs_digest = "blake3:00".into();
        assert!(matches!(
            s.put(&bad, &inputs, false),
            Err(StoreError::Invalid(_))
        ));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn concurrent_writers_agree_on_one_record() {
        let root = dir();
        let s = Arc::new(FsStore::new(&root));
        let inputs = serde_json::json!({"z": [1, 2, 3]});
        let mut handles = Vec::new();
        for i in 0..16 {
            let s = s.clone();
            let inputs = inputs.clone();
            handles.push(std::thread::spawn(move || {
                let mut r = record("k1:dd04", &inputs);
                r.image_id = format!("sha256:{i}");
                s.put(&r, &inputs, false).unwrap()
            }));
        }
        let outcomes: Vec<PutOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| **o == PutOutcome::Written)
                .count(),
            1,
            "{outcomes:?}"
        );
        assert!(matches!(s.get("k1:dd04").unwrap(), Lookup::Hit(_)));
        // No temporary files are left behind.
        let leftovers = walk(&root)
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".tmp-")
            })
            .count();
        assert_eq!(leftovers, 0);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn unwritable_store_is_unavailable() {
        let s = FsStore::new("/proc/kiln-cannot-write-here");
        let inputs = serde_json::json!({});
        assert!(matches!(
            s.put(&record("k1:ee05", &inputs), &inputs, false),
            Err(StoreError::Unavailable { .. })
        ));
        assert!(matches!(
            s.probe_write(),
            Err(StoreError::Unavailable { ref detail, .. }) if detail.contains("probe-v1")
                || detail.contains("creating a directory")
        ));
        assert!(FsStore::new(dir()).probe_write().is_ok());
    }

    /// A record, payload or pointer that is there but cannot be read is a
    /// miss that names the file, never an error that stops a build.
    #[test]
    fn unreadable_files_are_a_miss_naming_the_file() {
        let root = dir();
        let s = FsStore::new(&root);
        let inputs = serde_json::json!({"u": 1});
        let r = record("k1:ff06", &inputs);
        s.put(&r, &inputs, false).unwrap();
        let blob = s.path(&objects::blob_name(&r.inputs_digest));
        std::fs::remove_file(&blob).unwrap();
        std::fs::create_dir(&blob).unwrap();
        match s.get("k1:ff06").unwrap() {
            Lookup::Corrupt(why) => {
                assert!(why.contains(&blob.display().to_string()), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let rec = s.path(&objects::record_name("k1:ff06"));
        std::fs::remove_file(&rec).unwrap();
        std::fs::create_dir(&rec).unwrap();
        assert!(
            matches!(s.get("k1:ff06").unwrap(), Lookup::Corrupt(why) if why.contains(&rec.display().to_string()))
        );
        // The pointer names the key, whose record is unreadable: damage,
        // not "never built".
        assert!(matches!(s.latest("app").unwrap(), Lookup::Corrupt(_)));
        // A garbled pointer is damage too.
        std::fs::write(s.path(&objects::target_name("app")), b"\xff garbage").unwrap();
        assert!(
            matches!(s.latest("app").unwrap(), Lookup::Corrupt(why) if why.contains("does not hold a key"))
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    fn walk(p: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                let path = e.path();
                if path.is_dir() {
                    out.extend(walk(&path));
                } else {
                    out.push(path);
                }
            }
        }
        out
    }
}
