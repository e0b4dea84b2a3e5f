//! Layer-cache policy, applied by construction: for every target and
//! platform kiln derives a commit-independent registry cache ref (one per
//! target × platform × writer scope: two targets, two platforms or two
//! writers never export to one ref, which would make them overwrite each
//! other), imports it together with the per-commit/branch ref (the image
//! tag being built), and exports it with `mode=max` so discarded builder
//! stages are cached too — the fix seed 000 asks for, for every target.
//!
//! What a driver can honour differs:
//! - buildx / remote BuildKit: registry cache import and export as above,
//!   `image-manifest=true,oci-mediatypes=true,ignore-error=true`, never
//!   `BUILDKIT_INLINE_CACHE`;
//! - the Docker engine's embedded BuildKit (the local driver): inline cache
//!   only (which is `mode=min`: the final image's layers, never a discarded
//!   builder stage) plus `cache-from` of the previously pushed image; the
//!   policy carries a notice saying so.
//!
//! User-written `cache-from`/`cache-to` entries are kept and merged (a
//! user entry for the same ref wins over kiln's).
//!
//! Must never: contact a registry (probing refs is the engine's job).

use serde::Serialize;

use crate::reference::ImageRef;

/// The BuildKit the policy is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Driver {
    /// The Docker engine's embedded BuildKit (inline cache only).
    Local,
    /// `docker buildx` builders (remote, container, kubernetes drivers).
    Buildx,
}

/// Where and how cache refs are named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheSettings {
    /// A repository for cache refs (`registry/repo`); default: the
    /// repository of the target's first tag.
    pub repository: Option<String>,
    /// The writer scope (e.g. `ci`, `dev`): writers in different scopes
    /// never overwrite each other's refs. `None`: the default scope.
    pub scope: Option<String>,
    /// No registry cache at all (`--no-cache-policy`).
    pub disabled: bool,
}

/// One cache entry as buildx writes it (`type=registry,ref=…,mode=max`).
/// In JSON: `{"entry": "type=registry,ref=…", "ref": "…", "origin": "kiln|user"}`
/// plus `"exists": bool` once probed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// `type=…` and the other attributes, in order.
    pub attrs: Vec<(String, String)>,
    /// `kiln` when kiln derived it, `user` when the bake file wrote it.
    pub origin: String,
    /// Whether the registry holds the ref (`None`: not probed).
    pub exists: Option<bool>,
}

impl CacheEntry {
    /// The `ref=` attribute, if any.
    pub fn reference(&self) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == "ref")
            .map(|(_, v)| v.as_str())
    }

    /// The `type=` attribute (`registry` when absent, as buildx defaults).
    pub fn kind(&self) -> &str {
        self.attrs
            .iter()
            .find(|(k, _)| k == "type")
            .map(|(_, v)| v.as_str())
            .unwrap_or("registry")
    }

    /// The CSV form buildx reads (`type=registry,ref=r,mode=max`).
    pub fn csv(&self) -> String {
        self.attrs
            .iter()
            .map(|(k, v)| {
                if v.contains(',') || v.contains('"') {
                    format!("\"{k}={}\"", v.replace('"', "\"\""))
                } else {
                    format!("{k}={v}")
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    fn kiln(attrs: &[(&str, &str)]) -> CacheEntry {
        CacheEntry {
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            origin: "kiln".into(),
            exists: None,
        }
    }

    /// A user entry from bake's structured form (`{"type": "registry", "ref": …}`).
    pub fn user(entry: &[(String, String)]) -> CacheEntry {
        CacheEntry {
            attrs: entry.to_vec(),
            origin: "user".into(),
            exists: None,
        }
    }
}

impl Serialize for CacheEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("CacheEntry", 4)?;
        st.serialize_field("entry", &self.csv())?;
        st.serialize_field("ref", &self.reference())?;
        st.serialize_field("origin", &self.origin)?;
        if let Some(e) = self.exists {
            st.serialize_field("exists", &e)?;
        }
        st.end()
    }
}

/// The effective cache configuration of one target on one platform.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CachePolicy {
    pub driver: Driver,
    /// The platform (`native`: the builder's own).
    pub platform: String,
    /// The commit-independent ref kiln derived (`None` on the local
    /// engine, which cannot export it, and when no registry can hold it:
    /// the target has no tag and no cache repository is set).
    pub stable_ref: Option<String>,
    pub from: Vec<CacheEntry>,
    pub to: Vec<CacheEntry>,
    /// `BUILDKIT_INLINE_CACHE=1` (local driver, pushed targets only).
    pub inline: bool,
    /// What the user should know (e.g. inline cache cannot hold builder
    /// stages; no registry for the cache).
    pub notices: Vec<String>,
}

/// What the policy needs to know about a target.
#[derive(Clone, Debug, Default)]
pub struct CacheTarget<'a> {
    pub name: &'a str,
    pub tags: &'a [String],
    /// Requested platforms; empty: the builder's default (`native`).
    pub platforms: &'a [String],
    /// User-written `cache-from` / `cache-to` entries (bake's structured form).
    pub cache_from: &'a [Vec<(String, String)>],
    pub cache_to: &'a [Vec<(String, String)>],
    /// Whether the build pushes its tags.
    pub push: bool,
}

/// A tag-safe slug: lower-case `[a-z0-9._-]`, other characters as `-`.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The tag of a stable cache ref: `buildcache-<target>-<platform>[-<scope>]`,
/// shortened with a hash when it would exceed the 128-character tag limit.
pub fn cache_tag(target: &str, platform: &str, scope: Option<&str>) -> String {
    let mut t = format!("buildcache-{}-{}", slug(target), slug(platform));
    if let Some(s) = scope.filter(|s| !s.is_empty()) {
        t.push('-');
        t.push_str(&slug(s));
    }
    if t.len() > 128 {
        let h = blake3::hash(t.as_bytes()).to_hex();
        t = format!("{}-{}", &t[..100], &h[..16]);
    }
    t
}

/// The repository cache refs go to: the setting, or the first tag's
/// repository (so the registry deduplicates cache blobs against the image).
fn repository(t: &CacheTarget<'_>, s: &CacheSettings) -> Option<String> {
    if let Some(r) = &s.repository {
        return Some(r.trim_end_matches('/').to_string());
    }
    let first = t.tags.first()?;
    // Only a valid reference names a repository; keep the user's spelling
    // of it, without tag or digest.
    ImageRef::parse(first)?;
    Some(crate::repository_name(first).to_string())
}

/// The policy for one target on one driver.
///
/// On the local driver a target with several platforms gets one stable
/// ref per platform (it builds one platform at a time). On buildx it is
/// one solve of all its platforms on a single-node builder (kiln refuses
/// several nodes, which would solve platforms apart): one policy, whose
/// ref names the platform set (`buildcache-<target>-linux-amd64-linux-arm64`),
/// so it never shares a ref with a build of other platforms.
pub fn policy(t: &CacheTarget<'_>, s: &CacheSettings, driver: Driver) -> Vec<CachePolicy> {
    let platforms: Vec<String> = if t.platforms.is_empty() {
        vec!["native".to_string()]
    } else if driver == Driver::Buildx {
        vec![t.platforms.join(",")]
    } else {
        t.platforms.to_vec()
    };
    platforms.iter().map(|p| one(t, s, driver, p)).collect()
}

fn one(t: &CacheTarget<'_>, s: &CacheSettings, driver: Driver, platform: &str) -> CachePolicy {
    let mut notices = Vec::new();
    // The local engine cannot export a registry cache: no stable ref.
    let repo = if s.disabled || driver == Driver::Local {
        None
    } else {
        repository(t, s)
    };
    let stable = repo
        .as_ref()
        .map(|r| format!("{r}:{}", cache_tag(t.name, platform, s.scope.as_deref())));
    if stable.is_none() && !s.disabled && driver == Driver::Buildx {
        notices.push(format!(
            "target {} has no tag and no cache repository is set, so no registry can hold its layer cache; set --cache-repo or give it a tag",
            t.name
        ));
    }
    let mut from: Vec<CacheEntry> = Vec::new();
    let mut to: Vec<CacheEntry> = Vec::new();
    let mut inline = false;
    match driver {
        Driver::Buildx => {
            if let Some(r) = &stable {
                from.push(CacheEntry::kiln(&[("type", "registry"), ("ref", r)]));
                // The default scope's ref too, so a scoped writer (a branch,
                // a developer) starts from what the main writer cached.
                if s.scope.is_some()
                    && let Some(repo) = &repo
                {
                    let main = format!("{repo}:{}", cache_tag(t.name, platform, None));
                    from.push(CacheEntry::kiln(&[("type", "registry"), ("ref", &main)]));
                }
            }
            if !s.disabled {
                for tag in t.tags {
                    from.push(CacheEntry::kiln(&[("type", "registry"), ("ref", tag)]));
                }
            }
            if let Some(r) = &stable {
                to.push(CacheEntry::kiln(&[
                    ("type", "registry"),
                    ("ref", r),
                    ("mode", "max"),
                    ("image-manifest", "true"),
                    ("oci-mediatypes", "true"),
                    ("ignore-error", "true"),
                ]));
            }
        }
        Driver::Local => {
            if !s.disabled && t.push {
                inline = true;
                for tag in t.tags {
                    from.push(CacheEntry::kiln(&[("type", "registry"), ("ref", tag)]));
                }
            }
            notices.push(
                "the local engine's BuildKit only has inline cache (mode=min): it holds the final image's layers, never a discarded builder stage (COPY --from / RUN --mount from=); use a buildx builder with a registry cache for those".to_string(),
            );
        }
    }
    // User entries are kept; for the same ref the user's wins.
    merge(&mut from, t.cache_from);
    merge(&mut to, t.cache_to);
    if driver == Driver::Local {
        let unsupported: Vec<String> = to
            .iter()
            .filter(|e| e.origin == "user" && e.kind() != "inline")
            .map(|e| e.csv())
            .collect();
        if !unsupported.is_empty() {
            notices.push(format!(
                "cache-to {} cannot be exported by the local engine (inline cache only); it is kept for buildx",
                unsupported.join(" ")
            ));
        }
    }
    CachePolicy {
        driver,
        platform: platform.to_string(),
        stable_ref: stable,
        from,
        to,
        inline,
        notices,
    }
}

fn merge(into: &mut Vec<CacheEntry>, user: &[Vec<(String, String)>]) {
    for u in user {
        let e = CacheEntry::user(u);
        match e.reference() {
            Some(r) => {
                into.retain(|k| k.reference() != Some(r));
                into.push(e);
            }
            None => {
                if !into.contains(&e) {
                    into.push(e);
                }
            }
        }
    }
}

/// bake's structured cache entry (`{"type": "registry", "ref": …}`) as
/// ordered pairs: `type` first, `ref` next, the rest in key order.
pub fn entry_pairs(
    entry: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Vec<(String, String)> {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = Vec::new();
    for first in ["type", "ref"] {
        if let Some(v) = entry.get(first) {
            out.push((first.to_string(), text(v)));
        }
    }
    for (k, v) in entry {
        if k != "type" && k != "ref" {
            out.push((k.clone(), text(v)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t<'a>(name: &'a str, tags: &'a [String], platforms: &'a [String]) -> CacheTarget<'a> {
        CacheTarget {
            name,
            tags,
            platforms,
            push: true,
            ..CacheTarget::default()
        }
    }

    fn refs(v: &[CacheEntry]) -> Vec<String> {
        v.iter().map(|e| e.csv()).collect()
    }

    #[test]
    fn buildx_gets_a_stable_max_mode_ref_and_the_per_commit_import() {
        let tags = vec!["registry:5000/rocm/pytorch:abc123".to_string()];
        let p = policy(
            &t("pytorch", &tags, &[]),
            &CacheSettings::default(),
            Driver::Buildx,
        );
        assert_eq!(p.len(), 1);
        let p = &p[0];
        assert_eq!(
            p.stable_ref.as_deref(),
            Some("registry:5000/rocm/pytorch:buildcache-pytorch-native")
        );
        assert_eq!(
            refs(&p.from),
            [
                "type=registry,ref=registry:5000/rocm/pytorch:buildcache-pytorch-native",
                "type=registry,ref=registry:5000/rocm/pytorch:abc123"
            ]
        );
        assert_eq!(
            refs(&p.to),
            [
                "type=registry,ref=registry:5000/rocm/pytorch:buildcache-pytorch-native,mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true"
            ]
        );
        assert!(!p.inline, "never BUILDKIT_INLINE_CACHE under buildx");
    }

    #[test]
    fn refs_are_never_shared_by_targets_platforms_or_scopes() {
        let tags = vec!["r/shared:1".to_string()];
        let plats = vec!["linux/amd64".to_string(), "linux/arm64".to_string()];
        let s = CacheSettings::default();
        let a = policy(&t("a", &tags, &plats), &s, Driver::Buildx);
        let b = policy(&t("b", &tags, &plats), &s, Driver::Buildx);
        let scoped = CacheSettings {
            scope: Some("dev".into()),
            ..CacheSettings::default()
        };
        let c = policy(&t("a", &tags, &plats), &scoped, Driver::Buildx);
        // One platform of the same target is another solve: another ref.
        let d = policy(&t("a", &tags, &plats[..1]), &s, Driver::Buildx);
        // buildx solves a target's platforms together: one policy, named
        // after the set.
        assert_eq!(a.len(), 1);
        assert_eq!(
            a[0].stable_ref.as_deref(),
            Some("r/shared:buildcache-a-linux-amd64-linux-arm64")
        );
        let mut all: Vec<String> = a
            .iter()
            .chain(&b)
            .chain(&c)
            .chain(&d)
            .filter_map(|p| p.stable_ref.clone())
            .collect();
        assert_eq!(all.len(), 4);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 4, "{all:?}");
        // A scoped writer also imports the default scope's ref.
        assert!(
            c[0].from
                .iter()
                .any(|e| e.reference() == a[0].stable_ref.as_deref())
        );
    }

    #[test]
    fn user_entries_are_kept_and_win_for_their_ref() {
        let tags = vec!["r/app:1".to_string()];
        let stable = "r/app:buildcache-app-native".to_string();
        let user_to = vec![vec![
            ("type".to_string(), "registry".to_string()),
            ("ref".to_string(), stable.clone()),
            ("mode".to_string(), "min".to_string()),
        ]];
        let user_from = vec![vec![
            ("type".to_string(), "local".to_string()),
            ("src".to_string(), "/tmp/c".to_string()),
        ]];
        let target = CacheTarget {
            cache_to: &user_to,
            cache_from: &user_from,
            ..t("app", &tags, &[])
        };
        let p = &policy(&target, &CacheSettings::default(), Driver::Buildx)[0];
        assert_eq!(p.to.len(), 1);
        assert_eq!(p.to[0].origin, "user");
        assert!(p.from.iter().any(|e| e.kind() == "local"));
    }

    #[test]
    fn the_local_driver_gets_inline_cache_and_a_notice() {
        let tags = vec!["r/app:1".to_string()];
        let p = &policy(
            &t("app", &tags, &[]),
            &CacheSettings::default(),
            Driver::Local,
        )[0];
        assert!(p.inline);
        assert_eq!(refs(&p.from), ["type=registry,ref=r/app:1"]);
        assert!(p.to.is_empty());
        assert!(p.notices[0].contains("inline cache"), "{:?}", p.notices);
        // Not pushed: nothing to import from, nothing to embed.
        let quiet = CacheTarget {
            push: false,
            ..t("app", &tags, &[])
        };
        let p = &policy(&quiet, &CacheSettings::default(), Driver::Local)[0];
        assert!(!p.inline && p.from.is_empty());
    }

    #[test]
    fn no_tag_no_repository_is_a_notice_and_a_cache_repo_fixes_it() {
        let p = &policy(&t("x", &[], &[]), &CacheSettings::default(), Driver::Buildx)[0];
        assert!(p.stable_ref.is_none());
        assert!(p.to.is_empty());
        assert!(p.notices[0].contains("no tag"), "{:?}", p.notices);
        let s = CacheSettings {
            repository: Some("reg:5000/cache/".into()),
            ..CacheSettings::default()
        };
        let p = &policy(&t("x", &[], &[]), &s, Driver::Buildx)[0];
        assert_eq!(
            p.stable_ref.as_deref(),
            Some("reg:5000/cache:buildcache-x-native")
        );
    }

    #[test]
    fn long_names_stay_within_the_tag_grammar() {
        let tag = cache_tag(&"t".repeat(200), "linux/arm64/v8", Some("Feature/Branch"));
        assert!(tag.len() <= 128, "{tag}");
        assert!(
            tag.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        );
        assert_eq!(
            cache_tag("a", "linux/arm64/v8", Some("Feature/X")),
            "buildcache-a-linux-arm64-v8-feature-x"
        );
    }
}
