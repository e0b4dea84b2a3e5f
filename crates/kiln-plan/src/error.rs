//! The errors building or querying a [`Graph`](crate::Graph) can raise.

/// Why a graph could not be built or queried. Every message says what is wrong and, on a
/// `hint:` line, what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// A requested target does not exist.
    #[error("unknown target `{name}`\nhint: {}", did_you_mean(suggestion.as_deref(), "check the name against the targets and groups the bake files define"))]
    UnknownTarget {
        /// The name that was asked for.
        name: String,
        /// The closest existing target name, if one is close enough.
        suggestion: Option<String>,
    },
    /// A `target:NAME` named context refers to a target that does not exist.
    #[error("target `{target}`: context `{context}` is `target:{name}`, but no target `{name}` is defined\nhint: {}", did_you_mean(suggestion.as_deref(), "define that target, or point the context at an image (`docker-image://…`) or a directory"))]
    UnknownContextTarget {
        /// The target whose context is broken.
        target: String,
        /// The context's name (the key in `contexts`).
        context: String,
        /// The missing target name after `target:`.
        name: String,
        /// The closest existing target name, if one is close enough.
        suggestion: Option<String>,
    },
    /// The dependencies form a cycle. `path` starts and ends with the same target; each
    /// target in it is needed by the next one.
    #[error("dependency cycle: {}\nhint: each target is needed by the next; remove one of these dependencies (a `target:` context, a `docker-image://` context, or a build arg naming another target's tag)", path.join(" -> "))]
    Cycle {
        /// The cycle's members in edge order, the first repeated at the end.
        path: Vec<String>,
    },
    /// Two input targets share a name, so references to it would be ambiguous.
    #[error(
        "target `{name}` is defined more than once\nhint: give each target a unique name (bake merges same-named targets before kiln sees them)"
    )]
    DuplicateTarget {
        /// The name defined twice.
        name: String,
    },
}

fn did_you_mean(suggestion: Option<&str>, otherwise: &str) -> String {
    match suggestion {
        Some(s) => format!("did you mean `{s}`?"),
        None => otherwise.to_owned(),
    }
}
