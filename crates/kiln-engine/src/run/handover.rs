//! References between targets and nodes: what a finished target is known
//! by (its unique local tag on the node that made it, its registry digest
//! elsewhere), and what a target's build is handed for its named contexts
//! and its dependencies' tags — never a tag that could move.
//!
//! Must never: tag, push or pull anything; it only names references.

use std::collections::{BTreeMap, HashMap};

use super::nodes::Node;
use crate::driver::local::LocalEngine;
use crate::naming::local_ref;
use crate::spec::{BuildSpec, ContextSource};

/// The outputs of a target's upstreams a key was computed with.
pub(super) type Outputs = Vec<(String, Option<String>)>;

pub(super) fn upstream_outputs(spec: &BuildSpec, outputs: &HashMap<String, String>) -> Outputs {
    spec.deps
        .iter()
        .map(|d| (d.clone(), outputs.get(d).cloned()))
        .collect()
}

/// Where a finished target's image is: the node that has it locally and,
/// when pushed, its registry reference by digest.
pub(super) struct Produced {
    pub(super) node: usize,
    pub(super) local: String,
    pub(super) remote: Option<String>,
}

/// The reference dependents on the same node (and `docker run` there) use
/// for a target's image: the unique local tag on an engine, the registry
/// digest on a builder that keeps no image store.
pub(super) fn node_ref(
    node: &Node,
    spec: &BuildSpec,
    image_id: &str,
    remote: &Option<String>,
) -> String {
    match (engine_for(node, spec), remote) {
        (None, Some(r)) => r.clone(),
        _ => local_ref(&spec.name, image_id),
    }
}

/// The engine that holds `spec`'s image on `node`: none on a builder that
/// keeps no image store, and none for a multi-platform target, whose image
/// is an index in the registry, or a platform unit, pushed by digest
/// (docs/driver-buildx.md).
pub(super) fn engine_for<'a>(node: &'a Node, spec: &BuildSpec) -> Option<&'a LocalEngine> {
    node.engine.as_ref().filter(|_| !spec.registry_only())
}

/// The references dependents on node `k` use: the unique local tag when
/// the image was made on `k`, else its registry digest (a fleet run pushes
/// everything), never a tag that could move.
pub(super) fn refs_on(produced: &HashMap<String, Produced>, k: usize) -> HashMap<String, String> {
    produced
        .iter()
        .filter_map(|(t, p)| {
            let r = if p.node == k {
                p.local.clone()
            } else {
                p.remote.clone()?
            };
            Some((t.clone(), r))
        })
        .collect()
}

/// Named contexts (and tags of this run's targets used as image references)
/// mapped to the unique references of what this run built.
pub(super) fn context_refs(
    s: &BuildSpec,
    specs: &[BuildSpec],
    built: &HashMap<String, String>,
) -> BTreeMap<String, String> {
    let mut refs = BTreeMap::new();
    for (name, c) in &s.contexts {
        match c {
            ContextSource::Target { name: t } => {
                if let Some(r) = built.get(t) {
                    refs.insert(name.clone(), r.clone());
                }
            }
            ContextSource::Image {
                reference,
                producer,
            } => {
                let r = producer
                    .as_ref()
                    .and_then(|p| built.get(p))
                    .cloned()
                    .unwrap_or_else(|| reference.clone());
                refs.insert(name.clone(), r);
            }
            ContextSource::Local { .. } => {}
        }
    }
    // A dependency's own tags, wherever the build names them, resolve to the
    // image this run built, never to whatever the tag points at; a platform
    // unit's are its target's.
    // (A join's dependencies are its own units: none of their tags.)
    for d in s.deps.iter().filter(|_| s.join.is_empty()) {
        if let (Some(r), Some(ds)) = (built.get(d), specs.iter().find(|x| &x.name == d)) {
            let tags = match &ds.unit {
                Some(u) => specs
                    .iter()
                    .find(|x| x.name == u.target)
                    .map_or(&ds.tags, |t| &t.tags),
                None => &ds.tags,
            };
            for t in tags {
                refs.entry(t.clone()).or_insert_with(|| r.clone());
            }
        }
    }
    // A join is handed its units' images by name.
    for (_, u) in &s.join {
        if let Some(r) = built.get(u) {
            refs.insert(u.clone(), r.clone());
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_tags_map_to_built_refs() {
        let base = BuildSpec {
            name: "base".into(),
            tags: vec!["r/base:1".into()],
            ..BuildSpec::default()
        };
        let app = BuildSpec {
            name: "app".into(),
            deps: vec!["base".into()],
            contexts: [(
                "b".to_string(),
                ContextSource::Target {
                    name: "base".into(),
                },
            )]
            .into(),
            ..BuildSpec::default()
        };
        let built: HashMap<String, String> =
            [("base".to_string(), "kiln.local/base:1234".to_string())].into();
        let r = context_refs(&app, &[base, app.clone()], &built);
        assert_eq!(r["b"], "kiln.local/base:1234");
        assert_eq!(r["r/base:1"], "kiln.local/base:1234");
    }
}
