//! The resolved targets as a plan ([`Planned`], [`build_plan`]) and what a
//! build would do with each ([`predictions`]).
//!
//! Must never: build, tag or write anything (a prediction only looks), or
//! fail for want of an engine or a builder: without one, a warning says so
//! and every target is predicted to build.

use kiln_bake::{Bake, Diags};
use kiln_plan::{Graph, GraphError, Plan, PlanTarget};

use super::bake::resolve;
use super::engine::{engine_error, open_store, runtime};
use super::spec::{missing_dockerfile, spec_for};
use crate::error::CliError;
use crate::settings::{BakeSettings, StoreSettings};

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
                .copied()
        }),
        GraphError::UnknownContextTarget {
            target,
            context,
            name,
            ..
        } => bake
            .config
            .entry_span(target, "contexts", context, &format!("target:{name}")),
        GraphError::UnknownTarget { name, .. } | GraphError::DuplicateTarget { name } => {
            bake.config.target_spans.get(name).copied()
        }
    };
    let rendered = match span {
        Some(s) => kiln_bake::diag::render(&Diags::at(s, message.clone(), ""), &bake.sources),
        None => message,
    };
    let mut err = CliError::usage(rendered);
    if let Some(h) = hint {
        err = err.with_hint(h);
    }
    err
}

/// A plan with the graph it came from and the resolved targets.
pub struct Planned {
    pub graph: Graph,
    pub plan: Plan,
    /// Resolved bake targets by name (every target of the plan is here).
    pub targets: std::collections::BTreeMap<String, kiln_bake::Target>,
    /// The args and labels each target stamped by `VCS_REF`/`BUILD_DATE`
    /// is keyed by (`stamps`).
    pub key_views: std::collections::BTreeMap<String, kiln_engine::KeyView>,
    /// The stamp values this run builds with.
    pub stamps: std::collections::BTreeMap<String, String>,
}

/// Builds the graph over every target of the files (so that references to
/// tags another target produces become edges) and plans the requested ones.
/// `bake` and `views` are what [`super::stamps::load`] read: with stamp
/// variables, the files evaluated with the stamps (what is built) and
/// with stand-ins (what is keyed).
pub fn build_plan(
    bake: &Bake,
    views: Option<&super::stamps::Views>,
    s: &BakeSettings,
    requested: &[String],
) -> Result<Planned, CliError> {
    let r = resolve(bake, s, requested)?;
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
    let mut targets: std::collections::BTreeMap<String, kiln_bake::Target> = plan
        .targets
        .iter()
        .filter_map(|t| resolved.remove(&t.name).map(|x| (t.name.clone(), x)))
        .collect();
    let with_epoch = |t: &mut kiln_bake::Target| {
        // Every target builds with a SOURCE_DATE_EPOCH: its own (an arg of
        // the bake file, `null` to have none), else the run's.
        if let Some(sde) = &s.sde_default {
            t.args
                .get_or_insert_with(Default::default)
                .entry("SOURCE_DATE_EPOCH".into())
                .or_insert_with(|| Some(sde.clone()));
        }
    };
    targets.values_mut().for_each(with_epoch);
    let mut key_views = std::collections::BTreeMap::new();
    let mut stamps = std::collections::BTreeMap::new();
    if let Some(v) = views {
        stamps = v.values.clone();
        let names: Vec<String> = targets.keys().cloned().collect();
        let keyed = v
            .keyed
            .resolve(&names, &s.sets, &s.opts)
            .map_err(CliError::from)?;
        for (name, real) in &targets {
            let Some(mut k) = keyed.targets.get(name).cloned() else {
                continue;
            };
            with_epoch(&mut k);
            if let Some(view) = super::stamps::key_view(name, real, &k)? {
                key_views.insert(name.clone(), view);
            }
        }
    }
    Ok(Planned {
        graph,
        plan,
        targets,
        key_views,
        stamps,
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
    builder: Option<&kiln_engine::driver::buildx::BuilderSpec>,
) -> Result<Vec<kiln_engine::keys::Prediction>, CliError> {
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
    // On buildx, as `kiln build` splits them: a multi-platform target's
    // platforms are units of their own, joined into its index.
    if let Some(b) = builder {
        specs = crate::prepare::platforms::split(specs, &[b.name.as_str()]);
    }
    let (store, cache) = open_store(st)?;
    let rt = runtime()?;
    // A buildx builder decides where the images are: its engine, or the
    // registry alone for a builder that keeps no image store.
    let mut registry_only = None;
    let mut builder_engine = None;
    if let Some(bs) = builder {
        // A plan never needs the builder: without it, nothing recorded can
        // be confirmed, and every target is predicted to build.
        match rt.block_on(kiln_engine::driver::buildx::BuildxDriver::connect(bs)) {
            Ok(d) => match kiln_engine::driver::Driver::engine(&d) {
                Some(e) => builder_engine = Some(e.clone()),
                None => registry_only = Some(d.native_platform()),
            },
            Err(e) => eprintln!(
                "warning: {e}; no recorded image can be confirmed without the builder, so every target is predicted to build"
            ),
        }
    }
    let engine = rt.block_on(async {
        if builder.is_some() {
            return builder_engine;
        }
        let connect = kiln_engine::driver::local::LocalEngine::connect(st.endpoint.clone());
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
            registry_only,
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
            damaged: None,
            manifest: Default::default(),
        });
    }
    Ok(out)
}
