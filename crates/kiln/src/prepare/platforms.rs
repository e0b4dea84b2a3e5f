//! Multi-platform targets as platform units (docs/driver-buildx.md,
//! *Platform units*): on buildx, a target of several platforms becomes one
//! spec per platform (`TARGET@PLATFORM`, its own key, record, cache ref and
//! node), each pushed by digest into the target's repository, and a join
//! named as the target that makes their image index under its tags.
//!
//! Must never: touch a file, an engine or a registry: it rewrites specs.

use kiln_engine::{BuildSpec, ContextSource, Unit};

/// Why `spec` is built as one solve of all its platforms instead of as
/// units, or `None` when it is split.
pub fn not_split(spec: &BuildSpec) -> Option<String> {
    if !spec.multi_platform() {
        return Some("one platform".into());
    }
    let repos: std::collections::BTreeSet<&str> = spec
        .tags
        .iter()
        .map(|t| kiln_plan::repository_name(t))
        .collect();
    match repos.len() {
        0 => Some("no tag to push its platforms to".into()),
        1 => None,
        _ => Some(format!(
            "its tags name {} repositories, and an index is made where its platforms are",
            repos.len()
        )),
    }
}

/// The specs with every multi-platform target that can be split replaced
/// by its units and its join, in build order (the units just before their
/// join). A unit of platform P of target T needs, of each dependency split
/// the same way, its unit of P (handed over by digest), else the
/// dependency itself; a target that is not split and names one platform P
/// needs a split dependency's unit of P, else the dependency's index.
/// Nothing is split unless every builder in `builders` can push by digest
/// ([`kiln_engine::driver::buildx::pushes_by_digest`]). Targets that are
/// not split are said on stderr, once each.
pub fn split(specs: Vec<BuildSpec>, builders: &[&str]) -> Vec<BuildSpec> {
    // Units are pushed by digest, which buildx's docker driver cannot do.
    let docker = builders
        .iter()
        .find(|b| !kiln_engine::driver::buildx::pushes_by_digest(b))
        .map(|b| {
            format!("builder {b} is a docker-driver builder, which cannot push platforms by digest")
        });
    split_on(specs, docker)
}

/// [`split`], with nothing split when `refused` says why.
fn split_on(specs: Vec<BuildSpec>, refused: Option<String>) -> Vec<BuildSpec> {
    // Which targets are split, and into which platforms.
    let split: std::collections::HashMap<String, Vec<String>> = specs
        .iter()
        .filter(|s| {
            let why = match &refused {
                Some(r) if s.multi_platform() => Some(r.clone()),
                _ => not_split(s),
            };
            if let (true, Some(why)) = (s.multi_platform(), &why) {
                eprintln!(
                    "note: target {} builds its {} platforms in one solve on one node ({why})",
                    s.name,
                    s.platforms.len()
                );
            }
            why.is_none()
        })
        .map(|s| (s.name.clone(), s.platforms.clone()))
        .collect();
    if split.is_empty() {
        return specs;
    }
    let unit_of = |dep: &str, platform: Option<&str>| -> String {
        match (split.get(dep), platform) {
            (Some(ps), Some(p)) if ps.iter().any(|q| same_platform(q, p)) => {
                let q = ps.iter().find(|q| same_platform(q, p)).map_or(p, |q| q);
                unit_name(dep, q)
            }
            _ => dep.to_string(),
        }
    };
    let rewire = |s: &mut BuildSpec, platform: Option<&str>| {
        for d in &mut s.deps {
            *d = unit_of(d, platform);
        }
        for c in s.contexts.values_mut() {
            match c {
                ContextSource::Target { name } => *name = unit_of(name, platform),
                ContextSource::Image {
                    producer: Some(p), ..
                } => *p = unit_of(p, platform),
                _ => {}
            }
        }
    };
    let mut out = Vec::with_capacity(specs.len() + 2 * split.len());
    for mut s in specs {
        let Some(platforms) = split.get(&s.name) else {
            let one = match s.platforms.as_slice() {
                [p] => Some(p.clone()),
                _ => None,
            };
            rewire(&mut s, one.as_deref());
            out.push(s);
            continue;
        };
        let repository = s.push_repository().unwrap_or_default();
        let mut join = Vec::new();
        for p in platforms {
            let mut u = s.clone();
            u.name = unit_name(&s.name, p);
            u.platforms = vec![p.clone()];
            u.tags = Vec::new();
            u.unit = Some(Unit {
                target: s.name.clone(),
                platform: p.clone(),
                repository: repository.clone(),
            });
            rewire(&mut u, Some(p));
            join.push((p.clone(), u.name.clone()));
            out.push(u);
        }
        // The join builds nothing: it needs its units and nothing else.
        s.deps = join.iter().map(|(_, u)| u.clone()).collect();
        s.contexts.clear();
        s.secrets.clear();
        s.buildx_cache = None;
        s.join = join;
        out.push(s);
    }
    out
}

/// [`split`] on builders that can all push by digest.
#[cfg(test)]
fn split_with(specs: Vec<BuildSpec>) -> Vec<BuildSpec> {
    split_on(specs, None)
}

/// The name of the unit of `target` for `platform`.
pub fn unit_name(target: &str, platform: &str) -> String {
    format!("{target}@{platform}")
}

/// Whether two platforms are one (containerd's normal form).
fn same_platform(a: &str, b: &str) -> bool {
    let n = |p: &str| kiln_plan::platform::normalize(p).unwrap_or_else(|_| p.to_string());
    n(a) == n(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, platforms: &[&str], deps: &[&str], tags: &[&str]) -> BuildSpec {
        BuildSpec {
            name: name.into(),
            platforms: platforms.iter().map(|p| p.to_string()).collect(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            contexts: deps
                .iter()
                .map(|d| {
                    (
                        d.to_string(),
                        ContextSource::Target {
                            name: d.to_string(),
                        },
                    )
                })
                .collect(),
            push: true,
            ..BuildSpec::default()
        }
    }

    #[test]
    fn units_follow_their_platform_and_the_join_follows_its_units() {
        let two = ["linux/amd64", "linux/arm64"];
        let out = split_with(vec![
            spec("base", &two, &[], &["r.test/base:1", "r.test/base:latest"]),
            spec("app", &two, &["base"], &["r.test/app:1"]),
            spec("tool", &["linux/arm64/v8"], &["base"], &["r.test/tool:1"]),
            spec("any", &[], &["base"], &["r.test/any:1"]),
            spec("apart", &two, &[], &["r.test/a:1", "other.test/a:1"]),
        ]);
        let names: Vec<&str> = out.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "base@linux/amd64",
                "base@linux/arm64",
                "base",
                "app@linux/amd64",
                "app@linux/arm64",
                "app",
                "tool",
                "any",
                "apart",
            ]
        );
        let by = |n: &str| out.iter().find(|s| s.name == n).unwrap();
        let unit = by("app@linux/arm64");
        assert_eq!(unit.platforms, ["linux/arm64"]);
        assert!(unit.tags.is_empty());
        assert_eq!(
            unit.unit,
            Some(Unit {
                target: "app".into(),
                platform: "linux/arm64".into(),
                repository: "r.test/app".into(),
            })
        );
        assert_eq!(unit.deps, ["base@linux/arm64"]);
        assert_eq!(
            unit.contexts["base"],
            ContextSource::Target {
                name: "base@linux/arm64".into()
            }
        );
        let join = by("app");
        assert_eq!(join.deps, ["app@linux/amd64", "app@linux/arm64"]);
        assert_eq!(
            join.join,
            [
                ("linux/amd64".to_string(), "app@linux/amd64".to_string()),
                ("linux/arm64".to_string(), "app@linux/arm64".to_string())
            ]
        );
        assert!(join.contexts.is_empty() && join.tags == ["r.test/app:1"]);
        // One platform: the matching unit (arm64/v8 is arm64); none: the index.
        assert_eq!(by("tool").deps, ["base@linux/arm64"]);
        assert_eq!(by("any").deps, ["base"]);
        // Tags in two repositories: one solve, as before.
        assert!(by("apart").join.is_empty() && by("apart").unit.is_none());
        assert!(not_split(by("apart")).unwrap().contains("2 repositories"));
    }
}
