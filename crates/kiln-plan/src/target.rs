//! The graph's input: one buildable target, as the bake evaluator resolved it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One resolved build target: what `docker buildx bake --print` says about it, reduced to
/// what planning needs. kiln-plan defines its own type so it never depends on the bake
/// evaluator; the CLI converts one into the other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanTarget {
    /// The target's name, unique in the graph.
    pub name: String,
    /// The build context (a directory, or a URL).
    pub context: String,
    /// The Dockerfile path, relative to the context.
    pub dockerfile: String,
    /// Named contexts: name → `target:NAME`, `docker-image://REF`, a path or a URL.
    pub contexts: BTreeMap<String, String>,
    /// Build args after variable evaluation.
    pub args: BTreeMap<String, String>,
    /// The image references this target is pushed or loaded as.
    pub tags: Vec<String>,
    /// Target platforms, e.g. `linux/amd64`.
    pub platforms: Vec<String>,
    /// The Dockerfile stage to build, if not the last.
    pub target: Option<String>,
}

impl PlanTarget {
    /// A target named `name` with bake's defaults: context `.`, dockerfile `Dockerfile`,
    /// and nothing else.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            context: ".".to_owned(),
            dockerfile: "Dockerfile".to_owned(),
            ..Self::default()
        }
    }

    /// Adds a named context (builder style, for tests and converters).
    #[must_use]
    pub fn with_context(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.contexts.insert(name.into(), value.into());
        self
    }

    /// Adds a build arg.
    #[must_use]
    pub fn with_arg(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.args.insert(name.into(), value.into());
        self
    }

    /// Adds a tag.
    #[must_use]
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }
}
