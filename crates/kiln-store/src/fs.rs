//! The local filesystem backend, the embedded default (under the project's
//! `.kiln/store` or a configured directory).
//!
//! Layout (versioned):
//! - `blobs-v1/<aa>/<digest hex>`: payloads, content-addressed;
//! - `records-v1/<aa>/<key>.json`: records;
//! - `targets-v1/<target>.json`: the key of each target's latest record.
//!
//! Writes go to a temporary file in the same directory and then appear
//! atomically: `link(2)` for create-if-absent (fails if the name exists),
//! `rename(2)` to replace.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{FORMAT, Lookup, PutOutcome, Record, RecordStore, StoreError, digest, payload_bytes};

/// A record store in a local directory.
#[derive(Clone, Debug)]
pub struct FsStore {
    root: PathBuf,
}

fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn shard(name: &str) -> String {
    let hex = name.rsplit(':').next().unwrap_or(name);
    hex.get(..2).unwrap_or("00").to_string()
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

    fn blob_path(&self, d: &str) -> PathBuf {
        let hex = d.strip_prefix("blake3:").unwrap_or(d);
        self.root
            .join("blobs-v1")
            .join(shard(hex))
            .join(safe_name(hex))
    }

    fn record_path(&self, key: &str) -> PathBuf {
        self.root
            .join("records-v1")
            .join(shard(key))
            .join(format!("{}.json", safe_name(key)))
    }

    fn target_path(&self, target: &str) -> PathBuf {
        self.root
            .join("targets-v1")
            .join(format!("{}.json", safe_name(target)))
    }

    /// Writes `bytes` to a unique temporary file next to `path`.
    fn temp(&self, path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(|e| self.unavailable("creating a directory", e))?;
        let tmp = dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut f = std::fs::File::create(&tmp).map_err(|e| self.unavailable("writing", e))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| self.unavailable("writing", e))?;
        Ok(tmp)
    }

    /// Makes `bytes` appear at `path` only if nothing is there.
    fn create_if_absent(&self, path: &Path, bytes: &[u8]) -> Result<bool, StoreError> {
        let tmp = self.temp(path, bytes)?;
        let r = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(self.unavailable("publishing", e)),
        }
    }

    /// Makes `bytes` appear at `path`, replacing what is there.
    fn replace(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let tmp = self.temp(path, bytes)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.unavailable("publishing", e)
        })
    }

    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
        match std::fs::read(path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.unavailable("reading", e)),
        }
    }

    fn verify(&self, bytes: &[u8], key: Option<&str>) -> Result<Lookup, StoreError> {
        let record: Record = match serde_json::from_slice(bytes) {
            Ok(r) => r,
            Err(e) => return Ok(Lookup::Corrupt(format!("the record is not readable ({e})"))),
        };
        if record.format != FORMAT {
            return Ok(Lookup::Corrupt(format!(
                "record format {:?}, this kiln reads {FORMAT:?}",
                record.format
            )));
        }
        if let Some(k) = key
            && record.key != k
        {
            return Ok(Lookup::Corrupt(format!(
                "the record at key {k} names key {}",
                record.key
            )));
        }
        let Some(payload) = self.read(&self.blob_path(&record.inputs_digest))? else {
            return Ok(Lookup::Corrupt(format!(
                "the input manifest {} is missing",
                record.inputs_digest
            )));
        };
        let actual = digest(&payload);
        if actual != record.inputs_digest {
            return Ok(Lookup::Corrupt(format!(
                "the input manifest's digest is {actual}, the record says {}",
                record.inputs_digest
            )));
        }
        match serde_json::from_slice(&payload) {
            Ok(inputs) => Ok(Lookup::Hit(Box::new(crate::Entry { record, inputs }))),
            Err(e) => Ok(Lookup::Corrupt(format!(
                "the input manifest is not readable ({e})"
            ))),
        }
    }
}

impl RecordStore for FsStore {
    fn get(&self, key: &str) -> Result<Lookup, StoreError> {
        match self.read(&self.record_path(key))? {
            None => Ok(Lookup::Miss),
            Some(b) => self.verify(&b, Some(key)),
        }
    }

    fn put(
        &self,
        record: &Record,
        inputs: &serde_json::Value,
        force: bool,
    ) -> Result<PutOutcome, StoreError> {
        let payload = payload_bytes(inputs);
        let d = digest(&payload);
        if d != record.inputs_digest {
            return Err(StoreError::Invalid(format!(
                "record {} says its inputs are {}, but they hash to {d}",
                record.key, record.inputs_digest
            )));
        }
        // 1. The payload first (content-addressed: an existing copy is the
        //    same bytes unless damaged, which reads detect).
        let blob = self.blob_path(&d);
        if force {
            // A forced write also repairs a damaged payload.
            self.replace(&blob, &payload)?;
        } else if !blob.exists() {
            self.create_if_absent(&blob, &payload)?;
        }
        // 2. The record, atomically.
        let path = self.record_path(&record.key);
        let outcome = if force {
            let bytes = serde_json::to_vec_pretty(record)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            self.replace(&path, &bytes)?;
            PutOutcome::Replaced
        } else if path.exists() {
            PutOutcome::AlreadyPresent
        } else {
            let bytes = serde_json::to_vec_pretty(record)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            if self.create_if_absent(&path, &bytes)? {
                PutOutcome::Written
            } else {
                PutOutcome::AlreadyPresent
            }
        };
        // 3. The per-target pointer (last writer wins; it is only a hint for
        //    `why`), rewritten only when it changes: a no-op run writes nothing.
        let pointer = self.target_path(&record.target);
        if self.read(&pointer)?.as_deref() != Some(record.key.as_bytes()) {
            self.replace(&pointer, record.key.as_bytes())?;
        }
        Ok(outcome)
    }

    fn latest(&self, target: &str) -> Result<Lookup, StoreError> {
        match self.read(&self.target_path(target))? {
            None => Ok(Lookup::Miss),
            Some(k) => self.get(String::from_utf8_lossy(&k).trim()),
        }
    }

    fn location(&self) -> String {
        self.root.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let blob = s.blob_path(&digest(&payload_bytes(&inputs)));
        std::fs::write(&blob, b"{\"x\": 2}").unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("digest")));
        // A missing payload.
        std::fs::remove_file(&blob).unwrap();
        assert!(matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("missing")));
        // A truncated record.
        std::fs::write(s.record_path("k1:bb02"), b"{\"format\": ").unwrap();
        assert!(
            matches!(s.get("k1:bb02").unwrap(), Lookup::Corrupt(r) if r.contains("not readable"))
        );
        // A record of another format version.
        let mut r = record("k1:bb02", &inputs);
        r.format = "kiln-record-v0".into();
        std::fs::write(s.record_path("k1:bb02"), serde_json::to_vec(&r).unwrap()).unwrap();
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
        let p = s.record_path("k1:cc03");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p.parent().unwrap().join(".tmp-1-1"), b"garbage").unwrap();
        assert_eq!(s.get("k1:cc03").unwrap(), Lookup::Miss);
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
