//! What a run is given (`RunOptions`) and what every target task of the
//! run shares (`Shared`): the connected nodes, the specs, the reporter, the
//! store's write probe and the run-wide flags a task sets for the others.
//!
//! Must never: schedule targets or build anything.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kiln_store::RecordStore;

use super::handover::Outputs;
use super::nodes::{Node, NodeSpec};
use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::hashing::StatCache;
use crate::keys::Keyed;
use crate::spec::BuildSpec;

/// How to run.
#[derive(Clone)]
pub struct RunOptions {
    /// BuildKit builds running at once (at least 1). Keys, lookups and
    /// skips are not builds: they run for every ready target.
    pub jobs: usize,
    /// Stop everything at the first failure.
    pub fail_fast: bool,
    /// A short id naming this run (used in internal tags).
    pub run_id: String,
    /// Build even when the key is recorded, and overwrite the record.
    pub force: bool,
    /// Where keys are looked up and builds recorded.
    pub store: Arc<dyn RecordStore>,
    /// File digests by stat, so an unchanged file is not read again.
    pub stat_cache: Arc<StatCache>,
    /// The fleet (empty: the one engine `run` is given, `jobs` slots).
    pub nodes: Vec<NodeSpec>,
    /// Preferred node (index into `nodes`) per target, from the schedule.
    pub placement: HashMap<String, usize>,
    /// The nodes (indices into `nodes`) a target may run on (memory); a
    /// target not listed may run anywhere.
    pub eligible: HashMap<String, Vec<usize>>,
    /// Memory per compile job when deriving a node's job count (handed to
    /// builds that mount the secret `kiln-jobs`, `crate::jobs`).
    pub gb_per_job: f64,
    /// Build through this buildx builder instead of the engine (a run on
    /// one node; a fleet names a builder per node).
    pub builder: Option<crate::driver::buildx::BuilderSpec>,
    /// Where each build's BuildKit progress is kept, as the builder
    /// printed it (`<dir>/<target>.log`, for `kiln diagnose`); builds
    /// through the Engine API have no such log.
    pub log_dir: Option<std::path::PathBuf>,
    /// Stop before anything builds when the store cannot be written
    /// (otherwise a warning says nothing will be recorded, once).
    pub require_store: bool,
    /// The lease of a claim on a key being built (cross-run deduplication,
    /// `crate::claims`); `None` makes no claims and waits for none.
    pub claim_ttl: Option<Duration>,
    /// How long a target waits for another run's claim on its key, at
    /// most (`--claim-wait`): then it builds anyway, and says so.
    pub claim_wait: Duration,
    /// The targets' latest records, read while the run was prepared
    /// ([`super::Recent`]): the warm-up takes each that is the record of
    /// the key it computes.
    pub recent: Option<super::Recent>,
}

/// What every target task shares.
pub(super) struct Shared {
    pub(super) nodes: Vec<Node>,
    /// Whether this is a fleet run (hand-over through the registry).
    pub(super) fleet: bool,
    pub(super) specs: Vec<BuildSpec>,
    pub(super) reporter: Arc<dyn Reporter>,
    pub(super) opts: RunOptions,
    /// Whether the store took the write probe (asked once, before the
    /// first build): `Err` says why not, and nothing is recorded.
    pub(super) writable: tokio::sync::OnceCell<Result<(), String>>,
    /// Keys the warm-up computed (`warm`), each with the upstream outputs
    /// it assumed: the run takes one when its upstreams came out the same.
    pub(super) warmed: std::sync::OnceLock<HashMap<String, (Outputs, Keyed)>>,
    /// The records the warm-up found, by key: the run's first lookup of a
    /// key takes its answer (once, and only while nothing has been built or
    /// pulled) instead of reading and verifying the record again.
    pub(super) warm_hits: std::sync::Mutex<HashMap<String, kiln_store::Lookup>>,
    /// A lookup failed because the store did not answer: it is not asked
    /// again in this run.
    pub(super) store_down: std::sync::atomic::AtomicBool,
    /// A build or a pull has started: from then on the warm-up's keys are
    /// not reused (time has passed since it hashed the files, and files
    /// edited meanwhile must be keyed as they are).
    pub(super) busy: std::sync::atomic::AtomicBool,
    /// The store said it cannot hold claims (said once per run).
    pub(super) claims_unsupported: std::sync::atomic::AtomicBool,
    /// What each pushed tag of a target the warm-up found recorded names in
    /// its registry, asked in one concurrent round while the run starts
    /// (`warm`); taken by the skip that verifies the tag.
    pub(super) heads: std::sync::Mutex<HashMap<String, Head>>,
}

/// A registry's answer for one tag, asked ahead: when it came, and what
/// the tag named (`None`: no answer).
pub(super) type Head = futures_util::future::Shared<
    futures_util::future::BoxFuture<
        'static,
        (std::time::Instant, Option<crate::registry::Resolution>),
    >,
>;

/// How long an answer asked ahead stands for the skip that takes it.
pub(super) const HEAD_FRESH: Duration = Duration::from_secs(10);

/// Takes `tag`'s answer asked ahead (it is used once): `None` when there is
/// none, when the run is `busy` (something was built or pulled since it
/// was asked) or when it is older than [`HEAD_FRESH`].
async fn take_head(
    heads: &std::sync::Mutex<HashMap<String, Head>>,
    tag: &str,
    busy: bool,
) -> Option<Option<crate::registry::Resolution>> {
    let head = heads.lock().ok()?.remove(tag)?;
    if busy {
        return None;
    }
    let (at, answer) = head.await;
    (at.elapsed() < HEAD_FRESH).then_some(answer)
}

impl Shared {
    /// The answer asked ahead for `tag`, once, while nothing has been built
    /// or pulled and it is fresh ([`HEAD_FRESH`]); `None` otherwise (the
    /// caller asks the registry itself).
    pub(super) async fn head_ahead(
        &self,
        tag: &str,
    ) -> Option<Option<crate::registry::Resolution>> {
        let busy = self.busy.load(std::sync::atomic::Ordering::Relaxed);
        take_head(&self.heads, tag, busy).await
    }

    /// A build or a pull starts: the warm-up's keys and the registry's
    /// answers asked ahead are not used from now on.
    pub(super) fn set_busy(&self) {
        self.busy.store(true, std::sync::atomic::Ordering::Relaxed);
        crate::registry::forget_ahead();
    }

    /// What `tag`'s answer asked ahead says, without taking it (the skip
    /// that verifies the tag takes it): `None` on the same terms as
    /// [`head_ahead`](Shared::head_ahead).
    pub(super) async fn peek_head(&self, tag: &str) -> Option<Option<crate::registry::Resolution>> {
        if self.busy.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let head = self.heads.lock().ok()?.get(tag)?.clone();
        let (at, answer) = head.await;
        (at.elapsed() < HEAD_FRESH).then_some(answer)
    }

    /// The write probe's answer, asking the store the first time.
    pub(super) async fn writable(&self) -> &Result<(), String> {
        self.writable
            .get_or_init(|| async {
                let probe = store_call(&self.opts.store, |s| s.probe_write())
                    .await
                    .map_err(|e| e.to_string());
                if let Err(why) = &probe
                    && !self.opts.require_store
                {
                    self.reporter.event(&Event::Warning {
                        target: String::new(),
                        message: format!(
                            "{why}; nothing built in this run will be recorded, so the next run builds it again (--require-store stops instead)"
                        ),
                    });
                }
                probe
            })
            .await
    }
}

/// Runs a store call off the async threads (a store may block on I/O).
pub(super) async fn store_call<T: Send + 'static>(
    store: &Arc<dyn RecordStore>,
    f: impl FnOnce(&dyn RecordStore) -> Result<T, kiln_store::StoreError> + Send + 'static,
) -> Result<T, EngineError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || f(store.as_ref()))
        .await
        .map_err(|e| EngineError::Store(format!("record store task failed: {e}")))?
        .map_err(|e| EngineError::Store(e.to_string()))
}

/// A lookup in the record store (`get`, `latest`, `keep`): made in place
/// when the store answers from local files
/// ([`RecordStore::answers_locally`]: microseconds, where handing it to a
/// blocking thread and back costs more than the lookup), else as
/// [`store_call`].
pub(super) async fn store_lookup<T: Send + 'static>(
    store: &Arc<dyn RecordStore>,
    f: impl FnOnce(&dyn RecordStore) -> Result<T, kiln_store::StoreError> + Send + 'static,
) -> Result<T, EngineError> {
    if store.answers_locally() {
        return f(store.as_ref()).map_err(|e| EngineError::Store(e.to_string()));
    }
    store_call(store, f).await
}

/// Where the progress log of `target`'s build goes in this run.
pub(super) fn log_path(opts: &RunOptions, target: &str) -> Option<std::path::PathBuf> {
    let safe: String = target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    Some(opts.log_dir.as_ref()?.join(format!("{safe}.log")))
}

#[cfg(test)]
mod head_tests {
    use super::*;
    use crate::registry::Resolution;
    use futures_util::FutureExt;

    fn heads(tag: &str, at: std::time::Instant) -> std::sync::Mutex<HashMap<String, Head>> {
        let answer = Some(Resolution::Found("sha256:aa".into()));
        let head: Head = async move { (at, answer) }.boxed().shared();
        std::sync::Mutex::new(HashMap::from([(tag.to_string(), head)]))
    }

    #[tokio::test]
    async fn an_answer_asked_ahead_is_taken_once_while_fresh_and_idle() {
        let now = std::time::Instant::now();
        let h = heads("r/a:1", now);
        assert_eq!(
            take_head(&h, "r/a:1", false).await,
            Some(Some(Resolution::Found("sha256:aa".into())))
        );
        assert_eq!(take_head(&h, "r/a:1", false).await, None, "used once");
        assert_eq!(take_head(&h, "r/b:1", false).await, None, "never asked");
        // Something was built or pulled since: the skip asks again.
        let h = heads("r/a:1", now);
        assert_eq!(take_head(&h, "r/a:1", true).await, None);
        assert!(h.lock().unwrap().is_empty());
        // Too old.
        if let Some(old) = now.checked_sub(HEAD_FRESH + Duration::from_secs(1)) {
            let h = heads("r/a:1", old);
            assert_eq!(take_head(&h, "r/a:1", false).await, None);
        }
    }
}
