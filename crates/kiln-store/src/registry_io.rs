//! Registry access: the one place that decides how kiln talks to an OCI
//! registry, used by every client of one (the record store's OCI backend
//! here; the engine crate's registry client, which serves content keys,
//! preflight, read-back of pushed digests, hand-over between nodes, cache
//! probes and `kiln versions`). docs/registries.md is the user's view.
//!
//! Per registry (`host[:port]`, as in image references) it knows:
//! - **the scheme.** HTTPS with verified certificates, unless the registry
//!   is declared insecure: by being a loopback address (`localhost`,
//!   `127.0.0.0/8`, `[::1]`), by `KILN_INSECURE_REGISTRIES`, by the
//!   Docker engine kiln builds on (`/info`: an index config with
//!   `Secure: false`, or an address in `InsecureRegistryCIDRs`), by a
//!   target's output or cache attributes (`registry.insecure=true`), or by
//!   an `oci://…?insecure=1` store location. An insecure registry is spoken
//!   to as Docker does: HTTPS without verifying the certificate when it
//!   answers HTTPS, else plain HTTP (one probe per registry and process).
//!   Nothing else is ever downgraded: an HTTPS failure says what failed and
//!   how to declare the registry insecure if it should be.
//! - **trust.** The system trust store, plus every `*.crt` in Docker's
//!   per-registry directory `/etc/docker/certs.d/<host[:port]>/`
//!   (`KILN_DOCKER_CERTS_DIR` names another), trusted for that registry
//!   only, as dockerd and containerd read it.
//! - **credentials.** The docker CLI's login or credential helper for the
//!   registry (`crate::credentials`), sent as basic auth or exchanged for
//!   a bearer token with pull or pull+push scope, as the registry asks.
//! - **what a failure means**, in words that name the registry and what to
//!   do: a certificate nobody trusts, plain HTTP answered to HTTPS, HTTPS
//!   answered to plain HTTP, credentials missing or refused, no answer.
//!
//! Must never: send credentials over plain HTTP to a registry that was not
//! declared insecure, or trust a certificate authority for a registry
//! other than the one whose directory holds it.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;

/// oci-client's HTTPS is rustls without a built-in crypto provider: this
/// installs ring, which the workspace already builds. A provider installed
/// earlier is kept. Call before building an oci-client `Client`.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The system's CA certificates, read once per process: what
/// rustls-platform-verifier trusts on Linux (`SSL_CERT_FILE`,
/// `SSL_CERT_DIR`, else the distribution's bundle), keeping the ones rustls
/// can parse, as it does. Every HTTP client kiln builds is given these as
/// its only roots (plus a registry's own CAs): built with the platform
/// verifier instead, each client re-read and re-parsed the whole
/// certificate directory (~280 files on Debian), a few milliseconds of CPU
/// per client, even for a registry spoken to in plain HTTP.
pub fn system_roots() -> &'static [rustls::pki_types::CertificateDer<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<rustls::pki_types::CertificateDer<'static>>> =
        std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        rustls_native_certs::load_native_certs()
            .certs
            .into_iter()
            .filter(|c| rustls::RootCertStore::empty().add(c.clone()).is_ok())
            .collect()
    })
}

/// `localhost`, `127.0.0.0/8` or `::1` (`[::1]`), with or without a port:
/// registries dockerd itself treats as insecure.
pub fn is_loopback(domain: &str) -> bool {
    if let Some(v6) = domain.strip_prefix('[') {
        return v6
            .split_once(']')
            .and_then(|(addr, _)| addr.parse::<std::net::Ipv6Addr>().ok())
            .is_some_and(|a| a.is_loopback());
    }
    let host = split_host(domain).0;
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

/// `host[:port]` split into the host (without IPv6 brackets) and the port.
fn split_host(domain: &str) -> (&str, Option<u16>) {
    if let Some(v6) = domain.strip_prefix('[') {
        return match v6.split_once(']') {
            Some((addr, rest)) => (addr, rest.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (domain, None),
        };
    }
    match domain.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => match p.parse() {
            Ok(port) => (h, Some(port)),
            Err(_) => (domain, None),
        },
        _ => (domain, None),
    }
}

// ---------------------------------------------------------------- declarations

/// Who declared a registry insecure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Insecure {
    /// A loopback address (Docker's default).
    Loopback,
    /// `KILN_INSECURE_REGISTRIES`.
    Environment,
    /// The Docker engine kiln builds on: its `insecure-registries` (how,
    /// e.g. `insecure-registries 127.0.0.0/8 of unix:///…`).
    Engine(String),
    /// A target's output or cache attributes (`registry.insecure=true`):
    /// which target.
    Attribute(String),
    /// The record store's `oci://…?insecure=1`.
    Location,
}

impl std::fmt::Display for Insecure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Insecure::Loopback => f.write_str("it is a loopback address"),
            Insecure::Environment => f.write_str("KILN_INSECURE_REGISTRIES names it"),
            Insecure::Engine(how) => write!(f, "the Docker engine's {how}"),
            Insecure::Attribute(target) => {
                write!(f, "target {target:?} sets registry.insecure=true for it")
            }
            Insecure::Location => f.write_str("the store location says insecure=1"),
        }
    }
}

/// An IP network (`10.0.0.0/8`, `fd00::/8`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Cidr {
    fn parse(s: &str) -> Option<Cidr> {
        let (a, b) = s.trim().split_once('/')?;
        let addr: IpAddr = a.parse().ok()?;
        let bits: u8 = b.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (bits <= max).then_some(Cidr { addr, bits })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let (net, ip, width) = match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => (u32::from(n) as u128, u32::from(i) as u128, 32),
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
            (IpAddr::V4(n), IpAddr::V6(i)) => match i.to_ipv4_mapped() {
                Some(i) => (u32::from(n) as u128, u32::from(i) as u128, 32),
                None => return false,
            },
            (IpAddr::V6(_), IpAddr::V4(_)) => return false,
        };
        let shift = width - u32::from(self.bits);
        shift >= width || (net >> shift) == (ip >> shift)
    }
}

#[derive(Default)]
struct Declared {
    /// `host[:port]` (or `host`, any port) → who declared it.
    hosts: Vec<(String, Insecure)>,
    cidrs: Vec<(Cidr, Insecure)>,
    /// Hosts the engine lists as secure: no CIDR makes them insecure (as
    /// in dockerd, where an index config wins over the CIDRs).
    secure: Vec<String>,
}

fn declared() -> &'static RwLock<Declared> {
    static D: OnceLock<RwLock<Declared>> = OnceLock::new();
    D.get_or_init(|| {
        let mut d = Declared::default();
        if let Ok(v) = std::env::var("KILN_INSECURE_REGISTRIES") {
            for entry in parse_list(&v) {
                match Cidr::parse(&entry) {
                    Some(c) => d.cidrs.push((c, Insecure::Environment)),
                    None => d.hosts.push((entry, Insecure::Environment)),
                }
            }
        }
        RwLock::new(d)
    })
}

/// The entries of a `KILN_INSECURE_REGISTRIES`-style list: separated by
/// commas or white space, a scheme and a trailing `/` dropped, lower-case.
fn parse_list(v: &str) -> Vec<String> {
    v.split(|c: char| c == ',' || c.is_whitespace())
        .map(|e| {
            let e = e.trim();
            let e = e
                .strip_prefix("http://")
                .or_else(|| e.strip_prefix("https://"))
                .unwrap_or(e);
            e.trim_end_matches('/').to_ascii_lowercase()
        })
        .filter(|e| !e.is_empty())
        .collect()
}

/// Declares `host[:port]` insecure (a host without a port: every port).
pub fn declare_insecure(host: &str, why: Insecure) {
    let host = host.trim().to_ascii_lowercase();
    if host.is_empty() {
        return;
    }
    if let Ok(mut d) = declared().write()
        && !d.hosts.iter().any(|(h, _)| *h == host)
    {
        d.hosts.push((host, why));
    }
    forget_transports();
}

/// What a Docker engine's `/info` says of registries: index configs
/// (`name`, `secure`) and `InsecureRegistryCIDRs`. `engine` names it in
/// messages.
pub fn declare_engine_registries(
    engine: &str,
    indexes: &[(String, bool)],
    insecure_cidrs: &[String],
) {
    if let Ok(mut d) = declared().write() {
        for (name, secure) in indexes {
            let name = name.to_ascii_lowercase();
            if *secure {
                if !d.secure.contains(&name) {
                    d.secure.push(name);
                }
            } else if !d.hosts.iter().any(|(h, _)| *h == name) {
                d.hosts.push((
                    name.clone(),
                    Insecure::Engine(format!("insecure-registries entry {name} ({engine})")),
                ));
            }
        }
        for c in insecure_cidrs {
            if let Some(cidr) = Cidr::parse(c)
                && !d.cidrs.iter().any(|(x, _)| *x == cidr)
            {
                d.cidrs.push((
                    cidr,
                    Insecure::Engine(format!("insecure-registries network {c} ({engine})")),
                ));
            }
        }
    }
    forget_transports();
}

/// Whether `host[:port]` is declared insecure, and by whom.
pub fn insecure(host: &str) -> Option<Insecure> {
    let host = host.to_ascii_lowercase();
    if is_loopback(&host) {
        return Some(Insecure::Loopback);
    }
    let d = declared().read().ok()?;
    let (bare, _) = split_host(&host);
    if let Some((_, why)) = d
        .hosts
        .iter()
        .find(|(h, _)| *h == host || (*h == bare && split_host(h).1.is_none()))
    {
        return Some(why.clone());
    }
    if d.cidrs.is_empty() || d.secure.contains(&host) {
        return None;
    }
    let addrs = resolve(&host);
    d.cidrs
        .iter()
        .find(|(c, _)| addrs.iter().any(|a| c.contains(*a)))
        .map(|(_, why)| why.clone())
}

/// The addresses `host[:port]` resolves to (as dockerd checks a registry
/// against its insecure networks), remembered per host.
fn resolve(host: &str) -> Vec<IpAddr> {
    static MEMO: kiln_util::Memo<String, Vec<IpAddr>> = kiln_util::Memo::new();
    if let Some(v) = MEMO.get(host) {
        return v;
    }
    let (bare, port) = split_host(host);
    let v: Vec<IpAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(bare, port.unwrap_or(443)))
            .map(|it| it.map(|a| a.ip()).collect())
            .unwrap_or_default(),
    };
    MEMO.insert(host.to_string(), v.clone());
    v
}

// ---------------------------------------------------------------- transport

/// How requests reach a registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// HTTPS, the certificate verified.
    Https,
    /// HTTPS without verifying the certificate (an insecure registry that
    /// answers HTTPS).
    HttpsUnverified,
    /// Plain HTTP (an insecure registry that does not answer HTTPS).
    Http,
}

/// What kiln uses to reach one registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transport {
    pub scheme: Scheme,
    /// Why the registry counts as insecure, if it does.
    pub insecure: Option<Insecure>,
    /// The certificate authorities trusted for it beside the system's
    /// (`certs.d/<host>/*.crt`).
    pub roots: Vec<PathBuf>,
    /// A client certificate found for it (`client.cert`), which kiln
    /// cannot present yet.
    pub client_cert: Option<PathBuf>,
}

fn transports() -> &'static Mutex<HashMap<String, Transport>> {
    static T: OnceLock<Mutex<HashMap<String, Transport>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// Bumped whenever the chosen transports are forgotten, so that clients
/// built for an earlier choice are not used again ([`generation`]).
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A declaration made after a transport was chosen changes it.
fn forget_transports() {
    if let Ok(mut t) = transports().lock() {
        t.clear();
    }
    GENERATION.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Which generation of transport choices is current: a client built for a
/// transport of another generation may use a scheme or CAs that a
/// declaration since has changed.
pub fn generation() -> u64 {
    GENERATION.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether `host[:port]`'s transport is decided for this generation (a
/// probe that got no answer decides nothing: it is asked again).
pub fn settled(host: &str) -> bool {
    transports()
        .lock()
        .is_ok_and(|m| m.contains_key(&host.to_ascii_lowercase()))
}

/// Docker's per-registry certificate directory: `KILN_DOCKER_CERTS_DIR`,
/// else `/etc/docker/certs.d`.
pub fn certs_dir() -> PathBuf {
    std::env::var_os("KILN_DOCKER_CERTS_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/etc/docker/certs.d"), PathBuf::from)
}

/// The CA files (`*.crt`) and the client certificate (`*.cert`) of
/// `host`'s directory under [`certs_dir`], sorted.
fn certs_of(host: &str) -> (Vec<PathBuf>, Option<PathBuf>) {
    let dir = certs_dir().join(host);
    let mut roots = Vec::new();
    let mut client = None;
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let p = e.path();
            match p.extension().and_then(|x| x.to_str()) {
                Some("crt") => roots.push(p),
                Some("cert") => client = Some(p),
                _ => {}
            }
        }
    }
    roots.sort();
    (roots, client)
}

/// How to reach `host[:port]`: decided once per process (again after a new
/// declaration). An insecure registry is probed ([`probe`], no
/// credentials): one that answers plain HTTP is spoken to in plain HTTP,
/// one that answers as a TLS server in HTTPS, its certificate not
/// verified. A probe that gets no answer decides nothing: plain HTTP is
/// used and the registry is probed again next time. The probe takes at
/// most a quarter of `bound` (3 s at most) per request. (Docker
/// tries HTTPS first; asking in plain HTTP first gives the same choice, and
/// a plain-HTTP server that waits for a request line never stalls it, as a
/// TLS handshake sent to one can.)
pub async fn transport(host: &str, bound: Duration) -> Transport {
    let key = host.to_ascii_lowercase();
    if let Some(t) = transports().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return t;
    }
    let (roots, client_cert) = certs_of(host);
    let insecure = insecure(host);
    let (scheme, certain) = match insecure {
        None => (Scheme::Https, true),
        Some(_) => match probe(host, bound).await {
            Some(s) => (s, true),
            // No answer either way (down, an outage, a proxy that drops
            // connections): plain HTTP for now, asked again next time.
            None => (Scheme::Http, false),
        },
    };
    let t = Transport {
        scheme,
        insecure,
        roots,
        client_cert,
    };
    if certain && let Ok(mut m) = transports().lock() {
        m.insert(key, t.clone());
    }
    t
}

/// What an insecure registry speaks, when it says: plain HTTP if `GET
/// http://host/v2/` gets an HTTP answer that is not a TLS server's
/// complaint about plain HTTP (Go's `Client sent an HTTP request to an
/// HTTPS server`, nginx's `The plain HTTP request was sent to HTTPS
/// port`); HTTPS if it is such a complaint, or if `GET https://host/v2/`
/// (certificate not checked) gets any answer. `None` when neither answers.
async fn probe(host: &str, bound: Duration) -> Option<Scheme> {
    install_tls_provider();
    // A quarter of the operation's bound: the probe is part of it.
    let bound = (bound / 4).min(Duration::from_secs(3));
    let client = reqwest::Client::builder()
        .connect_timeout(bound)
        .timeout(bound)
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(true)
        .build()
        .ok()?;
    match client.get(format!("http://{host}/v2/")).send().await {
        Ok(r) if r.status() == reqwest::StatusCode::BAD_REQUEST => {
            let body = r.text().await.unwrap_or_default();
            let tls = body.contains("HTTP request to an HTTPS server")
                || body.contains("plain HTTP request was sent to HTTPS port");
            return Some(if tls {
                Scheme::HttpsUnverified
            } else {
                Scheme::Http
            });
        }
        Ok(_) => return Some(Scheme::Http),
        // Nothing listens, or nothing answered in time: HTTPS would not
        // answer either.
        Err(e) if e.is_timeout() || connection_refused(&e) => return None,
        Err(_) => {}
    }
    // The connection was closed without an answer: a TLS server that
    // drops plain HTTP, or a registry that is failing.
    client
        .get(format!("https://{host}/v2/"))
        .send()
        .await
        .ok()
        .map(|_| Scheme::HttpsUnverified)
}

/// The oci-client configuration for one registry: its scheme, its CAs,
/// the timeouts and the proxies of the environment.
pub fn client_config(
    t: &Transport,
    connect_timeout: Duration,
    read_timeout: Duration,
) -> Result<ClientConfig, String> {
    install_tls_provider();
    let mut roots = Vec::new();
    for p in &t.roots {
        let data = std::fs::read(p)
            .map_err(|e| format!("cannot read the CA certificate {}: {e}", p.display()))?;
        roots.push(Certificate {
            encoding: if data.starts_with(b"-----") {
                CertificateEncoding::Pem
            } else {
                CertificateEncoding::Der
            },
            data,
        });
    }
    let env = |names: [&str; 2]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
    };
    // No system roots (none installed): the client's own verifier then
    // says so when it is built, as before.
    let system: Vec<Certificate> = system_roots()
        .iter()
        .map(|c| Certificate {
            encoding: CertificateEncoding::Der,
            data: c.to_vec(),
        })
        .collect();
    Ok(ClientConfig {
        tls_certs_only: system,
        protocol: match t.scheme {
            Scheme::Http => ClientProtocol::Http,
            Scheme::Https | Scheme::HttpsUnverified => ClientProtocol::Https,
        },
        accept_invalid_certificates: t.scheme == Scheme::HttpsUnverified,
        extra_root_certificates: roots,
        connect_timeout: Some(connect_timeout),
        read_timeout: Some(read_timeout),
        https_proxy: env(["HTTPS_PROXY", "https_proxy"]),
        http_proxy: env(["HTTP_PROXY", "http_proxy"]),
        no_proxy: env(["NO_PROXY", "no_proxy"]),
        ..ClientConfig::default()
    })
}

/// The credentials for a registry and where they came from.
#[derive(Clone)]
pub struct Credentials {
    pub auth: RegistryAuth,
    /// `None` for anonymous access.
    pub source: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// The docker CLI's login for `host[:port]`, else anonymous.
pub fn credentials(host: &str) -> Credentials {
    match crate::credentials::login_for(host) {
        Some((u, p)) => Credentials {
            auth: RegistryAuth::Basic(u, p),
            source: Some(format!(
                "the docker CLI's login for {host} ({})",
                crate::credentials::config_dir()
                    .map(|d| d.join("config.json").display().to_string())
                    .unwrap_or_else(|| "config.json".into())
            )),
        },
        None => Credentials {
            auth: RegistryAuth::Anonymous,
            source: None,
        },
    }
}

// ---------------------------------------------------------------- failures

/// What a request that got no usable answer means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Nothing answered: refused, no route, name resolution, timeout.
    Unreachable(String),
    /// Something answered, but the connection could not be used: TLS
    /// trust, HTTP spoken to HTTPS or the other way round.
    Transport(String),
}

impl Reach {
    pub fn message(&self) -> &str {
        match self {
            Reach::Unreachable(m) | Reach::Transport(m) => m,
        }
    }
}

fn declare_hint(host: &str) -> String {
    format!(
        "if it is meant to be reached without TLS, declare it insecure: \
         KILN_INSECURE_REGISTRIES={host} (for the registries of a remote builder, whose \
         configuration kiln cannot see), registry.insecure=true in the target's output \
         or cache attributes, or the engine's insecure-registries (docs/registries.md)"
    )
}

fn trust_hint(host: &str) -> String {
    format!(
        "put the certificate of the authority that signed it at {}/{host}/ca.crt (where \
         dockerd and the docker CLI look too) or into the system trust store \
         (update-ca-certificates)",
        certs_dir().display()
    )
}

/// What a failed request to `host` means, from its error chain (see
/// `kiln_util::error_chain`) and how kiln reached it.
pub fn request_failure(
    host: &str,
    t: &Transport,
    chain: &str,
    refused: bool,
    timed_out: bool,
    timeout: Duration,
) -> Reach {
    let lower = chain.to_ascii_lowercase();
    if lower.contains("invalidcontenttype") || lower.contains("corrupt message") {
        return Reach::Transport(format!(
            "{host} answered an HTTPS request in plain HTTP: it does not serve TLS; {} \
             ({chain})",
            declare_hint(host)
        ));
    }
    if lower.contains("invalid peer certificate") || lower.contains("certificate") {
        let what = if lower.contains("unknownissuer") {
            "its certificate is signed by an authority kiln does not trust".to_string()
        } else if lower.contains("notvalidforname") {
            format!("its certificate is not valid for the name {host}")
        } else if lower.contains("expired") {
            "its certificate has expired".to_string()
        } else {
            "its certificate was not accepted".to_string()
        };
        let tried = if t.roots.is_empty() {
            format!(
                "no CA certificate for it in {}/{host}/",
                certs_dir().display()
            )
        } else {
            format!(
                "trusted beside the system's: {}",
                t.roots
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Reach::Transport(format!(
            "TLS with {host} failed: {what} ({tried}); {}; or, for a test registry, {}{} \
             ({chain})",
            trust_hint(host),
            declare_hint(host),
            client_cert_note(t)
        ));
    }
    if t.client_cert.is_some() && lower.contains("handshake") {
        return Reach::Transport(format!(
            "TLS with {host} failed{} ({chain})",
            client_cert_note(t)
        ));
    }
    if refused {
        return Reach::Unreachable(format!(
            "connection refused (is a registry running at {host}?): {chain}"
        ));
    }
    if timed_out {
        return Reach::Unreachable(format!("no answer within {timeout:?}: {chain}"));
    }
    Reach::Unreachable(chain.to_string())
}

/// What kiln cannot do yet, said where it may be why a registry refused:
/// a client certificate for mutual TLS was found, and not presented (the
/// registry client has no setting for one).
fn client_cert_note(t: &Transport) -> String {
    match &t.client_cert {
        Some(p) => format!(
            "; note: {} is a client certificate for mutual TLS, which kiln cannot present \
             yet (docs/registries.md): a registry that requires one refuses kiln",
            p.display()
        ),
        None => String::new(),
    }
}

/// A registry's HTTP answer that says the request used the wrong scheme:
/// Go's TLS servers answer plain HTTP with `400 Client sent an HTTP
/// request to an HTTPS server`.
pub fn wrong_scheme_answer(host: &str, t: &Transport, message: &str) -> Option<String> {
    if !message.contains("HTTP request to an HTTPS server") {
        return None;
    }
    let why = t
        .insecure
        .as_ref()
        .map_or_else(String::new, |w| format!(" ({w})"));
    Some(format!(
        "{host} serves HTTPS, but kiln spoke plain HTTP to it as an insecure registry{why}: \
         remove that declaration, or serve the registry without TLS"
    ))
}

/// What a refusal of access means: `status` 401, 403 or 407, with the
/// credentials that were sent (`source`) or none.
pub fn auth_failure(host: &str, status: u16, source: Option<&str>) -> String {
    match (status, source) {
        (407, _) => format!(
            "proxy authentication required (HTTP 407): a proxy between kiln and {host} \
             wants credentials"
        ),
        (_, Some(src)) => format!(
            "{host} refused the credentials kiln sent (HTTP {status}; {src}): they are wrong, \
             expired, or lack pull/push access to the repository; `docker login {host}` \
             again with the same DOCKER_CONFIG"
        ),
        (_, None) => format!(
            "{host} wants credentials and kiln has none for it (HTTP {status}): `docker \
             login {host}` with the same DOCKER_CONFIG kiln runs with (kiln reads the docker \
             CLI's login and credential helpers); some registries answer this way for a \
             repository that does not exist"
        ),
    }
}

/// A token service's refusal (`AuthenticationFailure` of oci-client).
pub fn token_failure(host: &str, message: &str, source: Option<&str>) -> String {
    match source {
        Some(src) => format!(
            "the token service of {host} refused the credentials kiln sent ({src}): {}; \
             `docker login {host}` again with the same DOCKER_CONFIG",
            message.trim()
        ),
        None => format!(
            "the token service of {host} refused anonymous access: {}; `docker login \
             {host}` with the same DOCKER_CONFIG kiln runs with",
            message.trim()
        ),
    }
}

/// Runs a registry call, and again after 50 ms and 250 ms while the
/// registry answers 5xx (not 501) or the connection breaks (not a
/// timeout: a server that does not answer is not asked twice). Every call
/// kiln makes is idempotent and starts over (an upload opens a new
/// session), the distribution filesystem driver answers 500 to a tag read
/// that races a write of the same tag, and an answer lost on the way back
/// leaves a write made that the next try finds.
pub async fn retry<T, F, Fut>(mut op: F) -> Result<T, OciDistributionError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, OciDistributionError>>,
{
    let mut delays = [50, 250].into_iter();
    loop {
        let r = op().await;
        let transient = match &r {
            Err(OciDistributionError::ServerError { code, .. }) => {
                (500..=599).contains(code) && *code != 501
            }
            Err(OciDistributionError::RequestError(e)) => {
                !e.is_timeout() && !e.is_builder() && !is_tls(e)
            }
            _ => false,
        };
        match (transient, delays.next()) {
            (true, Some(ms)) => tokio::time::sleep(Duration::from_millis(ms)).await,
            _ => return r,
        }
    }
}

/// A TLS failure: asking again gives the same answer.
fn is_tls(e: &reqwest::Error) -> bool {
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(c) = cur {
        let s = c.to_string().to_ascii_lowercase();
        if s.contains("certificate") || s.contains("corrupt message") {
            return true;
        }
        cur = c.source();
    }
    false
}

/// Whether an error chain holds a refused connection.
pub fn connection_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cur = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_with_and_without_ports() {
        for plain in [
            "localhost",
            "localhost:5000",
            "127.0.0.1",
            "127.3.2.1:5000",
            "[::1]",
            "[::1]:5000",
            "LOCALHOST",
        ] {
            assert!(is_loopback(plain), "{plain}");
        }
        for tls in [
            "registry.example",
            "10.0.0.1:5000",
            "[::2]:5000",
            "localhost.example",
        ] {
            assert!(!is_loopback(tls), "{tls}");
        }
    }

    #[test]
    fn networks_contain_their_addresses() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.0.9".parse().unwrap()));
        let all = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        let v6 = Cidr::parse("fd00::/8").unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        assert!(Cidr::parse("10.0.0.0/33").is_none());
        assert!(Cidr::parse("registry:5000").is_none());
    }

    #[test]
    fn lists_of_registries_are_read_as_users_write_them() {
        assert_eq!(
            parse_list(" Reg.Lan:5000, http://zot.tailnet:5000/ 10.0.0.0/8,,"),
            ["reg.lan:5000", "zot.tailnet:5000", "10.0.0.0/8"]
        );
        assert_eq!(split_host("reg:5000"), ("reg", Some(5000)));
        assert_eq!(split_host("[fd00::1]:5000"), ("fd00::1", Some(5000)));
        assert_eq!(split_host("reg"), ("reg", None));
    }

    /// Declarations are process-wide: this one test owns the names it
    /// declares (`*.declared.test`).
    #[test]
    fn declared_registries_are_insecure_and_say_who_declared_them() {
        assert_eq!(insecure("plain.declared.test:5000"), None);
        declare_insecure("plain.declared.test:5000", Insecure::Attribute("os".into()));
        assert_eq!(
            insecure("plain.declared.test:5000"),
            Some(Insecure::Attribute("os".into()))
        );
        assert_eq!(insecure("plain.declared.test:5001"), None, "another port");
        declare_insecure("any.declared.test", Insecure::Location);
        assert_eq!(
            insecure("any.declared.test:7000"),
            Some(Insecure::Location),
            "no port: every port"
        );
        // The engine's networks: an address literal in them is insecure;
        // an index config that says secure wins.
        declare_engine_registries(
            "unix:///e.sock",
            &[("203.0.113.9:5000".into(), true)],
            &["203.0.113.0/24".into()],
        );
        assert!(matches!(
            insecure("203.0.113.7:5000"),
            Some(Insecure::Engine(how)) if how.contains("203.0.113.0/24")
        ));
        assert_eq!(insecure("203.0.113.9:5000"), None);
        assert_eq!(insecure("198.51.100.1:5000"), None);
    }

    #[test]
    fn failures_say_what_failed_and_what_to_do() {
        let t = Transport {
            scheme: Scheme::Https,
            insecure: None,
            roots: Vec::new(),
            client_cert: None,
        };
        let d = Duration::from_secs(5);
        let r = request_failure(
            "reg.test:5000",
            &t,
            "error sending request: client error (Connect): received corrupt message of type InvalidContentType",
            false,
            false,
            d,
        );
        assert!(
            matches!(&r, Reach::Transport(m) if m.contains("plain HTTP")
                && m.contains("KILN_INSECURE_REGISTRIES=reg.test:5000")),
            "{r:?}"
        );
        let r = request_failure(
            "reg.test:5443",
            &t,
            "client error (Connect): invalid peer certificate: UnknownIssuer",
            false,
            false,
            d,
        );
        assert!(
            matches!(&r, Reach::Transport(m) if m.contains("authority kiln does not trust")
                && m.contains("/reg.test:5443/ca.crt")),
            "{r:?}"
        );
        let mtls = Transport {
            client_cert: Some(PathBuf::from("/etc/docker/certs.d/reg.test/client.cert")),
            ..t.clone()
        };
        let r = request_failure(
            "reg.test",
            &mtls,
            "client error (Connect): received fatal alert: CertificateRequired; handshake failed",
            false,
            false,
            d,
        );
        assert!(
            matches!(&r, Reach::Transport(m) if m.contains("cannot present")),
            "{r:?}"
        );
        let r = request_failure("reg.test:1", &t, "tcp connect error", true, false, d);
        assert!(
            matches!(&r, Reach::Unreachable(m) if m.contains("connection refused")),
            "{r:?}"
        );
        let sent = auth_failure("reg.test", 401, Some("the docker CLI's login"));
        assert!(sent.contains("refused the credentials"), "{sent}");
        let none = auth_failure("reg.test", 401, None);
        assert!(none.contains("kiln has none"), "{none}");
        assert!(
            wrong_scheme_answer("r", &t, "Client sent an HTTP request to an HTTPS server.")
                .is_some()
        );
    }

    /// A loopback server that answers every connection with `answer`
    /// (closing it at once when `None`); its `host:port`.
    fn server(answer: Option<&'static str>) -> String {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                if let Some(a) = answer {
                    let mut buf = [0u8; 4096];
                    let _ = c.read(&mut buf);
                    let _ = c.write_all(a.as_bytes());
                }
            }
        });
        format!("127.0.0.1:{port}")
    }

    fn decide(host: &str) -> Transport {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(transport(host, Duration::from_secs(8)))
    }

    fn remembered(host: &str) -> bool {
        transports().lock().unwrap().contains_key(host)
    }

    #[test]
    fn an_insecure_registry_is_probed_for_its_scheme() {
        let plain = server(Some(
            "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
        ));
        let t = decide(&plain);
        assert_eq!(t.scheme, Scheme::Http);
        assert_eq!(t.insecure, Some(Insecure::Loopback));
        assert!(remembered(&plain));
        // What a Go TLS server answers to plain HTTP.
        let tls = server(Some(
            "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
        ));
        assert_eq!(decide(&tls).scheme, Scheme::HttpsUnverified);
        // No answer either way (a registry in an outage): plain HTTP for
        // now, never remembered, so that the next call asks again.
        let closing = server(None);
        assert_eq!(decide(&closing).scheme, Scheme::Http);
        assert!(!remembered(&closing));
        // A registry not declared insecure is never probed.
        let t = decide("registry.probe.test:5000");
        assert_eq!(t.scheme, Scheme::Https);
        assert_eq!(t.insecure, None);
    }
}
