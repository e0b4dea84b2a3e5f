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
//!
//! Must never: build or write a build record (the target's task does
//! both), compare one machine's clock with another's, or let a store
//! failure fail the target: it says so through `say` and builds without a
//! claim.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kiln_store::{Claim, ClaimState, Claimant, Lookup, RecordStore, StoreError};

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

/// How long a target waits for another run's claim on its key when
/// `--claim-wait` (or `KILN_CLAIM_WAIT`) does not say: two hours — longer
/// than most single targets of a deep stack take cold, and well inside the
/// six hours a hosted CI job may run, so a job held back by a hung build
/// still builds and finishes.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(2 * 3600);

/// `--claim-wait` / `KILN_CLAIM_WAIT`: seconds a target waits at most for
/// another run's claim (`0`: never waits, builds at once). `Err` says what
/// is wrong with the value.
pub fn wait_from(v: Option<&str>) -> Result<Duration, String> {
    match v.map(str::trim) {
        None | Some("") => Ok(DEFAULT_WAIT),
        Some(t) => match t.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!(
                "claim wait {t:?} is not a number of seconds (0 or more; 0 builds at once instead of waiting for another run)"
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

/// What claiming a key came to.
pub enum Claimed {
    /// This run holds the claim: it builds.
    Won(Holding),
    /// No claim was made (the store holds none, or failed to answer): the
    /// run builds without one.
    Without,
    /// Another run holds the claim.
    Held { generation: u64, claimant: Claimant },
}

/// What waiting for another run's claim came to.
pub enum Waited {
    /// The record appeared (or a damaged one, which the run repairs by
    /// building): look it up again.
    Recorded,
    /// The holder stopped renewing and this run took the claim over: it
    /// builds.
    TookOver(Holding),
    /// The claim ended without a record, or another waiter took it over:
    /// claim again.
    Again,
    /// Stop waiting and build without a claim: the store failed, or the
    /// wait reached its bound (said through `say`).
    Build,
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

/// Claims `key` for `me` (see the module docs). `unsupported` is called
/// when the store holds no claims; `say` tells the user when the store
/// failed.
pub async fn try_claim(
    store: &Arc<dyn RecordStore>,
    key: &str,
    me: &Claimant,
    ttl: Duration,
    say: Arc<dyn Fn(String) + Send + Sync>,
    unsupported: impl FnOnce(),
) -> Claimed {
    let (k, m) = (key.to_string(), me.clone());
    match call(store, move |s| s.claim(&k, &m)).await {
        Ok(Claim::Won { generation }) => Claimed::Won(Holding::start(
            store.clone(),
            key.to_string(),
            generation,
            me.clone(),
            ttl,
            say,
        )),
        Ok(Claim::Unsupported) => {
            unsupported();
            Claimed::Without
        }
        Ok(Claim::Held {
            generation,
            claimant,
        }) => Claimed::Held {
            generation,
            claimant,
        },
        Err(e) => {
            say(format!(
                "could not claim key {key} ({e}); building without a claim (another run may build it too)"
            ));
            Claimed::Without
        }
    }
}

/// Waits for the run that holds `key` (`claimant`, at `generation`) until
/// its record appears, its claim ends, it stops renewing (then this run
/// takes the claim over), or `deadline` passes (then this run builds
/// anyway: a holder that renews but never finishes — a hung build — must
/// not hold every other run back for ever). `waiting_since` is when this
/// run began waiting for the key, for what it says.
#[expect(
    clippy::too_many_arguments,
    reason = "one caller (a target's task), each argument distinct"
)]
pub async fn wait_for(
    store: &Arc<dyn RecordStore>,
    key: &str,
    me: &Claimant,
    ttl: Duration,
    say: Arc<dyn Fn(String) + Send + Sync>,
    (generation, claimant): (u64, &Claimant),
    waiting_since: Instant,
    deadline: Instant,
) -> Waited {
    // Watch the claim: its beat must move within every lease.
    let mut seen = (generation, claimant.beat);
    let mut moved = Instant::now();
    let mut reminded = Instant::now();
    loop {
        let now = Instant::now();
        if now >= deadline {
            say(format!(
                "stopped waiting for {} after {:.0} s (--claim-wait); building anyway: both runs build this key, and the record written first stands",
                claimant.holder,
                now.duration_since(waiting_since).as_secs_f64()
            ));
            return Waited::Build;
        }
        tokio::time::sleep(poll_interval(ttl).min(deadline - now)).await;
        let k = key.to_string();
        match call(store, move |s| s.get(&k)).await {
            Ok(Lookup::Miss) => {}
            // A record (or damage, which the run repairs by building).
            Ok(_) => return Waited::Recorded,
            Err(e) => {
                say(format!(
                    "stopped waiting for {}: the record store failed ({e}); building",
                    claimant.holder
                ));
                return Waited::Build;
            }
        }
        if Instant::now() >= deadline {
            continue;
        }
        let k = key.to_string();
        let newest = match call(store, move |s| s.newest_claim(&k)).await {
            Ok(n) => n,
            Err(e) => {
                say(format!(
                    "stopped waiting for {}: the record store failed ({e}); building",
                    claimant.holder
                ));
                return Waited::Build;
            }
        };
        let Some((g, Some(c))) =
            newest.filter(|(_, c)| c.as_ref().is_some_and(|c| c.state == ClaimState::Building))
        else {
            // Ended (done, failed), damaged or removed: a done claim means
            // the record is there; else claim again.
            let k = key.to_string();
            if let Ok(Lookup::Hit(_)) = call(store, move |s| s.get(&k)).await {
                return Waited::Recorded;
            }
            return Waited::Again;
        };
        if (g, c.beat) != seen {
            seen = (g, c.beat);
            moved = Instant::now();
            if g != generation {
                // Someone else took it over: wait for them.
                return Waited::Again;
            }
        } else if moved.elapsed() >= ttl {
            say(format!(
                "{} has not renewed its claim for {:.0} s (the lease); taking the build over",
                c.holder,
                ttl.as_secs_f64()
            ));
            let (k, m) = (key.to_string(), me.clone());
            return match call(store, move |s| s.take_over(&k, g, &m)).await {
                Ok(true) => Waited::TookOver(Holding::start(
                    store.clone(),
                    key.to_string(),
                    g + 1,
                    me.clone(),
                    ttl,
                    say,
                )),
                // Another waiter was first: wait for it.
                Ok(false) => Waited::Again,
                Err(e) => {
                    say(format!(
                        "could not take the claim over ({e}); building without a claim"
                    ));
                    Waited::Build
                }
            };
        } else if reminded.elapsed() >= Duration::from_secs(60) {
            reminded = Instant::now();
            say(format!(
                "still waiting for {} ({:.0} s so far; its claim is renewed)",
                c.holder,
                waiting_since.elapsed().as_secs_f64()
            ));
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
    fn the_claim_wait_is_bounded_by_default_and_checked() {
        assert_eq!(wait_from(None), Ok(DEFAULT_WAIT));
        assert_eq!(wait_from(Some("90")), Ok(Duration::from_secs(90)));
        assert_eq!(wait_from(Some("0")), Ok(Duration::ZERO));
        for bad in ["soon", "-1", "inf"] {
            let e = wait_from(Some(bad)).unwrap_err();
            assert!(e.contains(bad), "{e}");
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
