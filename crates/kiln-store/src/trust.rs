//! Who may make kiln skip a build (docs/trust.md): records signed with an
//! ed25519 key, a run that counts only records signed by keys it trusts,
//! and read-only stores a run consults after the one it writes.
//!
//! - A **signing key** is a file `NAME:BASE64` of the 32-byte seed followed
//!   by the 32-byte public key (the form of Nix's secret keys);
//!   [`SigningKey::generate`] makes one. Its public half is `NAME:BASE64` of
//!   the 32-byte public key ([`TrustedKey`]).
//! - A record's signature ([`crate::RecordSignature`]) is over the record's
//!   compact JSON without `check` and `signature`, after a fixed context
//!   line, so it covers the key, the image, the digest and the input
//!   manifest's digest. The seal (`check`) is computed after it and covers
//!   it; records without a signature stay readable everywhere.
//! - [`Trusting`] wraps a store: it signs what it writes with the run's key,
//!   and, with trusted keys, turns a record that is unsigned, signed by
//!   another key or whose signature does not match into
//!   [`Lookup::Untrusted`] — a miss that says why, never an error.
//! - [`Layered`] reads the store a run writes, then read-only stores in
//!   order; it writes, claims and probes only the first.
//!
//! Ed25519 is `ring`'s (already built for TLS), never hand-written.
//!
//! Must never: write, log or put in a record, a message or a `Debug` text
//! the secret half of a key.

use std::path::Path;

use base64::Engine as _;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::{
    Claim, Claimant, Lookup, PutOutcome, Record, RecordSignature, RecordStore, StoreError,
};

/// What every signature is made over, before the record's JSON.
const CONTEXT: &[u8] = b"kiln-record-signature-v1\n";

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// A key name: what `kiln keys generate` takes and messages show.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "key name {name:?}: use 1 to 64 letters, digits, '-', '_' or '.'"
        ))
    }
}

/// The secret key a run signs its records with.
pub struct SigningKey {
    name: String,
    pair: Ed25519KeyPair,
    /// The file's text, kept to write it (never shown).
    secret: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.public())
    }
}

impl SigningKey {
    /// A new key named `name`, from the system's randomness.
    pub fn generate(name: &str) -> Result<SigningKey, String> {
        use ring::rand::SecureRandom as _;
        check_name(name)?;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| "the system's random number generator failed".to_string())?;
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|_| "cannot make a key from the random seed".to_string())?;
        let mut both = seed.to_vec();
        both.extend_from_slice(pair.public_key().as_ref());
        let secret = format!("{name}:{}", b64().encode(&both));
        Ok(SigningKey {
            name: name.to_string(),
            pair,
            secret,
        })
    }

    /// Reads a key from its text (`NAME:BASE64` of seed and public key);
    /// `what` names it in errors (its file). The error never quotes the
    /// text.
    pub fn parse(text: &str, what: &str) -> Result<SigningKey, String> {
        let text = text.trim();
        let bad = |why: &str| {
            format!(
                "{what} is not a kiln signing key ({why}); it is the file `kiln keys generate NAME` writes, NAME:BASE64 on one line"
            )
        };
        let (name, data) = text
            .split_once(':')
            .ok_or_else(|| bad("no NAME: in front"))?;
        check_name(name).map_err(|e| bad(&e))?;
        let bytes = b64()
            .decode(data.trim())
            .map_err(|_| bad("its key is not base64"))?;
        if bytes.len() != 64 {
            return Err(bad(&format!(
                "its key is {} bytes, not 64 (a seed and a public key)",
                bytes.len()
            )));
        }
        let pair = Ed25519KeyPair::from_seed_and_public_key(&bytes[..32], &bytes[32..])
            .map_err(|_| bad("its public half does not belong to its seed"))?;
        Ok(SigningKey {
            name: name.to_string(),
            pair,
            secret: text.to_string(),
        })
    }

    /// Reads the key file at `path`.
    pub fn read(path: &Path) -> Result<SigningKey, String> {
        let what = format!("signing key {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {what}: {e}"))?;
        SigningKey::parse(&text, &what)
    }

    /// Writes the key to a new file at `path` that only its owner can read
    /// (an existing file is never replaced).
    pub fn write_new(&self, path: &Path) -> Result<(), String> {
        use std::io::Write as _;
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            o.mode(0o600);
        }
        let mut f = o.open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{} exists already; kiln never replaces a key file (remove it first, or give another --out)",
                path.display()
            ),
            _ => format!("cannot create {}: {e}", path.display()),
        })?;
        f.write_all(format!("{}\n", self.secret).as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The public key, `NAME:BASE64`: what runs that trust it are given.
    pub fn public(&self) -> String {
        format!(
            "{}:{}",
            self.name,
            b64().encode(self.pair.public_key().as_ref())
        )
    }

    /// `record` with its signature (over everything but `check` and
    /// `signature`).
    pub fn sign(&self, record: &Record) -> Record {
        let mut r = record.clone();
        r.signature = None;
        r.check = None;
        let sig = self.pair.sign(&message(&r));
        r.signature = Some(RecordSignature {
            signer: self.name.clone(),
            ed25519: b64().encode(sig.as_ref()),
        });
        r.check = record.check.clone();
        r
    }
}

/// The bytes a record's signature is over.
fn message(r: &Record) -> Vec<u8> {
    let mut bare = r.clone();
    bare.signature = None;
    bare.check = None;
    let mut m = CONTEXT.to_vec();
    m.extend(serde_json::to_vec(&bare).unwrap_or_default());
    m
}

/// A public key whose signed records a run counts as hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedKey {
    pub name: String,
    key: Vec<u8>,
}

impl TrustedKey {
    /// `NAME:BASE64` of a 32-byte ed25519 public key (what `kiln keys
    /// generate` prints).
    pub fn parse(text: &str) -> Result<TrustedKey, String> {
        let bad = |why: &str| {
            format!(
                "trusted key {text:?} is not NAME:BASE64 of an ed25519 public key ({why}); `kiln keys generate NAME` prints one"
            )
        };
        let (name, data) = text.trim().split_once(':').ok_or_else(|| bad("no NAME:"))?;
        check_name(name).map_err(|e| bad(&e))?;
        let key = b64().decode(data.trim()).map_err(|_| bad("not base64"))?;
        if key.len() != 32 {
            return Err(bad(&format!("{} bytes, not 32", key.len())));
        }
        Ok(TrustedKey {
            name: name.to_string(),
            key,
        })
    }

    fn verifies(&self, r: &Record, sig: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.key)
            .verify(&message(r), sig)
            .is_ok()
    }
}

/// Why `record` does not count as a hit for a run trusting `trusted`, or
/// `None` when it does (always, with no trusted keys: every writer of the
/// store is trusted then).
pub fn distrust(record: &Record, trusted: &[TrustedKey]) -> Option<String> {
    if trusted.is_empty() {
        return None;
    }
    let target = &record.target;
    let Some(s) = &record.signature else {
        return Some(format!(
            "the record of {target} is not signed, and this run trusts only records signed by {}",
            names(trusted)
        ));
    };
    let signer = &s.signer;
    let keys: Vec<&TrustedKey> = trusted.iter().filter(|k| k.name == *signer).collect();
    if keys.is_empty() {
        return Some(format!(
            "the record of {target} is signed by {signer}, which is not trusted (this run trusts {})",
            names(trusted)
        ));
    }
    let Ok(sig) = b64().decode(&s.ed25519) else {
        return Some(format!(
            "the record of {target} has a signature by {signer} that is not base64"
        ));
    };
    if keys.iter().any(|k| k.verifies(record, &sig)) {
        None
    } else {
        Some(format!(
            "the record of {target} names {signer} as its signer, but the signature does not match it (the record was changed after it was signed, or signed by another key of that name)"
        ))
    }
}

fn names(trusted: &[TrustedKey]) -> String {
    let mut n: Vec<&str> = trusted.iter().map(|k| k.name.as_str()).collect();
    n.dedup();
    n.join(", ")
}

/// A store whose writes are signed with the run's key and whose reads
/// count only records signed by a trusted key (with any trusted keys).
pub struct Trusting {
    inner: std::sync::Arc<dyn RecordStore>,
    signer: Option<std::sync::Arc<SigningKey>>,
    trusted: Vec<TrustedKey>,
}

impl Trusting {
    pub fn new(
        inner: std::sync::Arc<dyn RecordStore>,
        signer: Option<std::sync::Arc<SigningKey>>,
        trusted: Vec<TrustedKey>,
    ) -> Trusting {
        Trusting {
            inner,
            signer,
            trusted,
        }
    }

    fn judged(&self, l: Lookup) -> Lookup {
        match l {
            Lookup::Hit(e) => match distrust(&e.record, &self.trusted) {
                None => Lookup::Hit(e),
                Some(why) => Lookup::Untrusted(why),
            },
            other => other,
        }
    }
}

impl RecordStore for Trusting {
    fn get(&self, key: &str) -> Result<Lookup, StoreError> {
        Ok(self.judged(self.inner.get(key)?))
    }
    fn put(
        &self,
        record: &Record,
        inputs: &serde_json::Value,
        force: bool,
    ) -> Result<PutOutcome, StoreError> {
        match &self.signer {
            Some(k) => self.inner.put(&k.sign(record), inputs, force),
            None => self.inner.put(record, inputs, force),
        }
    }
    fn keep(&self, record: &Record, inputs: &serde_json::Value) -> Result<PutOutcome, StoreError> {
        match &self.signer {
            Some(k) => self.inner.keep(&k.sign(record), inputs),
            None => self.inner.keep(record, inputs),
        }
    }
    fn latest(&self, target: &str) -> Result<Lookup, StoreError> {
        Ok(self.judged(self.inner.latest(target)?))
    }
    fn probe_write(&self) -> Result<(), StoreError> {
        self.inner.probe_write()
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    fn answers_locally(&self) -> bool {
        self.inner.answers_locally()
    }
    fn claim(&self, key: &str, me: &Claimant) -> Result<Claim, StoreError> {
        self.inner.claim(key, me)
    }
    fn newest_claim(&self, key: &str) -> Result<Option<(u64, Option<Claimant>)>, StoreError> {
        self.inner.newest_claim(key)
    }
    fn take_over(&self, key: &str, seen: u64, me: &Claimant) -> Result<bool, StoreError> {
        self.inner.take_over(key, seen, me)
    }
    fn renew(&self, key: &str, generation: u64, me: &Claimant) -> Result<bool, StoreError> {
        self.inner.renew(key, generation, me)
    }
}

/// The store a run writes, then read-only stores consulted in order when
/// it has no usable record: a pull request's job reads the main branch's
/// records (`--read-store`) and writes only its own store, and a main
/// branch's job, which does not read the pull request's store, never sees
/// what it wrote. Writes, claims and the write probe go to the first store
/// only.
pub struct Layered {
    write: std::sync::Arc<dyn RecordStore>,
    read: Vec<std::sync::Arc<dyn RecordStore>>,
}

impl Layered {
    pub fn new(
        write: std::sync::Arc<dyn RecordStore>,
        read: Vec<std::sync::Arc<dyn RecordStore>>,
    ) -> Layered {
        Layered { write, read }
    }

    /// The first hit of `ask` over the stores in order; else what the
    /// store the run writes said (a damaged or untrusted record there is
    /// then rebuilt and replaced), else a read store's.
    fn first(
        &self,
        ask: impl Fn(&dyn RecordStore) -> Result<Lookup, StoreError>,
    ) -> Result<Lookup, StoreError> {
        let mine = ask(self.write.as_ref())?;
        if matches!(mine, Lookup::Hit(_)) {
            return Ok(mine);
        }
        let mut theirs = Lookup::Miss;
        for s in &self.read {
            // A read store that does not answer is a miss there: the run
            // builds what it cannot find, it does not stop.
            match ask(s.as_ref()) {
                Ok(l @ Lookup::Hit(_)) => return Ok(l),
                Ok(Lookup::Miss) | Err(_) => {}
                Ok(other) => {
                    if matches!(theirs, Lookup::Miss) {
                        theirs = other;
                    }
                }
            }
        }
        Ok(match mine {
            Lookup::Miss => theirs,
            other => other,
        })
    }
}

impl RecordStore for Layered {
    fn get(&self, key: &str) -> Result<Lookup, StoreError> {
        self.first(|s| s.get(key))
    }
    fn put(
        &self,
        record: &Record,
        inputs: &serde_json::Value,
        force: bool,
    ) -> Result<PutOutcome, StoreError> {
        self.write.put(record, inputs, force)
    }
    fn keep(&self, record: &Record, inputs: &serde_json::Value) -> Result<PutOutcome, StoreError> {
        self.write.keep(record, inputs)
    }
    fn latest(&self, target: &str) -> Result<Lookup, StoreError> {
        self.first(|s| s.latest(target))
    }
    fn probe_write(&self) -> Result<(), StoreError> {
        self.write.probe_write()
    }
    fn location(&self) -> String {
        let reads: Vec<String> = self.read.iter().map(|s| s.location()).collect();
        format!(
            "{} (reading also {})",
            self.write.location(),
            reads.join(", ")
        )
    }
    fn answers_locally(&self) -> bool {
        self.write.answers_locally() && self.read.iter().all(|s| s.answers_locally())
    }
    fn claim(&self, key: &str, me: &Claimant) -> Result<Claim, StoreError> {
        self.write.claim(key, me)
    }
    fn newest_claim(&self, key: &str) -> Result<Option<(u64, Option<Claimant>)>, StoreError> {
        self.write.newest_claim(key)
    }
    fn take_over(&self, key: &str, seen: u64, me: &Claimant) -> Result<bool, StoreError> {
        self.write.take_over(key, seen, me)
    }
    fn renew(&self, key: &str, generation: u64, me: &Claimant) -> Result<bool, StoreError> {
        self.write.renew(key, generation, me)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FsStore;
    use std::sync::Arc;

    fn record(key: &str, target: &str, image: &str) -> Record {
        Record {
            format: crate::FORMAT.into(),
            key: key.into(),
            target: target.into(),
            image_id: image.into(),
            image_ref: None,
            digest: None,
            tags: Vec::new(),
            platform: None,
            built_at: "2026-12-04T00:00:00Z".into(),
            node: "n".into(),
            duration_s: 1.0,
            steps_total: 1,
            steps_cached: 0,
            inputs_digest: crate::digest(&crate::payload_bytes(&inputs())),
            check: None,
            signature: None,
        }
    }

    /// A well-formed key.
    fn key_n(n: u32) -> String {
        format!("k1:{n:064x}")
    }

    fn inputs() -> serde_json::Value {
        serde_json::json!({"recipe": "k1"})
    }

    fn temp(what: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "kiln-trust-{what}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Only a store of files on this machine answers locally (its
    /// lookups may run in place on the run's async threads); a signing or
    /// layered store answers locally only when every store under it does.
    #[test]
    fn only_stores_of_local_files_answer_locally() {
        let fs: Arc<dyn RecordStore> = Arc::new(FsStore::new(temp("local")));
        let far: Arc<dyn RecordStore> = Arc::from(
            crate::open("webdav://127.0.0.1:9/records", std::path::Path::new("/")).unwrap(),
        );
        let s3: Arc<dyn RecordStore> =
            Arc::from(crate::open("s3://bucket/prefix", std::path::Path::new("/")).unwrap());
        let oci: Arc<dyn RecordStore> =
            Arc::from(crate::open("oci://127.0.0.1:9/records", std::path::Path::new("/")).unwrap());
        assert!(fs.answers_locally());
        for remote in [&far, &s3, &oci] {
            assert!(!remote.answers_locally(), "{}", remote.location());
        }
        assert!(Trusting::new(fs.clone(), None, Vec::new()).answers_locally());
        assert!(!Trusting::new(far.clone(), None, Vec::new()).answers_locally());
        assert!(Layered::new(fs.clone(), vec![fs.clone()]).answers_locally());
        assert!(!Layered::new(fs.clone(), vec![far.clone()]).answers_locally());
        assert!(!Layered::new(far, vec![fs]).answers_locally());
    }

    #[test]
    fn a_key_file_round_trips_and_its_secret_is_never_shown() {
        let dir = temp("keys");
        let k = SigningKey::generate("ci-main").unwrap();
        let path = dir.join("ci-main.key");
        k.write_new(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Never replaced.
        let again = k.write_new(&path).unwrap_err();
        assert!(again.contains("exists already"), "{again}");
        let read = SigningKey::read(&path).unwrap();
        assert_eq!(read.public(), k.public());
        assert!(k.public().starts_with("ci-main:"));
        let secret = std::fs::read_to_string(&path).unwrap();
        let secret_b64 = secret.trim().split_once(':').unwrap().1.to_string();
        assert!(!format!("{k:?}").contains(&secret_b64), "{k:?}");
        // A signature from the key is trusted by its public half only.
        let signed = k.sign(&record(&key_n(1), "app", "sha256:1"));
        let mine = TrustedKey::parse(&k.public()).unwrap();
        assert_eq!(distrust(&signed, std::slice::from_ref(&mine)), None);
        assert!(
            !serde_json::to_string(&signed)
                .unwrap()
                .contains(&secret_b64)
        );
        let other = SigningKey::generate("ci-main").unwrap();
        let impostor = TrustedKey::parse(&other.public()).unwrap();
        let why = distrust(&signed, &[impostor]).unwrap();
        assert!(why.contains("does not match"), "{why}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_key_is_a_clear_error_that_quotes_nothing_of_it() {
        let k = SigningKey::generate("main").unwrap();
        let text = k.secret.clone();
        let (name, data) = text.split_once(':').unwrap();
        for (bad, says) in [
            (data.to_string(), "no NAME:"),
            (format!("{name}:{}", &data[..40]), "not 64"),
            (format!("{name}:!!{data}"), "not base64"),
            (format!("bad name:{data}"), "key name"),
        ] {
            let e = SigningKey::parse(&bad, "signing key k.key").unwrap_err();
            assert!(e.contains(says) && e.contains("k.key"), "{e}");
            assert!(!e.contains(&data[..20]), "the error quotes the key: {e}");
        }
        // A seed whose public half is another key's.
        let other = SigningKey::generate("main").unwrap();
        let (_, od) = other.secret.split_once(':').unwrap();
        let mut mixed = b64().decode(data).unwrap()[..32].to_vec();
        mixed.extend_from_slice(&b64().decode(od).unwrap()[32..]);
        let e = SigningKey::parse(&format!("main:{}", b64().encode(mixed)), "k").unwrap_err();
        assert!(e.contains("does not belong"), "{e}");
        assert!(TrustedKey::parse("main").is_err());
        assert!(
            TrustedKey::parse("main:AAAA")
                .unwrap_err()
                .contains("not 32")
        );
    }

    /// A pull request's run reads main's store and writes its own; main's
    /// next run never sees what the pull request wrote; a read store is
    /// never written or claimed in.
    #[test]
    fn a_run_reads_its_read_stores_and_writes_only_its_own() {
        let (main_dir, pr_dir) = (temp("main"), temp("pr"));
        let main: Arc<dyn RecordStore> = Arc::new(FsStore::new(&main_dir));
        let pr: Arc<dyn RecordStore> = Arc::new(FsStore::new(&pr_dir));
        main.put(&record(&key_n(1), "a", "sha256:main"), &inputs(), false)
            .unwrap();
        let run = Layered::new(pr.clone(), vec![main.clone()]);
        assert!(
            matches!(run.get(&key_n(1)).unwrap(), Lookup::Hit(e) if e.record.image_id == "sha256:main")
        );
        run.put(&record(&key_n(2), "b", "sha256:pr"), &inputs(), false)
            .unwrap();
        assert!(matches!(pr.get(&key_n(2)).unwrap(), Lookup::Hit(_)));
        assert_eq!(main.get(&key_n(2)).unwrap(), Lookup::Miss);
        assert!(run.location().contains("reading also"));
        // The write store's own record wins over a read store's.
        pr.put(&record(&key_n(1), "a", "sha256:pr-a"), &inputs(), false)
            .unwrap();
        assert!(
            matches!(run.get(&key_n(1)).unwrap(), Lookup::Hit(e) if e.record.image_id == "sha256:pr-a")
        );
        // An untrusted record in the write store gives way to a trusted one
        // in a read store.
        let key = SigningKey::generate("main").unwrap();
        let trusted = vec![TrustedKey::parse(&key.public()).unwrap()];
        main.put(
            &key.sign(&record(&key_n(3), "c", "sha256:signed")),
            &inputs(),
            false,
        )
        .unwrap();
        pr.put(&record(&key_n(3), "c", "sha256:unsigned"), &inputs(), false)
            .unwrap();
        let t = |s: &Arc<dyn RecordStore>| -> Arc<dyn RecordStore> {
            Arc::new(Trusting::new(s.clone(), None, trusted.clone()))
        };
        let run = Layered::new(t(&pr), vec![t(&main)]);
        assert!(
            matches!(run.get(&key_n(3)).unwrap(), Lookup::Hit(e) if e.record.image_id == "sha256:signed")
        );
        let only_pr = Layered::new(t(&pr), Vec::new());
        assert!(
            matches!(only_pr.get(&key_n(3)).unwrap(), Lookup::Untrusted(w) if w.contains("not signed"))
        );
        let _ = std::fs::remove_dir_all(&main_dir);
        let _ = std::fs::remove_dir_all(&pr_dir);
    }
}
