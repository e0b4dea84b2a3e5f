//! A small registry client: which manifest digest an image reference names
//! now. Content keys use it for the images a target builds on (`FROM`,
//! `docker-image://` contexts); preflight checks use it too.
//!
//! References are normalised the way Docker does it
//! ([`kiln_plan::ImageRef`]: `busybox` is `docker.io/library/busybox:latest`).
//! A reference pinned by digest is answered without a request. A tag is
//! resolved with `HEAD /v2/<name>/manifests/<tag>`, falling back to `GET`
//! (and hashing the body) when the answer carries no
//! `Docker-Content-Digest` header; every manifest type is accepted, so a
//! multi-platform tag resolves to its index (the digest `FROM name@…` pins).
//!
//! How each registry is reached (scheme, trusted CAs, credentials) and
//! what a failure means is decided in one place for all of kiln:
//! [`kiln_store::registry_io`] (docs/registries.md). Registries that hand
//! out anonymous pull tokens (`WWW-Authenticate: Bearer`, as Docker Hub and
//! most public registries do) work without a login; a registry that
//! refuses is [`RegistryError::Auth`], one that cannot be spoken to (TLS
//! trust, plain HTTP answered to HTTPS) [`RegistryError::Transport`].
//!
//! Every resolution is bounded by one timeout for the whole operation (the
//! token exchange, `HEAD`, the `GET` fallback and retries), so a registry
//! that accepts connections and never answers cannot hang a run.
//!
//! It also reads an image's size and identity from its manifests and
//! config, and points a tag at a digest (`retag`): the one write it makes,
//! a manifest put under a tag whose blobs are already there.
//!
//! Must never: decide how a registry is reached or what credentials it is
//! given (that is `registry_io`'s), push a layer or a blob, or print (a
//! failure is a [`RegistryError`] for the caller to say).

use std::sync::Arc;
use std::time::Duration;

use kiln_plan::ImageRef;
use kiln_store::registry_io::{self as access, Reach, Transport, retry};
use kiln_util::error_chain;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::{Client, Reference};

/// The shared client's own bounds: connecting, and one read on a
/// connection that stalls. Every operation is bounded by its
/// [`Registry`]'s timeout besides (the client is shared by registries of
/// different timeouts).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What a reference names in its registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The manifest digest (`sha256:<64 hex>` or `sha512:<128 hex>`); for a
    /// multi-platform image, the digest of the index.
    Found(String),
    /// The registry says the tag or the repository does not exist (HTTP 404,
    /// `MANIFEST_UNKNOWN`, `NAME_UNKNOWN`, `NOT_FOUND`). Nothing else is
    /// reported as absent.
    Absent,
}

/// Why a reference could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The registry or a proxy refused access (HTTP 401, 403 or
    /// 407). Some registries, Docker Hub among them, also answer 401 for a
    /// repository that does not exist, so that private ones stay hidden.
    #[error("registry {registry}: {detail}")]
    Auth {
        /// `host[:port]` as in the reference (`docker.io` for Docker Hub).
        registry: String,
        /// The HTTP status: 401, 403 or 407.
        status: u16,
        detail: String,
    },
    /// No answer: connection refused, name resolution or TLS failed, or the
    /// operation did not finish within the timeout.
    #[error("registry {registry} unreachable: {detail}")]
    Unreachable { registry: String, detail: String },
    /// Something answered, but kiln could not speak to it: a certificate
    /// it does not trust, plain HTTP answered to HTTPS (a registry that
    /// should be declared insecure), HTTPS answered to plain HTTP.
    #[error("registry {registry}: {detail}")]
    Transport { registry: String, detail: String },
    /// The registry answered, but not with a digest or a "not found":
    /// 5xx, rate limiting, other refusals, malformed answers.
    #[error("registry {registry}: {detail}")]
    Protocol { registry: String, detail: String },
    /// The string is not an image reference kiln can resolve.
    #[error("{reference:?} is not a valid image reference: {reason}")]
    InvalidReference { reference: String, reason: String },
    /// The HTTP client could not be set up (e.g. an unusable TLS setup).
    #[error("setting up the registry client: {0}")]
    Setup(String),
}

/// The manifest media types kiln reads: an index or one image's manifest,
/// OCI or Docker's.
const MANIFEST_TYPES: [&str; 4] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// The OCI platform object of `os/arch[/variant]`.
fn platform_object(platform: &str) -> serde_json::Value {
    let mut parts = platform.split('/');
    let mut p = serde_json::Map::new();
    p.insert("os".into(), parts.next().unwrap_or("linux").into());
    p.insert(
        "architecture".into(),
        parts.next().unwrap_or("amd64").into(),
    );
    if let Some(v) = parts.next() {
        p.insert("variant".into(), v.into());
    }
    serde_json::Value::Object(p)
}

/// What [`Registry::raw_manifest`] found.
enum RawManifest {
    Found(bytes::Bytes),
    Absent,
    /// The registry says it holds it but would not hand it over.
    Unreadable,
}

/// A manifest's OCI descriptor, and its config's digest for one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    pub config_digest: Option<String>,
}

/// A registry client shared by a run: cheap to clone, safe to use from many
/// tokio tasks at once (tokens are cached per repository and shared).
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

/// One registry's client and how it was reached.
#[derive(Clone)]
struct HostClient {
    client: Client,
    transport: Transport,
    credentials: access::Credentials,
}

struct Inner {
    timeout: Duration,
}

/// A client slot per registry (`host[:port]`) and generation of transport
/// choices ([`access::generation`]), shared by every
/// [`Registry`] of the process: a client is built on first use (setting up
/// TLS reads and parses the system's CA certificates, several milliseconds
/// of CPU; a run whose images are all on the engine never asks a
/// registry), once however many parts of a run (preflight, keys, the
/// driver's pushes and checks) ask the same registry at once, and keeps
/// its bearer tokens for all of them. A client whose transport is not
/// settled (its probe got no answer) is not kept.
type Slot = Arc<tokio::sync::OnceCell<HostClient>>;
type SlotKey = (String, u64);

fn shared_clients() -> &'static std::sync::Mutex<std::collections::HashMap<SlotKey, Slot>> {
    static CLIENTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<SlotKey, Slot>>,
    > = std::sync::OnceLock::new();
    CLIENTS.get_or_init(Default::default)
}

/// An answer asked ahead: when it came, and what the reference named
/// (`None`: no answer, which the run asks again and reports itself).
type Ahead = futures_util::future::Shared<
    futures_util::future::BoxFuture<'static, (std::time::Instant, Option<Resolution>)>,
>;

/// How long an answer asked ahead stands.
pub const AHEAD_FRESH: Duration = Duration::from_secs(10);

fn ahead() -> &'static std::sync::Mutex<std::collections::HashMap<String, Ahead>> {
    static AHEAD: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, Ahead>>> =
        std::sync::OnceLock::new();
    AHEAD.get_or_init(Default::default)
}

/// Starts asking, on the current tokio runtime, what each of `references`
/// names in its registry now ([`Registry::check`]), all at once and not
/// waited for: what a run will ask while it is still being prepared (the
/// tags a no-op verifies, the images the preflight looks for). Until
/// [`forget_ahead`], and for [`AHEAD_FRESH`] after each answer came,
/// `resolve` and `check` of the same reference, by any [`Registry`] of the
/// process, take that answer (waiting for it while it is asked) instead of
/// asking again. A reference asked ahead already is not asked twice. The
/// registry's client (its transport probe, its TLS set-up) is made by the
/// first of them, beside whatever the caller does next.
pub fn ask_ahead(references: impl IntoIterator<Item = String>) {
    use futures_util::FutureExt;
    let Ok(registry) = Registry::new(Duration::from_secs(30)) else {
        return;
    };
    let Ok(mut asked) = ahead().lock() else {
        return;
    };
    for reference in references {
        if asked.contains_key(&reference) {
            continue;
        }
        let (r, what) = (registry.clone(), reference.clone());
        let answer = async move {
            let answer = match Target::parse(&what) {
                Ok(target) => r.fetch(target).await.ok(),
                Err(_) => None,
            };
            (std::time::Instant::now(), answer)
        }
        .boxed()
        .shared();
        tokio::spawn(answer.clone());
        asked.insert(reference, answer);
    }
}

/// Forgets every answer asked ahead: from now on each question is asked.
/// Called when the run builds, pulls or writes to a registry (kiln's own
/// manifest puts call it), after which a tag may name something else.
pub fn forget_ahead() {
    if let Ok(mut asked) = ahead().lock() {
        asked.clear();
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// A reference ready to be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// `host[:port]`.
    registry: String,
    repository: String,
    /// `None` when pinned by digest.
    tag: Option<String>,
    digest: Option<String>,
}

impl Target {
    fn parse(reference: &str) -> Result<Target, RegistryError> {
        let invalid = |reason: &str| RegistryError::InvalidReference {
            reference: reference.to_string(),
            reason: reason.to_string(),
        };
        let r = ImageRef::parse(reference).ok_or_else(|| {
            invalid(
                "expected [HOST[:PORT]/]NAME[:TAG][@DIGEST] with a lower-case name, \
                 e.g. busybox:1.36 or registry.example:5000/team/app@sha256:…",
            )
        })?;
        if let Some(d) = r.digest() {
            check_digest(d).map_err(|why| invalid(&why))?;
        }
        Ok(Target {
            registry: r.domain().to_string(),
            repository: r.path().to_string(),
            // A digest wins over a tag written beside it, as in a pull.
            tag: match r.digest() {
                Some(_) => None,
                None => Some(r.tag().unwrap_or("latest").to_string()),
            },
            digest: r.digest().map(str::to_string),
        })
    }

    fn name(&self) -> String {
        match (&self.tag, &self.digest) {
            (_, Some(d)) => format!("{}/{}@{d}", self.registry, self.repository),
            (Some(t), None) => format!("{}/{}:{t}", self.registry, self.repository),
            (None, None) => format!("{}/{}", self.registry, self.repository),
        }
    }
}

/// `sha256:<64 lower-case hex>` or `sha512:<128 lower-case hex>`, as
/// go-digest (and so BuildKit) accepts them.
fn check_digest(d: &str) -> Result<(), String> {
    let Some((algorithm, hex)) = d.split_once(':') else {
        return Err(format!("digest {d:?} has no algorithm"));
    };
    let len = match algorithm {
        "sha256" => 64,
        "sha512" => 128,
        _ => {
            return Err(format!(
                "digest algorithm {algorithm:?} is not supported (sha256 or sha512)"
            ));
        }
    };
    if hex.len() != len || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(format!(
            "digest {d:?}: a {algorithm} digest is {len} lower-case hex digits"
        ));
    }
    Ok(())
}

impl Registry {
    /// A client whose every operation finishes within `timeout`.
    /// Nothing is contacted until then.
    pub fn new(timeout: Duration) -> Result<Registry, RegistryError> {
        Ok(Registry {
            inner: Arc::new(Inner { timeout }),
        })
    }

    /// The client for `registry`, built on first use: its transport
    /// (scheme, CAs) and credentials from [`kiln_store::registry_io`].
    async fn client(&self, registry: &str) -> Result<HostClient, RegistryError> {
        let timeout = self.inner.timeout;
        let key = (registry.to_string(), access::generation());
        let poisoned = |_| RegistryError::Setup("the registry clients' lock is poisoned".into());
        let slot = shared_clients()
            .lock()
            .map_err(poisoned)?
            .entry(key.clone())
            .or_default()
            .clone();
        let c = slot
            .get_or_try_init(|| async {
                let transport = access::transport(registry, timeout).await;
                let config = access::client_config(&transport, CONNECT_TIMEOUT, READ_TIMEOUT)
                    .map_err(RegistryError::Setup)?;
                let client =
                    Client::try_from(config).map_err(|e| RegistryError::Setup(error_chain(&e)))?;
                Ok(HostClient {
                    client,
                    transport,
                    credentials: access::credentials(registry),
                })
            })
            .await?
            .clone();
        if !access::settled(registry) {
            shared_clients().lock().map_err(poisoned)?.remove(&key);
        }
        Ok(c)
    }

    /// The timeout of one resolution.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// The digest `reference` names now.
    ///
    /// A reference pinned by digest (`name@sha256:…`, also `name:tag@…`)
    /// returns that digest without a request. A tag is asked of its registry
    /// (`HEAD`, then `GET` when the answer has no digest header);
    /// for a multi-platform image that is the index digest, which is what
    /// `FROM` pins. 5xx answers are retried twice (after 50 and 250 ms)
    /// within the timeout.
    ///
    /// Must be called inside a tokio runtime with the time driver enabled.
    pub async fn resolve(&self, reference: &str) -> Result<Resolution, RegistryError> {
        let target = Target::parse(reference)?;
        if let Some(d) = target.digest {
            return Ok(Resolution::Found(d));
        }
        if let Some(answer) = self.answered_ahead(reference).await {
            return Ok(answer);
        }
        self.fetch(target).await
    }

    /// Whether the registry holds `reference` now: like
    /// [`resolve`](Registry::resolve), but a reference pinned by digest is
    /// asked too (`HEAD` of the manifest by digest), so an image deleted
    /// from the registry is `Absent`.
    pub async fn check(&self, reference: &str) -> Result<Resolution, RegistryError> {
        let target = Target::parse(reference)?;
        if let Some(answer) = self.answered_ahead(reference).await {
            return Ok(answer);
        }
        self.fetch(target).await
    }

    /// The answer [`ask_ahead`] got for `reference`, waited for while it
    /// is asked (within this client's timeout): `None` when it was not
    /// asked ahead, found no answer, is older than [`AHEAD_FRESH`] or was
    /// forgotten ([`forget_ahead`]).
    async fn answered_ahead(&self, reference: &str) -> Option<Resolution> {
        let asked = ahead().lock().ok()?.get(reference)?.clone();
        let (at, answer) = tokio::time::timeout(self.inner.timeout, asked).await.ok()?;
        answer.filter(|_| at.elapsed() < AHEAD_FRESH)
    }

    /// The size of the image `reference` names, in megabytes (10^6 bytes):
    /// its config and layers as stored (compressed), what a node pulling it
    /// moves over its link. An index (several platforms, or one image with
    /// the attestations buildx adds by default) is the largest of its
    /// images — a node pulls one of them, never its attestations. `None`
    /// for an index with no image in it.
    pub async fn image_size_mb(&self, reference: &str) -> Result<Option<f64>, RegistryError> {
        use oci_client::manifest::OciManifest;
        let target = Target::parse(reference)?;
        let name = target.name();
        let (hc, oci_ref) = self.client_for(&target).await?;
        let client = &hc.client;
        let timeout = self.inner.timeout;
        let auth = hc.credentials.auth.clone();
        let pull = |r: Reference| {
            let auth = &auth;
            async move { tokio::time::timeout(timeout, retry(|| client.pull_manifest(&r, auth))).await }
        };
        let unreachable = || RegistryError::Unreachable {
            registry: target.registry.clone(),
            detail: format!("reading {name}: no answer within {timeout:?}"),
        };
        let bytes = |m: &oci_client::manifest::OciImageManifest| {
            (m.config.size + m.layers.iter().map(|l| l.size).sum::<i64>()).max(0) as f64 / 1e6
        };
        let index = match pull(oci_ref.clone()).await {
            Err(_) => return Err(unreachable()),
            Ok(Err(e)) => return classify(e, &hc, &target.registry, &name, timeout).map(|_| None),
            Ok(Ok((OciManifest::Image(m), _))) => return Ok(Some(bytes(&m))),
            Ok(Ok((OciManifest::ImageIndex(index), _))) => index,
        };
        let mut largest: Option<f64> = None;
        for e in image_entries(&index.manifests) {
            let r = Reference::with_digest(
                oci_ref.registry().to_string(),
                oci_ref.repository().to_string(),
                e.digest.clone(),
            );
            match pull(r).await {
                Err(_) => return Err(unreachable()),
                Ok(Err(e)) => {
                    return classify(e, &hc, &target.registry, &name, timeout).map(|_| None);
                }
                Ok(Ok((OciManifest::Image(m), _))) => {
                    largest = Some(largest.unwrap_or(0.0).max(bytes(&m)));
                }
                // An index inside an index is no image a node pulls.
                Ok(Ok((OciManifest::ImageIndex(_), _))) => {}
            }
        }
        Ok(largest)
    }

    /// The identity ([`crate::identity`]) of the image `reference` names,
    /// read from its config blob: an index is resolved to its manifest for
    /// `platform` (`os/arch[/variant]`; attestation manifests, whose
    /// platform is `unknown/unknown`, are never chosen), or to its only
    /// image manifest. `Ok(None)` when the reference names no image (an
    /// index without a manifest for the platform, a config that is not an
    /// image's). This is how a builder that keeps no image store learns
    /// what it built: the same identity an engine's inspect gives.
    pub async fn identity(
        &self,
        reference: &str,
        platform: &str,
    ) -> Result<Option<String>, RegistryError> {
        use oci_client::manifest::OciManifest;
        let target = Target::parse(reference)?;
        let name = target.name();
        let (hc, oci_ref) = self.client_for(&target).await?;
        let client = &hc.client;
        let timeout = self.inner.timeout;
        let auth = hc.credentials.auth.clone();
        let unreachable = |what: &str| RegistryError::Unreachable {
            registry: target.registry.clone(),
            detail: format!("{what} {name}: no answer within {timeout:?}"),
        };
        let pull = |r: Reference| {
            let auth = &auth;
            async move { tokio::time::timeout(timeout, retry(|| client.pull_manifest(&r, auth))).await }
        };
        let manifest = match pull(oci_ref.clone()).await {
            Err(_) => return Err(unreachable("reading")),
            Ok(Err(e)) => return classify(e, &hc, &target.registry, &name, timeout).map(|_| None),
            Ok(Ok((m, _))) => m,
        };
        let image = match manifest {
            OciManifest::Image(m) => m,
            OciManifest::ImageIndex(index) => {
                let Some(digest) = pick_manifest(&index.manifests, platform) else {
                    return Ok(None);
                };
                let r = Reference::with_digest(
                    oci_ref.registry().to_string(),
                    oci_ref.repository().to_string(),
                    digest,
                );
                match pull(r).await {
                    Err(_) => return Err(unreachable("reading")),
                    Ok(Err(e)) => {
                        return classify(e, &hc, &target.registry, &name, timeout).map(|_| None);
                    }
                    Ok(Ok((OciManifest::Image(m), _))) => m,
                    Ok(Ok((OciManifest::ImageIndex(_), _))) => return Ok(None),
                }
            }
        };
        let mut blob = Vec::new();
        match tokio::time::timeout(
            timeout,
            client.pull_blob(&oci_ref, &image.config, &mut blob),
        )
        .await
        {
            Err(_) => return Err(unreachable("reading the config of")),
            Ok(Err(e)) => return classify(e, &hc, &target.registry, &name, timeout).map(|_| None),
            Ok(Ok(())) => {}
        }
        Ok(serde_json::from_slice::<serde_json::Value>(&blob)
            .ok()
            .and_then(|v| crate::identity::from_config_blob(&v)))
    }

    /// The target's registry client and its manifest reference.
    async fn client_for(&self, target: &Target) -> Result<(HostClient, Reference), RegistryError> {
        let oci_ref = match &target.digest {
            Some(d) => Reference::with_digest(
                target.registry.clone(),
                target.repository.clone(),
                d.clone(),
            ),
            None => Reference::with_tag(
                target.registry.clone(),
                target.repository.clone(),
                target.tag.clone().unwrap_or_else(|| "latest".into()),
            ),
        };
        Ok((self.client(&target.registry).await?, oci_ref))
    }

    /// Points the tag `to` at the manifest `from` (`repo@digest`) of the
    /// same repository, through the registry API: the manifest is read by
    /// digest and put under the tag (its blobs are already there), with the
    /// same transport and credentials as every other registry call
    /// ([`kiln_store::registry_io`]). `Ok(false)` when `from` and `to` are
    /// not one repository or `from` is not pinned by digest: the caller
    /// uses another way.
    pub async fn retag(&self, from: &str, to: &str) -> Result<bool, RegistryError> {
        let src = Target::parse(from)?;
        let dst = Target::parse(to)?;
        let Some(digest) = src.digest.clone() else {
            return Ok(false);
        };
        if src.registry != dst.registry || src.repository != dst.repository || dst.tag.is_none() {
            return Ok(false);
        }
        let bytes = match self.raw_manifest(&src).await? {
            RawManifest::Found(b) => b,
            RawManifest::Absent => {
                return Err(RegistryError::Protocol {
                    registry: src.registry.clone(),
                    detail: format!("{} is not in the registry any more", src.name()),
                });
            }
            RawManifest::Unreadable => return Ok(false),
        };
        let media_type = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v["mediaType"].as_str().map(String::from))
            .unwrap_or_else(|| MANIFEST_TYPES[1].to_string());
        self.put_manifest(
            &dst,
            bytes,
            &media_type,
            &format!("pointing {} at {digest}", dst.name()),
        )
        .await
    }

    /// Puts the manifest `bytes` (of `media_type`) under `dst`'s tag; `what`
    /// says what for in errors. `Ok(false)` when the registry refuses it in
    /// a way [`classify`] calls an absence.
    async fn put_manifest(
        &self,
        dst: &Target,
        bytes: bytes::Bytes,
        media_type: &str,
        what: &str,
    ) -> Result<bool, RegistryError> {
        let name = dst.name();
        let (hc, dst_ref) = self.client_for(dst).await?;
        let client = &hc.client;
        let auth = hc.credentials.auth.clone();
        let timeout = self.inner.timeout;
        let content_type = media_type.parse().map_err(|_| RegistryError::Protocol {
            registry: dst.registry.clone(),
            detail: format!("{what}: an unusable media type {media_type:?}"),
        })?;
        // What was asked ahead may be about this tag: no longer asked.
        forget_ahead();
        // A push needs the login stored for the registry (the token for
        // pull and push is fetched with it).
        client.store_auth_if_needed(&dst.registry, &auth).await;
        match tokio::time::timeout(
            timeout,
            retry(|| {
                client.push_manifest_raw(&dst_ref, bytes.clone(), Clone::clone(&content_type))
            }),
        )
        .await
        {
            Err(_) => Err(RegistryError::Unreachable {
                registry: dst.registry.clone(),
                detail: format!("{what}: no answer within {timeout:?}"),
            }),
            Ok(Err(e)) => classify(e, &hc, &dst.registry, &name, timeout).map(|_| false),
            Ok(Ok(_)) => Ok(true),
        }
    }

    /// Makes one image index of platform images pushed by digest into one
    /// repository (`(platform, repo@digest)` each, as `docker buildx
    /// imagetools create` joins them) and puts it under every tag in
    /// `tags`, which must be of the same repository; returns its digest.
    /// An image that is itself an index (buildx pushes a platform with its
    /// attestation manifest as one) gives all its entries, so attestations
    /// stay attached to their platform's manifest. The index's bytes are a
    /// function of the images, so the same images make the same digest.
    pub async fn join_index(
        &self,
        units: &[(String, String)],
        tags: &[String],
    ) -> Result<String, RegistryError> {
        let mut manifests = Vec::new();
        for (platform, at) in units {
            let src = Target::parse(at)?;
            let bytes = match self.raw_manifest(&src).await? {
                RawManifest::Found(b) => b,
                _ => {
                    return Err(RegistryError::Protocol {
                        registry: src.registry.clone(),
                        detail: format!("{at} is not in the registry"),
                    });
                }
            };
            let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let media_type = body["mediaType"].as_str().unwrap_or(MANIFEST_TYPES[1]);
            match body["manifests"].as_array() {
                Some(list) => manifests.extend(list.iter().cloned()),
                None => manifests.push(serde_json::json!({
                    "mediaType": media_type,
                    "digest": format!("sha256:{}", crate::identity::sha256_hex(&bytes)),
                    "size": bytes.len(),
                    "platform": platform_object(platform),
                })),
            }
        }
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPES[0],
            "manifests": manifests,
        });
        let bytes = bytes::Bytes::from(serde_json::to_vec(&index).unwrap_or_default());
        let digest = format!("sha256:{}", crate::identity::sha256_hex(&bytes));
        for t in tags {
            let dst = Target::parse(t)?;
            let what = format!("putting the index {digest} under {t}");
            if !self
                .put_manifest(&dst, bytes.clone(), MANIFEST_TYPES[0], &what)
                .await?
            {
                return Err(RegistryError::Protocol {
                    registry: dst.registry.clone(),
                    detail: format!("{what}: the registry refused it"),
                });
            }
        }
        Ok(digest)
    }

    /// The manifest `target` names, as the registry stores it (bytes).
    async fn raw_manifest(&self, target: &Target) -> Result<RawManifest, RegistryError> {
        let (hc, oci_ref) = self.client_for(target).await?;
        let client = &hc.client;
        let auth = hc.credentials.auth.clone();
        let timeout = self.inner.timeout;
        match tokio::time::timeout(
            timeout,
            retry(|| client.pull_manifest_raw(&oci_ref, &auth, &MANIFEST_TYPES)),
        )
        .await
        {
            Err(_) => Err(RegistryError::Unreachable {
                registry: target.registry.clone(),
                detail: format!("reading {}: no answer within {timeout:?}", target.name()),
            }),
            Ok(Err(e)) => match classify(e, &hc, &target.registry, &target.name(), timeout)? {
                Resolution::Absent => Ok(RawManifest::Absent),
                Resolution::Found(_) => Ok(RawManifest::Unreadable),
            },
            Ok(Ok((bytes, _))) => Ok(RawManifest::Found(bytes)),
        }
    }

    /// The descriptor of the manifest `reference` names (`repo@digest` or a
    /// tag) and its config's digest when it is one image's manifest, as
    /// buildx's metadata file gives them (`containerimage.descriptor`,
    /// `containerimage.config.digest`). `Ok(None)` when the registry does
    /// not hold it.
    pub async fn descriptor(&self, reference: &str) -> Result<Option<Described>, RegistryError> {
        let target = Target::parse(reference)?;
        let bytes = match self.raw_manifest(&target).await? {
            RawManifest::Found(b) => b,
            RawManifest::Absent | RawManifest::Unreadable => return Ok(None),
        };
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let media_type = body["mediaType"]
            .as_str()
            .unwrap_or(MANIFEST_TYPES[1])
            .to_string();
        let digest = format!("sha256:{}", crate::identity::sha256_hex(&bytes));
        Ok(Some(Described {
            config_digest: body["config"]["digest"].as_str().map(String::from),
            media_type,
            digest,
            size: bytes.len() as u64,
        }))
    }

    async fn fetch(&self, target: Target) -> Result<Resolution, RegistryError> {
        let name = target.name();
        let (hc, oci_ref) = self.client_for(&target).await?;
        let client = &hc.client;
        let timeout = self.inner.timeout;
        let auth = hc.credentials.auth.clone();
        let (oci_ref, auth) = (&oci_ref, &auth);
        let answer = tokio::time::timeout(
            timeout,
            retry(|| client.fetch_manifest_digest(oci_ref, auth)),
        )
        .await;
        match answer {
            Err(_elapsed) => Err(RegistryError::Unreachable {
                registry: target.registry,
                detail: format!("resolving {name}: no answer within {timeout:?}"),
            }),
            Ok(Ok(digest)) => match check_digest(&digest) {
                Ok(()) => Ok(Resolution::Found(digest)),
                Err(why) => Err(RegistryError::Protocol {
                    registry: target.registry,
                    detail: format!("resolving {name}: the registry answered a bad {why}"),
                }),
            },
            Ok(Err(e)) => classify(e, &hc, &target.registry, &name, timeout),
        }
    }
}

/// The entries of an index that are images: attestation manifests
/// (`unknown/unknown`, or annotated as such) are not.
fn image_entries(
    entries: &[oci_client::manifest::ImageIndexEntry],
) -> Vec<&oci_client::manifest::ImageIndexEntry> {
    entries
        .iter()
        .filter(|e| {
            let attestation = e.annotations.as_ref().is_some_and(|a| {
                a.get("vnd.docker.reference.type").map(String::as_str)
                    == Some("attestation-manifest")
            });
            let unknown = e
                .platform
                .as_ref()
                .is_some_and(|p| p.os.to_string() == "unknown");
            !attestation && !unknown
        })
        .collect()
}

/// The manifest of an index for `platform` (`os/arch[/variant]`): the
/// entry whose platform matches (a missing variant in either matches), or
/// the only entry that is an image at all when none says its platform.
/// Attestation manifests (`unknown/unknown`, or annotated as such) never
/// count.
fn pick_manifest(
    entries: &[oci_client::manifest::ImageIndexEntry],
    platform: &str,
) -> Option<String> {
    let mut want = platform.split('/');
    let (os, arch, variant) = (want.next()?, want.next()?, want.next());
    let images = image_entries(entries);
    let matches = |e: &&&oci_client::manifest::ImageIndexEntry| {
        e.platform.as_ref().is_some_and(|p| {
            p.os.to_string() == os
                && p.architecture.to_string() == arch
                && match (variant, p.variant.as_deref()) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                }
        })
    };
    images
        .iter()
        .find(matches)
        .or_else(|| (images.len() == 1 && images[0].platform.is_none()).then(|| &images[0]))
        .map(|e| e.digest.clone())
}

fn classify(
    e: OciDistributionError,
    hc: &HostClient,
    registry: &str,
    name: &str,
    timeout: Duration,
) -> Result<Resolution, RegistryError> {
    use OciDistributionError as E;
    let source = hc.credentials.source.as_deref();
    let auth = |status: u16| {
        Err(RegistryError::Auth {
            registry: registry.to_string(),
            status,
            detail: format!(
                "resolving {name}: {}",
                access::auth_failure(registry, status, source)
            ),
        })
    };
    let protocol = |detail: String| {
        Err(RegistryError::Protocol {
            registry: registry.to_string(),
            detail: format!("resolving {name}: {detail}"),
        })
    };
    match e {
        E::UnauthorizedError { .. } => auth(401),
        E::AuthenticationFailure(m) => Err(RegistryError::Auth {
            registry: registry.to_string(),
            status: 401,
            detail: format!(
                "resolving {name}: {}",
                access::token_failure(registry, &m, source)
            ),
        }),
        E::RegistryError { envelope, .. } => {
            let has = |f: fn(&OciErrorCode) -> bool| envelope.errors.iter().any(|e| f(&e.code));
            if has(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                Ok(Resolution::Absent)
            } else if has(|c| matches!(c, OciErrorCode::Denied)) {
                auth(403)
            } else if has(|c| matches!(c, OciErrorCode::Unauthorized)) {
                auth(401)
            } else if has(|c| matches!(c, OciErrorCode::Toomanyrequests)) {
                protocol(format!("rate limited by the registry: {envelope}"))
            } else {
                protocol(format!("the registry refused the request: {envelope}"))
            }
        }
        E::ServerError { code, message, .. } => match code {
            401 | 403 | 407 => auth(code),
            404 => Ok(Resolution::Absent),
            500..=599 => protocol(format!(
                "registry server error (HTTP {code}): {}",
                message.trim()
            )),
            _ => match access::wrong_scheme_answer(registry, &hc.transport, &message) {
                Some(detail) => Err(RegistryError::Transport {
                    registry: registry.to_string(),
                    detail: format!("resolving {name}: {detail}"),
                }),
                None => protocol(format!(
                    "unexpected answer from the registry (HTTP {code}): {}",
                    message.trim()
                )),
            },
        },
        E::RequestError(re) => {
            let chain = error_chain(&re);
            if !(re.is_connect() || re.is_request() || re.is_timeout()) {
                return protocol(format!("the registry's answer is unusable: {chain}"));
            }
            match access::request_failure(
                registry,
                &hc.transport,
                &chain,
                access::connection_refused(&re),
                re.is_timeout(),
                timeout,
            ) {
                Reach::Transport(detail) => Err(RegistryError::Transport {
                    registry: registry.to_string(),
                    detail: format!("resolving {name}: {detail}"),
                }),
                Reach::Unreachable(detail) => Err(RegistryError::Unreachable {
                    registry: registry.to_string(),
                    detail: format!("resolving {name}: {detail}"),
                }),
            }
        }
        E::DigestError(d) => protocol(format!("the manifest does not match its digest: {d}")),
        other => protocol(error_chain(&other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn target(reference: &str) -> Target {
        Target::parse(reference).unwrap_or_else(|e| panic!("{reference}: {e}"))
    }

    fn t(registry: &str, repository: &str, tag: Option<&str>, digest: Option<&str>) -> Target {
        Target {
            registry: registry.into(),
            repository: repository.into(),
            tag: tag.map(Into::into),
            digest: digest.map(Into::into),
        }
    }

    #[test]
    fn references_normalise_like_docker() {
        let d = format!("sha256:{HEX}");
        let d512 = format!("sha512:{HEX}{HEX}");
        let table = [
            (
                "busybox".to_string(),
                t("docker.io", "library/busybox", Some("latest"), None),
            ),
            (
                "busybox:1.36".into(),
                t("docker.io", "library/busybox", Some("1.36"), None),
            ),
            (
                "docker.io/busybox".into(),
                t("docker.io", "library/busybox", Some("latest"), None),
            ),
            (
                "index.docker.io/library/busybox:1".into(),
                t("docker.io", "library/busybox", Some("1"), None),
            ),
            (
                "user/app".into(),
                t("docker.io", "user/app", Some("latest"), None),
            ),
            // A first component with a port is a registry, never a tag.
            (
                "localhost:5000/x".into(),
                t("localhost:5000", "x", Some("latest"), None),
            ),
            (
                "registry:5000/a/b:v2".into(),
                t("registry:5000", "a/b", Some("v2"), None),
            ),
            (
                "localhost/x:dev".into(),
                t("localhost", "x", Some("dev"), None),
            ),
            (
                "[::1]:5000/x".into(),
                t("[::1]:5000", "x", Some("latest"), None),
            ),
            // Digests: pinned, and the digest wins over a tag beside it.
            (
                format!("busybox@{d}"),
                t("docker.io", "library/busybox", None, Some(&d)),
            ),
            (
                format!("127.0.0.1:1/x:t@{d}"),
                t("127.0.0.1:1", "x", None, Some(&d)),
            ),
            (
                format!("ghcr.io/o/r@{d512}"),
                t("ghcr.io", "o/r", None, Some(&d512)),
            ),
        ];
        for (reference, expected) in table {
            assert_eq!(target(&reference), expected, "{reference}");
        }
        assert_eq!(target("busybox").name(), "docker.io/library/busybox:latest");
        assert_eq!(
            target(&format!("x:t@{d}")).name(),
            format!("docker.io/library/x@{d}")
        );
    }

    #[test]
    fn loopback_registries_are_insecure() {
        for plain in [
            "localhost",
            "localhost:5000",
            "LOCALHOST:5000",
            "127.0.0.1",
            "127.0.0.1:5000",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:5000",
            "[0:0:0:0:0:0:0:1]:5000",
        ] {
            assert!(access::is_loopback(plain), "{plain}");
        }
        for tls in [
            "docker.io",
            "registry:5000",
            "localhost.example.com",
            "128.0.0.1:5000",
            "10.0.0.1:5000",
            "[::2]:5000",
            "[fe80::1]",
        ] {
            assert!(!access::is_loopback(tls), "{tls}");
        }
    }

    #[test]
    fn invalid_references_and_digests_are_refused() {
        for (reference, why) in [
            ("", "not a valid image reference"),
            ("Busybox", "not a valid image reference"),
            ("busybox:", "not a valid image reference"),
            ("host:notaport/app", "not a valid image reference"),
            (HEX, "not a valid image reference"),
            ("busybox@sha256:abc", "not a valid image reference"),
            // Accepted by the reference grammar, refused as digests.
            (
                "busybox@sha256:0123456789abcdef0123456789abcdef",
                "64 lower-case hex",
            ),
            (
                "busybox@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                "64 lower-case hex",
            ),
            (
                "busybox@md5:0123456789abcdef0123456789abcdef",
                "not supported",
            ),
        ] {
            match Target::parse(reference) {
                Err(e @ RegistryError::InvalidReference { .. }) => {
                    assert!(e.to_string().contains(why), "{reference}: {e}");
                }
                other => panic!("{reference}: expected InvalidReference, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_index_resolves_to_the_platform_manifest_never_an_attestation() {
        let entries: Vec<oci_client::manifest::ImageIndexEntry> = serde_json::from_str(
            r#"[
              {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aaa","size":1,
               "platform":{"architecture":"amd64","os":"linux"}},
              {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bbb","size":1,
               "platform":{"architecture":"arm64","os":"linux","variant":"v8"}},
              {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:att","size":1,
               "platform":{"architecture":"unknown","os":"unknown"},
               "annotations":{"vnd.docker.reference.type":"attestation-manifest","vnd.docker.reference.digest":"sha256:aaa"}}
            ]"#,
        )
        .unwrap();
        assert_eq!(
            pick_manifest(&entries, "linux/amd64").as_deref(),
            Some("sha256:aaa")
        );
        assert_eq!(
            pick_manifest(&entries, "linux/arm64").as_deref(),
            Some("sha256:bbb")
        );
        assert_eq!(
            pick_manifest(&entries, "linux/arm64/v8").as_deref(),
            Some("sha256:bbb")
        );
        assert_eq!(pick_manifest(&entries, "linux/arm64/v7"), None);
        assert_eq!(pick_manifest(&entries, "linux/riscv64"), None);
        // A buildx push of one platform: the image and its attestation.
        let one = &entries[..1];
        assert_eq!(
            pick_manifest(one, "linux/amd64").as_deref(),
            Some("sha256:aaa")
        );
        let only_attestation = &entries[2..];
        assert_eq!(pick_manifest(only_attestation, "linux/amd64"), None);
        assert_eq!(pick_manifest(&entries, "linux"), None);
    }

    #[test]
    fn errors_are_classified() {
        let t = Duration::from_secs(1);
        access::install_tls_provider();
        let hc = HostClient {
            client: Client::default(),
            transport: Transport {
                scheme: access::Scheme::Https,
                insecure: None,
                roots: Vec::new(),
                client_cert: None,
            },
            credentials: access::Credentials {
                auth: oci_client::secrets::RegistryAuth::Anonymous,
                source: None,
            },
        };
        let c = |e| classify(e, &hc, "reg:5000", "reg:5000/x:t", t);
        let server = |code| OciDistributionError::ServerError {
            code,
            url: "u".into(),
            message: "m".into(),
        };
        let envelope = |code: &str| OciDistributionError::RegistryError {
            envelope: serde_json::from_str(&format!(r#"{{"errors":[{{"code":"{code}"}}]}}"#))
                .unwrap(),
            url: "u".into(),
        };
        let status = |r: Result<Resolution, RegistryError>| match r {
            Err(RegistryError::Auth { status, detail, .. }) => {
                assert!(detail.contains("reg:5000/x:t"), "{detail}");
                status
            }
            other => panic!("expected Auth, got {other:?}"),
        };
        assert_eq!(status(c(server(401))), 401);
        assert_eq!(status(c(server(403))), 403);
        assert_eq!(status(c(server(407))), 407);
        assert_eq!(status(c(envelope("DENIED"))), 403);
        assert_eq!(status(c(envelope("UNAUTHORIZED"))), 401);
        assert_eq!(
            status(c(OciDistributionError::UnauthorizedError {
                url: "u".into()
            })),
            401
        );
        for absent in [
            c(server(404)),
            c(envelope("MANIFEST_UNKNOWN")),
            c(envelope("NAME_UNKNOWN")),
        ] {
            assert_eq!(absent.unwrap(), Resolution::Absent);
        }
        for (e, says) in [
            (server(500), "server error (HTTP 500)"),
            (server(400), "HTTP 400"),
            (envelope("TOOMANYREQUESTS"), "rate limited"),
            (envelope("BLOB_UNKNOWN"), "refused"),
            (envelope("NAME_INVALID"), "refused"),
        ] {
            match c(e) {
                Err(RegistryError::Protocol { detail, .. }) => {
                    assert!(detail.contains(says), "{detail}");
                }
                other => panic!("expected Protocol, got {other:?}"),
            }
        }
    }
}
