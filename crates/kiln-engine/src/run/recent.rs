//! The record each target last pointed to, read ahead: while the run is
//! prepared (the bake files, the preflight waiting for the engine's
//! answers), a store on this machine is asked for every target's latest
//! record, and on one local engine the unique reference of each recorded
//! image is asked at once. In a run that changes nothing, those are the
//! records its keys find and the images its skips confirm: the warm-up
//! (`target::warm`) then takes a record instead of reading and verifying it
//! again, and finds the engine's answers in.
//!
//! Must never: decide anything. A record read ahead is taken only for the
//! key it is the record of (a target whose inputs changed computes another
//! key and looks it up as before); what the engine answered is only what
//! a later question would have been told.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use kiln_store::{Entry, Lookup, RecordStore};

use crate::spec::{BuildSpec, Endpoint};

type Found = Arc<Mutex<HashMap<String, Box<Entry>>>>;

/// The latest records of a run's targets, being read or read.
#[derive(Clone)]
pub struct Recent(Shared<BoxFuture<'static, Found>>);

impl Recent {
    /// Starts reading, on a thread that yields to the run's
    /// ([`crate::ahead`]), the latest record of each of `specs` from
    /// `store`, and then, on the current runtime, asking the local
    /// engine at `engine` (`None`: a builder or a fleet) about the unique
    /// reference of each recorded image it would hold. `None` when the
    /// store's lookups are not reads of local files: a store across the
    /// network is asked only what the run needs.
    pub fn read_ahead(
        store: Arc<dyn RecordStore>,
        specs: &[BuildSpec],
        engine: Option<Endpoint>,
    ) -> Option<Recent> {
        if !store.answers_locally() || specs.is_empty() {
            return None;
        }
        // (name, whether the engine holds its image)
        let targets: Vec<(String, bool)> = specs
            .iter()
            .map(|s| (s.name.clone(), !s.registry_only()))
            .collect();
        // On a thread that yields to the run's (`crate::ahead`), not the
        // runtime's blocking pool, whose threads the run goes on using.
        let (sender, reading) = tokio::sync::oneshot::channel();
        let started = crate::ahead::spawn("kiln-recent", move || {
            let read: Vec<_> = targets
                .into_iter()
                .filter_map(|(name, held)| match store.latest(&name) {
                    Ok(Lookup::Hit(entry)) => Some((name, held, entry)),
                    _ => None,
                })
                .collect();
            let _ = sender.send(read);
        });
        if started.is_err() {
            return None;
        }
        let found = async move {
            let read = reading.await.unwrap_or_default();
            let unique: Vec<String> = read
                .iter()
                .filter(|(_, held, _)| *held)
                .map(|(name, _, e)| crate::naming::local_ref(name, &e.record.image_id))
                .collect();
            let found: Found = Arc::new(Mutex::new(
                read.into_iter().map(|(name, _, e)| (name, e)).collect(),
            ));
            if let Some(endpoint) = engine
                && !unique.is_empty()
            {
                // Asked beside the run, not waited for: the warm-up's own
                // question waits for a round in flight.
                tokio::spawn(async move {
                    if let Ok(engine) = crate::driver::local::LocalEngine::connect(endpoint).await {
                        let unique: Vec<&str> = unique.iter().map(String::as_str).collect();
                        engine.prefetch_unique(&unique).await;
                    }
                });
            }
            found
        };
        let shared = found.boxed().shared();
        tokio::spawn(shared.clone());
        Some(Recent(shared))
    }

    /// The records read, once the reading is done.
    pub(super) async fn read(&self) -> Found {
        self.0.clone().await
    }
}

/// The record `target` last pointed to, if it is the record of `key`
/// (taken: a record is handed out once).
pub(super) fn take(found: &Found, target: &str, key: &str) -> Option<Box<Entry>> {
    let mut found = found.lock().ok()?;
    if found.get(target)?.record.key != key {
        return None;
    }
    found.remove(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(target: &str, key: &str, inputs: &serde_json::Value) -> kiln_store::Record {
        kiln_store::Record {
            format: kiln_store::FORMAT.into(),
            key: key.into(),
            target: target.into(),
            image_id: format!("sha256:{}", "ab".repeat(32)),
            image_ref: None,
            digest: None,
            tags: Vec::new(),
            platform: None,
            built_at: "2026-12-01T00:00:00Z".into(),
            node: "local".into(),
            duration_s: 1.0,
            steps_total: 1,
            steps_cached: 0,
            inputs_digest: kiln_store::digest(&kiln_store::payload_bytes(inputs)),
            check: None,
            signature: None,
        }
    }

    fn spec(name: &str) -> BuildSpec {
        BuildSpec {
            name: name.into(),
            ..BuildSpec::default()
        }
    }

    #[test]
    fn a_record_read_ahead_is_taken_once_and_only_for_its_own_key() {
        let dir = std::env::temp_dir().join(format!("kiln-recent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store: Arc<dyn RecordStore> = Arc::new(kiln_store::FsStore::new(dir.clone()));
        let inputs = serde_json::json!({"files": {}});
        let key = format!("k1:{}", "01".repeat(32));
        store
            .put(&record("a", &key, &inputs), &inputs, false)
            .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let found = rt.block_on(async {
            let recent = Recent::read_ahead(store.clone(), &[spec("a"), spec("b")], None)
                .expect("a store on this machine is read ahead");
            recent.read().await
        });
        // Only what a target points to is there: b was never recorded.
        assert!(take(&found, "b", &key).is_none());
        // Another key (its inputs changed): looked up as before, not taken.
        let other = format!("k1:{}", "02".repeat(32));
        assert!(take(&found, "a", &other).is_none());
        let taken = take(&found, "a", &key).expect("the record of its own key");
        assert_eq!(taken.record.key, key);
        assert_eq!(taken.inputs, inputs);
        // Once: a second lookup of the key reads the store.
        assert!(take(&found, "a", &key).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_store_across_the_network_is_not_read_ahead() {
        struct Remote;
        impl RecordStore for Remote {
            fn get(&self, _: &str) -> Result<Lookup, kiln_store::StoreError> {
                unreachable!("not asked")
            }
            fn put(
                &self,
                _: &kiln_store::Record,
                _: &serde_json::Value,
                _: bool,
            ) -> Result<kiln_store::PutOutcome, kiln_store::StoreError> {
                unreachable!("not asked")
            }
            fn latest(&self, _: &str) -> Result<Lookup, kiln_store::StoreError> {
                unreachable!("not asked")
            }
            fn probe_write(&self) -> Result<(), kiln_store::StoreError> {
                Ok(())
            }
            fn location(&self) -> String {
                "remote".into()
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _rt = rt.enter();
        assert!(Recent::read_ahead(Arc::new(Remote), &[spec("a")], None).is_none());
    }
}
