//! Cross-run deduplication: two runs (two CI jobs, two developers) that
//! need the same key at the same time build it once (docs/store-claims.md).
//!
//! Before building a key it missed, a run claims the key in the record
//! store (`RecordStore::claim`: a create-if-absent object per generation).
//! The winner builds, renewing its claim (a `beat` counter) every quarter
//! of the lease; when it has recorded the build it ends the claim (`done`),
//! when the build fails it ends it `failed`. A run that finds the key
//! claimed waits, saying for whom, and looks the record up until it
//! appears (then it skips, as for any hit). A claim whose beat has not
//! moved for a whole lease — measured on the waiter's own clock, so clocks
//! of different machines are never compared — is taken over: exactly one
//! waiter creates the next generation and builds. A store that cannot
//! create an object only if it is absent (the OCI registry store) holds no
//! claims: the run says so once and builds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kiln_store::{Claim, ClaimState, Claimant, Lookup, RecordStore, StoreError};

use crate::error::EngineError;

/// The lease when `KILN_CLAIM_TTL` does not set one.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// `KILN_CLAIM_TTL` (seconds; `0` turns claims off): the lease of a claim.
/// `Err` says what is wrong with the value.
pub fn ttl_from_env() -> Result<Option<Duration>, String> {
    ttl_from(std::env::var("KILN_CLAIM_TTL").ok().as_deref())
}

fn ttl_from(v: Option<&str>) -> Result<Option<Duration>, String> {
    match v.map(str::trim) {
        None | Some("") => Ok(Some(DEFAULT_TTL)),
        Some(t) => match t.parse::<f64>() {
            Ok(0.0) => Ok(None),
            Ok(s) if s.is_finite() && s >= 1.0 => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err(format!(
                "KILN_CLAIM_TTL={t:?} is not a number of seconds (at least 1, or 0 to turn claims off)"
            )),
        },
    }
}

/// Who this process is, for the claims it makes: `user@host pid N`.
pub fn holder() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{user}@{host} pid {}", std::process::id())
}

/// What the run does about a key it missed.
pub enum Decision {
    /// Build it, holding this claim (`None`: without one).
    Build(Option<Holding>),
    /// The record appeared while waiting: look it up again.
    Recorded { waited: Duration, holder: String },
}

/// A claim this run holds while it builds; renewed in the background
/// until [`Holding::end`] (or dropped, which stops renewing: the claim then
/// expires for waiters).
pub struct Holding {
    store: Arc<dyn RecordStore>,
    key: String,
    generation: u64,
    me: Claimant,
    beat: Arc<AtomicU64>,
    renewer: tokio::task::JoinHandle<()>,
}

impl Holding {
    fn start(
        store: Arc<dyn RecordStore>,
        key: String,
        generation: u64,
        me: Claimant,
        ttl: Duration,
        say: Arc<dyn Fn(String) + Send + Sync>,
    ) -> Holding {
        let beat = Arc::new(AtomicU64::new(me.beat));
        let renewer = {
            let (store, key, me, beat) = (store.clone(), key.clone(), me.clone(), beat.clone());
            tokio::spawn(async move {
                let mut warned = false;
                loop {
                    tokio::time::sleep(ttl / 4).await;
                    let mut now = me.clone();
                    now.beat = beat.fetch_add(1, Ordering::Relaxed) + 1;
                    let k = key.clone();
                    match call(&store, move |s| s.renew(&k, generation, &now)).await {
                        Ok(true) => {}
                        Ok(false) => {
                            say(format!(
                                "another run took over the claim on key {key} (this run's renewals were late); building on, its record stands if it is first"
                            ));
                            return;
                        }
                        Err(e) if !warned => {
                            warned = true;
                            say(format!(
                                "could not renew the claim on key {key} ({e}); other runs may take the build over"
                            ));
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        Holding {
            store,
            key,
            generation,
            me,
            beat,
            renewer,
        }
    }

    /// Stops renewing and ends the claim: `Done` after the record is
    /// written, `Failed` when there is none (waiters then build).
    pub async fn end(self, state: ClaimState) {
        self.renewer.abort();
        let mut last = self.me.clone();
        last.beat = self.beat.load(Ordering::Relaxed) + 1;
        last.state = state;
        let (key, generation) = (self.key.clone(), self.generation);
        let _ = call(&self.store, move |s| s.renew(&key, generation, &last)).await;
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn call<T: Send + 'static>(
    store: &Arc<dyn RecordStore>,
    f: impl FnOnce(&dyn RecordStore) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, String> {
    let store = store.clone();
    match tokio::task::spawn_blocking(move || f(store.as_ref())).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("record store task failed: {e}")),
    }
}

/// How often a waiter looks: often enough to see a record soon after it
/// appears, never more than every 2 s.
fn poll_interval(ttl: Duration) -> Duration {
    (ttl / 8).clamp(Duration::from_millis(200), Duration::from_secs(2))
}

/// Claims `key` for `me`, or waits for the run that holds it: see the
/// module docs. `say` tells the user what happens (who is waited for,
/// a take-over); `unsupported` is called when the store holds no claims.
pub async fn claim_or_wait(
    store: &Arc<dyn RecordStore>,
    key: &str,
    me: Claimant,
    ttl: Duration,
    say: Arc<dyn Fn(String) + Send + Sync>,
    unsupported: impl FnOnce(),
) -> Result<Decision, EngineError> {
    let t0 = Instant::now();
    let holding = |generation: u64| {
        Decision::Build(Some(Holding::start(
            store.clone(),
            key.to_string(),
            generation,
            me.clone(),
            ttl,
            say.clone(),
        )))
    };
    let mut unsupported = Some(unsupported);
    let mut last_said: Option<(u64, String)> = None;
    loop {
        let (k, m) = (key.to_string(), me.clone());
        let (generation, claimant) = match call(store, move |s| s.claim(&k, &m)).await {
            Ok(Claim::Won { generation }) => return Ok(holding(generation)),
            Ok(Claim::Unsupported) => {
                if let Some(f) = unsupported.take() {
                    f();
                }
                return Ok(Decision::Build(None));
            }
            Ok(Claim::Held {
                generation,
                claimant,
            }) => (generation, claimant),
            Err(e) => {
                say(format!(
                    "could not claim key {key} ({e}); building without a claim (another run may build it too)"
                ));
                return Ok(Decision::Build(None));
            }
        };
        if last_said.as_ref() != Some(&(generation, claimant.holder.clone())) {
            say(format!(
                "waiting for {} (run {}, node {}), which has been building this key since {}; its record will be used when it appears",
                claimant.holder, claimant.run_id, claimant.node, claimant.since
            ));
            last_said = Some((generation, claimant.holder.clone()));
        }
        // Watch the claim: its beat must move within every lease.
        let mut seen = (generation, claimant.beat);
        let mut moved = Instant::now();
        let mut reminded = Instant::now();
        loop {
            tokio::time::sleep(poll_interval(ttl)).await;
            let k = key.to_string();
            match call(store, move |s| s.get(&k)).await {
                Ok(Lookup::Miss) => {}
                // A record (or damage, which the run repairs by building).
                Ok(_) => {
                    return Ok(Decision::Recorded {
                        waited: t0.elapsed(),
                        holder: claimant.holder.clone(),
                    });
                }
                Err(e) => {
                    say(format!(
                        "stopped waiting for {}: the record store failed ({e}); building",
                        claimant.holder
                    ));
                    return Ok(Decision::Build(None));
                }
            }
            let k = key.to_string();
            let newest = match call(store, move |s| s.newest_claim(&k)).await {
                Ok(n) => n,
                Err(e) => {
                    say(format!(
                        "stopped waiting for {}: the record store failed ({e}); building",
                        claimant.holder
                    ));
                    return Ok(Decision::Build(None));
                }
            };
            match newest {
                Some((g, Some(c))) if c.state == ClaimState::Building => {
                    if (g, c.beat) != seen {
                        seen = (g, c.beat);
                        moved = Instant::now();
                        if g != generation {
                            // Someone else took it over: wait for them.
                            break;
                        }
                    } else if moved.elapsed() >= ttl {
                        say(format!(
                            "{} has not renewed its claim for {:.0} s (the lease); taking the build over",
                            c.holder,
                            ttl.as_secs_f64()
                        ));
                        let (k, m) = (key.to_string(), me.clone());
                        match call(store, move |s| s.take_over(&k, g, &m)).await {
                            Ok(true) => return Ok(holding(g + 1)),
                            // Another waiter was first: wait for it.
                            Ok(false) => break,
                            Err(e) => {
                                say(format!(
                                    "could not take the claim over ({e}); building without a claim"
                                ));
                                return Ok(Decision::Build(None));
                            }
                        }
                    } else if reminded.elapsed() >= Duration::from_secs(60) {
                        reminded = Instant::now();
                        say(format!(
                            "still waiting for {} ({:.0} s so far; its claim is renewed)",
                            c.holder,
                            t0.elapsed().as_secs_f64()
                        ));
                    }
                }
                // Ended (done, failed), damaged or removed: claim again.
                _ => break,
            }
        }
        // A done claim means the record is there: look it up first.
        let k = key.to_string();
        if let Ok(Lookup::Hit(_)) = call(store, move |s| s.get(&k)).await {
            return Ok(Decision::Recorded {
                waited: t0.elapsed(),
                holder: claimant.holder.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_comes_from_the_environment_or_is_a_minute() {
        assert_eq!(ttl_from(None), Ok(Some(DEFAULT_TTL)));
        assert_eq!(ttl_from(Some(" ")), Ok(Some(DEFAULT_TTL)));
        assert_eq!(ttl_from(Some("5")), Ok(Some(Duration::from_secs(5))));
        assert_eq!(ttl_from(Some("0")), Ok(None));
        for bad in ["soon", "-3", "0.5", "inf"] {
            let e = ttl_from(Some(bad)).unwrap_err();
            assert!(e.contains("KILN_CLAIM_TTL") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn waiters_look_often_but_not_too_often() {
        assert_eq!(
            poll_interval(Duration::from_secs(60)),
            Duration::from_secs(2)
        );
        assert_eq!(
            poll_interval(Duration::from_secs(4)),
            Duration::from_millis(500)
        );
        assert_eq!(
            poll_interval(Duration::from_secs(1)),
            Duration::from_millis(200)
        );
    }
}
