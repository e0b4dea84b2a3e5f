//! Image identity: what kiln records and compares as "the same image".
//!
//! An engine's image id is not stable across engines and image stores: on
//! the classic store it is the config digest, on the containerd image
//! store the manifest digest, and a registry pull on either gives yet
//! other ids for the same content. kiln's identity is what a dependent
//! consumes of an image — its filesystem and its runtime configuration —
//! and nothing else:
//!
//! `sha256:` of the canonical JSON of `os`, `architecture`, `variant`, the
//! uncompressed layer digests (`rootfs.diff_ids`) in order, and the
//! runtime fields of the config (`User`, `ExposedPorts`, `Env`,
//! `Entrypoint`, `Cmd`, `Volumes`, `WorkingDir`, `Labels`, `StopSignal`,
//! `Shell`, `OnBuild`, `Healthcheck`), with empty values dropped.
//!
//! Creation times and history are left out: they change on every rebuild
//! and no dependent consumes them, so an upstream rebuilt into the same
//! layers and configuration is the same image (early cutoff). The same
//! image has the same identity whether it is read from an engine's image
//! inspect (either store, any version) or from its config blob in a
//! registry.
//!
//! Must never: ask an engine or a registry anything (callers pass what
//! they read).

use serde_json::{Map, Value};

/// The config fields that shape a container run from the image.
const RUNTIME_FIELDS: [&str; 12] = [
    "User",
    "ExposedPorts",
    "Env",
    "Entrypoint",
    "Cmd",
    "Volumes",
    "WorkingDir",
    "Labels",
    "StopSignal",
    "Shell",
    "OnBuild",
    "Healthcheck",
];

/// Whether a JSON value carries nothing (`null`, `""`, `[]`, `{}`).
fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The identity of an image from its parts. `config` is the image's
/// runtime configuration object (the `Config` of an engine's inspect, or
/// the `config` of an OCI/Docker config blob); unknown fields are ignored.
pub fn identity(
    os: &str,
    architecture: &str,
    variant: Option<&str>,
    config: &Value,
    diff_ids: &[String],
) -> String {
    let mut cfg = Map::new();
    if let Value::Object(o) = config {
        for f in RUNTIME_FIELDS {
            if let Some(v) = o.get(f).filter(|v| !empty(v)) {
                cfg.insert(f.to_string(), v.clone());
            }
        }
    }
    let mut doc = Map::new();
    doc.insert("architecture".into(), Value::from(architecture));
    doc.insert("config".into(), canonical(&Value::Object(cfg)));
    doc.insert("diff_ids".into(), Value::from(diff_ids.to_vec()));
    doc.insert("os".into(), Value::from(os));
    if let Some(v) = variant.filter(|v| !v.is_empty()) {
        doc.insert("variant".into(), Value::from(v));
    }
    let text = canonical(&Value::Object(doc)).to_string();
    format!("sha256:{}", sha256_hex(text.as_bytes()))
}

/// The identity of a multi-platform image from the identities of its
/// platforms (each already names its os, architecture and variant): the
/// SHA-256 of their sorted list, so the order of an index's entries, its
/// attestations and the manifests' encoding never change it.
pub fn composite(platform_ids: &[String]) -> String {
    let mut ids = platform_ids.to_vec();
    ids.sort();
    ids.dedup();
    let text = Value::from(ids).to_string();
    format!(
        "sha256:{}",
        sha256_hex(format!("multi-platform:{text}").as_bytes())
    )
}

/// The identity of an image from its config blob (a registry's, or an
/// OCI layout's): `os`, `architecture`, `variant`, `config`,
/// `rootfs.diff_ids`. `None` when it is not an image config.
pub fn from_config_blob(blob: &Value) -> Option<String> {
    let os = blob.get("os")?.as_str()?;
    let arch = blob.get("architecture")?.as_str()?;
    let variant = blob.get("variant").and_then(Value::as_str);
    let diff_ids: Vec<String> = blob
        .get("rootfs")?
        .get("diff_ids")?
        .as_array()?
        .iter()
        .map(|d| d.as_str().map(String::from))
        .collect::<Option<_>>()?;
    let config = blob.get("config").cloned().unwrap_or(Value::Null);
    Some(identity(os, arch, variant, &config, &diff_ids))
}

/// The identity of an image from an engine's inspect.
pub fn from_inspect(i: &bollard::models::ImageInspect) -> Option<String> {
    let diff_ids = i.root_fs.as_ref()?.layers.clone().unwrap_or_default();
    let config = i
        .config
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null);
    Some(identity(
        i.os.as_deref().unwrap_or("linux"),
        i.architecture.as_deref().unwrap_or("amd64"),
        i.variant.as_deref(),
        &config,
        &diff_ids,
    ))
}

/// Object keys sorted at every level (serde_json keeps insertion order in
/// this workspace), so equal content gives equal text.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let mut m = Map::new();
            for k in keys {
                m.insert(k.clone(), canonical(&o[k]));
            }
            Value::Object(m)
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// SHA-256, as the OCI world names content.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids() -> Vec<String> {
        vec!["sha256:aaa".into(), "sha256:bbb".into()]
    }

    #[test]
    fn an_engines_inspect_and_the_registry_config_blob_agree() {
        // What a classic-store engine reports (Docker's field set, with
        // fields an image never sets) ...
        let inspect_config = json!({
            "Hostname": "", "Domainname": "", "User": "", "AttachStdin": false,
            "Tty": false, "Env": ["PATH=/bin"], "Cmd": ["/bin/sh"], "Image": "",
            "Volumes": null, "WorkingDir": "/w", "Entrypoint": null, "OnBuild": null,
            "Labels": {"b": "2", "a": "1"}
        });
        // ... and the config blob of the same image in a registry.
        let blob = json!({
            "architecture": "amd64", "os": "linux", "created": "2026-01-01T00:00:00Z",
            "history": [{"created_by": "RUN x"}],
            "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"], "WorkingDir": "/w",
                       "Labels": {"a": "1", "b": "2"}},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:aaa", "sha256:bbb"]}
        });
        let a = identity("linux", "amd64", None, &inspect_config, &ids());
        assert_eq!(Some(a.clone()), from_config_blob(&blob));
        assert!(a.starts_with("sha256:") && a.len() == 71, "{a}");
    }

    #[test]
    fn a_multi_platform_identity_is_its_platforms_in_any_order() {
        let amd = identity("linux", "amd64", None, &json!({}), &ids());
        let arm = identity("linux", "arm64", Some("v8"), &json!({}), &ids());
        let both = composite(&[amd.clone(), arm.clone()]);
        assert_eq!(both, composite(&[arm.clone(), amd.clone()]));
        assert!(both.starts_with("sha256:") && both.len() == 71, "{both}");
        // Neither platform alone, and a changed platform changes it.
        assert_ne!(both, amd);
        assert_ne!(both, composite(std::slice::from_ref(&amd)));
        let arm2 = identity("linux", "arm64", Some("v8"), &json!({"User": "1"}), &ids());
        assert_ne!(both, composite(&[amd, arm2]));
    }

    #[test]
    fn what_a_dependent_consumes_changes_the_identity_and_nothing_else_does() {
        let base = json!({"Env": ["A=1"], "Cmd": ["sh"]});
        let id = identity("linux", "amd64", None, &base, &ids());
        // Layers, their order, runtime config, platform: all count.
        let mut layers = ids();
        layers.reverse();
        assert_ne!(id, identity("linux", "amd64", None, &base, &layers));
        assert_ne!(id, identity("linux", "amd64", None, &base, &ids()[..1]));
        assert_ne!(
            id,
            identity(
                "linux",
                "amd64",
                None,
                &json!({"Env": ["A=2"], "Cmd": ["sh"]}),
                &ids()
            )
        );
        assert_ne!(
            id,
            identity(
                "linux",
                "amd64",
                None,
                &json!({"Env": ["A=1"], "Cmd": ["sh"], "User": "1000"}),
                &ids()
            )
        );
        assert_ne!(id, identity("linux", "arm64", None, &base, &ids()));
        assert_ne!(id, identity("linux", "arm64", Some("v8"), &base, &ids()));
        // Empty values, unknown fields and key order do not.
        assert_eq!(
            id,
            identity(
                "linux",
                "amd64",
                Some(""),
                &json!({"Cmd": ["sh"], "Env": ["A=1"], "Volumes": {}, "Entrypoint": [],
                        "Hostname": "x", "Image": "sha256:parent"}),
                &ids()
            )
        );
    }

    #[test]
    fn a_blob_that_is_not_an_image_config_has_no_identity() {
        assert_eq!(from_config_blob(&json!({"mediaType": "x"})), None);
        assert_eq!(
            from_config_blob(&json!({"os": "linux", "architecture": "amd64"})),
            None
        );
    }
}
