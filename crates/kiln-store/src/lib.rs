//! kiln-store: the record store. For each content key it keeps what was
//! built (image, where, when, how long, step counts) and the input manifest
//! the key was computed from, so a later run can skip the target and
//! `kiln why` can say what changed.
//!
//! Owns: the [`RecordStore`] trait, the record format (versioned) and its
//! protocol, the back ends — the local filesystem ([`FsStore`]), an OCI
//! registry ([`OciStore`]), S3 ([`S3Store`]) and WebDAV ([`DavStore`]); the
//! filesystem, S3 and WebDAV share one layout and protocol code
//! (`objects.rs`) — and [`open`], which picks one from a location string.
//!
//! Protocol (every backend):
//! 1. the payload (the input manifest) is written first, content-addressed
//!    by its blake3 digest, so a record never points at a missing payload;
//! 2. the record appears atomically and only if absent (create-if-absent);
//!    `force` replaces it atomically instead;
//! 3. on read, the record's format version and the payload's digest are
//!    verified; any mismatch or unparsable data is a miss with a reason
//!    ([`Lookup::Corrupt`]), never an error that stops a build and never a
//!    hit;
//! 4. temporary files of interrupted writes are never read as records.
//!
//! Must never: decide what to build, or store secret values.

pub mod compiler_cache;
pub mod credentials;
mod fs;
pub mod history;
mod http;
pub mod objects;
mod oci;
pub mod registry_io;
mod s3;
pub mod trust;
mod webdav;
mod worker;

pub use fs::FsStore;
pub use history::{BuildEvent, History, LearnedCost};
pub use oci::{INPUTS_MEDIA_TYPE, OciStore, RECORD_MEDIA_TYPE};
pub use s3::{AwsSettings, S3Store};
pub use webdav::{Auth as DavAuth, DavStore};

use serde::{Deserialize, Serialize};

/// The record format written by this version of kiln.
pub const FORMAT: &str = "kiln-record-v1";

/// What was built for a key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Always [`FORMAT`] when written by this version.
    pub format: String,
    /// The content key (`k1:<blake3 hex>`).
    pub key: String,
    pub target: String,
    /// The image id (`sha256:...`).
    pub image_id: String,
    /// The unique local reference on the node that built it.
    pub image_ref: Option<String>,
    /// The registry digest, when pushed.
    pub digest: Option<String>,
    pub tags: Vec<String>,
    pub platform: Option<String>,
    /// RFC 3339 UTC.
    pub built_at: String,
    pub node: String,
    pub duration_s: f64,
    pub steps_total: u64,
    pub steps_cached: u64,
    /// `blake3:<hex>` of the payload (the input manifest).
    pub inputs_digest: String,
    /// `blake3:<hex>` of the record's compact JSON without this field: set
    /// by the store when it writes ([`Record::sealed`]) and verified when
    /// present, so a damaged record (one flipped bit in an image id) is a
    /// miss, never a hit that names another image. Records written before
    /// it existed have none and are read as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// Who signed the record, and the signature ([`trust`]): absent in a
    /// record written without a signing key. `check` covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<RecordSignature>,
}

/// A record's signature: the signer's key name and the ed25519 signature
/// (base64) over the record without `check` and `signature` ([`trust`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSignature {
    pub signer: String,
    pub ed25519: String,
}

/// The seal of a record document: `blake3` of its compact JSON without
/// its `check` member, members in the document's own order. Computed over
/// the document as read, members this version does not know included, so
/// a record a newer kiln wrote with more fields verifies here (and is not
/// taken for damage and overwritten).
pub fn seal_of(doc: &serde_json::Value) -> String {
    let mut bare = doc.clone();
    if let serde_json::Value::Object(m) = &mut bare {
        m.shift_remove("check");
    }
    digest(&serde_json::to_vec(&bare).unwrap_or_default())
}

/// Checks a record document against its seal, when it has one.
pub fn verify_seal_of(doc: &serde_json::Value) -> Result<(), String> {
    match doc.get("check") {
        None | Some(serde_json::Value::Null) => Ok(()),
        Some(serde_json::Value::String(c)) if *c == seal_of(doc) => Ok(()),
        Some(c) => Err(format!(
            "the record does not match its check {c} (it was changed after it was written)"
        )),
    }
}

impl Record {
    fn unsealed_digest(&self) -> String {
        seal_of(&serde_json::to_value(self).unwrap_or_default())
    }

    /// The record with its [`Record::check`] set.
    pub fn sealed(&self) -> Record {
        let mut r = self.clone();
        r.check = Some(self.unsealed_digest());
        r
    }

    /// Whether the record is as it was sealed (`Err` says why not).
    pub fn verify_seal(&self) -> Result<(), String> {
        match &self.check {
            Some(c) if *c != self.unsealed_digest() => Err(format!(
                "the record does not match its check {c} (it was changed after it was written)"
            )),
            _ => Ok(()),
        }
    }
}

/// A record with its verified input manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub record: Record,
    pub inputs: serde_json::Value,
}

/// The outcome of a lookup.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    Hit(Box<Entry>),
    Miss,
    /// Something was there but failed verification: treat as a miss and
    /// say why (the next successful build repairs it with `force`).
    Corrupt(String),
    /// A sound record the run does not trust ([`trust`]: unsigned, signed
    /// by a key it does not trust, or not matching its signature): a miss
    /// that says why; the rebuild's record replaces it.
    Untrusted(String),
}

/// What a put did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Written,
    /// Another writer recorded this key first (create-if-absent lost); the
    /// existing record stands.
    AlreadyPresent,
    Replaced,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or written (exit code 3 territory).
    #[error("record store {location}: {detail}")]
    Unavailable { location: String, detail: String },
    #[error("record store: {0}")]
    Invalid(String),
}

/// A record store backend.
pub trait RecordStore: Send + Sync {
    /// Looks a key up, verifying what it finds.
    fn get(&self, key: &str) -> Result<Lookup, StoreError>;
    /// Records a build: payload first, then the record (create-if-absent
    /// unless `force`).
    fn put(
        &self,
        record: &Record,
        inputs: &serde_json::Value,
        force: bool,
    ) -> Result<PutOutcome, StoreError>;
    /// After a hit on `record` (a record this store, or a store it also
    /// reads, verified): makes sure the store holds it, and that its
    /// target's latest pointer names it. A store that already holds the
    /// record and its payload is not written to again; otherwise this is
    /// [`put`](Self::put) without force.
    fn keep(&self, record: &Record, inputs: &serde_json::Value) -> Result<PutOutcome, StoreError> {
        self.put(record, inputs, false)
    }
    /// The most recent record written for a target (for `kiln why`).
    fn latest(&self, target: &str) -> Result<Lookup, StoreError>;
    /// Checks that this process may write to the store, by writing one
    /// small object (the same one every time). A store that reads but
    /// refuses writes fails here with what it answered.
    fn probe_write(&self) -> Result<(), StoreError>;
    /// Where the store is, for messages.
    fn location(&self) -> String;
    /// Its lookups (`get`, `latest`, and `keep` of a record it holds) are
    /// reads of files on this machine, microseconds each, never the
    /// network: a caller on an async runtime may make them in place
    /// instead of handing them to a blocking thread. (`keep` writes only
    /// when the target's latest pointer moves.) `false` unless the store
    /// says so.
    fn answers_locally(&self) -> bool {
        false
    }
    /// Claims `key` for a build (cross-run deduplication, `claims.rs`):
    /// [`Claim::Won`] when this run may build it, [`Claim::Held`] when
    /// another run's claim is the newest, [`Claim::Unsupported`] on a
    /// store that cannot create an object only if it is absent.
    fn claim(&self, key: &str, me: &Claimant) -> Result<Claim, StoreError> {
        let _ = (key, me);
        Ok(Claim::Unsupported)
    }
    /// The newest claim of `key`: its generation and what it holds
    /// (`None` inside when it cannot be read).
    fn newest_claim(&self, key: &str) -> Result<Option<(u64, Option<Claimant>)>, StoreError> {
        let _ = key;
        Ok(None)
    }
    /// Takes `key` over from the claim of generation `seen` (its holder
    /// stopped renewing): `true` when this call made generation `seen + 1`.
    fn take_over(&self, key: &str, seen: u64, me: &Claimant) -> Result<bool, StoreError> {
        let _ = (key, seen, me);
        Ok(false)
    }
    /// Writes `me` (a new beat, or an end state) over this run's claim of
    /// generation `generation`: `false` when a newer generation took it
    /// over meanwhile (nothing is written then).
    fn renew(&self, key: &str, generation: u64, me: &Claimant) -> Result<bool, StoreError> {
        let _ = (key, generation, me);
        Ok(false)
    }
}

/// Who holds a claim, and how far along: written by the holder only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimant {
    /// `user@host pid N`: who to ask about it.
    pub holder: String,
    /// The holder's run id.
    pub run_id: String,
    pub target: String,
    /// The node the build runs on.
    pub node: String,
    /// When the claim was made (RFC 3339, the holder's clock; shown only).
    pub since: String,
    /// Incremented at every renewal: waiters see it move on their own
    /// clock, so no two machines' clocks are ever compared.
    pub beat: u64,
    pub state: ClaimState,
}

/// Where a claimed build is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimState {
    Building,
    /// Built and recorded.
    Done,
    /// The build failed or was given up: a waiter builds it itself.
    Failed,
}

/// What claiming a key found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This run holds generation `generation`.
    Won { generation: u64 },
    /// Another run's claim is the newest and says it is building.
    Held { generation: u64, claimant: Claimant },
    /// The store cannot hold claims.
    Unsupported,
}

/// `blake3:<hex>` of bytes.
pub fn digest(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}

/// The payload bytes of an input manifest: compact JSON of the value as
/// given (the workspace builds serde_json with `preserve_order`, so the
/// caller's key order is kept; callers build manifests from sorted maps).
pub fn payload_bytes(inputs: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(inputs).unwrap_or_default()
}

/// Opens the record store at `location`:
/// - `oci://HOST[:PORT]/REPOSITORY[?insecure=1][&timeout=SECONDS]`: an
///   [`OciStore`] (see its docs and `docs/store-oci.md`);
/// - `s3://BUCKET[/PREFIX][?timeout=SECONDS]`: an [`S3Store`]
///   (`docs/store-s3.md`);
/// - `webdav://HOST[:PORT]/PATH` or `webdavs://…[?timeout=SECONDS]`: a
///   [`DavStore`] (`docs/store-webdav.md`);
/// - any other string without a `scheme://` prefix: a directory for an
///   [`FsStore`], relative to `project_dir` unless absolute.
///
/// Other schemes and an empty location are [`StoreError::Invalid`]. Nothing
/// is read or contacted until the first operation.
pub fn open(
    location: &str,
    project_dir: &std::path::Path,
) -> Result<Box<dyn RecordStore>, StoreError> {
    const FORMS: &str = "expected oci://HOST[:PORT]/REPOSITORY, s3://BUCKET[/PREFIX], webdav(s)://HOST[:PORT]/PATH or a directory path";
    if location.trim().is_empty() {
        return Err(StoreError::Invalid(format!(
            "the record store location is empty; {FORMS}"
        )));
    }
    if let Some(why) = mistyped(location) {
        return Err(StoreError::Invalid(format!(
            "record store location {:?} {why}; {FORMS}",
            redact(location)
        )));
    }
    if let Some((scheme, _)) = location.split_once("://") {
        match scheme.to_ascii_lowercase().as_str() {
            "oci" => return Ok(Box::new(OciStore::new(location)?)),
            "s3" => return Ok(Box::new(S3Store::new(location)?)),
            "webdav" | "webdavs" => return Ok(Box::new(DavStore::new(location)?)),
            _ => {}
        }
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return Err(StoreError::Invalid(format!(
                "record store location {:?}: unsupported scheme {scheme:?}; {FORMS}",
                redact(location)
            )));
        }
    }
    Ok(Box::new(FsStore::new(project_dir.join(location))))
}

/// `location` with any `user:password@` replaced by `***@`: a location is
/// printed in messages and logs, and a password must never be.
pub(crate) fn redact(location: &str) -> String {
    match location.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                None => location.to_string(),
            }
        }
        None => location.to_string(),
    }
}

/// The schemes a store location may have.
const SCHEMES: &[&str] = &["oci", "s3", "webdav", "webdavs"];

/// Why `location`, which has no `scheme://`, looks like a URL or a registry
/// with a typo rather than a directory (`oci:/x`, `oci:x`, `oci//x`,
/// `127.0.0.1:5000/x`): such a location would otherwise silently become a
/// local directory with that name.
fn mistyped(location: &str) -> Option<String> {
    if location.contains("://") || location.starts_with('/') || location.starts_with('.') {
        return None;
    }
    let first = location.split('/').next().unwrap_or(location);
    if let Some((scheme, _)) = first.split_once(':')
        && let Some(known) = SCHEMES.iter().find(|k| k.eq_ignore_ascii_case(scheme))
    {
        return Some(format!(
            "looks like a {known}:// URL with a typo (did you mean {known}://...?)"
        ));
    }
    if let Some(known) = SCHEMES.iter().find(|k| k.eq_ignore_ascii_case(first))
        && location[first.len()..].starts_with("//")
    {
        return Some(format!(
            "looks like a {known}:// URL without its colon (did you mean {known}:{}?)",
            &location[first.len()..]
        ));
    }
    if let Some((host, port)) = first.rsplit_once(':')
        && !host.is_empty()
        && !port.is_empty()
        && port.chars().all(|c| c.is_ascii_digit())
        && location.len() > first.len() + 1
    {
        return Some(format!(
            "looks like a registry (HOST:PORT/REPOSITORY); a registry store is written oci://{location}, and a directory with a colon in its name as ./{location}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn invalid(location: &str) -> String {
        match open(location, Path::new("/project")) {
            Err(StoreError::Invalid(m)) => m,
            Err(e) => panic!("{location}: expected Invalid, got {e}"),
            Ok(s) => panic!("{location}: expected Invalid, opened {}", s.location()),
        }
    }

    #[test]
    fn open_picks_the_backend() {
        let dir = Path::new("/project");
        let s = open("oci://127.0.0.1:5000/kiln/records", dir).unwrap();
        assert_eq!(s.location(), "oci://127.0.0.1:5000/kiln/records");
        let s = open("oci://registry.example.com/kiln/records?timeout=5", dir).unwrap();
        assert_eq!(s.location(), "oci://registry.example.com/kiln/records");
        let s = open(".kiln/store", dir).unwrap();
        assert_eq!(s.location(), "/project/.kiln/store");
        let s = open("/var/cache/kiln", dir).unwrap();
        assert_eq!(s.location(), "/var/cache/kiln");
        let s = open("s3://kiln-ci/records", dir).unwrap();
        assert_eq!(s.location(), "s3://kiln-ci/records");
        let s = open("webdav://127.0.0.1:8080/kiln", dir).unwrap();
        assert_eq!(s.location(), "webdav://127.0.0.1:8080/kiln");
        // A colon alone is not a scheme.
        let s = open("store:v1", dir).unwrap();
        assert_eq!(s.location(), "/project/store:v1");
        // A directory that only looks like a registry, said so.
        let s = open("./127.0.0.1:5000/records", dir).unwrap();
        assert_eq!(s.location(), "/project/./127.0.0.1:5000/records");
    }

    fn a_record() -> Record {
        Record {
            format: FORMAT.into(),
            key: "k1:00".into(),
            target: "app".into(),
            image_id: "sha256:11".into(),
            image_ref: Some("kiln.local/app:11".into()),
            digest: None,
            tags: vec!["r/app:1".into()],
            platform: Some("linux/amd64".into()),
            built_at: "2026-12-02T10:00:00Z".into(),
            node: "local".into(),
            duration_s: 2.0,
            steps_total: 3,
            steps_cached: 1,
            inputs_digest: "blake3:22".into(),
            check: None,
            signature: None,
        }
    }

    /// A record a newer kiln wrote with a field this one does not know
    /// verifies (it is not damage, so it is not overwritten); the seal
    /// still covers that field; records sealed before the seal was taken
    /// over the document verify as before.
    #[test]
    fn the_seal_covers_the_document_as_written() {
        let sealed = serde_json::to_vec_pretty(&a_record().sealed()).unwrap();
        assert!(objects::check_record(&sealed, Some("k1:00")).is_ok());
        let mut doc = serde_json::to_value(a_record()).unwrap();
        doc.as_object_mut().unwrap().insert(
            "claimed_by".into(),
            serde_json::json!({"run": "x", "n": 1.5}),
        );
        let check = seal_of(&doc);
        doc.as_object_mut()
            .unwrap()
            .insert("check".into(), check.into());
        let bytes = serde_json::to_vec_pretty(&doc).unwrap();
        let r = objects::check_record(&bytes, Some("k1:00"));
        assert_eq!(r, Ok(a_record()), "a newer record reads");
        let text = String::from_utf8(bytes).unwrap();
        let flipped = text.replace("\"run\": \"x\"", "\"run\": \"y\"");
        assert_ne!(flipped, text);
        let e = objects::check_record(flipped.as_bytes(), Some("k1:00")).unwrap_err();
        assert!(e.contains("does not match its check"), "{e}");
    }

    #[test]
    fn passwords_in_locations_never_reach_a_message() {
        assert_eq!(redact("webdav://u:p@h:1/x"), "webdav://***@h:1/x");
        assert_eq!(redact("s3://bucket/a@b"), "s3://bucket/a@b");
        for l in [
            "webdav://kiln:s3cret@h/x",
            "gs://kiln:s3cret@h/x",
            "oci://kiln:s3cret@h/x",
        ] {
            let m = invalid(l);
            assert!(!m.contains("s3cret"), "{m}");
        }
    }

    #[test]
    fn a_mistyped_url_or_registry_is_an_error_not_a_directory() {
        for (location, hint) in [
            ("oci:/127.0.0.1:5000/kiln/records", "did you mean oci://"),
            ("oci:127.0.0.1:5000/kiln/records", "did you mean oci://"),
            ("OCI:/r/x", "did you mean oci://"),
            (
                "oci//127.0.0.1:5000/kiln/records",
                "did you mean oci://127.0.0.1",
            ),
            (
                "127.0.0.1:5000/kiln/records",
                "oci://127.0.0.1:5000/kiln/records",
            ),
            ("localhost:5000/records", "oci://localhost:5000/records"),
            ("s3:/bucket/records", "did you mean s3://"),
            ("webdav//h:8080/kiln", "did you mean webdav://h:8080"),
        ] {
            let m = invalid(location);
            assert!(m.contains(hint), "{location}: {m}");
            assert!(m.contains(&format!("{location:?}")), "names it: {m}");
        }
    }

    #[test]
    fn open_rejects_bad_locations_with_the_expected_form() {
        for (location, why) in [
            ("oci://", "no repository"),
            ("oci://127.0.0.1:5000", "no repository"),
            ("oci://127.0.0.1:5000/", "repository is empty"),
            ("oci://127.0.0.1:70000/r", "port"),
            ("oci://127.0.0.1:5000/Kiln", "not a valid name"),
            ("oci://127.0.0.1:5000/r?bogus=1", "unknown parameter"),
        ] {
            let m = invalid(location);
            assert!(m.contains(why), "{location}: {m}");
            assert!(
                m.contains("expected oci://HOST[:PORT]/REPOSITORY"),
                "{location}: {m}"
            );
        }
        for location in ["", "  ", "gs://bucket/records", "https://h/r"] {
            let m = invalid(location);
            assert!(
                m.contains("expected oci://HOST[:PORT]/REPOSITORY, s3://BUCKET[/PREFIX], webdav(s)://HOST[:PORT]/PATH or a directory path"),
                "{location:?}: {m}"
            );
        }
    }
}
