//! `kiln preflight [TARGET]...`: checks, before any build, that every image
//! the run needs and does not build itself exists — on the engine or in its
//! registry — and names what is missing with the target that produces it.
//! `kiln build` runs the same check first.
//!
//! Must never: build, pull or tag anything, or fail for a missing cache
//! ref (a warning: the build starts without that cache).

use std::io::Write;

use kiln_engine::preflight::{Checked, Status};

use crate::cli::Format;
use crate::error::CliError;
use crate::prepare::{
    Planned, build_plan, cache_policy, check, fleet_plan, probe_refs, specs_for, verdict,
};
use crate::settings::{BakeSettings, StoreSettings};

pub struct PreflightSettings {
    pub bake: BakeSettings,
    pub store: StoreSettings,
    pub fleet: Option<String>,
    pub costs: Option<String>,
    pub format: Format,
    pub targets: Vec<String>,
}

pub fn run(s: PreflightSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let (bake, views) = crate::prepare::stamps::load(&s.bake)?;
    let planned = build_plan(&bake, views.as_ref(), &s.bake, &s.targets)?;
    let specs = specs_for(&bake, &planned, &s.bake.cwd, false)?;
    let fleet_plan = match &s.fleet {
        Some(f) => Some(fleet_plan(
            f,
            s.costs.as_deref(),
            &s.bake.cwd,
            &s.store.history,
            &specs,
        )?),
        None => None,
    };
    let fleet = fleet_plan.as_ref().map(|(n, _, e, _)| (n.as_slice(), e));
    let rt = crate::prepare::runtime()?;
    let checked = check(&planned, &specs, &s.store, fleet, None, false, &rt)?;
    let missing_cache = missing_cache_refs(&planned)?;
    for (target, r) in &missing_cache {
        eprintln!(
            "warning: cache ref {r} of target {target} does not exist (yet): the build starts without that cache"
        );
    }
    let text = match s.format {
        Format::Json => {
            let mut t = serde_json::to_string_pretty(&serde_json::json!({
                "ok": checked.iter().all(Checked::ok),
                "images": checked,
                "missing_cache_refs": missing_cache
                    .iter()
                    .map(|(t, r)| serde_json::json!({"target": t, "ref": r}))
                    .collect::<Vec<_>>(),
            }))
            .map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => {
            let mut t = String::new();
            for c in &checked {
                let where_ = match &c.status {
                    Status::Engine { .. } => "on the engine".to_string(),
                    Status::Registry { digest } => format!("in the registry ({digest})"),
                    Status::Missing => "MISSING".to_string(),
                    Status::Auth { .. } => "cannot be checked (auth or proxy)".to_string(),
                    Status::Unreachable { .. } => "cannot be checked (unreachable)".to_string(),
                    Status::Invalid { .. } => "not an image reference".to_string(),
                    Status::NotOnEveryNode { on, missing_on, .. } => format!(
                        "on {} only, MISSING on {}",
                        on.join(", "),
                        missing_on.join(", ")
                    ),
                };
                t.push_str(&format!(
                    "{}  {where_}  (needed by {})\n",
                    c.need.reference,
                    c.need.needed_by.join(", ")
                ));
            }
            t.push_str(&format!(
                "{} image(s) needed from outside the run, {} available\n",
                checked.len(),
                checked.iter().filter(|c| c.ok()).count()
            ));
            t
        }
    };
    crate::output::write(out, &text)?;
    verdict(&checked)
}

/// Registry cache refs the run's targets would import (the user's
/// `cache-from` entries and kiln's per-commit refs of targets whose
/// outputs push — the refs `kiln plan` shows; a tag that never leaves the
/// machine is not asked of a registry) that the registry does not hold:
/// warnings, never failures. Refs whose registry cannot be asked are left
/// out.
fn missing_cache_refs(planned: &Planned) -> Result<Vec<(String, String)>, CliError> {
    let mut wanted: Vec<(String, String)> = Vec::new();
    for t in &planned.plan.targets {
        let Some(bt) = planned.targets.get(&t.name) else {
            continue;
        };
        let policies = cache_policy(
            bt,
            &Default::default(),
            kiln_plan::cache::Driver::Local,
            false,
        );
        for e in policies.iter().flat_map(|p| p.from.iter()) {
            if let Some(r) = e.reference().filter(|_| e.kind() == "registry") {
                wanted.push((t.name.clone(), r.to_string()));
            }
        }
    }
    let found = probe_refs(wanted.iter().map(|(_, r)| r.clone()))?;
    Ok(wanted
        .into_iter()
        .filter(|(_, r)| found.get(r) == Some(&Some(false)))
        .collect())
}
