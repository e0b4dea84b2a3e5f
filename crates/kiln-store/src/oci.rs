//! The OCI registry backend: records kept as OCI artifacts in one
//! repository of a registry (`oci://HOST[:PORT]/REPOSITORY`).
//!
//! Layout (versioned by media type):
//! - a record for key `k1:<hex>` is an OCI image manifest tagged `k1-<hex>`
//!   with `artifactType` [`RECORD_MEDIA_TYPE`], the empty config descriptor
//!   and two layers: the payload (the input manifest, [`INPUTS_MEDIA_TYPE`])
//!   and the record JSON ([`RECORD_MEDIA_TYPE`]); the annotations
//!   `kiln.record.key` and `kiln.record.target` are there for people and for
//!   `latest`;
//! - `latest-<target>` is a copy of the manifest of the target's most recent
//!   record; `latest` reads the key from its annotation and then reads that
//!   key's record, so it always agrees with [`RecordStore::get`].
//!
//! Keys and targets that do not fit the tag grammar
//! (`[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`) are hashed: `_k-<blake3 of key>`,
//! `latest_h-<blake3 of target>`. Direct and hashed tags never collide.
//!
//! Protocol: the blobs (payload, record, empty config) are uploaded before
//! the manifest that names them, and a registry makes a manifest visible in
//! one PUT, so a record appears atomically and never names a missing
//! payload. Registries have no conditional tag PUT: create-if-absent reads
//! the key's tag first and returns [`PutOutcome::AlreadyPresent`] when
//! something is there; two writers that both find it absent both write, and
//! the later manifest stands. That race is benign because both records
//! describe the same key (the same inputs). Reads verify the media types,
//! the layers, the record's format and key, the blobs' sha256 (oci-client)
//! and the payload's blake3 against `inputs_digest`; any failure is
//! [`Lookup::Corrupt`].
//!
//! Errors: a missing repository, tag or manifest is a miss; connection
//! failures, timeouts, 401/403/407 and 5xx are [`StoreError::Unavailable`]
//! with a message that says which (5xx answers are retried twice first:
//! every request is idempotent, and the distribution filesystem driver
//! answers 500 to a tag read racing a write of that tag).
//!
//! The trait is synchronous, and callers run it on plain threads or inside
//! `tokio::task::spawn_blocking`. The async client therefore runs on a
//! worker thread owned by the store, with its own current-thread runtime;
//! a call sends its future there and waits on a channel, so no runtime is
//! ever entered from the caller's thread.
//!
//! The full design, the location options and the request counts are in
//! `docs/store-oci.md`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::registry_io::{self as access, Reach, Transport, retry};
use crate::worker::Worker;
use kiln_util::error_chain;
use oci_client::client::ImageLayer;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest,
};
use oci_client::{Client, Reference};

use crate::{Lookup, PutOutcome, Record, RecordStore, StoreError, digest, payload_bytes};

/// The artifact type of a record manifest and the media type of its record
/// layer.
pub const RECORD_MEDIA_TYPE: &str = "application/vnd.kiln.record.v1+json";
/// The media type of the payload layer (the input manifest).
pub const INPUTS_MEDIA_TYPE: &str = "application/vnd.kiln.inputs.v1+json";
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
const EMPTY_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
const EMPTY_DATA: &[u8] = b"{}";
const ANNOTATION_KEY: &str = "kiln.record.key";
const ANNOTATION_TARGET: &str = "kiln.record.target";
/// Blobs larger than this are not read (a record or input manifest is a
/// few kilobytes).
const MAX_BLOB: i64 = 64 << 20;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Manifests are requested in every type a registry may hold under a tag,
/// so that a foreign one is read and reported (Corrupt) rather than
/// refused by the registry.
const ACCEPT: &[&str] = &[
    OCI_IMAGE_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

const EXPECTED: &str = "expected oci://HOST[:PORT]/REPOSITORY[?insecure=1][&timeout=SECONDS], \
     e.g. oci://127.0.0.1:5000/kiln/records";

/// A parsed `oci://` location.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OciLocation {
    /// `host[:port]`, as in image references.
    pub registry: String,
    pub repository: String,
    /// `insecure=1` (declared insecure: HTTPS unverified or plain HTTP,
    /// as for every insecure registry) or `insecure=0` (verified HTTPS,
    /// even on a loopback address); `None`: as declared elsewhere
    /// (`crate::registry_io`).
    pub insecure: Option<bool>,
    /// The limit for one store operation (and, up to 10 s, for connecting).
    pub timeout: Duration,
}

impl OciLocation {
    pub(crate) fn parse(s: &str) -> Result<OciLocation, StoreError> {
        let bad = |why: String| {
            StoreError::Invalid(format!(
                "registry location {:?}: {why}; {EXPECTED}",
                crate::redact(s)
            ))
        };
        let rest = s
            .get(..6)
            .filter(|p| p.eq_ignore_ascii_case("oci://"))
            .map(|_| &s[6..])
            .ok_or_else(|| bad("it does not start with oci://".into()))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, repository) = rest
            .split_once('/')
            .ok_or_else(|| bad("there is no repository after the host".into()))?;
        if authority.contains('@') {
            return Err(bad(
                "credentials do not belong in the location (it is printed in logs); kiln uses the docker CLI's login (`docker login HOST`)".into(),
            ));
        }
        check_authority(authority).map_err(bad)?;
        check_repository(repository).map_err(bad)?;
        let mut insecure = None;
        let mut timeout = DEFAULT_TIMEOUT;
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "insecure" => {
                    insecure = match v {
                        "" | "1" | "true" | "yes" => Some(true),
                        "0" | "false" | "no" => Some(false),
                        _ => return Err(bad(format!("insecure={v} is not 1 or 0"))),
                    }
                }
                "timeout" => {
                    timeout = match v.parse::<u64>() {
                        Ok(n) if n > 0 => Duration::from_secs(n),
                        _ => {
                            return Err(bad(format!(
                                "timeout={v} is not a positive number of seconds"
                            )));
                        }
                    }
                }
                _ => return Err(bad(format!("unknown parameter {k:?}"))),
            }
        }
        Ok(OciLocation {
            registry: authority.to_string(),
            repository: repository.to_string(),
            insecure,
            timeout,
        })
    }

    fn display(&self) -> String {
        format!("oci://{}/{}", self.registry, self.repository)
    }
}

/// Checks `host[:port]` and returns the host.
fn check_authority(authority: &str) -> Result<&str, String> {
    if authority.is_empty() {
        return Err("the host is empty".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("host {authority:?} has no closing ]"))?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Err(format!("host {authority:?} is not an IPv6 address"));
        }
        match after {
            "" => (&authority[..addr.len() + 2], None),
            p => (
                &authority[..addr.len() + 2],
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("unexpected {p:?} after the host"))?,
                ),
            ),
        }
    } else {
        let (h, p) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if h.is_empty()
            || !h
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        {
            return Err(format!("host {h:?} is not a host name or address"));
        }
        (h, p)
    };
    if let Some(p) = port
        && !matches!(p.parse::<u16>(), Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("port {p:?} is not a number from 1 to 65535"));
    }
    Ok(host)
}

/// The distribution spec's repository grammar:
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`.
fn check_repository(repo: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "repository {repo:?} is not a valid name (lower-case letters, digits and \
             separators . _ __ -, components joined by /)"
        )
    };
    if repo.is_empty() {
        return Err("the repository is empty".into());
    }
    if repo.len() > 255 {
        return Err(format!("repository {repo:?} is longer than 255 characters"));
    }
    for component in repo.split('/') {
        let b = component.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        if b.is_empty() || !alnum(&b[0]) || !alnum(&b[b.len() - 1]) {
            return Err(bad());
        }
        let mut i = 0;
        while i < b.len() {
            if alnum(&b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && !alnum(&b[i]) {
                i += 1;
            }
            let sep = &component[start..i];
            let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
            if !ok {
                return Err(bad());
            }
        }
    }
    Ok(())
}

fn is_tag_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// The tag of a key's record: `k1:<hex>` → `k1-<hex>`; anything else
/// `_k-<blake3 of the key>`.
pub(crate) fn key_tag(key: &str) -> String {
    if let Some((algo, hex)) = key.split_once(':')
        && algo.len() > 1
        && algo.starts_with('k')
        && algo[1..].bytes().all(|b| b.is_ascii_digit())
        && !hex.is_empty()
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && key.len() <= 128
    {
        return format!("{algo}-{hex}");
    }
    format!("_k-{}", blake3::hash(key.as_bytes()).to_hex())
}

/// The tag of a target's latest record: `latest-<target>` when the name fits
/// the tag grammar, otherwise `latest_h-<blake3 of the name>`.
pub(crate) fn latest_tag(target: &str) -> String {
    let direct = format!("latest-{target}");
    if direct.len() <= 128 && !target.is_empty() && target.bytes().all(is_tag_char) {
        direct
    } else {
        format!("latest_h-{}", blake3::hash(target.as_bytes()).to_hex())
    }
}

// ------------------------------------------------------------------ errors

/// A failed registry call, classified.
enum Fail {
    /// 404: the manifest, blob or repository is not there.
    NotFound,
    /// The content did not match its digest.
    Digest(String),
    /// The registry has the manifest but cannot serve or accept it as it is
    /// (e.g. `MANIFEST_INVALID`).
    Invalid(String),
    /// Unreachable, auth, 5xx, or anything else the registry refused.
    Unavailable(String),
}

/// What a failure is classified with: the registry, how kiln reached it
/// and with which credentials.
struct Ctx<'a> {
    host: &'a str,
    transport: &'a Transport,
    source: Option<&'a str>,
    timeout: Duration,
}

fn classify(e: OciDistributionError, ctx: &Ctx<'_>) -> Fail {
    use OciDistributionError as E;
    let auth_message = |code: u16| access::auth_failure(ctx.host, code, ctx.source);
    match e {
        E::UnauthorizedError { .. } => Fail::Unavailable(auth_message(401)),
        E::AuthenticationFailure(m) => {
            Fail::Unavailable(access::token_failure(ctx.host, &m, ctx.source))
        }
        E::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                Fail::NotFound
            } else if codes.iter().any(|c| matches!(c, OciErrorCode::Denied)) {
                Fail::Unavailable(auth_message(403))
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized))
            {
                Fail::Unavailable(auth_message(401))
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::DigestInvalid))
            {
                Fail::Digest(envelope.to_string())
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::ManifestInvalid | OciErrorCode::SizeInvalid))
            {
                Fail::Invalid(envelope.to_string())
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Toomanyrequests))
            {
                Fail::Unavailable(format!("rate limited by the registry: {envelope}"))
            } else {
                Fail::Unavailable(format!("the registry refused the request: {envelope}"))
            }
        }
        E::ServerError { code, message, .. } => match code {
            401 | 403 | 407 => Fail::Unavailable(auth_message(code)),
            404 => Fail::NotFound,
            500..=599 => Fail::Unavailable(format!(
                "registry server error (HTTP {code}): {}",
                message.trim()
            )),
            _ => Fail::Unavailable(
                access::wrong_scheme_answer(ctx.host, ctx.transport, &message).unwrap_or_else(
                    || {
                        format!(
                            "unexpected answer from the registry (HTTP {code}): {}",
                            message.trim()
                        )
                    },
                ),
            ),
        },
        E::RequestError(re) => {
            let chain = error_chain(&re);
            if !(re.is_connect() || re.is_request() || re.is_timeout()) {
                return Fail::Unavailable(format!("request to the registry failed: {chain}"));
            }
            match access::request_failure(
                ctx.host,
                ctx.transport,
                &chain,
                access::connection_refused(&re),
                re.is_timeout(),
                ctx.timeout,
            ) {
                Reach::Unreachable(m) => Fail::Unavailable(format!("registry unreachable: {m}")),
                Reach::Transport(m) => Fail::Unavailable(m),
            }
        }
        E::DigestError(d) => Fail::Digest(d.to_string()),
        other => Fail::Unavailable(error_chain(&other)),
    }
}

// ------------------------------------------------------------------ store

/// A record store in a repository of an OCI registry.
pub struct OciStore {
    inner: Arc<Inner>,
    worker: Worker,
}

impl std::fmt::Debug for OciStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciStore")
            .field("location", &self.inner.loc)
            .finish()
    }
}

struct Inner {
    /// Built on first use (`crate::registry_io` decides the transport,
    /// which may probe the registry).
    client: tokio::sync::OnceCell<(Client, Transport)>,
    loc: OciLocation,
    /// The docker CLI's login for the registry, else anonymous.
    credentials: access::Credentials,
}

/// What reading a manifest found.
enum Fetched {
    Found(Vec<u8>),
    Missing,
    Corrupt(String),
}

impl OciStore {
    /// Opens the store at `oci://HOST[:PORT]/REPOSITORY[?insecure=1][&timeout=SECONDS]`.
    /// Nothing is contacted until the first operation.
    ///
    /// Plain HTTP is used for `localhost`, `127.0.0.0/8` and `[::1]`, and
    /// wherever `insecure=1` is given (`insecure=0` forces HTTPS on a
    /// loopback address). `timeout` bounds each operation (default 60 s;
    /// connecting is bounded by the smaller of it and 10 s).
    pub fn new(location: &str) -> Result<OciStore, StoreError> {
        let loc = OciLocation::parse(location)?;
        crate::registry_io::install_tls_provider();
        if loc.insecure == Some(true) {
            access::declare_insecure(&loc.registry, access::Insecure::Location);
        }
        let unavailable = |detail: String| StoreError::Unavailable {
            location: loc.display(),
            detail,
        };
        let worker = Worker::start("kiln-store-oci").map_err(unavailable)?;
        Ok(OciStore {
            inner: Arc::new(Inner {
                client: tokio::sync::OnceCell::new(),
                credentials: access::credentials(&loc.registry),
                loc,
            }),
            worker,
        })
    }

    fn call<T: Send + 'static, F>(&self, f: impl FnOnce(Arc<Inner>) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let timeout = self.inner.loc.timeout;
        let fut = f(self.inner.clone());
        // The timer is made on the worker: it needs that runtime.
        match self
            .worker
            .run(async move { tokio::time::timeout(timeout, fut).await })
        {
            Some(Ok(r)) => r,
            Some(Err(_elapsed)) => Err(self.inner.unavailable(format!(
                "registry unreachable: the operation did not finish within {}s",
                timeout.as_secs()
            ))),
            None => Err(self
                .inner
                .unavailable("the registry client stopped unexpectedly".into())),
        }
    }
}

impl Inner {
    fn unavailable(&self, detail: String) -> StoreError {
        StoreError::Unavailable {
            location: self.loc.display(),
            detail,
        }
    }

    fn reference(&self, tag: &str) -> Reference {
        Reference::with_tag(
            self.loc.registry.clone(),
            self.loc.repository.clone(),
            tag.to_string(),
        )
    }

    /// The client, built on first use.
    async fn client(&self) -> Result<&(Client, Transport), StoreError> {
        self.client
            .get_or_try_init(|| async {
                let host = &self.loc.registry;
                let transport = match self.loc.insecure {
                    // insecure=0: verified HTTPS whatever else says.
                    Some(false) => Transport {
                        scheme: access::Scheme::Https,
                        insecure: None,
                        ..access::transport(host, self.loc.timeout).await
                    },
                    _ => access::transport(host, self.loc.timeout).await,
                };
                let mut config = access::client_config(
                    &transport,
                    self.loc.timeout.min(MAX_CONNECT_TIMEOUT),
                    self.loc.timeout,
                )
                .map_err(|e| self.unavailable(e))?;
                config.use_monolithic_push = true;
                let client = Client::try_from(config)
                    .map_err(|e| self.unavailable(format!("setting up the HTTP client: {e}")))?;
                client
                    .store_auth_if_needed(host, &self.credentials.auth)
                    .await;
                Ok((client, transport))
            })
            .await
    }

    fn fail(&self, e: OciDistributionError, what: &str) -> Fail {
        let Some((_, transport)) = self.client.get() else {
            return Fail::Unavailable(format!("{what}: {e}"));
        };
        let ctx = Ctx {
            host: &self.loc.registry,
            transport,
            source: self.credentials.source.as_deref(),
            timeout: self.loc.timeout,
        };
        match classify(e, &ctx) {
            Fail::Unavailable(m) => Fail::Unavailable(format!("{what}: {m}")),
            f => f,
        }
    }

    /// A write failed: everything is `Unavailable`.
    fn write_error(&self, e: OciDistributionError, what: &str) -> StoreError {
        match self.fail(e, what) {
            Fail::Unavailable(m) => self.unavailable(m),
            Fail::NotFound => self.unavailable(format!("{what}: the registry answered 404")),
            Fail::Digest(m) | Fail::Invalid(m) => self.unavailable(format!("{what}: {m}")),
        }
    }

    async fn fetch_manifest(&self, tag: &str) -> Result<Fetched, StoreError> {
        let r = self.reference(tag);
        let auth = self.credentials.auth.clone();
        let (client, r) = (&self.client().await?.0, &r);
        match retry(|| client.pull_manifest_raw(r, &auth, ACCEPT)).await {
            Ok((bytes, _)) => Ok(Fetched::Found(bytes.to_vec())),
            Err(e) => match self.fail(e, &format!("reading manifest {tag}")) {
                Fail::NotFound => Ok(Fetched::Missing),
                Fail::Digest(m) => Ok(Fetched::Corrupt(format!(
                    "the manifest at tag {tag} does not match its digest ({m})"
                ))),
                Fail::Invalid(m) => Ok(Fetched::Corrupt(format!(
                    "the registry cannot serve the manifest at tag {tag} ({m})"
                ))),
                Fail::Unavailable(m) => Err(self.unavailable(m)),
            },
        }
    }

    /// A blob's bytes, or why it cannot be used (`Err` inside `Ok`).
    async fn fetch_blob(
        &self,
        desc: &OciDescriptor,
        what: &str,
    ) -> Result<Result<Vec<u8>, String>, StoreError> {
        if desc.size < 0 || desc.size > MAX_BLOB {
            return Ok(Err(format!(
                "the {what} blob's size {} is out of range",
                desc.size
            )));
        }
        let r = self.reference("unused");
        let (client, r) = (&self.client().await?.0, &r);
        let pulled = retry(|| async move {
            let mut out = Vec::with_capacity(desc.size as usize);
            client.pull_blob(r, desc, &mut out).await.map(|()| out)
        })
        .await;
        match pulled {
            Ok(out) => Ok(Ok(out)),
            Err(e) => match self.fail(e, &format!("reading the {what} blob")) {
                Fail::NotFound => Ok(Err(format!("the {what} blob {} is missing", desc.digest))),
                Fail::Digest(m) | Fail::Invalid(m) => Ok(Err(format!(
                    "the {what} blob does not match its digest {} ({m})",
                    desc.digest
                ))),
                Fail::Unavailable(m) => Err(self.unavailable(m)),
            },
        }
    }

    async fn get(&self, key: &str) -> Result<Lookup, StoreError> {
        let tag = key_tag(key);
        match self.fetch_manifest(&tag).await? {
            Fetched::Missing => Ok(Lookup::Miss),
            Fetched::Corrupt(r) => Ok(Lookup::Corrupt(r)),
            Fetched::Found(m) => self.verify(&tag, &m, key).await,
        }
    }

    async fn verify(&self, tag: &str, bytes: &[u8], key: &str) -> Result<Lookup, StoreError> {
        let corrupt = |r: String| Ok(Lookup::Corrupt(r));
        let m: OciImageManifest = match serde_json::from_slice(bytes) {
            Ok(m) => m,
            Err(e) => return corrupt(format!("the manifest at tag {tag} is not readable ({e})")),
        };
        if m.schema_version != 2 || m.media_type.as_deref() != Some(OCI_IMAGE_MEDIA_TYPE) {
            return corrupt(format!(
                "the manifest at tag {tag} has media type {:?} (schema {}), expected \
                 {OCI_IMAGE_MEDIA_TYPE:?}",
                m.media_type.as_deref().unwrap_or(""),
                m.schema_version
            ));
        }
        if m.artifact_type.as_deref() != Some(RECORD_MEDIA_TYPE) {
            return corrupt(format!(
                "the manifest at tag {tag} has artifact type {:?}, expected {RECORD_MEDIA_TYPE:?}",
                m.artifact_type.as_deref().unwrap_or("")
            ));
        }
        let one = |media_type: &str, what: &str| -> Result<&OciDescriptor, String> {
            let found: Vec<&OciDescriptor> = m
                .layers
                .iter()
                .filter(|l| l.media_type == media_type)
                .collect();
            match found.as_slice() {
                [d] => Ok(d),
                _ => Err(format!(
                    "the manifest at tag {tag} has {} {what} layers ({media_type}), expected 1",
                    found.len()
                )),
            }
        };
        let (record_desc, inputs_desc) = match (
            one(RECORD_MEDIA_TYPE, "record"),
            one(INPUTS_MEDIA_TYPE, "input manifest"),
        ) {
            (Ok(r), Ok(i)) => (r, i),
            (Err(e), _) | (_, Err(e)) => return corrupt(e),
        };
        let record_bytes = match self.fetch_blob(record_desc, "record").await? {
            Ok(b) => b,
            Err(r) => return corrupt(r),
        };
        let record = match crate::objects::check_record(&record_bytes, Some(key)) {
            Ok(r) => r,
            Err(why) => return corrupt(why),
        };
        let payload = match self.fetch_blob(inputs_desc, "input manifest").await? {
            Ok(b) => b,
            Err(r) => return corrupt(r),
        };
        Ok(crate::objects::with_payload(record, &payload))
    }

    async fn latest(&self, target: &str) -> Result<Lookup, StoreError> {
        let tag = latest_tag(target);
        let bytes = match self.fetch_manifest(&tag).await? {
            Fetched::Missing => return Ok(Lookup::Miss),
            Fetched::Corrupt(r) => return Ok(Lookup::Corrupt(r)),
            Fetched::Found(b) => b,
        };
        let key = serde_json::from_slice::<OciImageManifest>(&bytes)
            .ok()
            .and_then(|m| m.annotations?.remove(ANNOTATION_KEY));
        let Some(key) = key else {
            return Ok(Lookup::Corrupt(format!(
                "the manifest at tag {tag} does not name a key ({ANNOTATION_KEY})"
            )));
        };
        match self.get(&key).await? {
            Lookup::Hit(e) if e.record.target != target => Ok(Lookup::Corrupt(format!(
                "the latest record for target {target} is key {key}, whose record is for \
                 target {}",
                e.record.target
            ))),
            Lookup::Miss => Ok(Lookup::Corrupt(format!(
                "the latest record for target {target} is key {key}, which has no record"
            ))),
            other => Ok(other),
        }
    }

    async fn push_blob(&self, r: &Reference, data: Vec<u8>, what: &str) -> Result<(), StoreError> {
        // Pushes take the login the client keeps per registry (stored
        // when the client was made).
        let client = &self.client().await?.0;
        let d = ImageLayer::new(data, String::new(), None);
        let sha = d.sha256_digest();
        let (data, sha) = (&d.data, &sha);
        retry(|| client.push_blob(r, data.clone(), sha))
            .await
            .map(|_| ())
            .map_err(|e| self.write_error(e, &format!("uploading the {what} blob")))
    }

    async fn push_manifest(&self, tag: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        let client = &self.client().await?.0;
        let content_type = OCI_IMAGE_MEDIA_TYPE
            .parse()
            .map_err(|e| self.unavailable(format!("content type: {e}")))?;
        let (r, bytes, content_type) = (&self.reference(tag), &bytes, &content_type);
        retry(|| client.push_manifest_raw(r, bytes.clone(), Clone::clone(content_type)))
            .await
            .map(|_| ())
            .map_err(|e| self.write_error(e, &format!("writing manifest {tag}")))
    }

    async fn put(
        &self,
        record: Record,
        payload: Vec<u8>,
        force: bool,
    ) -> Result<PutOutcome, StoreError> {
        let tag = key_tag(&record.key);
        let latest = latest_tag(&record.target);
        if !force {
            // Create-if-absent: no registry has a conditional tag PUT, so
            // look first. The race with another writer of this key is
            // benign: both records describe the same key.
            match self.fetch_manifest(&tag).await? {
                Fetched::Found(existing) => {
                    // This key is the target's most recent build again:
                    // point `latest` at the record that stands (when it is
                    // a record manifest at all; a damaged one stays put
                    // until a forced write repairs it).
                    let is_record = serde_json::from_slice::<OciImageManifest>(&existing)
                        .is_ok_and(|m| {
                            m.media_type.as_deref() == Some(OCI_IMAGE_MEDIA_TYPE)
                                && m.artifact_type.as_deref() == Some(RECORD_MEDIA_TYPE)
                        });
                    if is_record {
                        self.push_manifest(&latest, existing).await?;
                    }
                    return Ok(PutOutcome::AlreadyPresent);
                }
                Fetched::Corrupt(_) => return Ok(PutOutcome::AlreadyPresent),
                Fetched::Missing => {}
            }
        }
        let record_bytes = serde_json::to_vec_pretty(&record.sealed())
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let descriptor = |data: &[u8], media_type: &str| OciDescriptor {
            media_type: media_type.to_string(),
            digest: ImageLayer::new(data.to_vec(), String::new(), None).sha256_digest(),
            size: data.len() as i64,
            urls: None,
            annotations: None,
            artifact_type: None,
        };
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
            config: OciDescriptor {
                media_type: EMPTY_MEDIA_TYPE.to_string(),
                digest: EMPTY_DIGEST.to_string(),
                size: EMPTY_DATA.len() as i64,
                urls: None,
                annotations: None,
                artifact_type: None,
            },
            layers: vec![
                descriptor(&payload, INPUTS_MEDIA_TYPE),
                descriptor(&record_bytes, RECORD_MEDIA_TYPE),
            ],
            subject: None,
            artifact_type: Some(RECORD_MEDIA_TYPE.to_string()),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_KEY.to_string(), record.key.clone()),
                (ANNOTATION_TARGET.to_string(), record.target.clone()),
            ])),
        };
        let manifest_bytes =
            serde_json::to_vec(&manifest).map_err(|e| StoreError::Invalid(e.to_string()))?;
        // 1. The blobs (the payload among them) before the manifest that
        //    names them.
        let r = self.reference(&tag);
        tokio::try_join!(
            self.push_blob(&r, payload, "input manifest"),
            self.push_blob(&r, record_bytes, "record"),
            self.push_blob(&r, EMPTY_DATA.to_vec(), "empty config"),
        )?;
        // 2. The record appears in one manifest PUT.
        self.push_manifest(&tag, manifest_bytes.clone()).await?;
        // 3. The target's latest pointer (last writer wins).
        self.push_manifest(&latest, manifest_bytes).await?;
        Ok(if force {
            PutOutcome::Replaced
        } else {
            PutOutcome::Written
        })
    }
}

impl RecordStore for OciStore {
    fn get(&self, key: &str) -> Result<Lookup, StoreError> {
        let key = key.to_string();
        self.call(|inner| async move { inner.get(&key).await })
    }

    fn put(
        &self,
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
        let record = record.clone();
        self.call(|inner| async move { inner.put(record, payload, force).await })
    }

    fn latest(&self, target: &str) -> Result<Lookup, StoreError> {
        let target = target.to_string();
        self.call(|inner| async move { inner.latest(&target).await })
    }

    /// Uploads the empty config blob every record names (a blob upload
    /// needs the push permission a record needs).
    fn probe_write(&self) -> Result<(), StoreError> {
        self.call(|inner| async move {
            let r = inner.reference("unused");
            inner
                .push_blob(&r, EMPTY_DATA.to_vec(), "write probe")
                .await
        })
    }

    fn location(&self) -> String {
        self.inner.loc.display()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(s: &str) -> String {
        match OciLocation::parse(s) {
            Err(StoreError::Invalid(m)) => m,
            other => panic!("{s}: expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn locations_parse() {
        let l = OciLocation::parse("oci://127.0.0.1:5000/kiln/records").unwrap();
        assert_eq!(l.registry, "127.0.0.1:5000");
        assert_eq!(l.repository, "kiln/records");
        assert_eq!(l.insecure, None, "as declared (loopback: insecure)");
        assert_eq!(l.timeout, DEFAULT_TIMEOUT);
        assert_eq!(l.display(), "oci://127.0.0.1:5000/kiln/records");

        let l = OciLocation::parse("oci://registry.example.com/team/kiln-records").unwrap();
        assert_eq!(l.registry, "registry.example.com");
        assert_eq!(l.insecure, None);

        let l = OciLocation::parse("oci://reg.lan:5000/r?insecure=1&timeout=5").unwrap();
        assert_eq!(l.insecure, Some(true));
        assert_eq!(l.timeout, Duration::from_secs(5));
        assert_eq!(
            OciLocation::parse("oci://localhost/r?insecure=0")
                .unwrap()
                .insecure,
            Some(false)
        );
        assert_eq!(
            OciLocation::parse("oci://[::1]:5000/r").unwrap().registry,
            "[::1]:5000"
        );
        assert!(
            OciLocation::parse("oci://h/a.b/c__d/e---f_g")
                .unwrap()
                .repository
                .ends_with("e---f_g")
        );
    }

    #[test]
    fn bad_locations_say_the_expected_form() {
        for (s, why) in [
            ("http://h/r", "does not start with oci://"),
            ("oci://", "no repository"),
            ("oci://host", "no repository"),
            ("oci:///r", "host is empty"),
            ("oci://host/", "repository is empty"),
            ("oci://host:0/r", "port"),
            ("oci://host:99999/r", "port"),
            ("oci://host:x/r", "port"),
            ("oci://ho st/r", "host"),
            ("oci://[::1/r", "closing ]"),
            ("oci://host/Records", "not a valid name"),
            ("oci://host/a//b", "not a valid name"),
            ("oci://host/a/", "not a valid name"),
            ("oci://host/a...b", "not a valid name"),
            ("oci://host/a___b", "not a valid name"),
            ("oci://host/-a", "not a valid name"),
            ("oci://host/r?insecure=maybe", "insecure=maybe"),
            ("oci://host/r?timeout=0", "timeout=0"),
            ("oci://host/r?tls=off", "unknown parameter"),
        ] {
            let m = invalid(s);
            assert!(m.contains(why), "{s}: {m}");
            assert!(m.contains("oci://HOST[:PORT]/REPOSITORY"), "{s}: {m}");
        }
    }

    #[test]
    fn tags_fit_the_grammar_and_never_collide() {
        let hex = "ab".repeat(32);
        assert_eq!(key_tag(&format!("k1:{hex}")), format!("k1-{hex}"));
        assert_eq!(key_tag("k1:aa01"), "k1-aa01");
        // Not `kN:<lower hex>`: hashed, so `k1-abc` and `k1:abc` differ.
        assert!(key_tag("k1-abc").starts_with("_k-"));
        assert!(key_tag("k1:ABC").starts_with("_k-"));
        assert!(key_tag("latest:abc").starts_with("_k-"));
        assert_ne!(key_tag("k1-abc"), key_tag("k1:abc"));
        assert_eq!(latest_tag("app"), "latest-app");
        assert_eq!(latest_tag("app-1.2_x"), "latest-app-1.2_x");
        assert!(latest_tag("a/b").starts_with("latest_h-"));
        assert!(latest_tag("").starts_with("latest_h-"));
        assert!(latest_tag(&"x".repeat(200)).starts_with("latest_h-"));
        assert_ne!(latest_tag("a/b"), latest_tag("a:b"));
        let grammar = |t: &str| {
            let b = t.as_bytes();
            !b.is_empty()
                && b.len() <= 128
                && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
                && b.iter().all(|c| is_tag_char(*c))
        };
        for t in [
            key_tag(&format!("k1:{hex}")),
            key_tag("weird key / with spaces"),
            key_tag(&format!("k1:{}", "a".repeat(200))),
            latest_tag("ünïcode target"),
            latest_tag(&"x".repeat(121)),
            latest_tag(&"x".repeat(122)),
        ] {
            assert!(grammar(&t), "{t}");
        }
    }

    #[test]
    fn registry_errors_are_classified() {
        let transport = Transport {
            scheme: access::Scheme::Https,
            insecure: None,
            roots: Vec::new(),
            client_cert: None,
        };
        let t = &Ctx {
            host: "reg:5000",
            transport: &transport,
            source: None,
            timeout: Duration::from_secs(1),
        };
        let server = |code| OciDistributionError::ServerError {
            code,
            url: "u".into(),
            message: "m".into(),
        };
        let msg = |f: Fail| match f {
            Fail::Unavailable(m) => m,
            Fail::NotFound => "NotFound".into(),
            Fail::Digest(m) => format!("Digest {m}"),
            Fail::Invalid(m) => format!("Invalid {m}"),
        };
        assert!(msg(classify(server(401), t)).contains("kiln has none for it (HTTP 401)"));
        assert!(msg(classify(server(403), t)).contains("docker login reg:5000"));
        assert!(msg(classify(server(407), t)).contains("proxy"));
        assert_eq!(msg(classify(server(404), t)), "NotFound");
        assert!(msg(classify(server(503), t)).contains("server error (HTTP 503)"));
        let envelope = |code: &str| OciDistributionError::RegistryError {
            envelope: serde_json::from_str(&format!(r#"{{"errors":[{{"code":"{code}"}}]}}"#))
                .unwrap(),
            url: "u".into(),
        };
        assert_eq!(msg(classify(envelope("MANIFEST_UNKNOWN"), t)), "NotFound");
        assert_eq!(msg(classify(envelope("NAME_UNKNOWN"), t)), "NotFound");
        assert!(msg(classify(envelope("DENIED"), t)).contains("HTTP 403"));
        let sent = &Ctx {
            source: Some("the docker CLI's login"),
            ..*t
        };
        assert!(msg(classify(server(401), sent)).contains("refused the credentials kiln sent"));
        assert!(msg(classify(envelope("TOOMANYREQUESTS"), t)).contains("rate limited"));
    }
}
