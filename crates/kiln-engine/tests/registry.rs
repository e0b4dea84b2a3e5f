//! `kiln_engine::registry` against a real registry (`KILN_REGISTRY=host:port`
//! and `DOCKER_HOST`, e.g. from `scripts/dev-env env`) and against fake
//! servers on 127.0.0.1.
//!
//! Without `KILN_REGISTRY`/`DOCKER_HOST` the real-registry test prints that
//! it was skipped and passes, unless `KILN_E2E=1`, which makes it fail. The
//! fake-server tests always run. Every run pushes to its own repository.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kiln_engine::registry::{Registry, RegistryError, Resolution};

const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn registry(timeout: Duration) -> Registry {
    Registry::new(timeout).expect("registry client")
}

// ------------------------------------------------------------------ real registry

/// `KILN_REGISTRY` and `DOCKER_HOST`, or `None` (after saying so) when the
/// test is to be skipped.
fn dev_env(test: &str) -> Option<(String, String)> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    match (var("KILN_REGISTRY"), var("DOCKER_HOST")) {
        (Some(r), Some(d)) => Some((r, d)),
        _ => {
            if std::env::var("KILN_E2E").as_deref() == Ok("1") {
                panic!(
                    "{test}: KILN_E2E=1 but KILN_REGISTRY or DOCKER_HOST is not set \
                     (export $(scripts/dev-env env))"
                );
            }
            eprintln!(
                "{test}: skipped, KILN_REGISTRY or DOCKER_HOST is not set \
                 (export $(scripts/dev-env env))"
            );
            None
        }
    }
}

fn docker(host: &str, args: &[&str]) -> String {
    let out = Command::new("/usr/bin/docker")
        .arg("-H")
        .arg(host)
        .args(args)
        .output()
        .expect("running /usr/bin/docker");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "docker {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The `sha256:…` after `digest: ` in `docker push` output.
fn pushed_digest(output: &str) -> String {
    let at = output
        .find("digest: sha256:")
        .unwrap_or_else(|| panic!("no digest in docker push output: {output}"))
        + "digest: ".len();
    output[at..at + 71].to_string()
}

#[tokio::test]
async fn real_registry_resolves_tags_and_reports_absence() {
    let Some((reg, host)) = dev_env("real_registry_resolves_tags_and_reports_absence") else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let repo = format!("{reg}/kiln-test/resolve-{}-{nanos}", std::process::id());
    let image = format!("{repo}:t1");
    docker(&host, &["tag", "kiln/busybox:latest", &image]);
    let _untag = Untag {
        host: host.clone(),
        image: image.clone(),
    };
    let pushed = docker(&host, &["push", &image]);
    let digest = pushed_digest(&pushed);
    // The daemon records the same digest for this repository.
    let repo_digests = docker(
        &host,
        &[
            "image",
            "inspect",
            "--format",
            "{{range .RepoDigests}}{{println .}}{{end}}",
            &image,
        ],
    );
    assert!(
        repo_digests
            .lines()
            .any(|l| l == format!("{repo}@{digest}")),
        "{digest} not in {repo_digests}"
    );

    let r = registry(Duration::from_secs(30));
    assert_eq!(
        r.resolve(&image).await.unwrap(),
        Resolution::Found(digest.clone())
    );
    assert_eq!(
        r.resolve(&format!("{repo}:no-such-tag")).await.unwrap(),
        Resolution::Absent
    );
    assert_eq!(
        r.resolve(&format!("{repo}-missing:t1")).await.unwrap(),
        Resolution::Absent
    );
    // A clone shares the client, and resolutions run from tokio tasks.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (r, image) = (r.clone(), image.clone());
            tokio::spawn(async move { r.resolve(&image).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), Resolution::Found(digest.clone()));
    }
    // The digest reference resolves to itself.
    assert_eq!(
        r.resolve(&format!("{repo}@{digest}")).await.unwrap(),
        Resolution::Found(digest.clone())
    );
}

/// Removes the local tag when the test ends, passed or failed (the image
/// stays: `kiln/busybox:latest` still names it).
struct Untag {
    host: String,
    image: String,
}

impl Drop for Untag {
    fn drop(&mut self) {
        let _ = Command::new("/usr/bin/docker")
            .args(["-H", &self.host, "rmi", &self.image])
            .output();
    }
}

// ------------------------------------------------------------------ fake servers

struct Request {
    method: String,
    /// The request target, e.g. `/v2/x/manifests/t`.
    target: String,
    /// The header block, lower-cased.
    headers: String,
    /// The fake server's own port.
    port: u16,
}

struct Response {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn response(status: &'static str, headers: &[(&str, &str)], body: &str) -> Response {
    Response {
        status,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.as_bytes().to_vec(),
    }
}

/// A server on 127.0.0.1 answering each request with `handler`; returns its
/// port and the log of `METHOD target` lines.
fn serve(
    handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let handler = Arc::new(handler);
    let server_log = log.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let (handler, log) = (handler.clone(), server_log.clone());
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Answer each request on the connection (keep-alive).
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let mut words = head.split_whitespace();
                    let req = Request {
                        method: words.next().unwrap_or("").to_string(),
                        target: words.next().unwrap_or("").to_string(),
                        headers: head.to_lowercase(),
                        port,
                    };
                    log.lock()
                        .unwrap()
                        .push(format!("{} {}", req.method, req.target));
                    let resp = handler(&req);
                    let mut out = format!("HTTP/1.1 {}\r\n", resp.status);
                    for (k, v) in &resp.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str(&format!("Content-Length: {}\r\n\r\n", resp.body.len()));
                    let mut bytes = out.into_bytes();
                    if req.method != "HEAD" {
                        bytes.extend_from_slice(&resp.body);
                    }
                    if conn.write_all(&bytes).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, log)
}

/// Answers every request the same way.
fn fixed(status: &'static str, headers: &[(&str, &str)], body: &str) -> u16 {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let body = body.to_string();
    serve(move |_| Response {
        status,
        headers: headers.clone(),
        body: body.clone().into_bytes(),
    })
    .0
}

async fn error(r: &Registry, reference: &str) -> RegistryError {
    match r.resolve(reference).await {
        Err(e) => e,
        Ok(found) => panic!("{reference}: expected an error, got {found:?}"),
    }
}

fn manifest_requests(log: &Mutex<Vec<String>>) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("/manifests/"))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_digest_reference_needs_no_request() {
    let r = registry(Duration::from_secs(5));
    let digest = format!("sha256:{HEX}");
    // Nothing listens on port 1: any request would fail.
    for reference in [
        format!("127.0.0.1:1/x@{digest}"),
        format!("127.0.0.1:1/x:t1@{digest}"),
        format!("unreachable.invalid/x@{digest}"),
    ] {
        assert_eq!(
            r.resolve(&reference).await.unwrap(),
            Resolution::Found(digest.clone()),
            "{reference}"
        );
    }
    let (port, log) = serve(|_| response("500 Internal Server Error", &[], ""));
    assert_eq!(
        r.resolve(&format!("127.0.0.1:{port}/x@{digest}"))
            .await
            .unwrap(),
        Resolution::Found(digest)
    );
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
}

#[tokio::test]
async fn a_tag_resolves_to_the_digest_header_of_head_and_asks_for_indexes() {
    let index_digest = format!("sha256:{HEX}");
    let d = index_digest.clone();
    let (port, log) = serve(move |req| {
        let accepts_all = [
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        ]
        .iter()
        .all(|t| req.headers.contains(t));
        match (req.method.as_str(), req.target.as_str()) {
            (_, "/v2/") => response("200 OK", &[], "{}"),
            ("HEAD", "/v2/team/app/manifests/v1") if accepts_all => response(
                "200 OK",
                &[
                    ("Docker-Content-Digest", d.as_str()),
                    ("Content-Type", "application/vnd.oci.image.index.v1+json"),
                ],
                "",
            ),
            _ => response("404 Not Found", &[], ""),
        }
    });
    let r = registry(Duration::from_secs(5));
    assert_eq!(
        r.resolve(&format!("127.0.0.1:{port}/team/app:v1"))
            .await
            .unwrap(),
        Resolution::Found(index_digest.clone())
    );
    // HEAD was enough.
    assert_eq!(manifest_requests(&log), ["HEAD /v2/team/app/manifests/v1"]);
    // `localhost` is plain HTTP too (the fake speaks no TLS).
    assert_eq!(
        r.resolve(&format!("localhost:{port}/team/app:v1"))
            .await
            .unwrap(),
        Resolution::Found(index_digest)
    );
}

#[tokio::test]
async fn without_a_digest_header_the_manifest_is_fetched_and_hashed() {
    let body = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
    let expected =
        oci_client::client::ImageLayer::new(body.as_bytes().to_vec(), String::new(), None)
            .sha256_digest();
    let (port, log) = serve(move |req| match req.method.as_str() {
        "HEAD" => response("200 OK", &[], ""),
        _ => response(
            "200 OK",
            &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
            body,
        ),
    });
    let r = registry(Duration::from_secs(5));
    assert_eq!(
        r.resolve(&format!("127.0.0.1:{port}/x")).await.unwrap(),
        Resolution::Found(expected)
    );
    assert_eq!(
        manifest_requests(&log),
        ["HEAD /v2/x/manifests/latest", "GET /v2/x/manifests/latest"]
    );
}

#[tokio::test]
async fn anonymous_pull_tokens_are_fetched() {
    let digest = format!("sha256:{HEX}");
    let d = digest.clone();
    let (port, log) = serve(move |req| {
        let challenge = format!(
            "Bearer realm=\"http://127.0.0.1:{}/token\",service=\"fake\"",
            req.port
        );
        let unauthorized = || Response {
            status: "401 Unauthorized",
            headers: vec![
                ("WWW-Authenticate".into(), challenge.clone()),
                ("Content-Type".into(), "application/json".into()),
            ],
            body: br#"{"errors":[{"code":"UNAUTHORIZED"}]}"#.to_vec(),
        };
        if req.target.starts_with("/token?") {
            // Anonymous: no credentials are sent for a pull token.
            assert!(!req.headers.contains("authorization:"), "{}", req.headers);
            return response("200 OK", &[], r#"{"token":"anon-token"}"#);
        }
        if !req.headers.contains("authorization: bearer anon-token") {
            return unauthorized();
        }
        match req.target.as_str() {
            "/v2/lib/app/manifests/1.0" => {
                response("200 OK", &[("Docker-Content-Digest", d.as_str())], "")
            }
            _ => response(
                "404 Not Found",
                &[("Content-Type", "application/json")],
                r#"{"errors":[{"code":"MANIFEST_UNKNOWN"}]}"#,
            ),
        }
    });
    let r = registry(Duration::from_secs(5));
    assert_eq!(
        r.resolve(&format!("127.0.0.1:{port}/lib/app:1.0"))
            .await
            .unwrap(),
        Resolution::Found(digest)
    );
    assert_eq!(
        r.resolve(&format!("127.0.0.1:{port}/lib/app:2.0"))
            .await
            .unwrap(),
        Resolution::Absent
    );
    let log = log.lock().unwrap();
    assert!(
        log.iter()
            .any(|l| l.starts_with("GET /token?")
                && l.contains("scope=repository%3Alib%2Fapp%3Apull")),
        "{log:?}"
    );
}

/// The parts of a run that ask a registry (preflight, keys, the driver's
/// checks) each hold a `Registry`; they share one client per registry, so
/// its pull token is fetched once, not once per part (and
/// the system's CA certificates are read once).
#[tokio::test]
async fn registries_of_one_process_share_their_client_and_its_tokens() {
    let digest = format!("sha256:{HEX}");
    let d = digest.clone();
    let (port, log) = serve(move |req| {
        if req.target.starts_with("/token?") {
            return response("200 OK", &[], r#"{"token":"shared-token"}"#);
        }
        if !req.headers.contains("authorization: bearer shared-token") {
            let challenge = format!(
                "Bearer realm=\"http://127.0.0.1:{}/token\",service=\"fake\"",
                req.port
            );
            return Response {
                status: "401 Unauthorized",
                headers: vec![("WWW-Authenticate".into(), challenge)],
                body: br#"{"errors":[{"code":"UNAUTHORIZED"}]}"#.to_vec(),
            };
        }
        response("200 OK", &[("Docker-Content-Digest", d.as_str())], "")
    });
    let reference = format!("127.0.0.1:{port}/lib/shared:1.0");
    // Of different timeouts, as the run's parts have.
    for secs in [5, 30] {
        let r = registry(Duration::from_secs(secs));
        assert_eq!(
            r.resolve(&reference).await.unwrap(),
            Resolution::Found(digest.clone())
        );
    }
    let log = log.lock().unwrap();
    let tokens = log.iter().filter(|l| l.starts_with("GET /token?")).count();
    assert_eq!(tokens, 1, "{log:?}");
}

#[tokio::test]
async fn not_found_answers_are_absent() {
    let r = registry(Duration::from_secs(5));
    for (headers, body) in [
        (
            vec![("Content-Type", "application/json")],
            r#"{"errors":[{"code":"MANIFEST_UNKNOWN"}]}"#,
        ),
        (
            vec![("Content-Type", "application/json")],
            r#"{"errors":[{"code":"NAME_UNKNOWN"}]}"#,
        ),
        (vec![], "404 page not found"),
    ] {
        let port = fixed("404 Not Found", &headers, body);
        assert_eq!(
            r.resolve(&format!("127.0.0.1:{port}/x:t")).await.unwrap(),
            Resolution::Absent,
            "{body}"
        );
    }
}

#[tokio::test]
async fn unauthorized_and_forbidden_are_auth_errors_that_say_so() {
    let r = registry(Duration::from_secs(5));
    for (status, code, headers, body) in [
        (
            "401 Unauthorized",
            401,
            vec![
                ("WWW-Authenticate", "Basic realm=\"kiln\""),
                ("Content-Type", "application/json"),
            ],
            r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#,
        ),
        ("401 Unauthorized", 401, vec![], ""),
        (
            "403 Forbidden",
            403,
            vec![("Content-Type", "application/json")],
            r#"{"errors":[{"code":"DENIED","message":"no"}]}"#,
        ),
        // A proxy's bare 403.
        ("403 Forbidden", 403, vec![], "Forbidden"),
        ("407 Proxy Authentication Required", 407, vec![], ""),
    ] {
        let port = fixed(status, &headers, body);
        let reference = format!("127.0.0.1:{port}/x:t");
        let e = error(&r, &reference).await;
        let m = e.to_string();
        match e {
            RegistryError::Auth {
                status: got,
                registry,
                ..
            } => {
                assert_eq!(got, code, "{m}");
                assert_eq!(registry, format!("127.0.0.1:{port}"));
                assert!(m.contains(&format!("HTTP {code}")), "{m}");
                if code == 407 {
                    assert!(m.contains("proxy"), "{m}");
                } else {
                    assert!(m.contains("wants credentials and kiln has none"), "{m}");
                    assert!(m.contains("docker login"), "{m}");
                }
                assert!(m.contains(&reference), "{m}");
            }
            other => panic!("{status} {body}: expected Auth, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn server_errors_are_protocol_errors_after_retries() {
    let (port, log) = serve(|req| match req.target.as_str() {
        "/v2/" => response("200 OK", &[], "{}"),
        _ => response("500 Internal Server Error", &[], "storage broken"),
    });
    let r = registry(Duration::from_secs(5));
    match error(&r, &format!("127.0.0.1:{port}/x:t")).await {
        RegistryError::Protocol { detail, .. } => {
            assert!(detail.contains("HTTP 500"), "{detail}");
            assert!(detail.contains("storage broken"), "{detail}");
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
    // Three attempts, each a HEAD and a GET.
    let gets = manifest_requests(&log)
        .iter()
        .filter(|l| l.starts_with("GET"))
        .count();
    assert_eq!(gets, 3, "{:?}", log.lock().unwrap());
}

#[tokio::test]
async fn a_malformed_digest_from_the_registry_is_a_protocol_error() {
    let port = fixed("200 OK", &[("Docker-Content-Digest", "sha256:nothex")], "");
    let r = registry(Duration::from_secs(5));
    match error(&r, &format!("127.0.0.1:{port}/x:t")).await {
        RegistryError::Protocol { detail, .. } => {
            assert!(detail.contains("sha256:nothex"), "{detail}");
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_fast() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = registry(Duration::from_secs(20));
    let start = Instant::now();
    match error(&r, &format!("127.0.0.1:{port}/x:t")).await {
        e @ RegistryError::Unreachable { .. } => {
            let m = e.to_string();
            assert!(m.contains("refused"), "{m}");
            assert!(m.contains(&format!("127.0.0.1:{port}")), "{m}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_silent_server_times_out_as_unreachable() {
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for c in listener.incoming() {
            open.push(c);
        }
    });
    let r = registry(Duration::from_secs(1));
    let start = Instant::now();
    match error(&r, &format!("127.0.0.1:{port}/x:t")).await {
        e @ RegistryError::Unreachable { .. } => {
            let m = e.to_string();
            assert!(m.contains("within 1s"), "{m}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_trickling_server_is_cut_off_by_the_operation_timeout() {
    // Answers with a header every 200 ms and never finishes: no single read
    // waits long, so only the timeout of the whole operation ends it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\n");
                for i in 0..100 {
                    std::thread::sleep(Duration::from_millis(200));
                    if write!(conn, "X-Wait-{i}: 1\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let r = registry(Duration::from_secs(2));
    let start = Instant::now();
    match error(&r, &format!("127.0.0.1:{port}/x:t")).await {
        e @ RegistryError::Unreachable { .. } => {
            let m = e.to_string();
            assert!(m.contains("no answer within 2s"), "{m}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[tokio::test]
async fn invalid_references_are_refused_without_a_request() {
    let r = registry(Duration::from_secs(5));
    for reference in [
        "Busybox",
        "busybox:",
        "busybox@sha256:abc",
        "busybox@sha256:0123456789abcdef0123456789abcdef",
    ] {
        match error(&r, reference).await {
            RegistryError::InvalidReference { reference: got, .. } => {
                assert_eq!(got, reference);
            }
            other => panic!("{reference}: expected InvalidReference, got {other:?}"),
        }
    }
}

/// A cache-only manifest (what `--cache-to type=registry,image-manifest=true`
/// writes: an OCI manifest whose config is BuildKit's cache config, not an
/// image) is found by `check`, the raw manifest request kiln uses to probe
/// cache refs; a digest reference is asked too, and a missing one is absent.
#[tokio::test]
async fn a_cache_only_manifest_is_found_by_a_raw_manifest_request() {
    use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
    use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
    use oci_client::{Client, Reference};
    let Some((reg, _)) = dev_env("a_cache_only_manifest_is_found_by_a_raw_manifest_request") else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let repo = format!("kiln-test/cache-{}-{nanos}", std::process::id());
    kiln_store::registry_io::install_tls_provider();
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        use_monolithic_push: true,
        ..ClientConfig::default()
    });
    let at = |tag: &str| Reference::with_tag(reg.clone(), repo.clone(), tag.into());
    let push = async |data: &[u8], media_type: &str| {
        let layer = ImageLayer::new(data.to_vec(), media_type.into(), None);
        let digest = layer.sha256_digest();
        client
            .push_blob(&at("x"), layer.data.clone(), &digest)
            .await
            .unwrap();
        OciDescriptor {
            media_type: media_type.into(),
            digest,
            size: data.len() as i64,
            urls: None,
            annotations: None,
            artifact_type: None,
        }
    };
    let config = push(
        br#"{"layers":[],"records":[]}"#,
        "application/vnd.buildkit.cacheconfig.v0",
    )
    .await;
    let layer = push(
        b"cached layer bytes",
        "application/vnd.oci.image.layer.v1.tar+gzip",
    )
    .await;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config,
        layers: vec![layer],
        subject: None,
        artifact_type: None,
        annotations: None,
    };
    let bytes = serde_json::to_vec(&manifest).unwrap();
    // The manifest's digest: sha256 of its bytes (ImageLayer computes it).
    let digest = ImageLayer::new(bytes.clone(), OCI_IMAGE_MEDIA_TYPE.into(), None).sha256_digest();
    client
        .push_manifest_raw(
            &at("buildcache-app-native"),
            bytes,
            OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
        )
        .await
        .unwrap();
    let r = registry(Duration::from_secs(20));
    let tag_ref = format!("{reg}/{repo}:buildcache-app-native");
    assert_eq!(
        r.check(&tag_ref).await.unwrap(),
        Resolution::Found(digest.clone())
    );
    let by_digest = format!("{reg}/{repo}@{digest}");
    assert_eq!(
        r.check(&by_digest).await.unwrap(),
        Resolution::Found(digest)
    );
    let missing = format!("{reg}/{repo}@sha256:{HEX}");
    assert_eq!(r.check(&missing).await.unwrap(), Resolution::Absent);
    assert_eq!(
        r.check(&format!("{reg}/{repo}:buildcache-other"))
            .await
            .unwrap(),
        Resolution::Absent
    );
}

/// The pushed size of an index: buildx pushes one platform as an index of
/// the image and its attestation manifest, and several platforms as an
/// index of images. The size is the largest image's (what a node pulling
/// it moves), never `None` and never counting an attestation, which is not
/// even read.
#[tokio::test]
async fn an_index_has_the_size_of_its_largest_image_without_attestations() {
    let digest = |body: &str| {
        oci_client::client::ImageLayer::new(body.as_bytes().to_vec(), String::new(), None)
            .sha256_digest()
    };
    let image = |config: i64, layers: &[i64]| {
        let layers: Vec<String> = layers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    r#"{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:{i:064x}","size":{s}}}"#
                )
            })
            .collect();
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:{HEX}","size":{config}}},"layers":[{}]}}"#,
            layers.join(",")
        )
    };
    let amd64 = image(1_000, &[2_000_000, 500_000]);
    let arm64 = image(1_000, &[4_000_000]);
    let attestation = image(500, &[90_000_000]);
    let entry = |body: &str, platform: &str, annotations: &str| {
        let (os, arch) = platform.split_once('/').unwrap();
        format!(
            r#"{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{}","size":{},"platform":{{"os":"{os}","architecture":"{arch}"}}{annotations}}}"#,
            digest(body),
            body.len()
        )
    };
    let att = format!(
        r#","annotations":{{"vnd.docker.reference.type":"attestation-manifest","vnd.docker.reference.digest":"{}"}}"#,
        digest(&amd64)
    );
    let index = |entries: &[String]| {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{}]}}"#,
            entries.join(",")
        )
    };
    let one = index(&[
        entry(&amd64, "linux/amd64", ""),
        entry(&attestation, "unknown/unknown", &att),
    ]);
    let two = index(&[
        entry(&amd64, "linux/amd64", ""),
        entry(&arm64, "linux/arm64", ""),
        entry(&attestation, "unknown/unknown", &att),
    ]);
    let bodies: Vec<(String, String, &str)> = vec![
        (
            "/v2/x/manifests/one".into(),
            one,
            "application/vnd.oci.image.index.v1+json",
        ),
        (
            "/v2/x/manifests/two".into(),
            two,
            "application/vnd.oci.image.index.v1+json",
        ),
        (
            format!("/v2/x/manifests/{}", digest(&amd64)),
            amd64.clone(),
            "application/vnd.oci.image.manifest.v1+json",
        ),
        (
            format!("/v2/x/manifests/{}", digest(&arm64)),
            arm64.clone(),
            "application/vnd.oci.image.manifest.v1+json",
        ),
        (
            format!("/v2/x/manifests/{}", digest(&attestation)),
            attestation.clone(),
            "application/vnd.oci.image.manifest.v1+json",
        ),
    ];
    let (port, log) = serve(move |req| {
        if req.target == "/v2/" {
            return response("200 OK", &[], "{}");
        }
        match bodies.iter().find(|(path, _, _)| *path == req.target) {
            Some((_, body, media_type)) => response(
                "200 OK",
                &[
                    ("Content-Type", media_type),
                    ("Docker-Content-Digest", &digest(body)),
                ],
                body,
            ),
            None => response("404 Not Found", &[], ""),
        }
    });
    let r = registry(Duration::from_secs(5));
    let size = |tag: &str| {
        let r = &r;
        let reference = format!("127.0.0.1:{port}/x:{tag}");
        async move { r.image_size_mb(&reference).await.unwrap() }
    };
    // One platform and its attestation: the image's size.
    assert_eq!(size("one").await, Some(2.501));
    // Two platforms: the larger image.
    assert_eq!(size("two").await, Some(4.001));
    // A plain image manifest, by digest.
    assert_eq!(
        r.image_size_mb(&format!("127.0.0.1:{port}/x@{}", digest(&arm64)))
            .await
            .unwrap(),
        Some(4.001)
    );
    // The attestation is never read.
    let att_path = format!("/v2/x/manifests/{}", digest(&attestation));
    assert!(
        !manifest_requests(&log)
            .iter()
            .any(|l| l.ends_with(&att_path)),
        "{:?}",
        manifest_requests(&log)
    );
}

/// What `ask_ahead` asks is asked once, at once, and every `resolve` and
/// `check` of the same reference, by any `Registry` of the process, takes
/// that answer; once forgotten (the run builds or writes), the registry is
/// asked again, and a tag moved meanwhile is seen.
#[tokio::test]
async fn answers_asked_ahead_are_taken_until_forgotten() {
    let now = Arc::new(Mutex::new(format!("sha256:{HEX}")));
    let names = now.clone();
    let (port, log) = serve(move |req| match req.target.as_str() {
        "/v2/" => response("200 OK", &[], "{}"),
        "/v2/team/app/manifests/v1" => {
            let d = names.lock().unwrap().clone();
            response("200 OK", &[("Docker-Content-Digest", d.as_str())], "")
        }
        _ => response("404 Not Found", &[], ""),
    });
    let reference = format!("127.0.0.1:{port}/team/app:v1");
    let absent = format!("127.0.0.1:{port}/team/gone:v1");
    kiln_engine::registry::ask_ahead([reference.clone(), absent.clone(), reference.clone()]);
    let first = Resolution::Found(format!("sha256:{HEX}"));
    let (a, b) = (
        registry(Duration::from_secs(5)),
        registry(Duration::from_secs(30)),
    );
    assert_eq!(a.resolve(&reference).await.unwrap(), first);
    assert_eq!(b.check(&reference).await.unwrap(), first);
    assert_eq!(b.resolve(&absent).await.unwrap(), Resolution::Absent);
    let mut asked = manifest_requests(&log);
    asked.sort();
    assert_eq!(
        asked,
        [
            // A 404 carries no digest: oci-client reads the manifest too.
            "GET /v2/team/gone/manifests/v1",
            "HEAD /v2/team/app/manifests/v1",
            "HEAD /v2/team/gone/manifests/v1"
        ],
        "each asked once"
    );
    // The tag moves: the answer asked ahead stands until it is forgotten.
    let moved = format!("sha256:{}", "b".repeat(64));
    *now.lock().unwrap() = moved.clone();
    assert_eq!(a.resolve(&reference).await.unwrap(), first);
    kiln_engine::registry::forget_ahead();
    assert_eq!(
        a.resolve(&reference).await.unwrap(),
        Resolution::Found(moved)
    );
    assert_eq!(
        manifest_requests(&log).len(),
        4,
        "{:?}",
        log.lock().unwrap()
    );
}
