//! `kiln why TARGET`: what changed in a target's inputs since its last
//! recorded build — file paths, build args with old and new values, base
//! image digests, upstream outputs — or that nothing did.
//!
//! The current inputs are computed exactly as `kiln build` computes them
//! (upstreams that would be skipped take their recorded outputs; one that
//! would be rebuilt shows as a pending new output).
//!
//! Must never: build, tag or write anything, or compute a key another way
//! than `kiln build` does (it reads the same predictions as `kiln plan`).

use std::io::Write;

use serde::Serialize;

use crate::cli::Format;
use crate::error::CliError;
use crate::prepare::{build_plan, predictions};
use crate::settings::{BakeSettings, StoreSettings};

pub struct WhySettings {
    pub bake: BakeSettings,
    pub store: StoreSettings,
    pub format: Format,
    /// `--driver buildx`: the builder (keys as buildx builds them).
    pub builder: Option<kiln_engine::driver::buildx::BuilderSpec>,
    pub target: String,
}

/// The `kiln why --format json` contract.
#[derive(Debug, Serialize)]
struct Why {
    target: String,
    /// `unchanged`, `changed`, `never-built` or `damaged` (the last
    /// record cannot be read: `damaged` says why).
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    damaged: Option<String>,
    /// The current key (`null` while an upstream output is pending).
    key: Option<String>,
    recorded_key: Option<String>,
    recorded_at: Option<String>,
    /// What `kiln build` would do now, and why.
    action: &'static str,
    reason: String,
    changes: Vec<kiln_plan::key::Change>,
    /// For each changed upstream: the target that produces it and what
    /// changed there, down to the inputs that are not upstreams (the root
    /// cause).
    causes: Vec<Cause>,
    /// A target built as platform units (buildx): each unit, what `kiln
    /// build` would do with it and what changed in it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    units: Vec<UnitWhy>,
}

/// One platform unit of the target `kiln why` explains.
#[derive(Debug, Serialize)]
struct UnitWhy {
    target: String,
    action: &'static str,
    reason: String,
    changes: Vec<kiln_plan::key::Change>,
}

/// An upstream whose output changes, traced to its target.
#[derive(Debug, Serialize)]
struct Cause {
    /// The named context (or image) the dependent takes it by.
    context: String,
    /// The target that produces it.
    target: String,
    /// What `kiln build` would do with that target.
    action: &'static str,
    changes: Vec<kiln_plan::key::Change>,
    causes: Vec<Cause>,
}

fn action_name(a: &kiln_engine::keys::Action) -> &'static str {
    match a {
        kiln_engine::keys::Action::Build => "build",
        kiln_engine::keys::Action::Skip => "skip",
    }
}

/// The targets behind `changes`' upstreams, each with its own changes,
/// recursively (each target once).
fn causes(
    target: &str,
    changes: &[kiln_plan::key::Change],
    planned: &crate::prepare::Planned,
    all: &[kiln_engine::keys::Prediction],
    seen: &mut std::collections::BTreeSet<String>,
) -> Vec<Cause> {
    let mut out = Vec::new();
    for c in changes {
        let kiln_plan::key::Change::Upstream { context, .. } = c else {
            continue;
        };
        let producer = planned
            .targets
            .get(target)
            .and_then(|t| t.contexts.as_ref())
            .and_then(|m| m.get(context))
            .and_then(|v| v.strip_prefix("target:"))
            .map(String::from)
            .or_else(|| {
                // A tag another target produces, named directly.
                planned
                    .graph
                    .producers(context)
                    .first()
                    .map(|p| p.to_string())
            });
        let Some(producer) = producer else { continue };
        if !seen.insert(producer.clone()) {
            continue;
        }
        let Some(p) = all.iter().find(|p| p.name == producer) else {
            continue;
        };
        out.push(Cause {
            context: context.clone(),
            target: producer.clone(),
            action: action_name(&p.action),
            causes: causes(&producer, &p.changes, planned, all, seen),
            changes: p.changes.clone(),
        });
    }
    out
}

fn render_causes(t: &mut String, causes: &[Cause], depth: usize) {
    let pad = "    ".repeat(depth);
    for c in causes {
        t.push_str(&format!(
            "{pad}  ← {} produces {} (would {}){}\n",
            c.target,
            c.context,
            c.action,
            if c.changes.is_empty() { "" } else { ":" }
        ));
        for ch in &c.changes {
            t.push_str(&format!("{pad}      {ch}\n"));
        }
        render_causes(t, &c.causes, depth + 1);
    }
}

pub fn run(s: WhySettings, out: &mut dyn Write) -> Result<(), CliError> {
    let (bake, views) = crate::prepare::stamps::load(&s.bake)?;
    // `TARGET@PLATFORM` names a platform unit of TARGET.
    let base = match s.target.split_once('@') {
        Some((t, _)) => t.to_string(),
        None => s.target.clone(),
    };
    let requested = vec![base.clone()];
    let planned = build_plan(&bake, views.as_ref(), &s.bake, &requested)?;
    if planned.graph.target(&base).is_none() {
        return Err(CliError::usage(format!(
            "{base} is not a target (kiln why explains one target, not a group)"
        )));
    }
    let all = predictions(&bake, &planned, &s.bake, &s.store, s.builder.as_ref())?;
    let p = all
        .iter()
        .find(|p| p.name == s.target)
        .cloned()
        .ok_or_else(|| match s.target.split_once('@') {
            Some((t, platform)) => CliError::usage(format!(
                "{t} has no platform unit {platform}: a target is built as platform units only on a buildx builder that pushes by digest (--driver buildx --builder NAME), one unit per platform it names"
            )),
            None => CliError::usage(format!("target {} was not planned", s.target)),
        })?;
    let prefix = format!("{}@", s.target);
    let units: Vec<UnitWhy> = all
        .iter()
        .filter(|u| u.name.starts_with(&prefix))
        .map(|u| UnitWhy {
            target: u.name.clone(),
            action: action_name(&u.action),
            reason: u.reason.clone(),
            changes: u.changes.clone(),
        })
        .collect();
    let mut seen = std::collections::BTreeSet::from([s.target.clone()]);
    let causes = causes(&s.target, &p.changes, &planned, &all, &mut seen);
    let status = match (&p.recorded_key, &p.key) {
        (None, _) if p.damaged.is_some() => "damaged",
        (None, _) => "never-built",
        (Some(r), Some(k)) if r == k => "unchanged",
        (Some(_), _) if p.changes.is_empty() && p.key.is_some() => "unchanged",
        _ => "changed",
    };
    let why = Why {
        target: s.target.clone(),
        status,
        damaged: p.damaged.clone(),
        key: p.key.clone(),
        recorded_key: p.recorded_key.clone(),
        recorded_at: p.recorded_at.clone(),
        action: match p.action {
            kiln_engine::keys::Action::Build => "build",
            kiln_engine::keys::Action::Skip => "skip",
        },
        reason: p.reason.clone(),
        changes: p.changes,
        causes,
        units,
    };
    let text = match s.format {
        Format::Json => {
            let mut t =
                serde_json::to_string_pretty(&why).map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => {
            let mut t = String::new();
            let at = why.recorded_at.as_deref().unwrap_or("?");
            match why.status {
                "never-built" => t.push_str(&format!(
                    "{}: never built (no record in the store)\n",
                    why.target
                )),
                "damaged" => t.push_str(&format!(
                    "{}: its last record cannot be used ({}); nothing to compare with\n",
                    why.target,
                    why.damaged.as_deref().unwrap_or("damaged")
                )),
                "unchanged" => t.push_str(&format!(
                    "{}: unchanged since the build recorded at {at}\n",
                    why.target
                )),
                _ => {
                    t.push_str(&format!(
                        "{}: {} input(s) changed since the build recorded at {at}:\n",
                        why.target,
                        why.changes.len()
                    ));
                    for c in &why.changes {
                        t.push_str(&format!("  {c}\n"));
                    }
                    render_causes(&mut t, &why.causes, 0);
                }
            }
            t.push_str(&format!("would {}: {}\n", why.action, why.reason));
            for u in &why.units {
                t.push_str(&format!(
                    "  unit {}: would {}: {}\n",
                    u.target, u.action, u.reason
                ));
                for c in &u.changes {
                    t.push_str(&format!("      {c}\n"));
                }
            }
            t
        }
    };
    crate::output::write(out, &text)
}
