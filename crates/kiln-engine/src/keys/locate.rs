//! Where the image of a recorded build can be had: on the engine (by the
//! unique reference or a recorded tag, compared by identity), else in a
//! registry it was pushed to. The one skip decision `kiln plan` and
//! `kiln build` share.
//!
//! Must never: pull, tag or write anything.

use super::Resolver;
use crate::driver::local::LocalEngine;
use crate::registry::Resolution;

/// Where the image of a record can be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// The engine holds the image (same identity) under `source`, a
    /// reference it knows: the unique reference when that still points at
    /// it (`unique_tagged`), else one of the recorded tags.
    Engine { source: String, unique_tagged: bool },
    /// Only a registry holds it, as this `repo@digest` (pushed when built).
    Registry(String),
    /// Neither.
    Gone,
}

/// Finds the image of `target`'s record: on the engine (its unique
/// reference answers in one request in the usual case, else a recorded
/// tag that still names the same image), else in a registry it was pushed
/// to. Images are compared by identity ([`crate::identity`]), which is the
/// same on every engine and image store. `kiln plan` and `kiln build`
/// decide skips with this one function.
pub async fn locate(
    engine: Option<&LocalEngine>,
    resolver: &Resolver,
    target: &str,
    rec: &kiln_store::Record,
) -> Located {
    if let Some(e) = engine {
        let id = rec.image_id.as_str();
        let unique = crate::naming::local_ref(target, id);
        // The unique reference's inspect also answers for every tag of the
        // same image (a skip then checks the tags again, answered from what
        // was learned); tags it does not list are asked together.
        let here = e.image_id(&unique).await;
        if here.as_deref() == Some(id) {
            return Located::Engine {
                source: unique,
                unique_tagged: true,
            };
        }
        let refs: Vec<&str> = rec.tags.iter().map(String::as_str).collect();
        e.prefetch(&refs).await;
        for t in &rec.tags {
            if e.image_id(t).await.as_deref() == Some(id) {
                return Located::Engine {
                    source: t.clone(),
                    unique_tagged: false,
                };
            }
        }
    }
    match in_registry(resolver, rec).await {
        Some(r) => Located::Registry(r),
        None => Located::Gone,
    }
}

/// The `repo@digest` under which a registry still holds a recorded image
/// (pushed when it was built).
pub async fn in_registry(resolver: &Resolver, rec: &kiln_store::Record) -> Option<String> {
    let digest = rec.digest.as_ref()?;
    let registry = resolver.registry()?;
    // A platform unit has no tag: its record names it by digest.
    if rec.tags.is_empty()
        && let Some(r) = rec.image_ref.as_ref().filter(|r| r.contains("@sha256:"))
    {
        return matches!(registry.check(r).await, Ok(Resolution::Found(_))).then(|| r.clone());
    }
    for t in &rec.tags {
        let Some(reference) = at_digest(t, digest) else {
            continue;
        };
        if matches!(registry.check(&reference).await, Ok(Resolution::Found(_))) {
            return Some(reference);
        }
    }
    None
}

/// `tag`'s repository pinned at `digest` (`host/path@digest`, the host
/// and path normalised), the reference [`in_registry`] asks and answers;
/// `None` when `tag` is no image reference.
pub fn at_digest(tag: &str, digest: &str) -> Option<String> {
    let r = kiln_plan::ImageRef::parse(tag)?;
    Some(format!("{}/{}@{digest}", r.domain(), r.path()))
}
