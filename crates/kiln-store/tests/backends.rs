//! The record protocol and its damage cases on every back end, against real
//! servers: a directory (always), an OCI registry (`KILN_REGISTRY`, from
//! `scripts/dev-env up`), S3 and WebDAV (`KILN_TEST_S3_*`,
//! `KILN_TEST_WEBDAV*`, from `scripts/store-servers up`: moto's S3 server
//! and nginx's DAV module, each with a writer and a read-only reader).
//!
//! One test runs every case on every back end that is there and prints the
//! case count and the result as one line. A back end whose environment is
//! missing is skipped with a note, unless `KILN_E2E=1` (CI), which makes
//! that a failure. Each run uses namespaces nobody else uses.
//!
//! Signed records (docs/trust.md) are checked on every back end too: a
//! record changed in the store and sealed again is not trusted.
//!
//! For every case: no false hit (a lookup is a hit only with the record
//! that was written), no torn record, no acknowledged record lost, and
//! errors that name the store.
//!
//! The damage cases reach under the protocol: the filesystem, S3 and
//! WebDAV objects are replaced; the OCI store's records are damaged through
//! the registry's own API (different bytes pushed, the manifest under the
//! same tag PUT again naming them) and through `scripts/registry-faults`
//! in front of it, which serves cut or changed bytes for a blob's digest
//! (`common/registry.rs`).

mod common;

use common::*;
use kiln_store::objects;
use kiln_store::{Claim, ClaimState, Claimant, Lookup, PutOutcome, Record, StoreError};
use serde_json::json;

/// The record a lookup found, with its seal taken off (the store seals).
fn found(l: &Lookup) -> Option<Record> {
    match l {
        Lookup::Hit(e) => {
            let mut r = e.record.clone();
            r.check = None;
            Some(r)
        }
        _ => None,
    }
}

/// Counts cases and keeps what failed.
struct Cases {
    backend: &'static str,
    count: usize,
    failed: Vec<String>,
}

impl Cases {
    fn check(&mut self, case: &str, ok: bool, detail: impl FnOnce() -> String) {
        self.count += 1;
        if !ok {
            self.failed
                .push(format!("{}: {case}: {}", self.backend, detail()));
        }
    }
}

/// The protocol: miss, round trip, latest, create-if-absent, force, a
/// second key, inputs that do not match, the write probe, read-only
/// credentials, concurrent writers.
fn protocol(b: &Backend, c: &mut Cases) {
    let s = &b.store;
    let inputs = json!({"files": {"a": "blake3:01"}, "args": {"X": "1"}});
    let (k1, k2) = (key(1), key(2));
    let r1 = record(&k1, "app", "sha256:1111111111111111", &inputs);
    let l = s.get(&k1);
    c.check(
        "a key never written is a miss",
        matches!(l, Ok(Lookup::Miss)),
        || format!("{l:?}"),
    );
    let l = s.latest("app");
    c.check(
        "a target never built has no latest",
        matches!(l, Ok(Lookup::Miss)),
        || format!("{l:?}"),
    );
    let p = s.put(&r1, &inputs, false);
    c.check(
        "a first put writes",
        matches!(p, Ok(PutOutcome::Written)),
        || format!("{p:?}"),
    );
    let l = s.get(&k1);
    c.check(
        "a written record reads back as written",
        l.as_ref().ok().and_then(found) == Some(r1.clone()),
        || format!("{l:?}"),
    );
    c.check(
        "its input manifest reads back",
        matches!(&l, Ok(Lookup::Hit(e)) if e.inputs == inputs),
        || format!("{l:?}"),
    );
    let l = s.latest("app");
    c.check(
        "latest names the written record",
        l.as_ref().ok().and_then(found) == Some(r1.clone()),
        || format!("{l:?}"),
    );
    let mut other = r1.clone();
    other.image_id = "sha256:2222222222222222".into();
    let p = s.put(&other, &inputs, false);
    c.check(
        "a second writer of a key finds it present",
        matches!(p, Ok(PutOutcome::AlreadyPresent)),
        || format!("{p:?}"),
    );
    let l = s.get(&k1);
    c.check(
        "the first record stands",
        l.as_ref().ok().and_then(found) == Some(r1.clone()),
        || format!("{l:?}"),
    );
    let p = s.put(&other, &inputs, true);
    c.check(
        "force replaces",
        matches!(p, Ok(PutOutcome::Replaced)),
        || format!("{p:?}"),
    );
    let l = (b.another)().get(&k1);
    c.check(
        "another client reads the replacement",
        l.as_ref().ok().and_then(found) == Some(other.clone()),
        || format!("{l:?}"),
    );
    let inputs2 = json!({"files": {"a": "blake3:02"}});
    let r2 = record(&k2, "app", "sha256:3333333333333333", &inputs2);
    let p = s.put(&r2, &inputs2, false);
    c.check(
        "a second key writes",
        matches!(p, Ok(PutOutcome::Written)),
        || format!("{p:?}"),
    );
    let l = s.latest("app");
    c.check(
        "latest moves to the second key",
        l.as_ref().ok().and_then(found) == Some(r2.clone()),
        || format!("{l:?}"),
    );
    let l = s.get(&k1);
    c.check(
        "the first key is still there",
        l.as_ref().ok().and_then(found) == Some(other.clone()),
        || format!("{l:?}"),
    );
    // Keeping a hit (what a skipped target does): nothing is rewritten,
    // the latest pointer comes back to it; a record the store lacks (a hit
    // in a store it also reads) is written.
    let mut stale = other.clone();
    stale.image_id = "sha256:7777777777777777".into();
    let p = s.keep(&stale, &inputs);
    c.check(
        "keeping a record the store holds writes no record",
        matches!(p, Ok(PutOutcome::AlreadyPresent | PutOutcome::Written)),
        || format!("{p:?}"),
    );
    let l = s.get(&k1);
    c.check(
        "and the record there stands",
        l.as_ref().ok().and_then(found) == Some(other.clone()),
        || format!("{l:?}"),
    );
    let l = s.latest("app");
    c.check(
        "and latest names it again",
        l.as_ref().ok().and_then(found) == Some(other.clone()),
        || format!("{l:?}"),
    );
    let r6 = record(&key(6), "kept", "sha256:8888888888888888", &inputs2);
    let p = s.keep(&r6, &inputs2);
    c.check(
        "keeping a record the store lacks writes it",
        matches!(p, Ok(PutOutcome::Written)),
        || format!("{p:?}"),
    );
    let l = (b.another)().get(&key(6));
    c.check(
        "and it reads back with its inputs",
        matches!(&l, Ok(Lookup::Hit(e)) if e.inputs == inputs2)
            && l.as_ref().ok().and_then(found) == Some(r6.clone()),
        || format!("{l:?}"),
    );
    let p = s.put(&r2, &inputs2, false);
    c.check(
        "putting the second key again moves latest back",
        p.is_ok() && s.latest("app").ok().as_ref().and_then(found) == Some(r2.clone()),
        || format!("{p:?}"),
    );
    let mut bad = record(&key(3), "app", "sha256:4444444444444444", &inputs);
    bad.inputs_digest = "blake3:00".into();
    let p = s.put(&bad, &inputs, false);
    c.check(
        "inputs that do not hash to the record's digest are refused",
        matches!(p, Err(StoreError::Invalid(_))),
        || format!("{p:?}"),
    );
    let l = s.get(&key(3));
    c.check(
        "and nothing was recorded",
        matches!(l, Ok(Lookup::Miss)),
        || format!("{l:?}"),
    );
    let p = s.probe_write();
    c.check(
        "the write probe passes with write access",
        p.is_ok(),
        || format!("{p:?}"),
    );
    if let Some(reader) = &b.reader {
        let l = reader.get(&k2);
        c.check(
            "read-only credentials read",
            l.as_ref().ok().and_then(found) == Some(r2.clone()),
            || format!("{l:?}"),
        );
        let p = reader.probe_write();
        let named = |e: &StoreError| {
            let m = e.to_string();
            m.contains(&s.location()) && m.contains("403") && m.contains("may not")
        };
        c.check(
            "the write probe fails with read-only credentials, naming the store and what to do",
            matches!(&p, Err(e @ StoreError::Unavailable { .. }) if named(e)),
            || format!("{p:?}"),
        );
        let r4 = record(&key(4), "lib", "sha256:5555555555555555", &inputs);
        let p = reader.put(&r4, &inputs, false);
        c.check(
            "a read-only put is an error naming the store",
            matches!(&p, Err(e) if named(e)),
            || format!("{p:?}"),
        );
        let l = s.get(&key(4));
        c.check(
            "and nothing was recorded",
            matches!(l, Ok(Lookup::Miss)),
            || format!("{l:?}"),
        );
    }
    // Racing writers of one key, each with its own client.
    let k5 = key(5);
    let inputs5 = json!({"race": true});
    let outcomes: Vec<Result<PutOutcome, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let store = (b.another)();
                let (k5, inputs5) = (&k5, &inputs5);
                scope.spawn(move || {
                    let r = record(k5, "race", &format!("sha256:{i:016}"), inputs5);
                    store.put(&r, inputs5, false).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let written = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(PutOutcome::Written)))
        .count();
    c.check(
        "racing writers all finish",
        outcomes.iter().all(Result::is_ok),
        || format!("{outcomes:?}"),
    );
    c.check(
        "exactly one racing writer wins where create-if-absent is atomic",
        if b.atomic { written == 1 } else { written >= 1 },
        || format!("{outcomes:?}"),
    );
    let l = s.get(&k5);
    // The record that stands is one a writer wrote; where create-if-absent
    // is atomic, it is the one whose put said Written.
    let winner = outcomes
        .iter()
        .position(|o| matches!(o, Ok(PutOutcome::Written)))
        .map(|i| format!("sha256:{i:016}"));
    c.check(
        "the race leaves one whole record, the winner's",
        matches!(&l, Ok(Lookup::Hit(e)) if e.record.key == k5
            && (0..8).any(|i| e.record.image_id == format!("sha256:{i:016}"))
            && (!b.atomic || Some(&e.record.image_id) == winner.as_ref())),
        || format!("{l:?} {winner:?}"),
    );
    // Racing writers of different keys: every one recorded.
    let keys: Vec<String> = (10..18).map(key).collect();
    std::thread::scope(|scope| {
        for k in &keys {
            let store = (b.another)();
            let inputs = &inputs;
            scope.spawn(move || {
                let r = record(k, "many", "sha256:6666666666666666", inputs);
                store.put(&r, inputs, false)
            });
        }
    });
    let all = keys
        .iter()
        .all(|k| matches!(s.get(k), Ok(Lookup::Hit(e)) if e.record.key == *k));
    c.check(
        "concurrent writers of different keys all record",
        all,
        String::new,
    );
}

/// Damage under the protocol: every lookup of a damaged record is a miss
/// (with a reason) or the record as written, never another record. Each
/// back end is damaged the way its storage can be ([`Damage`]): objects
/// replaced; on a registry, different bytes pushed under the same tag
/// ([`How::Stored`]) or served for a blob's digest ([`How::Served`]).
fn damage(b: &Backend, c: &mut Cases) {
    let Some(d) = &b.damage else { return };
    let s = &b.store;
    let inputs = json!({"d": 1});
    let k = key(100);
    let r = record(&k, "dmg", "sha256:7777777777777777", &inputs);
    s.put(&r, &inputs, false).expect("a first put");
    let good = d.record(&k);
    let not_false = |l: &Result<Lookup, StoreError>| match l {
        Ok(Lookup::Hit(_)) => found(l.as_ref().unwrap()) == Some(r.clone()),
        Ok(Lookup::Corrupt(_)) | Ok(Lookup::Miss) => true,
        // A plain store never judges trust.
        Ok(Lookup::Untrusted(_)) | Err(_) => false,
    };
    // A miss for bytes served in place of a blob: where blobs are named by
    // their digest, because of the digest.
    let served_miss = |l: &Result<Lookup, StoreError>| match l {
        Ok(Lookup::Corrupt(why)) => !d.by_digest() || why.contains("does not match its digest"),
        _ => false,
    };
    // One bit flipped at every position of the record.
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 1 << (i % 8);
        d.record_becomes(&k, &bad, How::Stored);
        let l = s.get(&k);
        c.check(
            &format!("bit {} of byte {i} flipped", i % 8),
            not_false(&l),
            || format!("{l:?}"),
        );
    }
    // Truncated, emptied, another key's record, an unknown format.
    for len in [0, 1, good.len() / 2, good.len() - 1] {
        d.record_becomes(&k, &good[..len], How::Served);
        let l = s.get(&k);
        c.check(
            &format!("the record cut to {len} bytes is a miss"),
            served_miss(&l),
            || format!("{l:?}"),
        );
    }
    let other_key =
        serde_json::to_vec(&record(&key(101), "dmg", "sha256:8888888888888888", &inputs).sealed())
            .unwrap();
    d.record_becomes(&k, &other_key, How::Stored);
    let l = s.get(&k);
    c.check(
        "another key's record is a miss",
        matches!(&l, Ok(Lookup::Corrupt(w)) if w.contains("names key")),
        || format!("{l:?}"),
    );
    let mut v0 = r.clone();
    v0.format = "kiln-record-v0".into();
    d.record_becomes(&k, &serde_json::to_vec(&v0).unwrap(), How::Stored);
    let l = s.get(&k);
    c.check(
        "an unknown format version is a miss",
        matches!(&l, Ok(Lookup::Corrupt(w)) if w.contains("format")),
        || format!("{l:?}"),
    );
    if b.put_repairs {
        // A put repairs a damaged record (it is not "already present").
        let p = s.put(&r, &inputs, false);
        c.check(
            "a put over a damaged record repairs it",
            matches!(p, Ok(PutOutcome::Replaced)),
            || format!("{p:?}"),
        );
    } else {
        // Create-if-absent leaves it; the rebuild's forced put repairs it.
        let p = s.put(&r, &inputs, false);
        let l = s.get(&k);
        c.check(
            "a put over a damaged record leaves it to a forced put",
            matches!(p, Ok(PutOutcome::AlreadyPresent)) && matches!(l, Ok(Lookup::Corrupt(_))),
            || format!("{p:?} {l:?}"),
        );
        let p = s.put(&r, &inputs, true);
        c.check(
            "a forced put over a damaged record repairs it",
            matches!(p, Ok(PutOutcome::Replaced)),
            || format!("{p:?}"),
        );
    }
    let l = s.get(&k);
    c.check(
        "and it reads back",
        found(l.as_ref().unwrap()) == Some(r.clone()),
        || format!("{l:?}"),
    );
    // The payload: flipped, cut, missing.
    let payload = d.payload(&r);
    for i in 0..payload.len() {
        let mut bad = payload.clone();
        bad[i] ^= 1 << (i % 8);
        d.payload_becomes(&r, &bad, How::Stored);
        let l = s.get(&k);
        c.check(
            &format!("payload byte {i} flipped is a miss"),
            matches!(l, Ok(Lookup::Corrupt(_))),
            || format!("{l:?}"),
        );
    }
    d.payload_becomes(&r, &payload[..payload.len() / 2], How::Served);
    let l = s.get(&k);
    c.check("a cut payload is a miss", served_miss(&l), || {
        format!("{l:?}")
    });
    d.payload_becomes(&r, b"", How::Stored);
    let l = s.get(&k);
    c.check(
        "an emptied payload is a miss",
        matches!(l, Ok(Lookup::Corrupt(_))),
        || format!("{l:?}"),
    );
    let p = s.put(&r, &inputs, true);
    c.check(
        "force repairs a damaged payload",
        p.is_ok() && matches!(s.get(&k), Ok(Lookup::Hit(_))),
        || format!("{p:?}"),
    );
    // The latest pointer: garbage, a key without a record.
    d.pointer_becomes("dmg", b"\xff\xfe not a key");
    let l = s.latest("dmg");
    c.check(
        "a garbled latest pointer is damage, not never-built",
        matches!(l, Ok(Lookup::Corrupt(_))),
        || format!("{l:?}"),
    );
    d.pointer_becomes("dmg", key(999).as_bytes());
    let l = s.latest("dmg");
    c.check(
        "a pointer to a key without a record is damage",
        matches!(l, Ok(Lookup::Corrupt(_))),
        || format!("{l:?}"),
    );
    if d.by_digest() {
        // Where blobs are named by their digest, a whole other blob served
        // under it is damage too: a record of this key, sealed and readable,
        // that names another image (only the digest tells: read without it,
        // it is a false hit), a payload that is readable JSON.
        let mut other = r.clone();
        other.image_id = "sha256:9999999999999999".into();
        let other = serde_json::to_vec_pretty(&other.sealed()).unwrap();
        d.record_becomes(&k, &other, How::Served);
        let l = s.get(&k);
        c.check(
            "another whole record served under the record's digest is a miss",
            served_miss(&l),
            || format!("{l:?}"),
        );
        d.payload_becomes(&r, br#"{"d":2}"#, How::Served);
        let l = s.get(&k);
        c.check(
            "another whole payload served under the payload's digest is a miss",
            served_miss(&l),
            || format!("{l:?}"),
        );
    }
}

fn claimant(who: &str, beat: u64, state: ClaimState) -> Claimant {
    Claimant {
        holder: format!("{who}@host pid 1"),
        run_id: who.into(),
        target: "app".into(),
        node: "local".into(),
        since: "2026-12-02T10:00:00Z".into(),
        beat,
        state,
    }
}

/// Claims (cross-run deduplication): the first claimant wins, the next
/// sees who holds it, renewals show, exactly one of racing takers takes a
/// claim over, a superseded holder writes nothing, an ended or damaged
/// claim is followed by the next generation, a read-only client cannot
/// claim; a store without create-if-absent says it cannot hold claims.
fn claims(b: &Backend, c: &mut Cases) {
    let s = &b.store;
    let k = key(70);
    let (a, bb, cc) = (
        claimant("a", 0, ClaimState::Building),
        claimant("b", 0, ClaimState::Building),
        claimant("c", 0, ClaimState::Building),
    );
    let r = s.claim(&k, &a);
    if !b.atomic {
        c.check(
            "a store without create-if-absent holds no claims",
            matches!(r, Ok(Claim::Unsupported)),
            || format!("{r:?}"),
        );
        return;
    }
    c.check(
        "the first claimant wins generation 0",
        r.as_ref().ok() == Some(&Claim::Won { generation: 0 }),
        || format!("{r:?}"),
    );
    let r = (b.another)().claim(&k, &bb);
    c.check(
        "the next claimant sees who holds it",
        r.as_ref().ok()
            == Some(&Claim::Held {
                generation: 0,
                claimant: a.clone(),
            }),
        || format!("{r:?}"),
    );
    let a1 = claimant("a", 1, ClaimState::Building);
    let r = s.renew(&k, 0, &a1);
    c.check("the holder renews", matches!(r, Ok(true)), || {
        format!("{r:?}")
    });
    let r = (b.another)().newest_claim(&k);
    c.check(
        "a renewal shows to others",
        matches!(&r, Ok(Some((0, Some(x)))) if x.beat == 1),
        || format!("{r:?}"),
    );
    // Two waiters find the holder dead and take over at once.
    let (tb, tc) = std::thread::scope(|scope| {
        let hb = scope.spawn(|| (b.another)().take_over(&k, 0, &bb));
        let hc = scope.spawn(|| (b.another)().take_over(&k, 0, &cc));
        (hb.join().unwrap(), hc.join().unwrap())
    });
    c.check(
        "exactly one of two takers takes a claim over",
        matches!((&tb, &tc), (Ok(true), Ok(false)) | (Ok(false), Ok(true))),
        || format!("{tb:?} {tc:?}"),
    );
    let taker = if matches!(tb, Ok(true)) { &bb } else { &cc };
    let r = s.renew(&k, 0, &claimant("a", 2, ClaimState::Building));
    c.check(
        "a superseded holder's renewal is refused",
        matches!(r, Ok(false)),
        || format!("{r:?}"),
    );
    let r = s.claim(&k, &a);
    c.check(
        "the taker's claim is the one that stands",
        r.as_ref().ok()
            == Some(&Claim::Held {
                generation: 1,
                claimant: taker.clone(),
            }),
        || format!("{r:?}"),
    );
    let mut done = taker.clone();
    done.state = ClaimState::Done;
    let r = (b.another)().renew(&k, 1, &done);
    c.check("the taker ends its claim", matches!(r, Ok(true)), || {
        format!("{r:?}")
    });
    let r = s.claim(&k, &a);
    c.check(
        "an ended claim is followed by the next generation",
        r.as_ref().ok() == Some(&Claim::Won { generation: 2 }),
        || format!("{r:?}"),
    );
    let r = s.renew(&k, 2, &claimant("a", 1, ClaimState::Failed));
    c.check(
        "a failed build ends its claim",
        matches!(r, Ok(true)),
        || format!("{r:?}"),
    );
    let r = (b.another)().claim(&k, &bb);
    c.check(
        "a failed claim is followed by the next generation",
        r.as_ref().ok() == Some(&Claim::Won { generation: 3 }),
        || format!("{r:?}"),
    );
    if let Some(raw) = &b.raw {
        let w = raw.replace(&objects::claim_name(&k, 3), b"{not json");
        let r = s.claim(&k, &a);
        c.check(
            "a damaged claim is followed by the next generation",
            w.is_ok() && r.as_ref().ok() == Some(&Claim::Won { generation: 4 }),
            || format!("{w:?} {r:?}"),
        );
    }
    // Eight runs claim a fresh key at once: one wins, seven see it held.
    let k8 = key(71);
    let results: Vec<_> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let k8 = &k8;
                scope.spawn(move || {
                    (b.another)().claim(k8, &claimant(&format!("r{i}"), 0, ClaimState::Building))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won = results
        .iter()
        .filter(|r| matches!(r, Ok(Claim::Won { generation: 0 })))
        .count();
    let held = results
        .iter()
        .filter(|r| matches!(r, Ok(Claim::Held { generation: 0, .. })))
        .count();
    c.check(
        "one of eight racing claimants wins, seven see it held",
        won == 1 && held == 7,
        || format!("{results:?}"),
    );
    if let Some(reader) = &b.reader {
        let r = reader.claim(&key(72), &a);
        c.check(
            "a read-only client cannot claim, and the error names the store",
            matches!(&r, Err(e) if e.to_string().contains(&reader.location())),
            || format!("{r:?}"),
        );
    }
}

/// Signed records on this back end (docs/trust.md): a record signed with
/// the run's key is a hit for a run that trusts that key, and a miss that
/// says why for one trusting another key or reading an unsigned record; a
/// record whose image is changed in the store and whose seal is computed
/// again — what anyone with write access can do — still passes the seal,
/// but its signature does not match.
fn trust(b: &Backend, c: &mut Cases) {
    use kiln_store::trust::{SigningKey, TrustedKey, Trusting};
    let main = std::sync::Arc::new(SigningKey::generate("main").unwrap());
    let other = SigningKey::generate("pr-jobs").unwrap();
    let trusting = |keys: &[&SigningKey]| {
        Trusting::new(
            b.store.clone(),
            None,
            keys.iter()
                .map(|k| TrustedKey::parse(&k.public()).unwrap())
                .collect(),
        )
    };
    let writer = Trusting::new(b.store.clone(), Some(main.clone()), Vec::new());
    let inputs = json!({"trust": b.name});
    let (signed, unsigned) = (key(9001), key(9002));
    writer
        .put(
            &record(&signed, "app", "sha256:good", &inputs),
            &inputs,
            false,
        )
        .unwrap();
    b.store
        .put(
            &record(&unsigned, "app", "sha256:plain", &inputs),
            &inputs,
            false,
        )
        .unwrap();
    use kiln_store::RecordStore as _;
    let got = trusting(&[&main]).get(&signed).unwrap();
    c.check(
        "a record signed by a trusted key is a hit",
        matches!(&got, Lookup::Hit(e) if e.record.signature.as_ref().is_some_and(|s| s.signer == "main")),
        || format!("{got:?}"),
    );
    let got = trusting(&[&other]).get(&signed).unwrap();
    c.check(
        "a record signed by a key not trusted is untrusted",
        matches!(&got, Lookup::Untrusted(w) if w.contains("signed by main, which is not trusted")),
        || format!("{got:?}"),
    );
    let got = trusting(&[&main]).get(&unsigned).unwrap();
    c.check(
        "an unsigned record is untrusted where keys are trusted",
        matches!(&got, Lookup::Untrusted(w) if w.contains("is not signed")),
        || format!("{got:?}"),
    );
    let got = b.store.get(&unsigned).unwrap();
    c.check(
        "without trusted keys every record counts",
        matches!(got, Lookup::Hit(_)),
        || format!("{got:?}"),
    );
    let Some(d) = &b.damage else {
        return;
    };
    let mut doc: serde_json::Value = serde_json::from_slice(&d.record(&signed)).unwrap();
    doc["image_id"] = json!("sha256:evil");
    doc["check"] = json!(kiln_store::seal_of(&doc));
    d.record_becomes(&signed, &serde_json::to_vec(&doc).unwrap(), How::Stored);
    let got = b.store.get(&signed).unwrap();
    c.check(
        "a record changed and sealed again passes the seal",
        matches!(&got, Lookup::Hit(e) if e.record.image_id == "sha256:evil"),
        || format!("{got:?}"),
    );
    let got = trusting(&[&main]).get(&signed).unwrap();
    c.check(
        "a record changed after it was signed is untrusted",
        matches!(&got, Lookup::Untrusted(w) if w.contains("does not match")),
        || format!("{got:?}"),
    );
}

#[test]
fn every_back_end_keeps_the_protocol_under_damage() {
    let mut backends = vec![fs_backend()];
    backends.extend(oci_backend());
    backends.extend(s3_backend());
    backends.extend(dav_backend());
    let results: Vec<Cases> = std::thread::scope(|scope| {
        let handles: Vec<_> = backends
            .iter()
            .map(|b| {
                scope.spawn(move || {
                    let mut c = Cases {
                        backend: b.name,
                        count: 0,
                        failed: Vec::new(),
                    };
                    protocol(b, &mut c);
                    damage(b, &mut c);
                    claims(b, &mut c);
                    trust(b, &mut c);
                    c
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: usize = results.iter().map(|c| c.count).sum();
    let failed: Vec<&String> = results.iter().flat_map(|c| &c.failed).collect();
    let per: Vec<String> = results
        .iter()
        .map(|c| format!("{} {}", c.backend, c.count))
        .collect();
    println!(
        "store fault matrix: {total} cases on {} back ends ({}): {} passed, {} failed",
        results.len(),
        per.join(", "),
        total - failed.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{}",
        failed
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
