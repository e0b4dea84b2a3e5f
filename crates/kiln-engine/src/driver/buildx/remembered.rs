//! What kiln knows of a buildx builder without starting buildx, so that a
//! run with nothing to build starts no process: the builder's definition
//! in buildx's own instance store (`$DOCKER_CONFIG/buildx/instances/NAME`:
//! driver, nodes, endpoints, the platforms given at `buildx create
//! --platform`), and what `docker buildx inspect` said of it last (its
//! native platforms), kept in kiln's cache
//! (`$XDG_CACHE_HOME/kiln/builders.json`, else `~/.cache/kiln/`) for as
//! long as that definition is byte for byte the same, a day at most.
//!
//! What is remembered is confirmed by `docker buildx inspect` before the
//! first build on the builder (`BuildxDriver`); a builder whose native
//! platform changed under the same definition is then an error that says
//! so, and the cache is corrected.
//!
//! Must never: write into the docker CLI's configuration, or fail a run
//! because the cache cannot be read or written (it is then not used).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::discover::Inspected;

/// How long an inspected builder is remembered without being asked again.
const KEEP_FOR: Duration = Duration::from_secs(24 * 3600);

/// The docker CLI's configuration directory: `$DOCKER_CONFIG`, else
/// `~/.docker`.
pub(super) fn docker_config() -> Option<PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
}

/// A builder as buildx's instance store defines it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Defined {
    /// What the definition says (driver, first endpoint, node count, the
    /// platforms given at creation); no status or BuildKit version.
    pub inspected: Inspected,
    /// The checksum of the definition's file: what is remembered of the
    /// builder holds while it is unchanged.
    pub sha: String,
}

/// The builder `name` from buildx's instance store, when it is there and
/// readable (a docker context is not: it is no instance).
pub(super) fn defined(name: &str) -> Option<Defined> {
    let bytes = std::fs::read(docker_config()?.join("buildx").join("instances").join(name)).ok()?;
    parse_instance(name, &bytes)
}

/// The platforms kiln knows builder `name` builds natively without asking
/// it: those given at `docker buildx create --platform` (buildx's instance
/// store), else the first (native) platform `docker buildx inspect` listed
/// when kiln last asked, while the definition is unchanged. The rest of an
/// inspected list may be emulated (QEMU's binfmt handlers add theirs), so
/// it is not taken as native. Empty when neither is known (a docker
/// context, or a builder never inspected).
pub fn native_platforms(name: &str) -> Vec<String> {
    let Some(d) = defined(name) else {
        return Vec::new();
    };
    if !d.inspected.platforms.is_empty() {
        return d.inspected.platforms;
    }
    recall(name, &d.sha)
        .and_then(|(platforms, _)| platforms.into_iter().next())
        .into_iter()
        .collect()
}

/// Whether builder `name` can push an image by digest, which building a
/// multi-platform target as platform units needs: a builder of buildx's
/// instance store whose driver is not `docker` (buildx's docker driver has
/// no push-by-digest). A docker context, or a builder kiln cannot read,
/// is taken as one that cannot.
pub fn pushes_by_digest(name: &str) -> bool {
    defined(name).is_some_and(|d| !d.inspected.keeps_images())
}

fn parse_instance(name: &str, bytes: &[u8]) -> Option<Defined> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if v.get("Name")?.as_str()? != name {
        return None;
    }
    let driver = v.get("Driver")?.as_str()?.to_string();
    let nodes = v.get("Nodes")?.as_array()?;
    let first = nodes.first()?;
    let platforms = first
        .get("Platforms")
        .and_then(|p| p.as_array())
        .map(|ps| ps.iter().filter_map(platform_text).collect())
        .unwrap_or_default();
    Some(Defined {
        inspected: Inspected {
            driver,
            endpoint: first
                .get("Endpoint")
                .and_then(|e| e.as_str())
                .filter(|e| !e.is_empty())
                .map(String::from),
            status: None,
            buildkit: None,
            platforms,
            nodes: nodes.len(),
        },
        sha: crate::identity::sha256_hex(bytes),
    })
}

/// `os/arch[/variant]` of an OCI platform object.
fn platform_text(p: &serde_json::Value) -> Option<String> {
    let os = p.get("os")?.as_str()?;
    let arch = p.get("architecture")?.as_str()?;
    Some(match p.get("variant").and_then(|v| v.as_str()) {
        Some(v) if !v.is_empty() => format!("{os}/{arch}/{v}"),
        _ => format!("{os}/{arch}"),
    })
}

/// The cache file (in [`crate::user_cache`]).
const CACHE: &str = "builders.json";

/// The key of a builder in the cache: the docker configuration it is
/// defined in, and its name.
fn cache_key(name: &str) -> String {
    let config = docker_config()
        .map(|c| c.display().to_string())
        .unwrap_or_default();
    format!("{config}#{name}")
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What `docker buildx inspect` said of the builder `name` when it was
/// defined as it is now (`sha`), within the last day: its platforms,
/// native first, and its BuildKit version. `None` otherwise.
pub(super) fn recall(name: &str, sha: &str) -> Option<(Vec<String>, Option<String>)> {
    recall_in(&crate::user_cache::read(CACHE), name, sha, now_s())
}

fn recall_in(
    cache: &serde_json::Map<String, serde_json::Value>,
    name: &str,
    sha: &str,
    now: u64,
) -> Option<(Vec<String>, Option<String>)> {
    let e = cache.get(&cache_key(name))?;
    if e.get("definition")?.as_str()? != sha {
        return None;
    }
    let asked = e.get("asked_at")?.as_u64()?;
    if now.saturating_sub(asked) > KEEP_FOR.as_secs() {
        return None;
    }
    let platforms: Vec<String> = e
        .get("platforms")?
        .as_array()?
        .iter()
        .filter_map(|p| p.as_str().map(String::from))
        .collect();
    if platforms.is_empty() {
        return None;
    }
    let buildkit = e.get("buildkit").and_then(|b| b.as_str()).map(String::from);
    Some((platforms, buildkit))
}

/// Remembers what `docker buildx inspect` said of the builder `name`,
/// defined as `sha` (best effort).
pub(super) fn keep(name: &str, sha: &str, inspected: &Inspected) {
    let mut cache = crate::user_cache::read(CACHE);
    cache.insert(
        cache_key(name),
        serde_json::json!({
            "definition": sha,
            "platforms": inspected.platforms,
            "buildkit": inspected.buildkit,
            "asked_at": now_s(),
        }),
    );
    crate::user_cache::write(CACHE, cache);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_definition_gives_driver_endpoint_nodes_and_given_platforms() {
        let remote = br#"{"Name":"kiln-remote","Driver":"remote","Nodes":[{"Name":"kiln-remote0","Endpoint":"unix:///w/buildkit.sock","Platforms":null,"DriverOpts":null,"Flags":null,"Files":null}],"Dynamic":false}"#;
        let d = parse_instance("kiln-remote", remote).unwrap();
        assert_eq!(d.inspected.driver, "remote");
        assert_eq!(
            d.inspected.endpoint.as_deref(),
            Some("unix:///w/buildkit.sock")
        );
        assert_eq!(d.inspected.nodes, 1);
        assert!(d.inspected.platforms.is_empty());
        assert!(!d.inspected.keeps_images());
        assert_eq!(d.sha.len(), 64);
        // Given with `buildx create --platform`, and a second node.
        let two = br#"{"Name":"pool","Driver":"docker-container","Nodes":[{"Name":"a","Endpoint":"ssh://arm","Platforms":[{"architecture":"arm64","os":"linux"},{"architecture":"arm","os":"linux","variant":"v7"}]},{"Name":"b","Endpoint":"unix:///var/run/docker.sock","Platforms":null}]}"#;
        let d = parse_instance("pool", two).unwrap();
        assert_eq!(d.inspected.platforms, ["linux/arm64", "linux/arm/v7"]);
        assert_eq!(d.inspected.nodes, 2);
        // Another builder's file, or not JSON: not used.
        assert_eq!(parse_instance("other", two), None);
        assert_eq!(parse_instance("pool", b"not json"), None);
    }

    #[test]
    fn what_was_inspected_is_recalled_only_for_the_same_definition_within_a_day() {
        let mut cache = serde_json::Map::new();
        cache.insert(
            cache_key("b"),
            serde_json::json!({"definition": "s1", "platforms": ["linux/arm64"], "buildkit": "v0.13.2", "asked_at": 1000}),
        );
        assert_eq!(
            recall_in(&cache, "b", "s1", 1000 + 3600),
            Some((vec!["linux/arm64".to_string()], Some("v0.13.2".to_string())))
        );
        assert_eq!(recall_in(&cache, "b", "s2", 1000), None, "redefined");
        assert_eq!(
            recall_in(&cache, "b", "s1", 1000 + KEEP_FOR.as_secs() + 1),
            None,
            "older than a day"
        );
        assert_eq!(recall_in(&cache, "c", "s1", 1000), None, "another builder");
    }
}
