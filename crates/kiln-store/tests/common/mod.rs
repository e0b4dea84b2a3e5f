//! What the store tests that run on every back end share: the back ends
//! on fresh namespaces (a directory; `KILN_REGISTRY`; the `KILN_TEST_S3_*`
//! and `KILN_TEST_WEBDAV*` servers of `scripts/store-servers`), records and
//! keys.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::sync::Arc;

use kiln_store::objects::Objects;
use kiln_store::{
    AwsSettings, DavAuth, DavStore, FORMAT, FsStore, OciStore, Record, RecordStore, S3Store,
    digest, payload_bytes,
};

/// A back end under test: a store on a fresh namespace, the same
/// namespace as raw objects (to damage), another handle on it (another
/// client: another writer), and a handle with read-only credentials.
pub struct Backend {
    pub name: &'static str,
    pub store: Arc<dyn RecordStore>,
    pub raw: Option<Arc<dyn Objects>>,
    pub another: Box<dyn Fn() -> Arc<dyn RecordStore> + Send + Sync>,
    pub reader: Option<Arc<dyn RecordStore>>,
    /// Create-if-absent is atomic (exactly one of racing writers wins).
    pub atomic: bool,
}

pub fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `None` (after saying so) when the back end's environment is missing;
/// a failure under `KILN_E2E=1`.
pub fn required(backend: &str, vars: &[&str], how: &str) -> Option<Vec<String>> {
    let values: Option<Vec<String>> = vars.iter().map(|v| env(v)).collect();
    if values.is_none() {
        let missing: Vec<&str> = vars.iter().copied().filter(|v| env(v).is_none()).collect();
        if env("KILN_E2E").as_deref() == Some("1") {
            panic!(
                "KILN_E2E=1 but {} is not set for the {backend} back end ({how})",
                missing.join(", ")
            );
        }
        eprintln!(
            "{backend} back end skipped: {} is not set ({how})",
            missing.join(", ")
        );
    }
    values
}

pub fn pair(v: &str) -> (String, String) {
    let (a, b) = v.split_once(':').expect("NAME:SECRET");
    (a.to_string(), b.to_string())
}

pub fn fs_backend() -> Backend {
    let dir = std::env::temp_dir().join(unique("kiln-backends"));
    let store = Arc::new(FsStore::new(&dir));
    Backend {
        name: "fs",
        store: store.clone(),
        raw: Some(store),
        another: Box::new(move || Arc::new(FsStore::new(&dir))),
        reader: None,
        atomic: true,
    }
}

pub fn oci_backend() -> Option<Backend> {
    let [registry] = required("oci", &["KILN_REGISTRY"], "scripts/dev-env up sets it")
        .map(|v| <[String; 1]>::try_from(v).unwrap())?;
    let location = format!("oci://{registry}/kiln-test/{}", unique("matrix"));
    let open = move || -> Arc<dyn RecordStore> { Arc::new(OciStore::new(&location).unwrap()) };
    Some(Backend {
        name: "oci",
        store: open(),
        raw: None,
        another: Box::new(open),
        reader: None,
        // Registries have no conditional tag PUT (docs/store-oci.md).
        atomic: false,
    })
}

pub fn s3_backend() -> Option<Backend> {
    let [endpoint, bucket, writer, reader] = required(
        "s3",
        &[
            "KILN_TEST_S3_ENDPOINT",
            "KILN_TEST_S3_BUCKET",
            "KILN_TEST_S3_WRITER",
            "KILN_TEST_S3_READER",
        ],
        "scripts/store-servers up sets them",
    )
    .map(|v| <[String; 4]>::try_from(v).unwrap())?;
    // Characters a path may hold unencoded but SigV4 encodes: the
    // signature must cover the path the server sees.
    let location = format!(
        "s3://{bucket}/{}/a+b=c@d:e!f$g&h,i;j*k(l)'m~n",
        unique("matrix")
    );
    let settings = move |who: &str| {
        let (k, s) = pair(who);
        AwsSettings {
            endpoint: Some(endpoint.clone()),
            region: "us-east-1".into(),
            key: Some((k, s, None)),
        }
    };
    let (w, r) = (settings(&writer), settings(&reader));
    let loc = location.clone();
    let store = Arc::new(S3Store::with_settings(&location, w.clone()).unwrap());
    Some(Backend {
        name: "s3",
        store: store.clone(),
        raw: Some(store),
        another: Box::new(move || Arc::new(S3Store::with_settings(&loc, w.clone()).unwrap())),
        reader: Some(Arc::new(S3Store::with_settings(&location, r).unwrap())),
        atomic: true,
    })
}

pub fn dav_backend() -> Option<Backend> {
    let [base, writer, reader] = required(
        "webdav",
        &[
            "KILN_TEST_WEBDAV",
            "KILN_TEST_WEBDAV_WRITER",
            "KILN_TEST_WEBDAV_READER",
        ],
        "scripts/store-servers up sets them",
    )
    .map(|v| <[String; 3]>::try_from(v).unwrap())?;
    let location = format!("{}/{}", base.trim_end_matches('/'), unique("matrix"));
    let auth = |who: &str| {
        let (u, p) = pair(who);
        DavAuth::Basic(u, p)
    };
    let (w, r) = (auth(&writer), auth(&reader));
    let loc = location.clone();
    let store = Arc::new(DavStore::with_auth(&location, w.clone()).unwrap());
    Some(Backend {
        name: "webdav",
        store: store.clone(),
        raw: Some(store),
        another: Box::new(move || Arc::new(DavStore::with_auth(&loc, w.clone()).unwrap())),
        reader: Some(Arc::new(DavStore::with_auth(&location, r).unwrap())),
        atomic: true,
    })
}

pub fn record(key: &str, target: &str, image: &str, inputs: &serde_json::Value) -> Record {
    Record {
        format: FORMAT.into(),
        key: key.into(),
        target: target.into(),
        image_id: image.into(),
        image_ref: Some(
            format!("kiln.local/{target}:{}", &image[7..])
                .chars()
                .take(40)
                .collect(),
        ),
        digest: None,
        tags: vec![format!("r/{target}:1")],
        platform: Some("linux/amd64".into()),
        built_at: "2026-12-02T00:00:00Z".into(),
        node: "n".into(),
        duration_s: 1.25,
        steps_total: 3,
        steps_cached: 1,
        inputs_digest: digest(&payload_bytes(inputs)),
        check: None,
    }
}

pub fn key(n: u32) -> String {
    format!("k1:{:064x}", u128::from(n) * 0x9e37_79b9_7f4a_7c15)
}

/// The network back ends that are there, each with where its server
/// listens (`host:port`), for tests that put something between kiln and
/// the server (a fault-injecting proxy) or kill a writer.
pub fn remotes() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some([r]) = required("oci", &["KILN_REGISTRY"], "scripts/dev-env up sets it")
        .map(|v| <[String; 1]>::try_from(v).unwrap())
    {
        out.push(("oci", r));
    }
    if let Some([e]) = required(
        "s3",
        &["KILN_TEST_S3_ENDPOINT"],
        "scripts/store-servers up sets it",
    )
    .map(|v| <[String; 1]>::try_from(v).unwrap())
    {
        out.push(("s3", e.trim_start_matches("http://").to_string()));
    }
    if let Some([d]) = required(
        "webdav",
        &["KILN_TEST_WEBDAV"],
        "scripts/store-servers up sets it",
    )
    .map(|v| <[String; 1]>::try_from(v).unwrap())
    {
        let rest = d.trim_start_matches("webdav://");
        out.push(("webdav", rest.split('/').next().unwrap().to_string()));
    }
    out
}

/// The writer's store of back end `name` at `host:port` (the server or a
/// proxy in front of it), namespace `ns`, location options `query` (e.g.
/// `?timeout=2`).
pub fn remote(name: &str, hostport: &str, ns: &str, query: &str) -> Arc<dyn RecordStore> {
    match name {
        "oci" => {
            Arc::new(OciStore::new(&format!("oci://{hostport}/kiln-test/{ns}{query}")).unwrap())
        }
        "s3" => {
            let (k, s) = pair(&env("KILN_TEST_S3_WRITER").unwrap());
            let bucket = env("KILN_TEST_S3_BUCKET").unwrap();
            Arc::new(
                S3Store::with_settings(
                    &format!("s3://{bucket}/{ns}{query}"),
                    AwsSettings {
                        endpoint: Some(format!("http://{hostport}")),
                        region: "us-east-1".into(),
                        key: Some((k, s, None)),
                    },
                )
                .unwrap(),
            )
        }
        "webdav" => {
            let (u, p) = pair(&env("KILN_TEST_WEBDAV_WRITER").unwrap());
            let base = env("KILN_TEST_WEBDAV").unwrap();
            let path = base
                .trim_start_matches("webdav://")
                .split_once('/')
                .map_or("", |(_, p)| p)
                .trim_end_matches('/');
            Arc::new(
                DavStore::with_auth(
                    &format!("webdav://{hostport}/{path}/{ns}{query}"),
                    DavAuth::Basic(u, p),
                )
                .unwrap(),
            )
        }
        "fs" => Arc::new(FsStore::new(hostport)),
        other => panic!("no back end {other}"),
    }
}
