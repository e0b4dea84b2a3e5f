//! The local engine driver: BuildKit builds through the Docker Engine API
//! (`POST /build?version=2` with a session, via `bollard`), tagging, pushing
//! and image lookups.
//!
//! Must never: carry a build secret (the Engine API's `/build` cannot;
//! targets with secrets build through the docker CLI, `cli`), print
//! anything (a retried push is a warning event to the reporter), or wait
//! without a bound on a request that is not a build, a pull or a push.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::BuildInfoAux;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, BuilderVersion, PushImageOptionsBuilder, TagImageOptionsBuilder,
};
use futures_util::StreamExt;

use kiln_util::error_chain;

use super::{Built, Failed, Retry};
use crate::context;
use crate::error::EngineError;
use crate::events::Reporter;
use crate::spec::{BuildSpec, Endpoint};
use crate::steps::StepTracker;

/// Where an engine keeps its images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageStore {
    /// The classic graph-driver store (`overlay2`, `vfs`, ...): an image's
    /// id is its config digest.
    Classic,
    /// The containerd image store (the default for new installs from
    /// Docker 29): an image's id is its manifest digest, and dockerd cannot
    /// hand an uploaded context tar to its BuildKit (`load remote build
    /// context ... no such host`), so builds take the session-based client.
    Containerd,
}

impl ImageStore {
    /// From `docker info`'s `DriverStatus` pairs.
    pub fn from_driver_status(status: &[Vec<String>]) -> ImageStore {
        let containerd = status.iter().any(|kv| {
            kv.len() == 2
                && kv[0] == "driver-type"
                && kv[1].starts_with("io.containerd.snapshotter")
        });
        if containerd {
            ImageStore::Containerd
        } else {
            ImageStore::Classic
        }
    }
}

/// A connected local engine.
#[derive(Clone)]
pub struct LocalEngine {
    docker: Docker,
    pub endpoint: Endpoint,
    /// `os/arch` of the engine (`linux/amd64`).
    pub platform: String,
    /// Its image store.
    pub image_store: ImageStore,
    /// The engine's version (`26.1.5`), as it says.
    pub version: String,
    /// What this process learned of references (see
    /// [`LocalEngine::image_id`]); shared by clones.
    seen: std::sync::Arc<std::sync::Mutex<HashMap<String, Option<String>>>>,
    /// kiln's cache of identities by engine id (`identities.json`), read
    /// at the first lookup; shared by clones.
    identities: Identities,
    /// The engine's id of each reference the Engine API answered in this
    /// process: what its containerd store is compared with.
    engine_ids: std::sync::Arc<std::sync::Mutex<HashMap<String, String>>>,
    /// The containerd image store read directly ([`super::containerd`]),
    /// when there is one that kiln may read and that has not disagreed
    /// with the Engine API; shared by clones.
    link: std::sync::Arc<std::sync::Mutex<Option<Link>>>,
    /// The identity of the engine's unix socket when this process
    /// connected (what its facts are kept under).
    socket: Option<String>,
    /// The references a round of [`LocalEngine::prefetch`] questions is
    /// asking now, each with that round's end: a question about one of them
    /// waits for that round instead of asking it again (a round started
    /// early, while the run is prepared, answers the preflight's and the
    /// run's), and asks the rest at once; shared by clones.
    asking: Asking,
    /// Why the containerd store `KILN_CONTAINERD` names could not be read,
    /// until it is taken to be said; shared by clones.
    trouble: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

/// See [`LocalEngine::asking`]: a round's end is `true` on its channel
/// (or the channel closed, when the round was dropped unfinished).
type Asking = std::sync::Arc<std::sync::Mutex<HashMap<String, tokio::sync::watch::Receiver<bool>>>>;

/// A round of questions in flight: its references leave
/// [`LocalEngine::asking`] and its end is signalled when it is dropped,
/// finished or not (what it did not answer is then asked by whoever
/// needs it).
struct Round {
    asking: Asking,
    references: Vec<String>,
    done: tokio::sync::watch::Sender<bool>,
    end: tokio::sync::watch::Receiver<bool>,
}

impl Drop for Round {
    fn drop(&mut self) {
        if let Ok(mut m) = self.asking.lock() {
            for r in &self.references {
                if m.get(r).is_some_and(|rx| rx.same_channel(&self.end)) {
                    m.remove(r);
                }
            }
        }
        let _ = self.done.send(true);
    }
}

/// The unique reference ([`crate::naming::local_ref`]) of each target's
/// image, as far as `seen` knows what its first tag names: what a recorded
/// target's skip confirms besides its tags.
fn unique_of(
    targets: &[(String, Vec<String>)],
    seen: &HashMap<String, Option<String>>,
) -> Vec<String> {
    targets
        .iter()
        .filter_map(|(name, tags)| {
            let id = seen.get(tags.first()?)?.as_deref()?;
            Some(crate::naming::local_ref(name, id))
        })
        .collect()
}

/// A containerd image store that answers lookups for an engine.
#[derive(Clone, Debug)]
struct Link {
    store: super::containerd::Store,
    /// It answered as the Engine API did, in a run that asked both.
    agreed: bool,
    /// `KILN_CONTAINERD` names it: a store that cannot be read is then said
    /// ([`LocalEngine::take_store_trouble`]), not passed over in silence.
    named: bool,
}

/// See [`LocalEngine::recalled_identity`].
type Identities =
    std::sync::Arc<std::sync::Mutex<Option<serde_json::Map<String, serde_json::Value>>>>;

/// Seconds of a protobuf timestamp (`seconds`, `nanos`).
macro_rules! secs {
    ($ts:expr) => {
        $ts.as_ref()
            .map(|t| t.seconds as f64 + f64::from(t.nanos) / 1e9)
    };
}

/// The engines this process connected to, by endpoint.
/// What a failed Engine API connection means, in words, with the cause
/// chain after it (bollard's own text, "Error in the hyper legacy client:
/// client error (Connect)", says nothing a user can act on).
pub fn explain(e: &bollard::errors::Error) -> String {
    let chain = kiln_util::error_chain(e);
    let lower = chain.to_ascii_lowercase();
    let meaning = if lower.contains("connection refused") {
        "nothing listens there (connection refused): the daemon is not running"
    } else if lower.contains("socket not found") || lower.contains("no such file or directory") {
        "the socket does not exist: the daemon is not running, or the address is wrong"
    } else if lower.contains("permission denied") {
        "permission denied on the socket: run as a user in the docker group, or point DOCKER_HOST at a socket you may use"
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        "the TLS handshake failed: check DOCKER_CERT_PATH / DOCKER_TLS_VERIFY and the daemon's certificate"
    } else if lower.contains("timed out") || lower.contains("deadline") {
        "the daemon did not answer in time"
    } else if lower.contains("dns") || lower.contains("failed to lookup") {
        "the daemon's host name does not resolve"
    } else if lower.contains("connection reset") || lower.contains("broken pipe") {
        "the daemon closed the connection"
    } else {
        return chain.replace("Error in the hyper legacy client: ", "");
    };
    let cause = chain.replace("Error in the hyper legacy client: ", "");
    format!("{meaning} ({cause})")
}

/// How long one Engine API request that is not a build, a pull or a push
/// may take: `KILN_ENGINE_TIMEOUT` seconds, default 30.
pub fn request_bound() -> std::time::Duration {
    let secs = std::env::var("KILN_ENGINE_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(30);
    std::time::Duration::from_secs(secs)
}

/// Images' identities by engine id, in kiln's cache ([`LocalEngine::prefetch`]).
const IDENTITIES: &str = "identities.json";

/// The most identities kept there (the oldest go first); ~150 bytes each.
const MAX_IDENTITIES: usize = 4096;

/// What `/version` and `/info` say of an engine that kiln uses, kept in
/// kiln's cache ([`crate::user_cache`], `engines.json`) by endpoint with
/// the identity of its unix socket.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct EngineFacts {
    /// The socket's identity when it was asked (`socket_identity`).
    #[serde(default)]
    socket: String,
    platform: String,
    containerd: bool,
    version: String,
    /// Registry indexes and whether each is secure.
    indexes: Vec<(String, bool)>,
    insecure_cidrs: Vec<String>,
    /// Whether the store below was looked for (facts kept by an older
    /// kiln were not).
    #[serde(default)]
    containerd_looked: bool,
    /// Its containerd image store, when it has one and it was found.
    #[serde(default)]
    containerd_store: Option<super::containerd::Store>,
    /// A store that was compared with the Engine API, and whether they
    /// agreed.
    #[serde(default)]
    containerd_verdict: Option<(super::containerd::Store, bool)>,
}

/// The cache file of engine facts.
const ENGINES: &str = "engines.json";

impl EngineFacts {
    fn from_answers(v: bollard::models::SystemVersion, info: bollard::models::SystemInfo) -> Self {
        let platform = format!(
            "{}/{}",
            v.os.unwrap_or_else(|| "linux".into()),
            v.arch.unwrap_or_else(|| "amd64".into())
        );
        let (indexes, insecure_cidrs) = match &info.registry_config {
            Some(rc) => (
                rc.index_configs
                    .iter()
                    .flatten()
                    .map(|(k, v)| {
                        (
                            v.name.clone().unwrap_or_else(|| k.clone()),
                            v.secure != Some(false),
                        )
                    })
                    .collect(),
                rc.insecure_registry_cidrs.clone().unwrap_or_default(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let store = ImageStore::from_driver_status(&info.driver_status.unwrap_or_default());
        // dockerd 27 and later say where their containerd is.
        let said = info.containerd.and_then(|c| {
            Some(super::containerd::Store {
                address: c.address?,
                namespace: c.namespaces?.containers?,
            })
        });
        EngineFacts {
            socket: String::new(),
            platform,
            containerd: store == ImageStore::Containerd,
            version: v.version.unwrap_or_default(),
            indexes,
            insecure_cidrs,
            containerd_looked: false,
            containerd_store: said,
            containerd_verdict: None,
        }
    }

    fn recall(host: &str, socket: &str) -> Option<EngineFacts> {
        Self::recall_from(&crate::user_cache::read(ENGINES), host, socket)
    }

    fn recall_from(
        cache: &serde_json::Map<String, serde_json::Value>,
        host: &str,
        socket: &str,
    ) -> Option<EngineFacts> {
        let f: EngineFacts = serde_json::from_value(cache.get(host)?.clone()).ok()?;
        (f.socket == socket).then_some(f)
    }

    fn keep(&self, host: &str, socket: &str) {
        let mut cache = crate::user_cache::read(ENGINES);
        self.keep_into(&mut cache, host, socket);
        crate::user_cache::write(ENGINES, cache);
    }

    fn keep_into(
        &self,
        cache: &mut serde_json::Map<String, serde_json::Value>,
        host: &str,
        socket: &str,
    ) {
        if let Ok(v) = serde_json::to_value(EngineFacts {
            socket: socket.to_string(),
            ..self.clone()
        }) {
            cache.insert(host.to_string(), v);
        }
    }
}

/// The identity of a unix socket (device, inode, change time): a daemon
/// that starts makes a new one. `None` for another transport (TCP), whose
/// facts are always asked.
fn socket_identity(host: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(host.strip_prefix("unix://")?).ok()?;
    Some(format!(
        "{}:{}:{}.{}",
        m.dev(),
        m.ino(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// The platform (`os/arch`) of the engine at `host` as kiln last asked it,
/// while the same daemon still owns its unix socket; no request is made.
/// `None` for an engine never asked, one restarted since, or one reached
/// over TCP (docs/fleet.md, *Platforms*).
pub fn recalled_platform(host: &str) -> Option<String> {
    let socket = socket_identity(host)?;
    EngineFacts::recall(host, &socket).map(|f| f.platform)
}

/// Per endpoint, held while this process connects to it.
fn connecting() -> &'static std::sync::Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>
{
    static CONNECTING: std::sync::OnceLock<
        std::sync::Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    > = std::sync::OnceLock::new();
    CONNECTING.get_or_init(Default::default)
}

fn connected() -> &'static std::sync::Mutex<HashMap<String, LocalEngine>> {
    static ENGINES: std::sync::OnceLock<std::sync::Mutex<HashMap<String, LocalEngine>>> =
        std::sync::OnceLock::new();
    ENGINES.get_or_init(Default::default)
}

impl LocalEngine {
    /// Connects and checks that the engine answers (once per process and
    /// endpoint). One connection at a time per endpoint: one started early
    /// (while the run is prepared, [`LocalEngine::start_early`]) is waited
    /// for, not made again, and if it found the engine unreachable, that
    /// is the answer (a wedged daemon is not waited for twice).
    pub async fn connect(endpoint: Endpoint) -> Result<LocalEngine, EngineError> {
        static UNREACHABLE: kiln_util::Memo<String, String> = kiln_util::Memo::new();
        let in_flight = connecting()
            .lock()
            .map(|mut m| m.entry(endpoint.host.clone()).or_default().clone())
            .unwrap_or_default();
        let (_one, waited) = match in_flight.try_lock() {
            Ok(g) => (g, false),
            Err(_) => (in_flight.lock().await, true),
        };
        if waited && let Some(detail) = UNREACHABLE.get(&endpoint.host) {
            return Err(EngineError::Unreachable {
                endpoint: endpoint.host.clone(),
                detail,
            });
        }
        let host = endpoint.host.clone();
        let r = LocalEngine::connect_once(endpoint).await;
        match &r {
            Err(EngineError::Unreachable { detail, .. }) => {
                UNREACHABLE.insert(host, detail.clone())
            }
            Ok(_) => UNREACHABLE.remove(&host),
            Err(_) => {}
        }
        r
    }

    async fn connect_once(endpoint: Endpoint) -> Result<LocalEngine, EngineError> {
        let unreachable = |detail: String| EngineError::Unreachable {
            endpoint: endpoint.host.clone(),
            detail,
        };
        let docker = if let Some(path) = endpoint.host.strip_prefix("unix://") {
            Docker::connect_with_unix(path, 600, bollard::API_DEFAULT_VERSION)
        } else {
            Docker::connect_with_http(
                &endpoint.host.replacen("tcp://", "http://", 1),
                600,
                bollard::API_DEFAULT_VERSION,
            )
        }
        .map_err(|e| unreachable(explain(&e)))?;
        // An engine this process already connected to (preflight, then the
        // run) is not asked again: its platform, store and version do not
        // change, and what was learned of its images is shared. A daemon
        // gone since shows at the first request, as a lost node.
        if let Some(known) = connected()
            .lock()
            .ok()
            .and_then(|m| m.get(&endpoint.host).cloned())
        {
            return Ok(LocalEngine {
                docker,
                endpoint,
                ..known
            });
        }
        let bound = request_bound();
        let wedged = || {
            unreachable(format!(
                "it accepted the connection but did not answer within {}s (a wedged daemon? restart it, or set KILN_ENGINE_TIMEOUT=SECONDS to wait longer)",
                bound.as_secs()
            ))
        };
        // What the daemon behind this socket said before, while it still
        // owns the socket (a restarted daemon makes a new one): then a ping
        // shows it is alive, and `/version` and `/info` (~20 ms on the
        // containerd store) are not asked.
        let socket = socket_identity(&endpoint.host);
        let mut changed = false;
        let mut facts = match socket
            .as_deref()
            .and_then(|s| EngineFacts::recall(&endpoint.host, s))
        {
            Some(f) => {
                tokio::time::timeout(bound, docker.ping())
                    .await
                    .map_err(|_| wedged())?
                    .map_err(|e| unreachable(explain(&e)))?;
                f
            }
            None => {
                // `/version` answers only from a live daemon: no separate
                // ping. A socket that accepts and never answers (a wedged
                // dockerd) is bounded, like every request that is not a
                // build or a transfer. Both asked at once.
                let (v, info) = tokio::join!(
                    tokio::time::timeout(bound, docker.version()),
                    tokio::time::timeout(bound, docker.info())
                );
                let v = v
                    .map_err(|_| wedged())?
                    .map_err(|e| unreachable(explain(&e)))?;
                let info = info
                    .map_err(|_| wedged())?
                    .map_err(|e| unreachable(explain(&e)))?;
                changed = true;
                EngineFacts::from_answers(v, info)
            }
        };
        // Where its containerd image store is, looked for once per daemon
        // (what `/info` said, else the daemon's own configuration).
        if facts.containerd && !facts.containerd_looked {
            facts.containerd_store =
                super::containerd::discover(&endpoint.host, facts.containerd_store.take());
            facts.containerd_looked = true;
            changed = true;
        }
        if changed && let Some(s) = &socket {
            facts.keep(&endpoint.host, s);
        }
        let link = if facts.containerd {
            let named = super::containerd::overridden();
            let is_named = matches!(named, Some(Some(_)));
            named
                .unwrap_or_else(|| facts.containerd_store.clone())
                .and_then(|store| match &facts.containerd_verdict {
                    Some((judged, false)) if *judged == store => None,
                    Some((judged, true)) if *judged == store => Some(Link {
                        store,
                        agreed: true,
                        named: is_named,
                    }),
                    _ => Some(Link {
                        store,
                        agreed: false,
                        named: is_named,
                    }),
                })
        } else {
            None
        };
        // The registries this engine treats as insecure are spoken to the
        // same way by every kiln client (kiln_store::registry_io).
        kiln_store::registry_io::declare_engine_registries(
            &endpoint.host,
            &facts.indexes,
            &facts.insecure_cidrs,
        );
        let engine = LocalEngine {
            docker,
            endpoint,
            platform: facts.platform,
            image_store: if facts.containerd {
                ImageStore::Containerd
            } else {
                ImageStore::Classic
            },
            version: facts.version,
            seen: Default::default(),
            identities: Default::default(),
            engine_ids: Default::default(),
            link: std::sync::Arc::new(std::sync::Mutex::new(link)),
            socket,
            asking: Default::default(),
            trouble: Default::default(),
        };
        if let Ok(mut m) = connected().lock() {
            m.insert(engine.endpoint.host.clone(), engine.clone());
        }
        Ok(engine)
    }

    /// Why the containerd store `KILN_CONTAINERD` names could not be read,
    /// once (the next call says nothing until it fails again in another
    /// process): for the run to say.
    pub fn take_store_trouble(&self) -> Option<String> {
        self.trouble.lock().ok()?.take()
    }

    /// Whether the daemon still answers (within the request bound).
    pub async fn answers(&self) -> bool {
        matches!(
            tokio::time::timeout(request_bound(), self.docker.ping()).await,
            Ok(Ok(_))
        )
    }

    /// The engine's CPU count (`NCPU` of `docker info`), if it says.
    pub async fn cpus(&self) -> Option<u32> {
        let n = tokio::time::timeout(request_bound(), self.docker.info())
            .await
            .ok()?
            .ok()?
            .ncpu?;
        u32::try_from(n).ok().filter(|&n| n > 0)
    }

    /// The Engine API client (for drivers and probes in this crate).
    pub(crate) fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The identity ([`crate::identity`]) of the image `reference` names
    /// on this engine, if it holds one: the same value for the same image
    /// on every engine and image store, so records, keys and early cutoff
    /// compare it, never the engine's own id.
    ///
    /// Each reference is asked once per process; what this process tags,
    /// untags or pulls is asked again. A run sees the engine as it was when
    /// it first looked, apart from its own changes. The question is the
    /// image's history (`GET /images/{name}/history`), whose newest entry
    /// names the engine's id of the image and all its tags: about two
    /// thirds of the cost of an inspect on the containerd image store,
    /// where every lookup walks the whole store (~8 against ~12 ms at 1,100
    /// images) and a no-op run's lookups are most of its time. The identity
    /// behind an engine id is recalled from kiln's cache
    /// (`identities.json`); an id not seen before, and a reference whose
    /// history the engine does not give, are inspected.
    pub async fn image_id(&self, reference: &str) -> Option<String> {
        if let Some(known) = self.seen.lock().ok()?.get(reference) {
            return known.clone();
        }
        if let Ok(Ok(history)) =
            tokio::time::timeout(request_bound(), self.docker.image_history(reference)).await
            && let Some(newest) = history.first()
            && let Some(identity) = self.recalled_identity(&newest.id)
        {
            self.learn(reference, Some(identity.clone()), &newest.tags);
            self.note_engine_id(reference, &newest.id, &newest.tags);
            return Some(identity);
        }
        let Ok(inspected) =
            tokio::time::timeout(request_bound(), self.docker.inspect_image(reference)).await
        else {
            // Not answered in time: not known (asked again next time).
            return None;
        };
        let found = match inspected {
            Ok(i) => {
                let id = crate::identity::from_inspect(&i);
                if let (Some(engine_id), Some(identity)) = (&i.id, &id) {
                    self.remember_identity(&i, engine_id, identity);
                }
                // Every tag of the image names the same identity: one
                // lookup answers them all (a recorded image's unique
                // reference and its tags, in a no-op run).
                if let Some(tags) = &i.repo_tags {
                    self.learn(reference, id.clone(), tags);
                }
                if let Some(engine_id) = &i.id {
                    self.note_engine_id(
                        reference,
                        engine_id,
                        i.repo_tags.as_deref().unwrap_or(&[]),
                    );
                }
                id
            }
            // Only "no such image" is remembered; other errors ask again.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => None,
            Err(_) => return None,
        };
        if let Ok(mut m) = self.seen.lock() {
            m.insert(reference.to_string(), found.clone());
        }
        found
    }

    /// Notes that `reference` and every tag in `tags` name the image of
    /// `identity`.
    fn learn(&self, reference: &str, identity: Option<String>, tags: &[String]) {
        if let Ok(mut m) = self.seen.lock() {
            if let Some(id) = &identity {
                for t in tags {
                    m.entry(t.clone()).or_insert_with(|| Some(id.clone()));
                }
            }
            m.insert(reference.to_string(), identity);
        }
    }

    /// Notes the engine's id of the image that `reference` and `tags` name,
    /// as the Engine API said it.
    fn note_engine_id(&self, reference: &str, engine_id: &str, tags: &[String]) {
        if let Ok(mut m) = self.engine_ids.lock() {
            for r in tags.iter().map(String::as_str).chain([reference]) {
                m.insert(r.to_string(), engine_id.to_string());
            }
        }
    }

    /// Answers what it can of `wanted` from the engine's containerd image
    /// store, in one question, and returns the references left to ask of
    /// the Engine API: a reference the store does not hold, one by digest,
    /// and an image whose identity kiln has not learned yet.
    ///
    /// A store never compared with the Engine API is compared: every
    /// reference is asked of both (the Engine API's answers are this run's),
    /// and the store answers from the next run on only when they agreed on
    /// at least one image and differed on none. A store that differed is
    /// not read again while the daemon runs.
    async fn ask_containerd(&self, wanted: Vec<String>) -> Vec<String> {
        let Some(link) = self.link.lock().ok().and_then(|l| l.clone()) else {
            return wanted;
        };
        let mut by_name: HashMap<String, Vec<String>> = HashMap::new();
        for r in &wanted {
            if let Some(n) = kiln_plan::normalize_reference(r).filter(|n| !n.contains('@')) {
                by_name.entry(n).or_default().push(r.clone());
            }
        }
        let names: Vec<String> = by_name.keys().cloned().collect();
        let found: HashMap<String, String> = match super::containerd::images(&link.store, &names)
            .await
        {
            Ok(f) => f.into_iter().collect(),
            // Not readable (no right to its socket, gone, not answering):
            // not asked again in this process; said when it was named.
            Err(why) => {
                if let Ok(mut l) = self.link.lock() {
                    *l = None;
                }
                if link.named
                    && let Ok(mut t) = self.trouble.lock()
                {
                    *t = Some(format!(
                        "KILN_CONTAINERD names the containerd store {} (namespace {}), which cannot be read ({why}): images are looked up through the Engine API instead, which walks every image on the containerd image store; fix the path or the right to open the socket, or set KILN_CONTAINERD=off",
                        link.store.address, link.store.namespace
                    ));
                }
                return wanted;
            }
        };
        if !link.agreed {
            futures_util::future::join_all(wanted.iter().map(|r| self.image_id(r))).await;
            if let Some(agreed) = self.agrees(&by_name, &found) {
                self.keep_verdict(&link.store, agreed);
                if let Ok(mut l) = self.link.lock() {
                    *l = agreed.then_some(Link {
                        agreed: true,
                        ..link
                    });
                }
            }
            return Vec::new();
        }
        for (name, refs) in &by_name {
            let Some(digest) = found.get(name) else {
                continue;
            };
            let Some(identity) = self.recalled_identity(digest) else {
                continue;
            };
            for r in refs {
                self.learn(r, Some(identity.clone()), &[]);
                self.note_engine_id(r, digest, &[]);
            }
        }
        match self.seen.lock() {
            Ok(m) => wanted.into_iter().filter(|r| !m.contains_key(r)).collect(),
            Err(_) => wanted,
        }
    }

    /// Whether the containerd store's answers (`found`: digest by name) are
    /// the Engine API's for the references of `by_name`: `Some(true)` when
    /// they agree on at least one image and differ on none, `Some(false)`
    /// when they differ (one names an image the other does not, or another
    /// one), `None` when nothing could be compared.
    fn agrees(
        &self,
        by_name: &HashMap<String, Vec<String>>,
        found: &HashMap<String, String>,
    ) -> Option<bool> {
        let seen = self.seen.lock().ok()?;
        let ids = self.engine_ids.lock().ok()?;
        let mut same = 0usize;
        for (name, refs) in by_name {
            for r in refs {
                // What the Engine API said: an id, no such image, or nothing
                // it answered (not compared).
                let api = match (ids.get(r), seen.get(r)) {
                    (Some(id), _) => Some(id.as_str()),
                    (None, Some(None)) => None,
                    _ => continue,
                };
                match (api, found.get(name).map(String::as_str)) {
                    (Some(a), Some(b)) if a == b => same += 1,
                    (None, None) => {}
                    _ => return Some(false),
                }
            }
        }
        (same > 0).then_some(true)
    }

    /// Keeps, with the engine's facts, whether `store` agreed with it.
    fn keep_verdict(&self, store: &super::containerd::Store, agreed: bool) {
        let Some(socket) = &self.socket else {
            return;
        };
        let host = &self.endpoint.host;
        let mut cache = crate::user_cache::read(ENGINES);
        if let Some(mut f) = EngineFacts::recall_from(&cache, host, socket) {
            f.containerd_verdict = Some((store.clone(), agreed));
            f.keep_into(&mut cache, host, socket);
            crate::user_cache::write(ENGINES, cache);
        }
    }

    /// The key of an engine id in kiln's cache of identities: the
    /// engine's platform and store, whose reading of an image the identity
    /// is.
    fn identity_key(&self, engine_id: &str) -> String {
        format!("{}|{:?}|{}", self.platform, self.image_store, engine_id)
    }

    /// The identity kiln learned before for the engine's id `engine_id`.
    fn recalled_identity(&self, engine_id: &str) -> Option<String> {
        let key = self.identity_key(engine_id);
        let mut cache = self.identities.lock().ok()?;
        let map = cache.get_or_insert_with(|| crate::user_cache::read(IDENTITIES));
        map.get(&key)?.as_str().map(String::from)
    }

    /// Keeps the identity read from an inspect for its engine id. The
    /// identity of an engine id is a function of it (the classic store's id
    /// is the config's digest, the containerd store's the manifest's or
    /// index's) as long as the inspect read the engine's own platform: an
    /// index of which only a foreign platform is present could read
    /// another platform once more of it is pulled, so it is not kept.
    fn remember_identity(&self, i: &bollard::models::ImageInspect, engine_id: &str, id: &str) {
        let native = format!(
            "{}/{}",
            i.os.as_deref().unwrap_or("linux"),
            i.architecture.as_deref().unwrap_or("amd64")
        );
        if native != self.platform {
            return;
        }
        let key = self.identity_key(engine_id);
        let Ok(mut cache) = self.identities.lock() else {
            return;
        };
        let map = cache.get_or_insert_with(|| crate::user_cache::read(IDENTITIES));
        if map.get(&key).and_then(|v| v.as_str()) == Some(id) {
            return;
        }
        map.insert(key, serde_json::Value::String(id.to_string()));
        let excess = map.len().saturating_sub(MAX_IDENTITIES);
        let kept: serde_json::Map<String, serde_json::Value> = map
            .iter()
            .skip(excess)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        *map = kept.clone();
        crate::user_cache::write(IDENTITIES, kept);
    }

    /// The engine's own id of the image `reference` names (the config
    /// digest on the classic store, the manifest's or index's digest on the
    /// containerd store), as `docker image inspect` shows it; `None` when
    /// it holds none or does not answer in time.
    pub async fn engine_id(&self, reference: &str) -> Option<String> {
        tokio::time::timeout(request_bound(), self.docker.inspect_image(reference))
            .await
            .ok()?
            .ok()?
            .id
    }

    /// Looks `references` up at once, so later lookups of them answer
    /// without a request. On the classic store, one image listing of the
    /// engine filtered by all of them
    /// (`GET /images/json?filters={"reference":[...]}`) names the
    /// engine id behind each; the identity of an engine id is a function
    /// of it (the classic store's id is the config's digest, the containerd
    /// store's the manifest's or index's, read for this engine's platform),
    /// so it is inspected once and then recalled from kiln's cache
    /// ([`crate::user_cache`], `identities.json`). A reference the listing
    /// does not name (absent, or written in another form than the engine's)
    /// is inspected by itself, and so is every reference on the containerd
    /// store, all at once (its listing walks every image in the store).
    pub async fn prefetch(&self, references: &[&str]) {
        let (round, others) = self.claim(references);
        let ask = async {
            if let Some(round) = round {
                self.ask_round(round.references.clone()).await;
                // Answers are learned before the round ends (`claim`).
                drop(round);
            }
        };
        let wait = futures_util::future::join_all(others.into_iter().map(|mut end| async move {
            let _ = end.wait_for(|done| *done).await;
        }));
        tokio::join!(ask, wait);
    }

    /// Splits `references` into those to ask now (a new [`Round`], `None`
    /// when there are none) and the ends of the rounds in flight that ask
    /// the others; those already answered are neither. Under the lock of
    /// [`LocalEngine::asking`], which a round holds to leave it, after what
    /// it learned is in `seen`: a reference is never missed between the two.
    fn claim(
        &self,
        references: &[&str],
    ) -> (Option<Round>, Vec<tokio::sync::watch::Receiver<bool>>) {
        let Ok(mut asking) = self.asking.lock() else {
            return (None, Vec::new());
        };
        let Ok(seen) = self.seen.lock() else {
            return (None, Vec::new());
        };
        let (done, end) = tokio::sync::watch::channel(false);
        let mut mine: Vec<String> = Vec::new();
        let mut others: Vec<tokio::sync::watch::Receiver<bool>> = Vec::new();
        for r in references {
            if seen.contains_key(*r) || mine.iter().any(|m| m == r) {
                continue;
            }
            match asking.get(*r) {
                Some(other) => {
                    if !others.iter().any(|o| o.same_channel(other)) {
                        others.push(other.clone());
                    }
                }
                None => {
                    asking.insert(r.to_string(), end.clone());
                    mine.push(r.to_string());
                }
            }
        }
        drop(seen);
        drop(asking);
        let round = (!mine.is_empty()).then(|| Round {
            asking: self.asking.clone(),
            references: mine,
            done,
            end,
        });
        (round, others)
    }

    /// One round of questions about `wanted` (none answered yet).
    async fn ask_round(&self, wanted: Vec<String>) {
        // The containerd store's own API answers all at once; through the
        // Engine API it lists by walking every image it holds (~90 ms
        // filtered, at 223 images, against ~8 ms an inspect): what that
        // store does not answer is asked per reference, at once.
        let wanted = match self.image_store {
            ImageStore::Classic => wanted,
            ImageStore::Containerd => self.ask_containerd(wanted).await,
        };
        if wanted.is_empty() {
            return;
        }
        let listed = match self.image_store {
            ImageStore::Classic => self.list(&wanted).await,
            ImageStore::Containerd => None,
        };
        if let Some(images) = listed {
            for img in images {
                let identity = match self.recalled_identity(&img.id) {
                    Some(i) => i,
                    // Inspected by its id: learns the identity and keeps it.
                    None => match self.image_id(&img.id).await {
                        Some(i) => i,
                        None => continue,
                    },
                };
                if let Ok(mut m) = self.seen.lock() {
                    for t in img.repo_tags {
                        m.entry(t).or_insert_with(|| Some(identity.clone()));
                    }
                }
            }
        }
        let rest: Vec<String> = match self.seen.lock() {
            Ok(m) => wanted.into_iter().filter(|r| !m.contains_key(r)).collect(),
            Err(_) => return,
        };
        futures_util::future::join_all(rest.iter().map(|r| self.image_id(r))).await;
    }

    /// Starts, on the current runtime, connecting to the engine at
    /// `endpoint` and then (on the containerd image store) asking about
    /// `targets` (each a target's name and tags) while the caller goes on
    /// preparing the run: first every tag, then the unique reference
    /// ([`crate::naming::local_ref`]) of the image each target's first tag
    /// names, which is the one a recorded target's skip confirms (with no
    /// targets yet, only the store's connection is opened). A
    /// connection or a round in flight is waited for by the next caller,
    /// never made twice. Errors are left for the preflight and the run to
    /// meet and report.
    pub fn start_early(endpoint: Endpoint, targets: Vec<(String, Vec<String>)>) {
        tokio::spawn(async move {
            if let Ok(engine) = LocalEngine::connect(endpoint).await {
                engine.ask_about(targets).await;
            }
        });
    }

    /// [`start_early`](Self::start_early)'s questions about `targets`, on an
    /// engine connected to: started on the current runtime, not waited for.
    pub fn ask_early(&self, targets: Vec<(String, Vec<String>)>) {
        let engine = self.clone();
        tokio::spawn(async move { engine.ask_about(targets).await });
    }

    async fn ask_about(&self, targets: Vec<(String, Vec<String>)>) {
        if self.image_store != ImageStore::Containerd {
            return;
        }
        if targets.is_empty() {
            // Nothing to ask yet: the store's connection is opened for what
            // will be.
            let link = self.link.lock().ok().and_then(|l| l.clone());
            if let Some(link) = link {
                super::containerd::connect_ahead(&link.store).await;
            }
            return;
        }
        let tags: Vec<&str> = targets
            .iter()
            .flat_map(|(_, tags)| tags.iter().map(String::as_str))
            .collect();
        self.prefetch(&tags).await;
        let unique = match self.seen.lock() {
            Ok(seen) => unique_of(&targets, &seen),
            Err(_) => return,
        };
        let unique: Vec<&str> = unique.iter().map(String::as_str).collect();
        self.prefetch(&unique).await;
    }

    /// Looks up the unique references of recorded images ahead of the
    /// warm-up's question ([`prefetch_recorded`](Self::prefetch_recorded)),
    /// on the containerd store. On the classic store nothing is asked: one
    /// listing answers for the unique references and their tags together,
    /// and the warm-up asks it.
    pub async fn prefetch_unique(&self, unique: &[&str]) {
        if self.image_store == ImageStore::Containerd {
            self.prefetch(unique).await;
        }
    }

    /// Looks up recorded images by their unique references and the tags
    /// they should carry. On the classic store, one listing for all of them
    /// (a reference-filtered listing names only the matching tags of each
    /// image, so the tags must be in the same filter). On the containerd
    /// store, the unique references first: each inspect names every tag of
    /// its image, so only tags on another image (a pushed index) are asked
    /// after them.
    pub async fn prefetch_recorded(&self, unique: &[&str], tags: &[&str]) {
        match self.image_store {
            ImageStore::Classic => {
                let all: Vec<&str> = unique.iter().chain(tags).copied().collect();
                self.prefetch(&all).await;
            }
            ImageStore::Containerd => {
                self.prefetch(unique).await;
                self.prefetch(tags).await;
            }
        }
    }

    /// The images that `references` name, in one request; `None` when the
    /// engine does not answer it in time.
    async fn list(&self, references: &[String]) -> Option<Vec<bollard::models::ImageSummary>> {
        let filters: HashMap<String, Vec<String>> =
            HashMap::from([("reference".to_string(), references.to_vec())]);
        let opts = bollard::query_parameters::ListImagesOptions {
            filters: Some(filters),
            ..Default::default()
        };
        tokio::time::timeout(request_bound(), self.docker.list_images(Some(opts)))
            .await
            .ok()?
            .ok()
    }

    /// Forgets what was learned of `reference`: this process changes it
    /// (a tag, a pull, or a build that names its image).
    pub(crate) fn touched(&self, reference: &str) {
        if let Ok(mut m) = self.seen.lock() {
            m.remove(reference);
        }
    }

    /// Tags `image` as `reference` (`repo[:tag]`).
    pub async fn tag(&self, image: &str, reference: &str) -> Result<(), EngineError> {
        self.touched(reference);
        let (repo, tag) = split_reference(reference);
        let opts = TagImageOptionsBuilder::default()
            .repo(&repo)
            .tag(&tag)
            .build();
        tokio::time::timeout(request_bound(), self.docker.tag_image(image, Some(opts)))
            .await
            .map_err(|_| {
                EngineError::Build(format!(
                    "tagging {image} as {reference}: the engine did not answer within {}s",
                    request_bound().as_secs()
                ))
            })?
            .map_err(|e| EngineError::Build(format!("tagging {image} as {reference}: {e}")))
    }

    /// Removes the tag `reference` (never the image: other tags keep it).
    pub async fn untag(&self, reference: &str) {
        self.touched(reference);
        let opts = bollard::query_parameters::RemoveImageOptionsBuilder::default()
            .noprune(true)
            .build();
        let _ = tokio::time::timeout(
            request_bound(),
            self.docker.remove_image(reference, Some(opts), None),
        )
        .await;
    }

    /// Pulls `reference` (e.g. `repo@sha256:…`) into the engine.
    pub async fn pull(&self, reference: &str) -> Result<(), EngineError> {
        self.touched(reference);
        let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
            .from_image(reference)
            .build();
        let mut s = self
            .docker
            .create_image(Some(opts), None, engine_credentials(reference));
        while let Some(item) = s.next().await {
            let info = item.map_err(|e| EngineError::Build(format!("pulling {reference}: {e}")))?;
            if let Some(err) = info.error_detail.and_then(|d| d.message) {
                return Err(EngineError::Build(format!("pulling {reference}: {err}")));
            }
        }
        Ok(())
    }

    /// Pushes `reference`; returns the registry digest. A push the
    /// registry fails with a 5xx answer, or whose connection breaks, is
    /// tried again after 1 s and 3 s: a push is idempotent, and a
    /// distribution registry on its filesystem driver answers 500 to a tag
    /// read that races another writer of the same tag.
    pub async fn push(
        &self,
        reference: &str,
        target: &str,
        reporter: &dyn Reporter,
    ) -> Result<(String, Vec<Retry>), EngineError> {
        let mut delays = [1u64, 3].into_iter();
        let mut retries = Vec::new();
        loop {
            let start = std::time::Instant::now();
            match self.push_once(reference).await {
                Err(EngineError::Build(m)) if transient_registry_failure(&m) => {
                    match delays.next() {
                        Some(s) => {
                            retries.push(Retry {
                                message: m.clone(),
                                start,
                                end: std::time::Instant::now(),
                            });
                            reporter.event(&crate::events::Event::Warning {
                                target: target.to_string(),
                                message: format!("{m}; trying the push again in {s} s"),
                            });
                            tokio::time::sleep(std::time::Duration::from_secs(s)).await;
                        }
                        None => return Err(EngineError::Build(m)),
                    }
                }
                r => return r.map(|d| (d, retries)),
            }
        }
    }

    async fn push_once(&self, reference: &str) -> Result<String, EngineError> {
        let (repo, tag) = split_reference(reference);
        let opts = PushImageOptionsBuilder::default().tag(&tag).build();
        let mut s = self
            .docker
            .push_image(&repo, Some(opts), engine_credentials(reference));
        let mut digest = None;
        while let Some(item) = s.next().await {
            let info = item.map_err(|e| EngineError::Build(format!("pushing {reference}: {e}")))?;
            if let Some(err) = info.error_detail.and_then(|d| d.message) {
                return Err(EngineError::Build(format!("pushing {reference}: {err}")));
            }
            if let Some(st) = info.status.as_deref() {
                // "<tag>: digest: sha256:... size: N"
                if let Some(i) = st.find("digest: ") {
                    let d = st[i + 8..].split_whitespace().next().unwrap_or("");
                    if d.starts_with("sha256:") {
                        digest = Some(d.to_string());
                    }
                }
            }
        }
        digest.ok_or_else(|| {
            EngineError::Build(format!(
                "pushing {reference}: the registry returned no digest"
            ))
        })
    }

    /// Builds `spec` with `dockerfile` (already rewritten) and `args`.
    pub async fn build(
        &self,
        spec: &BuildSpec,
        dockerfile: &str,
        args: &std::collections::BTreeMap<String, String>,
        build_tag: &str,
        reporter: &dyn Reporter,
    ) -> Result<Result<Built, Failed>, EngineError> {
        let df_rel = spec
            .dockerfile
            .strip_prefix(&spec.context)
            .ok()
            .map(|p| p.display().to_string());
        let entries = context::list(&spec.context, df_rel.as_deref())?;
        let mut b = BuildImageOptionsBuilder::default()
            .dockerfile(context::DOCKERFILE_IN_TAR)
            .t(build_tag)
            .rm(true)
            .nocache(spec.no_cache)
            .version(BuilderVersion::BuilderBuildKit)
            .session(&format!("kiln-{}-{}", spec.name, std::process::id()))
            .buildargs(
                &args
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<HashMap<_, _>>(),
            )
            .labels(
                &spec
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<HashMap<_, _>>(),
            );
        if let Some(t) = &spec.target {
            b = b.target(t);
        }
        if spec.pull {
            b = b.pull("1");
        }
        if !spec.cache_from.is_empty() {
            b = b.cachefrom(&spec.cache_from);
        }
        if let Some(n) = &spec.network {
            b = b.networkmode(n);
        }
        if let Some(p) = spec.platforms.first() {
            b = b.platform(p);
        }
        let opts = b.build();
        let mut tracker = StepTracker::new(&spec.name);
        // A pooled connection the daemon has just closed fails the request
        // before anything is sent ("SendRequest"); nothing ran, so it is
        // sent again on a fresh connection (at most twice more).
        let mut attempt = 0;
        let (mut stream, first) = loop {
            let body = bollard::body_try_stream(context::tar_stream(
                spec.context.clone(),
                entries.clone(),
                dockerfile.to_string(),
            ));
            let mut stream = self.docker.build_image(opts.clone(), None, Some(body));
            let first = stream.next().await;
            let retry = matches!(&first, Some(Err(e)) if is_send_error(e));
            if retry && attempt < 2 {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
                continue;
            }
            break (stream, first);
        };
        let mut image_id = None;
        let mut error = None;
        let mut next = first;
        while let Some(item) = next {
            match item {
                Ok(info) => {
                    if let Some(e) = info.error_detail.and_then(|d| d.message) {
                        error = Some(e);
                    }
                    match info.aux {
                        Some(BuildInfoAux::BuildKit(st)) => {
                            for v in &st.vertexes {
                                let err = (!v.error.is_empty()).then_some(v.error.as_str());
                                for e in tracker.vertex(
                                    &v.digest,
                                    &v.name,
                                    v.cached,
                                    secs!(v.started),
                                    secs!(v.completed),
                                    err,
                                ) {
                                    reporter.event(&e);
                                }
                            }
                            for l in &st.logs {
                                for e in tracker.log(&l.vertex, &l.msg) {
                                    reporter.event(&e);
                                }
                            }
                        }
                        Some(BuildInfoAux::Default(id)) => image_id = id.id,
                        None => {}
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    // A daemon that died mid-build cuts the stream in many
                    // ways; if it no longer answers, that is the cause.
                    if is_connection_error(&msg) || self.docker.ping().await.is_err() {
                        return Err(EngineError::Unreachable {
                            endpoint: self.endpoint.host.clone(),
                            detail: msg,
                        });
                    }
                    // The progress stream can be cut after the export
                    // (the daemon's last message truncated). The per-run
                    // build tag exists only if this build exported its
                    // image, and no step failed: then the build is done.
                    self.touched(build_tag);
                    if tracker.failure().is_none()
                        && let Some(id) = self.image_id(build_tag).await
                    {
                        image_id = Some(id);
                        break;
                    }
                    error = Some(error_chain(&e));
                    break;
                }
            }
            next = stream.next().await;
        }
        if let Some(message) = error {
            let (step, log_tail) = match tracker.failure() {
                Some((s, _, logs)) => (Some(s), logs),
                None => (None, Vec::new()),
            };
            return Ok(Err(Failed {
                message: clean_error(&message),
                step,
                log_tail,
                steps: tracker.counts(),
                cache: tracker.cache_ops(),
            }));
        }
        // The aux message carries the engine's own id; what kiln records
        // is the image's identity, read from the tag the build named.
        let _ = image_id;
        self.touched(build_tag);
        let image_id = self.image_id(build_tag).await.ok_or_else(|| {
            EngineError::Build(format!("build of {} finished without an image", spec.name))
        })?;
        Ok(Ok(Built {
            image_id,
            steps: tracker.counts(),
            cache: tracker.cache_ops(),
            retries: Vec::new(),
        }))
    }
}

/// The request could not be sent (typically a pooled connection the
/// daemon closed): safe to send again, nothing ran.
fn is_send_error(e: &bollard::errors::Error) -> bool {
    error_chain(e).contains("SendRequest")
}

fn is_connection_error(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("connection refused")
        || m.contains("no such file or directory") && m.contains("sock")
        || m.contains("broken pipe")
}

/// Strips bollard's wrapper text from a daemon error.
pub fn clean_error(msg: &str) -> String {
    msg.trim_start_matches("Docker stream error: ")
        .trim()
        .to_string()
}

/// Splits `repo[:tag]` (a registry port is not a tag); no tag means `latest`.
pub fn split_reference(r: &str) -> (String, String) {
    let (name, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    if let Some(d) = digest {
        return (name.to_string(), d.to_string());
    }
    let repo = kiln_plan::repository_name(name);
    let tag = name.get(repo.len() + 1..).unwrap_or("latest");
    (repo.to_string(), tag.to_string())
}

#[cfg(test)]
mod explain_tests {
    use super::explain;

    #[test]
    fn connection_failures_are_said_in_words() {
        let io = |kind, msg: &str| bollard::errors::Error::IOError {
            err: std::io::Error::new(kind, msg.to_string()),
        };
        let refused = explain(&io(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        assert!(refused.starts_with("nothing listens there"), "{refused}");
        let denied = explain(&io(
            std::io::ErrorKind::PermissionDenied,
            "Permission denied (os error 13)",
        ));
        assert!(denied.contains("docker group"), "{denied}");
        let other = explain(&io(std::io::ErrorKind::Other, "something odd"));
        assert!(
            other.contains("something odd") && !other.contains("hyper"),
            "{other}"
        );
    }
}

/// The docker CLI's login for the registry of `reference`, as the Engine
/// API takes it for a pull or a push (`X-Registry-Auth`): the daemon does
/// not read the CLI's configuration, the client sends it, as `docker push`
/// does. `None` (anonymous) without one.
fn engine_credentials(reference: &str) -> Option<bollard::auth::DockerCredentials> {
    let host = kiln_plan::ImageRef::parse(reference)?.domain().to_string();
    let (username, password) = kiln_store::credentials::login_for(&host)?;
    let serveraddress = match host.as_str() {
        "docker.io" => "https://index.docker.io/v1/".to_string(),
        h => h.to_string(),
    };
    Some(bollard::auth::DockerCredentials {
        username: Some(username),
        password: Some(password),
        serveraddress: Some(serveraddress),
        ..Default::default()
    })
}

/// Whether a failed push's message says the registry failed in a way that
/// another try may not: a 5xx answer (not 501), a broken connection, or
/// what a registry answers while another build of the run pushes the same
/// blob (BuildKit pushes a layer shared by concurrent builds from each of
/// them: a manifest `PUT` that names a blob whose upload another push has
/// not finished is `BLOB_UNKNOWN`/`MANIFEST_BLOB_UNKNOWN`, and
/// distribution 2.8 answers concurrent uploads of one blob, or an image
/// and its cache pushed to one repository at once, with `DIGEST_INVALID`).
pub(crate) fn transient_registry_failure(msg: &str) -> bool {
    let server = (500..=599)
        .filter(|c| *c != 501)
        .any(|c| msg.contains(&format!(": {c} ")) || msg.ends_with(&format!(": {c}")));
    let lower = msg.to_ascii_lowercase();
    server
        || lower.contains("connection reset by peer")
        || lower.contains("broken pipe")
        || lower.contains("unexpected eof")
        || lower.contains("blob unknown")
        || lower.contains("blob_unknown")
        || lower.contains("provided digest did not match uploaded content")
        || lower.contains("digest invalid")
        || lower.contains("digest_invalid")
        || manifest_put_refused_without_reason(&lower)
}

/// containerd 1.7 (dockerd 26's pusher) reports a manifest `PUT` the
/// registry answered 400 without the registry's reason: `unexpected status
/// from PUT request to …/manifests/…: 400 Bad Request`. In a push whose
/// blobs were just uploaded that is almost always the race with another
/// build's upload of a shared blob; a manifest the registry refuses for
/// good fails again after the retries.
fn manifest_put_refused_without_reason(lower: &str) -> bool {
    lower.contains("put request to")
        && lower.contains("/manifests/")
        && lower
            .split_once(": 400 bad request")
            .is_some_and(|(_, reason)| !reason.trim_start().starts_with(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that is never asked: what this process knows of it only.
    fn idle_engine() -> LocalEngine {
        LocalEngine {
            // Never connected to: no request is made.
            docker: Docker::connect_with_http(
                "http://127.0.0.1:9",
                1,
                bollard::API_DEFAULT_VERSION,
            )
            .unwrap(),
            endpoint: Endpoint {
                host: "tcp://127.0.0.1:9".into(),
                docker_cli: "docker".into(),
            },
            platform: "linux/amd64".into(),
            image_store: ImageStore::Containerd,
            version: "26.1.5".into(),
            seen: Default::default(),
            identities: Default::default(),
            engine_ids: Default::default(),
            link: Default::default(),
            socket: None,
            asking: Default::default(),
            trouble: Default::default(),
        }
    }

    /// A containerd store that cannot be read is not asked again and its
    /// questions go to the Engine API; when `KILN_CONTAINERD` named it, why
    /// is kept for the run to say (once), and not otherwise.
    #[test]
    fn a_named_containerd_store_that_cannot_be_read_is_said_once() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let gone = std::env::temp_dir().join(format!(
            "kiln-no-containerd-{}/containerd.sock",
            std::process::id()
        ));
        for named in [true, false] {
            let e = idle_engine();
            *e.link.lock().unwrap() = Some(Link {
                store: super::super::containerd::Store {
                    address: gone.display().to_string(),
                    namespace: "moby".into(),
                },
                agreed: true,
                named,
            });
            let left = rt.block_on(e.ask_containerd(vec!["busybox:latest".into()]));
            assert_eq!(left, ["busybox:latest"], "the Engine API is asked");
            assert!(e.link.lock().unwrap().is_none(), "not asked again");
            let said = e.take_store_trouble();
            if named {
                let said = said.expect("said");
                assert!(
                    said.contains("KILN_CONTAINERD")
                        && said.contains(&gone.display().to_string())
                        && said.contains("KILN_CONTAINERD=off"),
                    "{said}"
                );
                assert_eq!(e.take_store_trouble(), None, "said once");
            } else {
                assert_eq!(said, None, "a store kiln found itself falls back quietly");
            }
        }
    }

    /// A reference is asked by one round at a time: a question about it
    /// while a round asks it waits for that round (and asks the rest
    /// itself, at once); once the round has ended, what it learned answers
    /// and nothing is asked again.
    #[test]
    fn a_reference_in_flight_is_waited_for_and_the_rest_asked_at_once() {
        let e = idle_engine();
        let (first, waits) = e.claim(&["a", "b", "a"]);
        let first = first.expect("a and b are asked");
        assert_eq!(first.references, ["a", "b"]);
        assert!(waits.is_empty());
        let (second, mut waits) = e.claim(&["b", "c"]);
        assert_eq!(
            second.as_ref().map(|r| r.references.clone()),
            Some(vec!["c".to_string()])
        );
        assert_eq!(waits.len(), 1, "b is in flight in the first round");
        assert!(!*waits[0].borrow());
        // The first round learns a and b, then ends.
        if let Ok(mut seen) = e.seen.lock() {
            seen.insert("a".into(), Some("sha256:a".into()));
            seen.insert("b".into(), None);
        }
        drop(first);
        assert!(*waits[0].borrow_and_update(), "its end is signalled");
        let (third, waits) = e.claim(&["a", "b", "c"]);
        assert!(third.is_none(), "a and b answered, c in flight");
        assert_eq!(waits.len(), 1);
        drop(second);
        // c was not answered: it is asked again, by whoever needs it.
        let (fourth, _) = e.claim(&["c"]);
        assert_eq!(
            fourth.map(|r| r.references.clone()),
            Some(vec!["c".to_string()])
        );
    }

    /// The unique references asked early are those of the images the
    /// targets' first tags name; a tag not known (or of no image) gives
    /// none.
    #[test]
    fn unique_references_follow_what_the_first_tags_name() {
        let seen: HashMap<String, Option<String>> = [
            (
                "r/a:1".to_string(),
                Some("sha256:0123456789abcdef0123".to_string()),
            ),
            ("r/b:1".to_string(), None),
        ]
        .into();
        let targets = vec![
            (
                "a".to_string(),
                vec!["r/a:1".to_string(), "r/a:latest".to_string()],
            ),
            ("b".to_string(), vec!["r/b:1".to_string()]),
            ("c".to_string(), vec!["r/c:1".to_string()]),
            ("d".to_string(), Vec::new()),
        ];
        assert_eq!(
            unique_of(&targets, &seen),
            [crate::naming::local_ref("a", "sha256:0123456789abcdef0123")]
        );
    }

    /// An engine's facts are recalled only while the daemon that gave them
    /// owns the socket: a new socket (a restarted daemon) is asked again.
    #[test]
    fn engine_facts_are_recalled_for_the_same_socket_only() {
        let dir = std::env::temp_dir().join(format!("kiln-facts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("docker.sock");
        std::fs::write(&sock, "").unwrap();
        let host = format!("unix://{}", sock.display());
        let id = socket_identity(&host).unwrap();
        assert_eq!(socket_identity("tcp://127.0.0.1:2375"), None);
        let facts = EngineFacts {
            socket: String::new(),
            platform: "linux/arm64".into(),
            containerd: true,
            version: "29.0.0".into(),
            indexes: vec![("registry.test:5000".into(), false)],
            insecure_cidrs: vec!["10.0.0.0/8".into()],
            containerd_looked: true,
            containerd_store: Some(super::super::containerd::Store {
                address: "/run/containerd/containerd.sock".into(),
                namespace: "moby".into(),
            }),
            containerd_verdict: None,
        };
        let mut cache = serde_json::Map::new();
        assert_eq!(EngineFacts::recall_from(&cache, &host, &id), None);
        facts.keep_into(&mut cache, &host, &id);
        let back = EngineFacts::recall_from(&cache, &host, &id).unwrap();
        assert_eq!(back.platform, "linux/arm64");
        assert_eq!(back.indexes, facts.indexes);
        assert_eq!(back.containerd_store, facts.containerd_store);
        // Facts kept by a kiln that did not look for the containerd store
        // are read, and say it was not looked for.
        let mut old = serde_json::to_value(&facts).unwrap();
        for k in [
            "containerd_looked",
            "containerd_store",
            "containerd_verdict",
        ] {
            old.as_object_mut().unwrap().remove(k);
        }
        old["socket"] = serde_json::Value::String(id.clone());
        let mut older = serde_json::Map::new();
        older.insert(host.clone(), old);
        let back = EngineFacts::recall_from(&older, &host, &id).unwrap();
        assert!(!back.containerd_looked);
        assert_eq!(back.containerd_store, None);
        // The daemon restarts: its socket is made again.
        std::fs::remove_file(&sock).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&sock, "").unwrap();
        let new_id = socket_identity(&host).unwrap();
        assert_ne!(new_id, id);
        assert_eq!(EngineFacts::recall_from(&cache, &host, &new_id), None);
        assert_eq!(
            EngineFacts::recall_from(&cache, "unix:///other.sock", &id),
            None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn transient_push_failures_are_told_from_lasting_ones() {
        for m in [
            "pushing r:1: unexpected status from HEAD request to http://127.0.0.1:5001/v2/twin/r/manifests/1: 500 Internal Server Error",
            "pushing r:1: received unexpected HTTP status: 503 Service Unavailable",
            "pushing r:1: Put \"http://h/v2/r/blobs/uploads/x\": write tcp 127.0.0.1:1->127.0.0.1:2: write: connection reset by peer",
            "pushing r:1: unexpected EOF",
            // Concurrent pushes of one layer (buildkitd 0.32, distribution 2.8).
            "failed to push registry.test:5000/hidden/app:1: failed commit on ref \"manifest-sha256:73acc\": unexpected status from PUT request to http://registry.test:5000/v2/hidden/app/manifests/1: 400 Bad Request: blob unknown to registry - sha256:73acc",
            "pushing r:1: manifest blob unknown: blob unknown to registry",
            "pushing r:1: errors:\ndigest invalid: provided digest did not match uploaded content",
            // The same race as dockerd 26 (containerd 1.7) reports it.
            "pushing 127.0.0.1:45185/e2e-reg/os:1: Docker stream error: failed commit on ref \"manifest-sha256:f5\": unexpected status from PUT request to http://127.0.0.1:45185/v2/e2e-reg/os/manifests/1: 400 Bad Request",
        ] {
            assert!(transient_registry_failure(m), "{m}");
        }
        for m in [
            "pushing r:1: unauthorized: authentication required",
            "pushing r:1: denied: requested access to the resource is denied",
            "pushing r:1: received unexpected HTTP status: 501 Not Implemented",
            "pushing r:1: Get \"http://h/v2/\": dial tcp 127.0.0.1:9: connect: connection refused",
            "pushing r:1: tag does not exist: r:1",
            // A 400 for a blob, or with a reason that is not the race.
            "pushing r:1: unexpected status from PUT request to http://h/v2/r/blobs/uploads/u: 400 Bad Request",
            "pushing r:1: unexpected status from PUT request to http://h/v2/r/manifests/1: 400 Bad Request: manifest invalid",
        ] {
            assert!(!transient_registry_failure(m), "{m}");
        }
    }

    #[test]
    fn references_split_at_the_tag_not_the_port() {
        assert_eq!(
            split_reference("127.0.0.1:5000/a/b:1.0"),
            ("127.0.0.1:5000/a/b".into(), "1.0".into())
        );
        assert_eq!(
            split_reference("127.0.0.1:5000/a/b"),
            ("127.0.0.1:5000/a/b".into(), "latest".into())
        );
        assert_eq!(
            split_reference("busybox"),
            ("busybox".into(), "latest".into())
        );
    }
}
