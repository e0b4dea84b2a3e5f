//! `OciStore` against a real registry (`KILN_REGISTRY=host:port`, e.g. from
//! `scripts/dev-env up`) and against fake servers on 127.0.0.1.
//!
//! Without `KILN_REGISTRY` the registry tests print that they were skipped
//! and pass, unless `KILN_E2E=1`, which makes them fail. The fake-server
//! tests always run. Every registry test uses its own repository.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_store::{
    FORMAT, INPUTS_MEDIA_TYPE, Lookup, OciStore, PutOutcome, RECORD_MEDIA_TYPE, Record,
    RecordStore, StoreError, digest, payload_bytes,
};
use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::{Client, Reference};
use serde_json::json;

// ------------------------------------------------------------------ helpers

/// The registry under test, or `None` (after saying so) when the test is
/// to be skipped.
fn registry(test: &str) -> Option<String> {
    match std::env::var("KILN_REGISTRY") {
        Ok(r) if !r.is_empty() => Some(r),
        _ => {
            if std::env::var("KILN_E2E").as_deref() == Ok("1") {
                panic!("{test}: KILN_E2E=1 but KILN_REGISTRY is not set (run scripts/dev-env up)");
            }
            eprintln!("{test}: skipped, KILN_REGISTRY is not set (scripts/dev-env up sets it)");
            None
        }
    }
}

/// A repository nobody else uses: reruns and parallel tests never collide.
fn repository(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "kiln-test/{}-{nanos}/{}",
        std::process::id(),
        test.replace('_', "-")
    )
}

struct Fixture {
    registry: String,
    repository: String,
    store: OciStore,
}

impl Fixture {
    fn new(test: &str) -> Option<Fixture> {
        let registry = registry(test)?;
        let repository = repository(test);
        let store = OciStore::new(&format!("oci://{registry}/{repository}?timeout=30")).unwrap();
        Some(Fixture {
            registry,
            repository,
            store,
        })
    }

    fn another_store(&self) -> OciStore {
        OciStore::new(&format!("oci://{}/{}", self.registry, self.repository)).unwrap()
    }

    fn reference(&self, tag: &str) -> Reference {
        Reference::with_tag(self.registry.clone(), self.repository.clone(), tag.into())
    }

    /// Runs raw oci-client calls (for writing damaged records).
    fn raw<T>(&self, f: impl AsyncFnOnce(&Client) -> T) -> T {
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::Http,
            use_monolithic_push: true,
            ..ClientConfig::default()
        });
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f(&client))
    }

    fn push_blob(&self, data: &[u8], media_type: &str) -> OciDescriptor {
        let layer = ImageLayer::new(data.to_vec(), media_type.into(), None);
        let sha = layer.sha256_digest();
        let r = self.reference("x");
        self.raw(async |c| c.push_blob(&r, layer.data.clone(), &sha).await)
            .unwrap();
        OciDescriptor {
            media_type: media_type.into(),
            digest: sha,
            size: data.len() as i64,
            urls: None,
            annotations: None,
            artifact_type: None,
        }
    }

    fn push_manifest(&self, tag: &str, manifest: &OciImageManifest) {
        let bytes = serde_json::to_vec(manifest).unwrap();
        let r = self.reference(tag);
        self.raw(async |c| {
            c.push_manifest_raw(&r, bytes, OCI_IMAGE_MEDIA_TYPE.parse().unwrap())
                .await
        })
        .unwrap();
    }

    fn pull_manifest(&self, tag: &str) -> OciImageManifest {
        let r = self.reference(tag);
        let (bytes, _) = self
            .raw(async |c| {
                c.pull_manifest_raw(
                    &r,
                    &oci_client::secrets::RegistryAuth::Anonymous,
                    &[OCI_IMAGE_MEDIA_TYPE],
                )
                .await
            })
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Deletes a blob from the repository (the dev-env registry allows it),
    /// with a bare HTTP request: oci-client has no delete.
    fn delete_blob(&self, digest: &str) {
        let mut conn = std::net::TcpStream::connect(&self.registry).unwrap();
        write!(
            conn,
            "DELETE /v2/{}/blobs/{digest} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.repository, self.registry
        )
        .unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    }

    /// A record manifest for `key` made of the given layers.
    fn record_manifest(&self, key: &str, layers: Vec<OciDescriptor>) -> OciImageManifest {
        let config = self.push_blob(b"{}", "application/vnd.oci.empty.v1+json");
        OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
            config,
            layers,
            subject: None,
            artifact_type: Some(RECORD_MEDIA_TYPE.into()),
            annotations: Some(BTreeMap::from([(
                "kiln.record.key".to_string(),
                key.to_string(),
            )])),
        }
    }
}

fn key(n: u8) -> String {
    format!("k1:{}", format!("{n:02x}").repeat(32))
}

fn tag(key: &str) -> String {
    key.replace(':', "-")
}

fn record(key: &str, target: &str, inputs: &serde_json::Value) -> Record {
    Record {
        format: FORMAT.into(),
        key: key.into(),
        target: target.into(),
        image_id: "sha256:abc".into(),
        image_ref: Some(format!("kiln.local/{target}:abc")),
        digest: None,
        tags: vec![format!("r/{target}:1")],
        platform: Some("linux/amd64".into()),
        built_at: "2026-11-30T00:00:00Z".into(),
        node: "local".into(),
        duration_s: 1.5,
        steps_total: 3,
        steps_cached: 1,
        inputs_digest: digest(&payload_bytes(inputs)),
        check: None,
        signature: None,
    }
}

fn hit(l: Lookup) -> kiln_store::Entry {
    match l {
        Lookup::Hit(e) => *e,
        other => panic!("hit expected, got {other:?}"),
    }
}

fn corrupt(l: Lookup) -> String {
    match l {
        Lookup::Corrupt(r) => r,
        other => panic!("Corrupt expected, got {other:?}"),
    }
}

fn unavailable(r: Result<impl std::fmt::Debug, StoreError>) -> String {
    match r {
        Err(e @ StoreError::Unavailable { .. }) => e.to_string(),
        other => panic!("Unavailable expected, got {other:?}"),
    }
}

// ------------------------------------------------------------------ registry

#[test]
fn put_then_get_round_trips_and_misses_are_misses() {
    let Some(f) = Fixture::new("round_trip") else {
        return;
    };
    let s = &f.store;
    let inputs = json!({"files": {"a": "blake3:1"}, "args": {"X": "1"}});
    // The repository does not exist yet: a miss, not an error.
    assert_eq!(s.get(&key(1)).unwrap(), Lookup::Miss);
    assert_eq!(s.latest("app").unwrap(), Lookup::Miss);
    let r = record(&key(1), "app", &inputs);
    assert_eq!(s.put(&r, &inputs, false).unwrap(), PutOutcome::Written);
    let e = hit(s.get(&key(1)).unwrap());
    assert_eq!(e.record, r);
    assert_eq!(e.inputs, inputs);
    // Another key in an existing repository: still a miss.
    assert_eq!(s.get(&key(2)).unwrap(), Lookup::Miss);
    // Another client sees the same record.
    assert_eq!(hit(f.another_store().get(&key(1)).unwrap()).record, r);
    // The layout is the documented one.
    let m = f.pull_manifest(&tag(&key(1)));
    assert_eq!(m.artifact_type.as_deref(), Some(RECORD_MEDIA_TYPE));
    assert_eq!(m.config.media_type, "application/vnd.oci.empty.v1+json");
    let types: Vec<&str> = m.layers.iter().map(|l| l.media_type.as_str()).collect();
    assert_eq!(types, [INPUTS_MEDIA_TYPE, RECORD_MEDIA_TYPE]);
    assert_eq!(
        m.annotations.unwrap().get("kiln.record.target").unwrap(),
        "app"
    );
    // Keys outside the `k1:<hex>` form work too (hashed tags).
    let odd = "some key/with spaces";
    let r2 = record(odd, "app", &inputs);
    assert_eq!(s.put(&r2, &inputs, false).unwrap(), PutOutcome::Written);
    assert_eq!(hit(s.get(odd).unwrap()).record, r2);
    // Inputs that do not hash to the record's digest are refused up front.
    let mut bad = record(&key(3), "app", &inputs);
    bad.inputs_digest = "blake3:00".into();
    assert!(matches!(
        s.put(&bad, &inputs, false),
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(s.get(&key(3)).unwrap(), Lookup::Miss);
}

#[test]
fn latest_follows_the_last_put_for_a_target() {
    let Some(f) = Fixture::new("latest") else {
        return;
    };
    let s = &f.store;
    let (i1, i2) = (json!({"v": 1}), json!({"v": 2}));
    s.put(&record(&key(1), "app", &i1), &i1, false).unwrap();
    assert_eq!(hit(s.latest("app").unwrap()).record.key, key(1));
    s.put(&record(&key(2), "app", &i2), &i2, false).unwrap();
    let e = hit(s.latest("app").unwrap());
    assert_eq!(e.record.key, key(2));
    assert_eq!(e.inputs, i2);
    // Targets are independent; names outside the tag grammar work.
    s.put(&record(&key(3), "web/ünï", &i1), &i1, false).unwrap();
    assert_eq!(hit(s.latest("web/ünï").unwrap()).record.key, key(3));
    assert_eq!(hit(s.latest("app").unwrap()).record.key, key(2));
    assert_eq!(s.latest("nothing").unwrap(), Lookup::Miss);
    // Building an existing key again makes it the latest again.
    assert_eq!(
        s.put(&record(&key(1), "app", &i1), &i1, false).unwrap(),
        PutOutcome::AlreadyPresent
    );
    assert_eq!(hit(s.latest("app").unwrap()).record.key, key(1));
}

#[test]
fn create_if_absent_keeps_the_first_and_force_replaces() {
    let Some(f) = Fixture::new("create_if_absent") else {
        return;
    };
    let s = &f.store;
    let inputs = json!({"x": [1, 2]});
    let first = record(&key(1), "app", &inputs);
    assert_eq!(s.put(&first, &inputs, false).unwrap(), PutOutcome::Written);
    let mut other = first.clone();
    other.image_id = "sha256:other".into();
    assert_eq!(
        s.put(&other, &inputs, false).unwrap(),
        PutOutcome::AlreadyPresent
    );
    assert_eq!(hit(s.get(&key(1)).unwrap()).record.image_id, "sha256:abc");
    assert_eq!(hit(s.latest("app").unwrap()).record.image_id, "sha256:abc");
    assert_eq!(s.put(&other, &inputs, true).unwrap(), PutOutcome::Replaced);
    assert_eq!(hit(s.get(&key(1)).unwrap()).record.image_id, "sha256:other");
    assert_eq!(
        hit(s.latest("app").unwrap()).record.image_id,
        "sha256:other"
    );
}

#[test]
fn damaged_records_are_corrupt_with_a_reason_and_force_repairs_them() {
    let Some(f) = Fixture::new("corrupt") else {
        return;
    };
    let s = &f.store;
    let inputs = json!({"x": 1});
    let good = record(&key(1), "app", &inputs);
    let good_bytes = serde_json::to_vec(&good).unwrap();
    let payload = f.push_blob(&payload_bytes(&inputs), INPUTS_MEDIA_TYPE);
    let record_layer = f.push_blob(&good_bytes, RECORD_MEDIA_TYPE);
    let k = key(1);
    let t = tag(&k);
    // A hand-made manifest in the documented layout is read.
    f.push_manifest(
        &t,
        &f.record_manifest(&k, vec![payload.clone(), record_layer.clone()]),
    );
    assert_eq!(hit(s.get(&k).unwrap()).record, good);

    let cases: Vec<(&str, OciImageManifest, &str)> = vec![
        (
            "payload whose blake3 is not inputs_digest",
            f.record_manifest(
                &k,
                vec![
                    f.push_blob(br#"{"x":2}"#, INPUTS_MEDIA_TYPE),
                    record_layer.clone(),
                ],
            ),
            "digest",
        ),
        (
            "record blob that is not JSON",
            f.record_manifest(
                &k,
                vec![
                    payload.clone(),
                    f.push_blob(b"{\"format\": ", RECORD_MEDIA_TYPE),
                ],
            ),
            "not readable",
        ),
        (
            "record of another format version",
            f.record_manifest(
                &k,
                vec![payload.clone(), {
                    let mut r = good.clone();
                    r.format = "kiln-record-v0".into();
                    f.push_blob(&serde_json::to_vec(&r).unwrap(), RECORD_MEDIA_TYPE)
                }],
            ),
            "format",
        ),
        (
            "record that names another key",
            f.record_manifest(
                &k,
                vec![payload.clone(), {
                    let r = record(&key(9), "app", &inputs);
                    f.push_blob(&serde_json::to_vec(&r).unwrap(), RECORD_MEDIA_TYPE)
                }],
            ),
            "names key",
        ),
        (
            "payload that is not JSON but matches its digest",
            f.record_manifest(
                &k,
                vec![f.push_blob(b"not json", INPUTS_MEDIA_TYPE), {
                    let mut r = good.clone();
                    r.inputs_digest = digest(b"not json");
                    f.push_blob(&serde_json::to_vec(&r).unwrap(), RECORD_MEDIA_TYPE)
                }],
            ),
            "input manifest is not readable",
        ),
        (
            "manifest without the payload layer",
            f.record_manifest(&k, vec![record_layer.clone()]),
            "0 input manifest layers",
        ),
        (
            "manifest without layers",
            f.record_manifest(&k, vec![]),
            "layers",
        ),
        (
            "manifest with two record layers",
            f.record_manifest(
                &k,
                vec![payload.clone(), record_layer.clone(), {
                    let mut r = good.clone();
                    r.node = "elsewhere".into();
                    f.push_blob(&serde_json::to_vec(&r).unwrap(), RECORD_MEDIA_TYPE)
                }],
            ),
            "2 record layers",
        ),
        (
            "manifest of another artifact type",
            OciImageManifest {
                artifact_type: Some("application/vnd.example.other+json".into()),
                ..f.record_manifest(&k, vec![payload.clone(), record_layer.clone()])
            },
            "artifact type",
        ),
        (
            "manifest with layers of other media types",
            f.record_manifest(
                &k,
                vec![
                    OciDescriptor {
                        media_type: "application/json".into(),
                        ..payload.clone()
                    },
                    OciDescriptor {
                        media_type: "application/json".into(),
                        ..record_layer.clone()
                    },
                ],
            ),
            "layers",
        ),
    ];
    for (what, manifest, reason) in cases {
        f.push_manifest(&t, &manifest);
        let r = corrupt(s.get(&k).unwrap());
        assert!(r.contains(reason), "{what}: {r}");
    }
    // A docker image manifest (another media type) under the key's tag.
    let docker = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "digest": f.push_blob(b"{}", "application/json").digest,
            "size": 2
        },
        "layers": []
    });
    let r = f.reference(&t);
    f.raw(async |c| {
        c.push_manifest_raw(
            &r,
            serde_json::to_vec(&docker).unwrap(),
            "application/vnd.docker.distribution.manifest.v2+json"
                .parse()
                .unwrap(),
        )
        .await
    })
    .unwrap();
    let reason = corrupt(s.get(&k).unwrap());
    assert!(reason.contains("media type"), "{reason}");
    // latest() on a manifest that names no key.
    f.push_manifest(
        "latest-app",
        &OciImageManifest {
            annotations: None,
            ..f.record_manifest(&k, vec![payload.clone(), record_layer.clone()])
        },
    );
    let reason = corrupt(s.latest("app").unwrap());
    assert!(reason.contains("does not name a key"), "{reason}");
    // A payload blob that went away (garbage collection, a deleted blob).
    let gone_inputs = json!({"x": "gone"});
    let k2 = key(2);
    s.put(&record(&k2, "app", &gone_inputs), &gone_inputs, false)
        .unwrap();
    assert!(matches!(s.get(&k2).unwrap(), Lookup::Hit(_)));
    f.delete_blob(&f.pull_manifest(&tag(&k2)).layers[0].digest);
    let reason = corrupt(s.get(&k2).unwrap());
    assert!(reason.contains("missing"), "{reason}");
    // Create-if-absent does not overwrite a damaged record; force repairs it.
    assert_eq!(
        s.put(&good, &inputs, false).unwrap(),
        PutOutcome::AlreadyPresent
    );
    assert_eq!(s.put(&good, &inputs, true).unwrap(), PutOutcome::Replaced);
    assert_eq!(hit(s.get(&k).unwrap()).record, good);
    assert_eq!(hit(s.latest("app").unwrap()).record, good);
}

#[test]
fn concurrent_writers_of_one_key_leave_one_consistent_record() {
    let Some(f) = Fixture::new("concurrent") else {
        return;
    };
    let f = Arc::new(f);
    let inputs = json!({"z": [1, 2, 3]});
    let k = key(4);
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let f = f.clone();
            let inputs = inputs.clone();
            let k = k.clone();
            std::thread::spawn(move || {
                let mut r = record(&k, "app", &inputs);
                r.image_id = format!("sha256:{i}");
                // Half share the fixture's store (one I/O thread), half
                // bring their own client.
                let outcome = if i % 2 == 0 {
                    f.store.put(&r, &inputs, false)
                } else {
                    f.another_store().put(&r, &inputs, false)
                };
                outcome.unwrap()
            })
        })
        .collect();
    let outcomes: Vec<PutOutcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(
        outcomes.contains(&PutOutcome::Written)
            && outcomes
                .iter()
                .all(|o| matches!(o, PutOutcome::Written | PutOutcome::AlreadyPresent)),
        "{outcomes:?}"
    );
    let e = hit(f.store.get(&k).unwrap());
    let writers: Vec<String> = (0..8).map(|i| format!("sha256:{i}")).collect();
    assert!(writers.contains(&e.record.image_id), "{:?}", e.record);
    assert_eq!(e.inputs, inputs);
    // Every reader agrees, and latest() is the same record.
    for _ in 0..3 {
        assert_eq!(hit(f.another_store().get(&k).unwrap()).record, e.record);
    }
    assert_eq!(hit(f.store.latest("app").unwrap()).record, e.record);
}

#[test]
fn works_from_spawn_blocking_and_inside_a_runtime() {
    let Some(f) = Fixture::new("spawn_blocking") else {
        return;
    };
    let store: Arc<dyn RecordStore> = Arc::new(f.store);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let inputs = json!({"rt": true});
    let k = key(5);
    let r = record(&k, "app", &inputs);
    let got = rt.block_on(async {
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let store = store.clone();
                let (r, inputs, k) = (r.clone(), inputs.clone(), k.clone());
                tokio::spawn(async move {
                    tokio::task::spawn_blocking(move || {
                        let o = store.put(&r, &inputs, i == 0).unwrap();
                        (o, store.get(&k).unwrap())
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    for (_, lookup) in got {
        assert_eq!(hit(lookup).record, r);
    }
    // Dropping the store inside the runtime is fine too.
    rt.block_on(async move { drop(store) });
}

// ------------------------------------------------------------------ fake servers

/// Answers every request with `status`, the extra `headers` and `body`.
fn fake_server(status: &str, headers: &str, body: &str) -> u16 {
    let response: &'static str = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .leak();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
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
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let body_len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    while buf.len() < end + body_len {
                        match conn.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..end + body_len);
                    if conn.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn fake_store(port: u16) -> OciStore {
    OciStore::new(&format!("oci://127.0.0.1:{port}/kiln/records?timeout=10")).unwrap()
}

fn all_operations_unavailable(s: &OciStore) -> Vec<String> {
    let inputs = json!({});
    vec![
        unavailable(s.get(&key(1))),
        unavailable(s.latest("app")),
        unavailable(s.put(&record(&key(1), "app", &inputs), &inputs, false)),
        unavailable(s.put(&record(&key(1), "app", &inputs), &inputs, true)),
    ]
}

#[test]
fn unauthorized_is_unavailable_and_says_auth() {
    let port = fake_server(
        "401 Unauthorized",
        "WWW-Authenticate: Basic realm=\"kiln\"\r\nContent-Type: application/json\r\n",
        r#"{"errors":[{"code":"UNAUTHORIZED","message":"login"}]}"#,
    );
    for m in all_operations_unavailable(&fake_store(port)) {
        assert!(m.contains("wants credentials") && m.contains("401"), "{m}");
        assert!(
            m.contains(&format!("oci://127.0.0.1:{port}/kiln/records")),
            "{m}"
        );
    }
}

#[test]
fn forbidden_is_unavailable_and_says_auth() {
    for (headers, body) in [
        (
            "Content-Type: application/json\r\n",
            r#"{"errors":[{"code":"DENIED","message":"no"}]}"#,
        ),
        // A proxy's bare 403.
        ("", "Forbidden"),
    ] {
        for m in
            all_operations_unavailable(&fake_store(fake_server("403 Forbidden", headers, body)))
        {
            assert!(m.contains("wants credentials") && m.contains("403"), "{m}");
            assert!(m.contains("docker login"), "{m}");
        }
    }
}

#[test]
fn server_errors_are_unavailable() {
    let port = fake_server("503 Service Unavailable", "", "maintenance");
    for m in all_operations_unavailable(&fake_store(port)) {
        assert!(m.contains("server error (HTTP 503)"), "{m}");
    }
}

#[test]
fn a_closed_port_is_unavailable_quickly() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = OciStore::new(&format!("oci://127.0.0.1:{port}/kiln/records?timeout=3")).unwrap();
    let start = Instant::now();
    for m in all_operations_unavailable(&s) {
        assert!(m.contains("unreachable") && m.contains("refused"), "{m}");
    }
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_silent_server_times_out() {
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for c in listener.incoming() {
            open.push(c);
        }
    });
    let s = OciStore::new(&format!("oci://127.0.0.1:{port}/kiln/records?timeout=1")).unwrap();
    let start = Instant::now();
    let m = unavailable(s.get(&key(1)));
    assert!(m.contains("unreachable") && m.contains("1s"), "{m}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}
