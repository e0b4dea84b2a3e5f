//! The record protocol over a store of named objects: what the filesystem,
//! S3 and WebDAV back ends share. A back end offers [`Objects`] (read,
//! create-if-absent, replace, with its own primitives); this module lays
//! records out and keeps the protocol (`lib.rs`): payload before record,
//! create-if-absent unless forced, verified reads, damage is a miss.
//!
//! Layout (versioned, the same on every back end):
//! - `blobs-v1/<aa>/<digest hex>`: payloads, content-addressed;
//! - `records-v1/<aa>/<key>.json`: records;
//! - `targets-v1/<target>.json`: the key of each target's latest record;
//! - `probe-v1/write`: what the write probe writes;
//! - `claims-v1/<aa>/<key>.<generation>.json`: claims of keys being built
//!   (cross-run deduplication; docs/store-claims.md).
//!
//! The primitives and names are public for tests and tools that need to
//! reach under the protocol (the fault matrix damages objects with them).

use crate::{
    Claim, ClaimState, Claimant, Entry, FORMAT, Lookup, PutOutcome, Record, RecordStore,
    StoreError, digest, payload_bytes,
};

/// What reading one object found.
#[derive(Debug)]
pub enum Read {
    Found(Vec<u8>),
    Missing,
    /// It is there but cannot be read (permissions, a directory where a
    /// file should be): a miss for this key, with why, never a stop.
    Unreadable(String),
}

/// A namespace of objects with the three primitives the protocol needs.
/// Names are `/`-separated relative paths made of `[A-Za-z0-9._-]`.
pub trait Objects: Send + Sync {
    /// Where the objects are, for messages (the store's location).
    fn shown(&self) -> String;
    fn read(&self, name: &str) -> Result<Read, StoreError>;
    /// Makes `bytes` appear at `name` atomically, only if nothing is there:
    /// `true` when this call created it.
    fn create(&self, name: &str, bytes: &[u8]) -> Result<bool, StoreError>;
    /// Makes `bytes` appear at `name` atomically, replacing what is there.
    fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Whether `name` exists (a payload is not uploaded twice).
    fn exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(matches!(self.read(name)?, Read::Found(_)))
    }
    /// The objects are files on this machine: see
    /// [`RecordStore::answers_locally`].
    fn on_local_disk(&self) -> bool {
        false
    }
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

/// The object name of a payload (`blake3:<hex>`).
pub fn blob_name(d: &str) -> String {
    let hex = d.strip_prefix("blake3:").unwrap_or(d);
    format!("blobs-v1/{}/{}", shard(hex), safe_name(hex))
}

/// The object name of a key's record.
pub fn record_name(key: &str) -> String {
    format!("records-v1/{}/{}.json", shard(key), safe_name(key))
}

/// The object name of a target's latest-record pointer.
pub fn target_name(target: &str) -> String {
    format!("targets-v1/{}.json", safe_name(target))
}

/// The object name of generation `generation` of a key's claim.
pub fn claim_name(key: &str, generation: u64) -> String {
    format!(
        "claims-v1/{}/{}.{generation}.json",
        shard(key),
        safe_name(key)
    )
}

/// How many generations of one key's claims are looked through: each is a
/// build of the key that was taken over or ended without a record.
const MAX_GENERATIONS: u64 = 64;

/// [`crate::RecordStore::newest_claim`] over objects: generations are
/// made in order (`n + 1` only by someone who read `n`), so the newest is
/// the last before the first missing one.
pub(crate) fn newest_claim(
    o: &dyn Objects,
    key: &str,
) -> Result<Option<(u64, Option<Claimant>)>, StoreError> {
    let mut newest = None;
    for g in 0..MAX_GENERATIONS {
        match o.read(&claim_name(key, g))? {
            Read::Missing => return Ok(newest),
            Read::Found(b) => newest = Some((g, serde_json::from_slice(&b).ok())),
            Read::Unreadable(_) => newest = Some((g, None)),
        }
    }
    Err(StoreError::Invalid(format!(
        "key {key} has {MAX_GENERATIONS} claims in {} (claims-v1/): remove them",
        o.shown()
    )))
}

fn claimant_bytes(me: &Claimant) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(me).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// [`crate::RecordStore::claim`] over objects: the newest claim stands
/// while it says it is building; one that ended (or is damaged) is
/// followed by the next generation, which exactly one writer creates.
pub(crate) fn claim(o: &dyn Objects, key: &str, me: &Claimant) -> Result<Claim, StoreError> {
    let bytes = claimant_bytes(me)?;
    // Another writer may create the generation looked at in between:
    // look again (each turn, someone won a generation).
    for _ in 0..MAX_GENERATIONS {
        let next = match newest_claim(o, key)? {
            None => 0,
            Some((g, Some(c))) if c.state == ClaimState::Building => {
                return Ok(Claim::Held {
                    generation: g,
                    claimant: c,
                });
            }
            Some((g, _)) => g + 1,
        };
        if o.create(&claim_name(key, next), &bytes)? {
            return Ok(Claim::Won { generation: next });
        }
    }
    Err(StoreError::Invalid(format!(
        "claiming key {key} in {}: every generation was taken first",
        o.shown()
    )))
}

/// [`crate::RecordStore::take_over`] over objects.
pub(crate) fn take_over(
    o: &dyn Objects,
    key: &str,
    seen: u64,
    me: &Claimant,
) -> Result<bool, StoreError> {
    o.create(&claim_name(key, seen + 1), &claimant_bytes(me)?)
}

/// [`crate::RecordStore::renew`] over objects: only the holder writes its
/// generation, so replacing it is safe once no newer one exists.
pub(crate) fn renew(
    o: &dyn Objects,
    key: &str,
    generation: u64,
    me: &Claimant,
) -> Result<bool, StoreError> {
    if o.exists(&claim_name(key, generation + 1))? {
        return Ok(false);
    }
    o.replace(&claim_name(key, generation), &claimant_bytes(me)?)?;
    Ok(true)
}

/// The object the write probe replaces.
pub const PROBE_NAME: &str = "probe-v1/write";

/// A record's bytes checked against what the protocol promises: readable,
/// this format, this key. `Err` is why it is damaged.
pub fn check_record(bytes: &[u8], key: Option<&str>) -> Result<Record, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the record is not readable ({e})"))?;
    // The seal is checked on the document as written, unknown members
    // included (a newer kiln's record is not damage).
    crate::verify_seal_of(&doc)?;
    let record: Record =
        serde_json::from_value(doc).map_err(|e| format!("the record is not readable ({e})"))?;
    if record.format != FORMAT {
        return Err(format!(
            "record format {:?}, this kiln reads {FORMAT:?}",
            record.format
        ));
    }
    if let Some(k) = key
        && record.key != k
    {
        return Err(format!("the record at key {k} names key {}", record.key));
    }
    // The seal is the store's business: readers get the record as written.
    let mut record = record;
    record.check = None;
    Ok(record)
}

/// A checked record with its payload: a hit when the payload is the one
/// the record names, else why not.
pub(crate) fn with_payload(record: Record, payload: &[u8]) -> Lookup {
    let actual = digest(payload);
    if actual != record.inputs_digest {
        return Lookup::Corrupt(format!(
            "the input manifest's digest is {actual}, the record says {}",
            record.inputs_digest
        ));
    }
    match serde_json::from_slice(payload) {
        Ok(inputs) => Lookup::Hit(Box::new(Entry { record, inputs })),
        Err(e) => Lookup::Corrupt(format!("the input manifest is not readable ({e})")),
    }
}

fn lookup_key(o: &dyn Objects, key: &str) -> Result<Lookup, StoreError> {
    let name = record_name(key);
    let bytes = match o.read(&name)? {
        Read::Missing => return Ok(Lookup::Miss),
        Read::Unreadable(why) => return Ok(Lookup::Corrupt(format!("{name}: {why}"))),
        Read::Found(b) => b,
    };
    let record = match check_record(&bytes, Some(key)) {
        Ok(r) => r,
        Err(why) => return Ok(Lookup::Corrupt(why)),
    };
    let blob = blob_name(&record.inputs_digest);
    match o.read(&blob)? {
        Read::Found(payload) => Ok(with_payload(record, &payload)),
        Read::Missing => Ok(Lookup::Corrupt(format!(
            "the input manifest {} is missing",
            record.inputs_digest
        ))),
        Read::Unreadable(why) => Ok(Lookup::Corrupt(format!("{blob}: {why}"))),
    }
}

/// [`crate::RecordStore::get`] over objects.
pub(crate) fn get(o: &dyn Objects, key: &str) -> Result<Lookup, StoreError> {
    lookup_key(o, key)
}

/// [`crate::RecordStore::put`] over objects: the payload, then the record,
/// then the target's pointer (rewritten only when it changes, so a repeated
/// put writes nothing).
pub(crate) fn put(
    o: &dyn Objects,
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
    // 1. The payload first (content-addressed: an existing copy is the same
    //    bytes unless damaged, which reads detect; a forced write repairs it).
    let blob = blob_name(&d);
    if force {
        o.replace(&blob, &payload)?;
    } else if !o.exists(&blob)? {
        o.create(&blob, &payload)?;
    }
    // 2. The record, atomically.
    let name = record_name(&record.key);
    let bytes = serde_json::to_vec_pretty(&record.sealed())
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    let outcome = if force {
        o.replace(&name, &bytes)?;
        PutOutcome::Replaced
    } else if !o.exists(&name)? && o.create(&name, &bytes)? {
        PutOutcome::Written
    } else if intact(o, &name, &record.key)? {
        // Another writer recorded this key first: its record stands.
        PutOutcome::AlreadyPresent
    } else {
        // Something is there that is not this key's record (damage, a
        // dangling symlink): the build at hand repairs it.
        o.replace(&name, &bytes)?;
        PutOutcome::Replaced
    };
    point(o, record)?;
    Ok(outcome)
}

/// The per-target pointer, the last step of [`put`] (last writer wins; it
/// is a hint for `why`), written only when it names another key.
fn point(o: &dyn Objects, record: &Record) -> Result<(), StoreError> {
    let pointer = target_name(&record.target);
    let current = match o.read(&pointer)? {
        Read::Found(b) => Some(b),
        _ => None,
    };
    if current.as_deref() != Some(record.key.as_bytes()) {
        o.replace(&pointer, record.key.as_bytes())?;
    }
    Ok(())
}

/// [`crate::RecordStore::keep`] over objects: a record and payload that
/// are there were verified by the lookup that found them, so they are not
/// read, hashed or written again; only the pointer is brought up to date.
pub(crate) fn keep(
    o: &dyn Objects,
    record: &Record,
    inputs: &serde_json::Value,
) -> Result<PutOutcome, StoreError> {
    if o.exists(&record_name(&record.key))? && o.exists(&blob_name(&record.inputs_digest))? {
        point(o, record)?;
        return Ok(PutOutcome::AlreadyPresent);
    }
    put(o, record, inputs, false)
}

/// Whether `name` holds a readable record of `key` (what another writer
/// put there first, or damage).
fn intact(o: &dyn Objects, name: &str, key: &str) -> Result<bool, StoreError> {
    Ok(match o.read(name)? {
        Read::Found(b) => check_record(&b, Some(key)).is_ok(),
        _ => false,
    })
}

/// [`crate::RecordStore::latest`] over objects. A pointer that names a
/// key without a record, or a record of another target, is damage (said
/// so), never "never built".
pub(crate) fn latest(o: &dyn Objects, target: &str) -> Result<Lookup, StoreError> {
    let pointer = target_name(target);
    let key = match o.read(&pointer)? {
        Read::Missing => return Ok(Lookup::Miss),
        Read::Unreadable(why) => return Ok(Lookup::Corrupt(format!("{pointer}: {why}"))),
        Read::Found(b) => b,
    };
    let Some(key) = std::str::from_utf8(&key)
        .ok()
        .map(str::trim)
        .filter(|k| k.starts_with("k1:") && !k.contains(char::is_whitespace))
    else {
        return Ok(Lookup::Corrupt(format!(
            "the latest-record pointer {pointer} does not hold a key"
        )));
    };
    match lookup_key(o, key)? {
        Lookup::Hit(e) if e.record.target != target => Ok(Lookup::Corrupt(format!(
            "the latest record for target {target} is key {key}, whose record is for target {}",
            e.record.target
        ))),
        Lookup::Miss => Ok(Lookup::Corrupt(format!(
            "the latest record for target {target} is key {key}, which has no record"
        ))),
        other => Ok(other),
    }
}

/// The write probe: replaces one small object, so a store that takes
/// reads but refuses writes is found before anything is built.
pub(crate) fn probe(o: &dyn Objects) -> Result<(), StoreError> {
    o.replace(PROBE_NAME, b"kiln write probe\n")
}

/// Every store of objects keeps records by the one protocol above.
impl<T: Objects> RecordStore for T {
    fn get(&self, key: &str) -> Result<Lookup, StoreError> {
        get(self, key)
    }

    fn put(
        &self,
        record: &Record,
        inputs: &serde_json::Value,
        force: bool,
    ) -> Result<PutOutcome, StoreError> {
        put(self, record, inputs, force)
    }

    fn keep(&self, record: &Record, inputs: &serde_json::Value) -> Result<PutOutcome, StoreError> {
        keep(self, record, inputs)
    }

    fn latest(&self, target: &str) -> Result<Lookup, StoreError> {
        latest(self, target)
    }

    fn probe_write(&self) -> Result<(), StoreError> {
        probe(self)
    }

    fn location(&self) -> String {
        self.shown()
    }

    fn answers_locally(&self) -> bool {
        self.on_local_disk()
    }

    fn claim(&self, key: &str, me: &Claimant) -> Result<Claim, StoreError> {
        claim(self, key, me)
    }

    fn newest_claim(&self, key: &str) -> Result<Option<(u64, Option<Claimant>)>, StoreError> {
        newest_claim(self, key)
    }

    fn take_over(&self, key: &str, seen: u64, me: &Claimant) -> Result<bool, StoreError> {
        take_over(self, key, seen, me)
    }

    fn renew(&self, key: &str, generation: u64, me: &Claimant) -> Result<bool, StoreError> {
        renew(self, key, generation, me)
    }
}
