//! `kiln plan`: the ordered closure of the requested targets with each
//! target's direct dependencies and what a build would do with it (content
//! key, `build`/`skip`, why), as text, JSON, or a mermaid/dot graph.

use std::io::Write;

use kiln_bake::{Bake, Diags};
use kiln_plan::{Graph, GraphError, Plan, PlanTarget};

use crate::cli::{DriverKind, Format, GraphFormat};
use crate::error::CliError;
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

fn plan_target(t: &kiln_bake::Target) -> PlanTarget {
    PlanTarget {
        name: t.name.clone(),
        context: t.context.clone().unwrap_or_else(|| ".".into()),
        dockerfile: t.dockerfile.clone().unwrap_or_else(|| "Dockerfile".into()),
        contexts: t.contexts.clone().unwrap_or_default(),
        args: t
            .args
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect(),
        tags: t.tags.clone().unwrap_or_default(),
        platforms: t.platforms.clone().unwrap_or_default(),
        target: t.target.clone(),
    }
}

/// Maps a graph error to a CLI error pointing at the bake file.
fn graph_error(bake: &Bake, e: GraphError) -> CliError {
    let text = e.to_string();
    let (message, hint) = match text.split_once("\nhint: ") {
        Some((m, h)) => (m.to_string(), Some(h.to_string())),
        None => (text, None),
    };
    let span = match &e {
        GraphError::Cycle { path } => path.first().and_then(|n| {
            bake.config
                .attr_spans
                .get(&(n.clone(), "contexts".into()))
                .or(bake.config.target_spans.get(n))
        }),
        GraphError::UnknownContextTarget { target, .. } => bake
            .config
            .attr_spans
            .get(&(target.clone(), "contexts".into())),
        GraphError::UnknownTarget { name, .. } | GraphError::DuplicateTarget { name } => {
            bake.config.target_spans.get(name)
        }
    };
    let rendered = match span {
        Some(s) => kiln_bake::diag::render(&Diags::at(*s, message.clone(), ""), &bake.sources),
        None => message,
    };
    let mut err = CliError::usage(rendered);
    if let Some(h) = hint {
        err = err.with_hint(h);
    }
    err
}

/// Builds the graph over every target of the files (so that references to
/// tags another target produces become edges) and plans the requested ones.
/// A plan with the graph it came from and the resolved targets.
pub struct Planned {
    pub graph: Graph,
    pub plan: Plan,
    /// Resolved bake targets by name (every target of the plan is here).
    pub targets: std::collections::BTreeMap<String, kiln_bake::Target>,
}

pub fn build_plan(
    bake: &Bake,
    s: &BakeSettings,
    requested: &[String],
) -> Result<Planned, CliError> {
    let r = super::resolve(bake, s, requested)?;
    let all: Vec<String> = bake.config.targets.iter().map(|t| t.name.clone()).collect();
    // Targets outside the request matter when a requested one names their
    // tag. If some unrelated target cannot be resolved, plan with what was
    // requested and say that image-reference edges may be incomplete.
    let full = bake.resolve(&all, &s.sets, &s.opts).unwrap_or_else(|e| {
        eprintln!(
            "warning: not every target in the files resolves ({}); dependencies through image references to targets outside the request may be missing",
            e.to_string().lines().next().unwrap_or_default()
        );
        r.clone()
    });
    let mut targets: Vec<PlanTarget> = bake
        .config
        .targets
        .iter()
        .filter_map(|t| full.targets.get(&t.name).or(r.targets.get(&t.name)))
        .map(plan_target)
        .collect();
    let present: std::collections::HashSet<String> =
        targets.iter().map(|t| t.name.clone()).collect();
    for (n, t) in &r.targets {
        if !present.contains(n) {
            targets.push(plan_target(t));
        }
    }
    let graph = Graph::new(targets).map_err(|e| graph_error(bake, e))?;
    let wanted: Vec<&str> = r.order.iter().map(String::as_str).collect();
    let plan = Plan::new(&graph, &wanted).map_err(|e| graph_error(bake, e))?;
    let mut resolved = full.targets;
    resolved.extend(r.targets);
    let targets = plan
        .targets
        .iter()
        .filter_map(|t| resolved.remove(&t.name).map(|x| (t.name.clone(), x)))
        .collect();
    Ok(Planned {
        graph,
        plan,
        targets,
    })
}

/// Predicts what `kiln build` would do with each planned target: keys
/// computed as the build will compute them, looked up in the record store,
/// recorded images checked on the engine. Never builds or writes.
///
/// A target the local driver cannot build (or whose Dockerfile is
/// missing) gets a `build` prediction naming the problem; its dependents'
/// keys stay pending. With no engine answering, a warning says that base
/// images are unresolved and nothing can be confirmed as skippable.
pub fn predictions(
    bake: &Bake,
    planned: &Planned,
    b: &BakeSettings,
    st: &StoreSettings,
) -> Result<Vec<kiln_engine::keys::Prediction>, CliError> {
    use super::build::{engine_error, missing_dockerfile, open_store, runtime, spec_for};
    let mut specs = Vec::new();
    let mut unbuildable = Vec::new();
    for t in &planned.plan.targets {
        match spec_for(planned, &t.name, &b.cwd, false)
            .and_then(|spec| missing_dockerfile(bake, &spec).map(|()| spec))
        {
            Ok(spec) => specs.push(spec),
            Err(e) => unbuildable.push((t.name.clone(), e.message)),
        }
    }
    let (store, cache) = open_store(st)?;
    let rt = runtime()?;
    let engine = rt.block_on(async {
        let connect = kiln_engine::local::LocalEngine::connect(st.endpoint.clone());
        match tokio::time::timeout(std::time::Duration::from_secs(10), connect).await {
            Ok(Ok(e)) => Some(e),
            Ok(Err(e)) => {
                eprintln!(
                    "warning: {e}; no recorded image can be confirmed without an engine, so every target is predicted to build"
                );
                None
            }
            Err(_) => {
                eprintln!(
                    "warning: the Docker engine at {} did not answer within 10s; every target is predicted to build",
                    st.endpoint.host
                );
                None
            }
        }
    });
    let registry = kiln_engine::registry::Registry::new(std::time::Duration::from_secs(30)).ok();
    let mut out = rt
        .block_on(kiln_engine::keys::predict(
            engine.as_ref(),
            registry.as_ref(),
            &specs,
            store.as_ref(),
            cache,
        ))
        .map_err(|e| engine_error(e, &st.endpoint))?;
    for (name, message) in unbuildable {
        let first = message.lines().next().unwrap_or_default().to_string();
        out.push(kiln_engine::keys::Prediction {
            name,
            key: None,
            action: kiln_engine::keys::Action::Build,
            reason: format!("cannot compute the key: {first}"),
            changes: Vec::new(),
            recorded_key: None,
            recorded_at: None,
            manifest: Default::default(),
        });
    }
    Ok(out)
}

pub fn run(s: PlanSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let bake = super::load(&s.bake)?;
    let planned = build_plan(&bake, &s.bake, &s.targets)?;
    let names: Vec<&str> = planned
        .plan
        .targets
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let text = match (s.graph, s.format) {
        (Some(GraphFormat::Mermaid), _) => planned.graph.render_mermaid(&names),
        (Some(GraphFormat::Dot), _) => planned.graph.render_dot(&names),
        (None, format) => {
            let predicted = predictions(&bake, &planned, &s.bake, &s.store)?;
            let mut plan = planned.plan.clone();
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
                    && let Ok(spec) = super::build::spec_for(&planned, &t.name, &s.bake.cwd, false)
                    && let Some(p) = t.cache.first()
                {
                    t.command = Some(kiln_engine::buildx::command(
                        &spec,
                        p,
                        &buildx_hand_over(&spec, &planned),
                        &kiln_engine::buildx::BuildxOptions {
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
                        text.push_str(&kiln_engine::buildx::render(argv));
                    }
                }
                text
            }
        }
    };
    crate::output::write(out, &text)
}

/// The cache policy of a resolved bake target on `driver`, one per platform.
pub fn cache_policy(
    t: &kiln_bake::Target,
    settings: &kiln_plan::cache::CacheSettings,
    driver: kiln_plan::cache::Driver,
    push: bool,
) -> Vec<kiln_plan::cache::CachePolicy> {
    use kiln_plan::cache::{CacheTarget, entry_pairs, policy};
    let pairs = |v: &Option<Vec<kiln_bake::model::Entry>>| -> Vec<Vec<(String, String)>> {
        v.iter().flatten().map(entry_pairs).collect()
    };
    let tags = t.tags.clone().unwrap_or_default();
    let platforms = t.platforms.clone().unwrap_or_default();
    let from = pairs(&t.cache_from);
    let to = pairs(&t.cache_to);
    let pushes = push
        || t.output.iter().flatten().any(|e| {
            e.get("type").and_then(|v| v.as_str()) == Some("registry")
                || e.get("push").and_then(|v| v.as_str()) == Some("true")
        });
    policy(
        &CacheTarget {
            name: &t.name,
            tags: &tags,
            platforms: &platforms,
            cache_from: &from,
            cache_to: &to,
            push: pushes,
        },
        settings,
        driver,
    )
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

/// Whether each registry ref exists (a raw manifest request; a cache-only
/// manifest counts): `Some(true|false)`, or `None` when its registry could
/// not be asked. Each ref is asked once; a registry that fails once is not
/// asked again (one warning per registry).
pub fn probe_refs(
    refs: impl IntoIterator<Item = String>,
) -> Result<std::collections::HashMap<String, Option<bool>>, CliError> {
    use kiln_engine::registry::Resolution;
    let registry = kiln_engine::registry::Registry::new(std::time::Duration::from_secs(10))
        .map_err(|e| CliError::env(e.to_string()))?;
    let rt = super::build::runtime()?;
    let mut out = std::collections::HashMap::new();
    let mut dead: std::collections::HashSet<String> = Default::default();
    for r in refs {
        if out.contains_key(&r) {
            continue;
        }
        let host = kiln_plan::ImageRef::parse(&r)
            .map(|i| i.domain().to_string())
            .unwrap_or_default();
        let found = if dead.contains(&host) {
            None
        } else {
            match rt.block_on(registry.check(&r)) {
                Ok(Resolution::Found(_)) => Some(true),
                Ok(Resolution::Absent) => Some(false),
                Err(err) => {
                    eprintln!("warning: cannot probe cache refs on {host}: {err}");
                    dead.insert(host);
                    None
                }
            }
        };
        out.insert(r, found);
    }
    Ok(out)
}
