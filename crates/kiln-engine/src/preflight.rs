//! Preflight: before any build, every image the run needs and does not
//! build itself is checked — on the engine (the local driver uses a local
//! image first), then in its registry. A missing image is named with the
//! targets that need it and, when a target in the files produces it, how to
//! build it; only a 404 counts as absent, 401/403 are auth or proxy
//! problems, an unreachable registry is an infrastructure failure.
//!
//! Must never: decide what the run builds (the caller says which images
//! the run produces), or fail on a missing cache ref (a warning).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::driver::local::LocalEngine;
use crate::registry::{Registry, RegistryError, Resolution};

/// One image the run needs from outside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Need {
    pub reference: String,
    /// Targets of the run that read it.
    pub needed_by: Vec<String>,
    /// Targets in the files (not in this run) whose tags name it.
    pub producers: Vec<String>,
}

/// Where a needed image was found, or why not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Status {
    /// The engine holds it (image id).
    Engine { id: String },
    /// Its registry holds it (manifest digest).
    Registry { digest: String },
    /// The registry answered 404.
    Missing,
    /// 401/403/407: credentials, or a proxy in the way.
    Auth { detail: String },
    /// The registry could not be reached (or answered 5xx).
    Unreachable { detail: String },
    /// Not a valid image reference.
    Invalid { detail: String },
    /// A fleet run: some nodes that may build a target needing it hold it,
    /// others do not, and the registry cannot supply it to them (`registry`
    /// says what it answered).
    NotOnEveryNode {
        on: Vec<String>,
        missing_on: Vec<String>,
        registry: String,
    },
}

/// A need with what preflight found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checked {
    #[serde(flatten)]
    pub need: Need,
    #[serde(flatten)]
    pub status: Status,
}

impl Checked {
    pub fn ok(&self) -> bool {
        matches!(self.status, Status::Engine { .. } | Status::Registry { .. })
    }
}

/// Collects needs: `(target, reference)` pairs, merged by reference.
pub fn needs(
    pairs: impl IntoIterator<Item = (String, String)>,
    producers: impl Fn(&str) -> Vec<String>,
) -> Vec<Need> {
    let mut by_ref: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (target, reference) in pairs {
        if reference == "scratch" {
            continue;
        }
        let v = by_ref.entry(reference).or_default();
        if !v.contains(&target) {
            v.push(target);
        }
    }
    by_ref
        .into_iter()
        .map(|(reference, needed_by)| Need {
            producers: producers(&reference),
            reference,
            needed_by,
        })
        .collect()
}

/// A node of a fleet run: its name and its engine (`None`: it does not
/// answer, and the run gives it no work).
pub struct FleetNode {
    pub name: String,
    pub engine: Option<LocalEngine>,
}

/// Checks every need (one engine is a fleet of one node that may build
/// everything). An image is available when every
/// answering node that may build a target needing it (`may_build`: node
/// indices) holds it, or when the registry does (each node then pulls it by
/// digest). Held by some of those nodes only and not in the registry, it is
/// [`Status::NotOnEveryNode`]: the schedule could place its target on a node
/// that cannot build it.
pub async fn check_fleet(
    nodes: &[FleetNode],
    registry: &Registry,
    needs: Vec<Need>,
    may_build: impl Fn(&Need) -> Vec<usize>,
) -> Vec<Checked> {
    let mut held = Vec::with_capacity(needs.len());
    for need in needs {
        let mut on = Vec::new();
        let mut missing_on = Vec::new();
        let mut id = None;
        for k in may_build(&need) {
            let Some(node) = nodes.get(k) else { continue };
            let Some(engine) = &node.engine else { continue };
            match engine.image_id(&need.reference).await {
                Some(i) => {
                    id.get_or_insert(i);
                    on.push(node.name.clone());
                }
                None => missing_on.push(node.name.clone()),
            }
        }
        held.push((need, on, missing_on, id));
    }
    // What the registries are asked, asked at once; the run's keys take
    // the same answers (`registry::ask_ahead`).
    crate::registry::ask_ahead(
        held.iter()
            .filter(|(_, _, missing_on, id)| id.is_none() || !missing_on.is_empty())
            .map(|(need, ..)| need.reference.clone()),
    );
    let mut out = Vec::with_capacity(held.len());
    for (need, on, missing_on, id) in held {
        let status = match id {
            Some(id) if missing_on.is_empty() => Status::Engine { id },
            _ => match registry_status(registry, &need.reference).await {
                Status::Missing if !on.is_empty() => Status::NotOnEveryNode {
                    on,
                    missing_on,
                    registry: "not found (404)".into(),
                },
                Status::Auth { detail } | Status::Unreachable { detail } if !on.is_empty() => {
                    Status::NotOnEveryNode {
                        on,
                        missing_on,
                        registry: detail,
                    }
                }
                other => other,
            },
        };
        out.push(Checked { need, status });
    }
    out
}

async fn registry_status(registry: &Registry, reference: &str) -> Status {
    match registry.check(reference).await {
        Ok(Resolution::Found(digest)) => Status::Registry { digest },
        Ok(Resolution::Absent) => Status::Missing,
        Err(e @ RegistryError::Auth { .. }) => Status::Auth {
            detail: e.to_string(),
        },
        Err(e @ RegistryError::InvalidReference { .. }) => Status::Invalid {
            detail: e.to_string(),
        },
        Err(e) => Status::Unreachable {
            detail: e.to_string(),
        },
    }
}

/// The report for humans: one block per image that is not available.
pub fn render(checked: &[Checked]) -> String {
    let mut out = String::new();
    let bad: Vec<&Checked> = checked.iter().filter(|c| !c.ok()).collect();
    let missing: Vec<&&Checked> = bad.iter().filter(|c| c.status == Status::Missing).collect();
    if !missing.is_empty() {
        out.push_str("these images are needed but neither on the engine nor in their registry, and nothing in this run builds them:\n");
        for c in missing {
            out.push_str(&format!("  {}\n", c.need.reference));
            out.push_str(&format!(
                "      needed by: {}\n",
                c.need.needed_by.join(", ")
            ));
            match c.need.producers.as_slice() {
                [] => out.push_str(
                    "      no target in the files produces it: push or import it first\n",
                ),
                ps => out.push_str(&format!(
                    "      build it with: {}\n",
                    ps.iter()
                        .map(|p| format!("kiln build {p}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
            }
        }
    }
    for c in bad.iter().filter(|c| c.status != Status::Missing) {
        let why = match &c.status {
            Status::Auth { detail } => format!("cannot be checked: {detail}"),
            Status::Unreachable { detail } => format!("cannot be checked: {detail}"),
            Status::Invalid { detail } => format!("is not an image reference: {detail}"),
            Status::NotOnEveryNode {
                on,
                missing_on,
                registry,
            } => format!(
                "is on {} but not on {}, which may build what needs it, and its registry cannot supply it ({registry})\n      load it on {} or push it to its registry (every node then pulls it by digest)",
                on.join(", "),
                missing_on.join(", "),
                missing_on.join(", "),
            ),
            _ => continue,
        };
        out.push_str(&format!(
            "  {} {why}\n      needed by: {}\n",
            c.need.reference,
            c.need.needed_by.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_merge_by_reference_and_skip_scratch() {
        let n = needs(
            [
                ("a".to_string(), "base:1".to_string()),
                ("b".to_string(), "base:1".to_string()),
                ("b".to_string(), "scratch".to_string()),
                ("a".to_string(), "base:1".to_string()),
            ],
            |r| {
                if r == "base:1" {
                    vec!["base".into()]
                } else {
                    vec![]
                }
            },
        );
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].needed_by, ["a", "b"]);
        assert_eq!(n[0].producers, ["base"]);
    }

    #[test]
    fn the_report_names_the_image_who_needs_it_and_how_to_build_it() {
        let c = vec![
            Checked {
                need: Need {
                    reference: "reg/pytorch:2.15".into(),
                    needed_by: vec!["aiter-wheel".into(), "vllm".into()],
                    producers: vec!["pytorch".into()],
                },
                status: Status::Missing,
            },
            Checked {
                need: Need {
                    reference: "private/x:1".into(),
                    needed_by: vec!["y".into()],
                    producers: vec![],
                },
                status: Status::Auth {
                    detail: "HTTP 403".into(),
                },
            },
        ];
        let text = render(&c);
        assert!(text.contains("  reg/pytorch:2.15\n      needed by: aiter-wheel, vllm\n      build it with: kiln build pytorch\n"), "{text}");
        assert!(
            text.contains("private/x:1 cannot be checked: HTTP 403"),
            "{text}"
        );
    }
}
