//! What the store tests that run on every back end share: the back ends
//! on fresh namespaces (a directory; `KILN_REGISTRY`; the `KILN_TEST_S3_*`
//! and `KILN_TEST_WEBDAV*` servers of `scripts/store-servers`), how the
//! fault matrix damages what each holds ([`Damage`]), records and keys.

#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod registry;

use std::sync::Arc;

use kiln_store::objects::{self, Objects, Read};
use kiln_store::{
    AwsSettings, DavAuth, DavStore, FORMAT, FsStore, OciStore, Record, RecordStore, S3Store,
    digest, payload_bytes,
};

/// A back end under test: a store on a fresh namespace, the same
/// namespace as raw objects (to damage claims), a way to damage its
/// records, another handle on it (another client: another writer), and a
/// handle with read-only credentials.
pub struct Backend {
    pub name: &'static str,
    pub store: Arc<dyn RecordStore>,
    pub raw: Option<Arc<dyn Objects>>,
    /// How the fault matrix damages records, payloads and latest pointers:
    /// the raw objects ([`ObjectDamage`]), or a registry's own API and a
    /// proxy in front of it ([`registry::RegistryDamage`]).
    pub damage: Option<Arc<dyn Damage>>,
    pub another: Box<dyn Fn() -> Arc<dyn RecordStore> + Send + Sync>,
    pub reader: Option<Arc<dyn RecordStore>>,
    /// Create-if-absent is atomic (exactly one of racing writers wins).
    pub atomic: bool,
    /// A put without `force` over a damaged record replaces it. The OCI
    /// store's create-if-absent cannot tell damage from another writer's
    /// record without reading every blob, so it leaves a damaged record to
    /// the rebuild's forced put (docs/store-oci.md, Protocol 5).
    pub put_repairs: bool,
}

/// How a damage case puts its bytes where a record or payload was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Stored in its place. Objects: the object replaced. A registry:
    /// the bytes pushed as a blob of their own and the manifest under the
    /// key's tag PUT again with the layer naming it (a manifest replaced
    /// by a push of different bytes under the same tag: what any client
    /// with push access can do). Every digest then matches, so only the
    /// store's own checks (seal, format, key, the payload's blake3) can
    /// tell.
    Stored,
    /// Served in its place. Objects: the object replaced. A registry: the
    /// manifest as written, and the registry answering these bytes for the
    /// blob's digest, as a registry whose stored copy is damaged (cut
    /// short, changed) serves it as if intact (`scripts/registry-faults`'
    /// `serve-blob`). The blob then does not match its digest.
    Served,
}

/// Reaches under the protocol of a back end to damage what it holds, the
/// way its kind of storage can be damaged.
pub trait Damage: Send + Sync {
    /// Key's record as it is stored (read, not damaged).
    fn record(&self, key: &str) -> Vec<u8>;
    /// Makes key's record `bytes`, undoing any earlier damage to it.
    fn record_becomes(&self, key: &str, bytes: &[u8], how: How);
    /// The payload of record `r` as it is stored.
    fn payload(&self, r: &Record) -> Vec<u8>;
    /// Makes the payload of record `r` `bytes`, undoing any earlier damage.
    fn payload_becomes(&self, r: &Record, bytes: &[u8], how: How);
    /// Makes `target`'s latest-record pointer hold `bytes`.
    fn pointer_becomes(&self, target: &str, bytes: &[u8]);
    /// Whether blobs are named by their digest and a read checks it: then
    /// [`How::Served`] damage is a miss *because* of the digest, and
    /// another whole record served under a record's digest is damage.
    fn by_digest(&self) -> bool {
        false
    }
}

/// Damage to a store of named objects (filesystem, S3, WebDAV): the object
/// replaced, however the case puts it.
pub struct ObjectDamage(pub Arc<dyn Objects>);

impl ObjectDamage {
    fn read(&self, name: &str) -> Vec<u8> {
        match self.0.read(name) {
            Ok(Read::Found(b)) => b,
            other => panic!("{name} in {} is not readable: {other:?}", self.0.shown()),
        }
    }

    fn replace(&self, name: &str, bytes: &[u8]) {
        if let Err(e) = self.0.replace(name, bytes) {
            panic!("replacing {name} in {}: {e}", self.0.shown())
        }
    }
}

impl Damage for ObjectDamage {
    fn record(&self, key: &str) -> Vec<u8> {
        self.read(&objects::record_name(key))
    }

    fn record_becomes(&self, key: &str, bytes: &[u8], _: How) {
        self.replace(&objects::record_name(key), bytes);
    }

    fn payload(&self, r: &Record) -> Vec<u8> {
        self.read(&objects::blob_name(&r.inputs_digest))
    }

    fn payload_becomes(&self, r: &Record, bytes: &[u8], _: How) {
        self.replace(&objects::blob_name(&r.inputs_digest), bytes);
    }

    fn pointer_becomes(&self, target: &str, bytes: &[u8]) {
        self.replace(&objects::target_name(target), bytes);
    }
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
        raw: Some(store.clone()),
        damage: Some(Arc::new(ObjectDamage(store))),
        another: Box::new(move || Arc::new(FsStore::new(&dir))),
        reader: None,
        atomic: true,
        put_repairs: true,
    }
}

/// The OCI back end: a repository of `KILN_REGISTRY`, which the stores
/// reach through `scripts/registry-faults` (its `serve-blob` fault serves
/// damaged blobs when a case asks for it, and forwards everything else);
/// records are damaged through the registry's own API
/// ([`registry::RegistryDamage`]).
pub fn oci_backend() -> Option<Backend> {
    let [registry] = required("oci", &["KILN_REGISTRY"], "scripts/dev-env up sets it")
        .map(|v| <[String; 1]>::try_from(v).unwrap())?;
    let repository = format!("kiln-test/{}", unique("matrix"));
    let damage = registry::RegistryDamage::start(&registry, &repository);
    let location = format!("oci://{}/{repository}", damage.proxy());
    let open = move || -> Arc<dyn RecordStore> { Arc::new(OciStore::new(&location).unwrap()) };
    Some(Backend {
        name: "oci",
        store: open(),
        raw: None,
        damage: Some(Arc::new(damage)),
        another: Box::new(open),
        reader: None,
        // Registries have no conditional tag PUT (docs/store-oci.md).
        atomic: false,
        put_repairs: false,
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
        raw: Some(store.clone()),
        damage: Some(Arc::new(ObjectDamage(store))),
        another: Box::new(move || Arc::new(S3Store::with_settings(&loc, w.clone()).unwrap())),
        reader: Some(Arc::new(S3Store::with_settings(&location, r).unwrap())),
        atomic: true,
        put_repairs: true,
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
        raw: Some(store.clone()),
        damage: Some(Arc::new(ObjectDamage(store))),
        another: Box::new(move || Arc::new(DavStore::with_auth(&loc, w.clone()).unwrap())),
        reader: Some(Arc::new(DavStore::with_auth(&location, r).unwrap())),
        atomic: true,
        put_repairs: true,
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
        signature: None,
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
