//! `kiln plan`: the ordered closure of the requested targets with each
//! target's direct dependencies and what a build would do with it (content
//! key, `build`/`skip`, why), as text, JSON, or a mermaid/dot graph.
//!
//! Must never: build, tag, push or record anything, or run the buildx
//! commands it shows (they are printed for reading).

use std::io::Write;

use crate::cli::{DriverKind, Format, GraphFormat};
use crate::error::CliError;
use crate::prepare::{Planned, build_plan, cache_policy, predictions, probe_refs, spec_for};
use crate::settings::{BakeSettings, StoreSettings};

pub struct PlanSettings {
    pub bake: BakeSettings,
    pub store: StoreSettings,
    pub cache: kiln_plan::cache::CacheSettings,
    pub driver: DriverKind,
    pub builder: String,
    pub probe_cache: bool,
    pub format: Format,
    pub graph: Option<GraphFormat>,
    pub targets: Vec<String>,
}

pub fn run(s: PlanSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let (bake, views) = crate::prepare::stamps::load(&s.bake)?;
    let planned = build_plan(&bake, views.as_ref(), &s.bake, &s.targets)?;
    let names: Vec<&str> = planned
        .plan
        .targets
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    // Targets whose key cannot be computed (a missing Dockerfile or
    // context): the plan is still printed, then the run is bad input.
    let mut unplannable: Vec<String> = Vec::new();
    let text = match (s.graph, s.format) {
        (Some(GraphFormat::Mermaid), _) => planned.graph.render_mermaid(&names),
        (Some(GraphFormat::Dot), _) => planned.graph.render_dot(&names),
        (None, format) => {
            let builder = (s.driver == DriverKind::Buildx)
                .then(|| crate::prepare::builder_spec(Some(&s.builder)));
            let predicted = predictions(&bake, &planned, &s.bake, &s.store, builder.as_ref())?;
            unplannable = predicted
                .iter()
                .filter_map(|p| {
                    p.reason
                        .strip_prefix("cannot compute the key: ")
                        .map(|r| format!("{}: {r}", p.name))
                })
                .collect();
            let mut plan = planned.plan.clone();
            // A target built as platform units (buildx) gets a row per unit,
            // just before its own row (the join that makes its index).
            let mut rows = Vec::with_capacity(plan.targets.len());
            for t in std::mem::take(&mut plan.targets) {
                let prefix = format!("{}@", t.name);
                for p in predicted.iter().filter(|p| p.name.starts_with(&prefix)) {
                    let mut unit = t.clone();
                    unit.name = p.name.clone();
                    unit.platforms = vec![p.name[prefix.len()..].to_string()];
                    rows.push(unit);
                }
                rows.push(t);
            }
            plan.targets = rows;
            for t in &mut plan.targets {
                if let Some(p) = predicted.iter().find(|p| p.name == t.name) {
                    t.key = p.key.clone();
                    t.action = Some(
                        match p.action {
                            kiln_engine::keys::Action::Build => "build",
                            kiln_engine::keys::Action::Skip => "skip",
                        }
                        .into(),
                    );
                    t.reason = Some(p.reason.clone());
                }
            }
            let driver = match s.driver {
                DriverKind::Local => kiln_plan::cache::Driver::Local,
                DriverKind::Buildx => kiln_plan::cache::Driver::Buildx,
            };
            for t in &mut plan.targets {
                let Some(bt) = planned.targets.get(&t.name) else {
                    continue;
                };
                t.cache = cache_policy(bt, &s.cache, driver, false);
                if driver == kiln_plan::cache::Driver::Buildx
                    && let Ok(spec) = spec_for(&planned, &t.name, &s.bake.cwd, false)
                    && let Some(p) = t.cache.first()
                {
                    t.command = Some(kiln_engine::driver::buildx::command(
                        &spec,
                        p,
                        &buildx_hand_over(&spec, &planned),
                        &kiln_engine::driver::buildx::BuildxOptions {
                            builder: s.builder.clone(),
                            ..Default::default()
                        },
                        &s.bake.cwd,
                    ));
                }
            }
            if s.probe_cache {
                probe_cache_refs(&mut plan)?;
            }
            if format == Format::Json {
                let mut t = serde_json::to_string_pretty(&plan)
                    .map_err(|e| CliError::env(e.to_string()))?;
                t.push('\n');
                t
            } else {
                let mut text = plan.render_text();
                for t in &plan.targets {
                    if let Some(argv) = &t.command {
                        text.push_str(&format!("\n# {}\n", t.name));
                        text.push_str(&kiln_engine::driver::buildx::render(argv));
                    }
                }
                text
            }
        }
    };
    crate::output::write(out, &text)?;
    // The plan is printed either way (the graph of files without their
    // Dockerfiles, a reference stack, is still worth reading), but plan and
    // build must agree: what `kiln build` refuses is bad input here too.
    if !unplannable.is_empty() {
        return Err(CliError::usage(format!(
            "{} target(s) cannot be built as the files say (kiln build stops on the same):\n  {}",
            unplannable.len(),
            unplannable.join("\n  ")
        ))
        .with_hint(
            "add what is missing, or read the graph alone with `kiln plan --graph mermaid` (or `dot`) or `kiln print`",
        ));
    }
    Ok(())
}

/// What a buildx command hands each named context and dependency tag: the
/// dependency's first tag pinned by the digest its build will push
/// (`REPO@<digest of DEP>`: known only after that build).
fn buildx_hand_over(
    spec: &kiln_engine::BuildSpec,
    planned: &Planned,
) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let pinned = |dep: &str| {
        let repo = planned
            .targets
            .get(dep)
            .and_then(|t| t.tags.as_ref()?.first().cloned())
            .map(|tag| kiln_plan::repository_name(&tag).to_string())
            .unwrap_or_else(|| format!("kiln.local/{dep}"));
        format!("{repo}@<digest of {dep}>")
    };
    for (ctx, src) in &spec.contexts {
        match src {
            kiln_engine::ContextSource::Target { name } => {
                out.insert(ctx.clone(), pinned(name));
            }
            kiln_engine::ContextSource::Image {
                producer: Some(p), ..
            } => {
                out.insert(ctx.clone(), pinned(p));
            }
            _ => {}
        }
    }
    for d in &spec.deps {
        if let Some(t) = planned.targets.get(d) {
            for tag in t.tags.iter().flatten() {
                out.entry(tag.clone()).or_insert_with(|| pinned(d));
            }
        }
    }
    out
}

/// Asks each registry whether the registry cache refs to import exist: a
/// raw manifest request (`HEAD`), which finds cache-only manifests too.
/// A ref whose registry cannot be asked stays unprobed.
fn probe_cache_refs(plan: &mut kiln_plan::Plan) -> Result<(), CliError> {
    let refs = plan
        .targets
        .iter()
        .flat_map(|t| t.cache.iter())
        .flat_map(|c| c.from.iter())
        .filter(|e| e.kind() == "registry")
        .filter_map(|e| e.reference().map(String::from));
    let found = probe_refs(refs)?;
    for e in plan
        .targets
        .iter_mut()
        .flat_map(|t| t.cache.iter_mut())
        .flat_map(|c| c.from.iter_mut())
    {
        if let Some(r) = e.reference() {
            e.exists = found.get(r).copied().flatten();
        }
    }
    Ok(())
}
