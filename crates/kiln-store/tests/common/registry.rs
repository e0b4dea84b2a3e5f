//! The OCI store's records damaged the way a registry can damage them,
//! through its own API, for the fault matrix (`tests/backends.rs`): a
//! registry has no raw objects to overwrite, and a blob's bytes cannot
//! change under its digest through the distribution API.
//!
//! - [`How::Stored`]: the different bytes are pushed as a blob of their
//!   own, and the manifest under the key's tag is PUT again with its layer
//!   naming that blob: the manifest replaced by a push of different bytes
//!   under the same tag. Every digest matches; only the store's own checks
//!   (the record's seal, format and key, the payload's blake3) can tell.
//! - [`How::Served`]: the manifest as written, and `scripts/registry-faults`
//!   (`serve-blob`), which every store of the back end goes through,
//!   answers the different bytes for the blob's digest: a registry serving
//!   a damaged (cut short, changed) copy as if it were intact.
//! - The latest pointer is the `kiln.record.key` annotation of the manifest
//!   under the target's latest tag: that manifest is PUT again with the
//!   pointer's bytes (as UTF-8, lossy) in the annotation.
//!
//! Tags follow docs/store-oci.md: `k1:<hex>` is tagged `k1-<hex>`, a
//! target `t` `latest-t` (the matrix uses no other keys or targets).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kiln_store::{INPUTS_MEDIA_TYPE, RECORD_MEDIA_TYPE, Record};
use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::{Damage, How, unique};

/// `scripts/registry-faults` in front of a registry, stopped (and its
/// directory removed) when dropped.
pub struct FaultProxy {
    child: Child,
    /// `127.0.0.1:<port>`, where it listens.
    pub addr: String,
    /// Its port file, request log (`log`; `INJECTED` marks what it
    /// answered itself) and messages (`stderr`).
    pub dir: PathBuf,
}

impl FaultProxy {
    /// Starts the proxy in front of `upstream` (`host:port`) with `faults`
    /// (`--fault` specs), keeping its files in `dir` (made here).
    pub fn start(upstream: &str, dir: &Path, faults: &[String]) -> FaultProxy {
        std::fs::create_dir_all(dir).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/registry-faults");
        let port_file = dir.join("port");
        let mut cmd = Command::new(&script);
        cmd.args(["--upstream", upstream, "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(dir.join("log"));
        for f in faults {
            cmd.args(["--fault", f]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        let t0 = Instant::now();
        let port: u16 = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            let stderr = || std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
            if let Ok(Some(status)) = child.try_wait() {
                panic!("scripts/registry-faults exited ({status}): {}", stderr());
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "scripts/registry-faults did not listen within 20 s: {}",
                    stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        FaultProxy {
            child,
            addr: format!("127.0.0.1:{port}"),
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Damage to the records of one repository of a registry, through its own
/// API ([`How::Stored`]) and a `serve-blob` proxy in front of it
/// ([`How::Served`]).
pub struct RegistryDamage {
    registry: String,
    repository: String,
    client: Client,
    rt: tokio::runtime::Runtime,
    /// What `serve-blob` serves: one file per damaged digest.
    served: PathBuf,
    /// The manifest under each key's tag as it was last read, that is as
    /// the store wrote it: what damage starts from and `Served` restores.
    written: Mutex<HashMap<String, Vec<u8>>>,
    proxy: FaultProxy,
}

impl RegistryDamage {
    /// Starts the proxy in front of `registry` for `repository`.
    pub fn start(registry: &str, repository: &str) -> RegistryDamage {
        let dir = std::env::temp_dir().join(unique("kiln-registry-faults"));
        let served = dir.join("served");
        std::fs::create_dir_all(&served).unwrap();
        let proxy = FaultProxy::start(
            registry,
            &dir,
            &[format!("serve-blob={}", served.display())],
        );
        // The crypto provider oci-client's rustls needs (as the store does).
        kiln_store::registry_io::install_tls_provider();
        RegistryDamage {
            registry: registry.to_string(),
            repository: repository.to_string(),
            client: Client::new(ClientConfig {
                protocol: ClientProtocol::Http,
                use_monolithic_push: true,
                ..ClientConfig::default()
            }),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            served,
            written: Mutex::default(),
            proxy,
        }
    }

    /// `host:port` of the proxy the stores are to reach the registry by.
    pub fn proxy(&self) -> &str {
        &self.proxy.addr
    }

    fn reference(&self, tag: &str) -> Reference {
        Reference::with_tag(
            self.registry.clone(),
            self.repository.clone(),
            tag.to_string(),
        )
    }

    fn key_tag(key: &str) -> String {
        let hex = key.strip_prefix("k1:").expect("a k1: key");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        format!("k1-{hex}")
    }

    fn latest_tag(target: &str) -> String {
        assert!(
            target
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "{target}"
        );
        format!("latest-{target}")
    }

    /// The manifest under `tag`, read from the registry itself.
    fn pull_manifest(&self, tag: &str) -> Vec<u8> {
        let r = self.reference(tag);
        self.rt
            .block_on(self.client.pull_manifest_raw(
                &r,
                &RegistryAuth::Anonymous,
                &[OCI_IMAGE_MEDIA_TYPE],
            ))
            .unwrap_or_else(|e| panic!("reading manifest {tag}: {e}"))
            .0
            .to_vec()
    }

    fn put_manifest(&self, tag: &str, bytes: &[u8]) {
        let r = self.reference(tag);
        self.rt
            .block_on(self.client.push_manifest_raw(
                &r,
                bytes.to_vec(),
                OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
            ))
            .unwrap_or_else(|e| panic!("writing manifest {tag}: {e}"));
    }

    /// Pushes `bytes` as a blob: its digest.
    fn push_blob(&self, bytes: &[u8]) -> String {
        let layer = ImageLayer::new(bytes.to_vec(), String::new(), None);
        let digest = layer.sha256_digest();
        if bytes.is_empty() {
            // oci-client pushes no empty blob; a registry takes one.
            self.push_empty_blob(&digest);
            return digest;
        }
        let r = self.reference("unused");
        self.rt
            .block_on(self.client.push_blob(&r, layer.data, &digest))
            .unwrap_or_else(|e| panic!("pushing blob {digest}: {e}"));
        digest
    }

    /// The empty blob, pushed as the distribution API has it: an upload
    /// session opened (POST), then closed with no data and the digest (PUT).
    fn push_empty_blob(&self, digest: &str) {
        let base = format!("http://{}", self.registry);
        let http = reqwest::Client::new();
        let done = self.rt.block_on(async {
            let opened = http
                .post(format!("{base}/v2/{}/blobs/uploads/", self.repository))
                .send()
                .await?
                .error_for_status()?;
            let location = opened.headers()["location"].to_str().unwrap().to_string();
            let location = if location.starts_with('/') {
                format!("{base}{location}")
            } else {
                location
            };
            let sep = if location.contains('?') { '&' } else { '?' };
            http.put(format!("{location}{sep}digest={digest}"))
                .header("content-length", "0")
                .send()
                .await?
                .error_for_status()
        });
        if let Err(e) = done {
            panic!("pushing the empty blob: {e}")
        }
    }

    /// The `(digest, size)` of the one layer of `media_type`.
    fn layer(manifest: &[u8], media_type: &str) -> (String, i64) {
        let m: serde_json::Value = serde_json::from_slice(manifest).unwrap();
        let found: Vec<&serde_json::Value> = m["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["mediaType"] == media_type)
            .collect();
        let [l] = found.as_slice() else {
            panic!("not one {media_type} layer in {m}")
        };
        (
            l["digest"].as_str().unwrap().to_string(),
            l["size"].as_i64().unwrap(),
        )
    }

    /// The manifest with its layer of `media_type` naming `digest`.
    fn repointed(manifest: &[u8], media_type: &str, digest: &str, size: usize) -> Vec<u8> {
        let mut m: serde_json::Value = serde_json::from_slice(manifest).unwrap();
        for l in m["layers"].as_array_mut().unwrap() {
            if l["mediaType"] == media_type {
                l["digest"] = digest.into();
                l["size"] = size.into();
            }
        }
        serde_json::to_vec(&m).unwrap()
    }

    fn read_blob(&self, manifest: &[u8], media_type: &str) -> Vec<u8> {
        let (digest, size) = Self::layer(manifest, media_type);
        let desc = OciDescriptor {
            media_type: media_type.to_string(),
            digest,
            size,
            urls: None,
            annotations: None,
            artifact_type: None,
        };
        let r = self.reference("unused");
        let mut out = Vec::new();
        self.rt
            .block_on(self.client.pull_blob(&r, &desc, &mut out))
            .unwrap_or_else(|e| panic!("reading blob {}: {e}", desc.digest));
        out
    }

    /// Nothing is served damaged any more.
    fn serve_nothing(&self) {
        for f in std::fs::read_dir(&self.served).unwrap().flatten() {
            std::fs::remove_file(f.path()).unwrap();
        }
    }

    /// `serve-blob` answers `bytes` for `digest` (written beside, renamed).
    fn serve(&self, digest: &str, bytes: &[u8]) {
        let tmp = self.served.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, self.served.join(digest)).unwrap();
    }

    /// Reads the manifest under `tag` as written, remembers it, and reads
    /// its layer of `media_type`.
    fn read(&self, tag: &str, media_type: &str) -> Vec<u8> {
        let manifest = self.pull_manifest(tag);
        let bytes = self.read_blob(&manifest, media_type);
        self.written
            .lock()
            .unwrap()
            .insert(tag.to_string(), manifest);
        bytes
    }

    /// Makes the layer of `media_type` under `tag` `bytes`, `how`.
    fn becomes(&self, tag: &str, media_type: &str, bytes: &[u8], how: How) {
        self.serve_nothing();
        let written = self.written.lock().unwrap().get(tag).cloned();
        let written = written.unwrap_or_else(|| panic!("{tag} is damaged before it was read"));
        match how {
            How::Stored => {
                let digest = self.push_blob(bytes);
                let manifest = Self::repointed(&written, media_type, &digest, bytes.len());
                self.put_manifest(tag, &manifest);
            }
            How::Served => {
                self.put_manifest(tag, &written);
                self.serve(&Self::layer(&written, media_type).0, bytes);
            }
        }
    }
}

impl Damage for RegistryDamage {
    fn record(&self, key: &str) -> Vec<u8> {
        self.read(&Self::key_tag(key), RECORD_MEDIA_TYPE)
    }

    fn record_becomes(&self, key: &str, bytes: &[u8], how: How) {
        self.becomes(&Self::key_tag(key), RECORD_MEDIA_TYPE, bytes, how);
    }

    fn payload(&self, r: &Record) -> Vec<u8> {
        self.read(&Self::key_tag(&r.key), INPUTS_MEDIA_TYPE)
    }

    fn payload_becomes(&self, r: &Record, bytes: &[u8], how: How) {
        self.becomes(&Self::key_tag(&r.key), INPUTS_MEDIA_TYPE, bytes, how);
    }

    fn pointer_becomes(&self, target: &str, bytes: &[u8]) {
        self.serve_nothing();
        let tag = Self::latest_tag(target);
        let mut m: serde_json::Value = serde_json::from_slice(&self.pull_manifest(&tag)).unwrap();
        m["annotations"]["kiln.record.key"] = String::from_utf8_lossy(bytes).into();
        self.put_manifest(&tag, &serde_json::to_vec(&m).unwrap());
    }

    fn by_digest(&self) -> bool {
        true
    }
}
