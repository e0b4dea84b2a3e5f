//! Everything `kiln build` does before anything builds: the run id, the
//! bake files and the plan, the specs with their cache policy, the fleet's
//! placement, the preflight, the compiler cache, and the schedule the live
//! view and the report compare against.
//!
//! Must never: build, or write anything but warnings and notes on stderr.

use super::{build_plan, builder_spec, check, fleet_plan, specs_for, verdict};
use crate::error::CliError;
use crate::settings::BuildSettings;

/// What a build needs once it is planned and checked, before anything
/// builds.
pub struct Prepared {
    pub run_id: String,
    pub project: String,
    pub planned: crate::prepare::Planned,
    pub specs: Vec<kiln_engine::BuildSpec>,
    pub nodes: Vec<kiln_engine::run::NodeSpec>,
    pub placement: std::collections::HashMap<String, usize>,
    pub eligible: std::collections::HashMap<String, Vec<usize>>,
    pub builder: Option<kiln_engine::driver::buildx::BuilderSpec>,
    /// The nodes and their build slots: the live view's lanes and the
    /// report's planned schedule.
    pub lanes: Vec<(String, usize)>,
    /// The schedule kiln plans: on a fleet, the one that places targets;
    /// on one engine, planned only for the live view (empty otherwise).
    pub schedule: crate::report::Planned,
    /// The compiler cache's secret file, alive while the run is.
    pub compiler_cache: Option<kiln_engine::proc::TempDir>,
    /// The targets' latest records, being read ahead.
    pub recent: Option<kiln_engine::run::Recent>,
}

/// Everything before the run: the run id, the bake files and the plan,
/// the specs with their cache policy, the fleet's placement, the
/// preflight, the compiler cache, and the schedule the live view and the
/// report compare against.
///
/// On one local engine, connecting to it and asking about the targets'
/// tags start on `rt` as soon as what to ask is known, beside the rest.
pub fn prepare(
    s: &mut BuildSettings,
    rt: &tokio::runtime::Runtime,
    store: &std::sync::Arc<dyn kiln_store::RecordStore>,
) -> Result<Prepared, CliError> {
    // On one engine the preflight asks it, so it is connected to while the
    // bake files are read.
    let one_engine = s.fleet.is_none() && s.driver == crate::cli::DriverKind::Local;
    if one_engine {
        let _rt = rt.enter();
        kiln_engine::driver::local::LocalEngine::start_early(s.store.endpoint.clone(), Vec::new());
    }
    let env_run_id = std::env::var("RUN_ID").ok();
    let run_id = crate::prepare::names::run_id(s.run_id.as_deref(), env_run_id.as_deref())?;
    // --run-id is the bake variable RUN_ID too (unless --var sets it): the
    // bake file's own build names then carry it.
    if s.run_id.is_some() {
        s.bake
            .opts
            .vars
            .entry("RUN_ID".into())
            .or_insert_with(|| run_id.clone());
    }
    let (bake, views) = crate::prepare::stamps::load(&s.bake)?;
    let planned = build_plan(&bake, views.as_ref(), &s.bake, &s.targets)?;
    let mut specs = specs_for(&bake, &planned, &s.bake.cwd, s.push || s.fleet.is_some())?;
    // What the keys read of the targets' own files is gathered while the
    // rest is prepared: on the one engine's platform, else (a builder or a
    // fleet, not asked yet) this machine's, the usual one.
    {
        let _rt = rt.enter();
        kiln_engine::keys::gather_early(
            one_engine.then(|| s.store.endpoint.clone()),
            crate::settings::local_platform(),
            specs.clone(),
            kiln_engine::hashing::StatCache::shared(&s.store.stat_cache),
        );
    }
    // What each pushed tag names in its registry (what a skip verifies),
    // asked while the rest is worked out; the registry's client is set up
    // by the first of these questions.
    if specs.iter().any(|sp| sp.push) {
        let _rt = rt.enter();
        kiln_engine::registry::ask_ahead(
            specs
                .iter()
                .filter(|sp| sp.push)
                .flat_map(|sp| sp.tags.iter().cloned()),
        );
    }
    // What the run asks the engine of recorded targets (their tags and
    // unique references), asked while the rest is worked out.
    if one_engine {
        let _rt = rt.enter();
        kiln_engine::driver::local::LocalEngine::start_early(
            s.store.endpoint.clone(),
            crate::prepare::preflight::engine_images(&specs),
        );
    }
    if s.fleet.is_some()
        && let Some(untagged) = specs.iter().find(|sp| sp.tags.is_empty())
    {
        return Err(CliError::usage(format!(
            "target {}: a fleet run hands every target to the next through the registry by digest, so each needs a tag to push",
            untagged.name
        ))
        .with_hint(format!(
            "give it one, e.g. --set {}.tags=REGISTRY/{}:dev",
            untagged.name, untagged.name
        )));
    }
    let buildx = s.driver == crate::cli::DriverKind::Buildx;
    // On buildx, each platform of a multi-platform target is a unit of its
    // own (its key, record, cache ref and node), joined into one index.
    if buildx {
        let builders: Vec<String> = match &s.fleet {
            Some(f) => crate::prepare::fleet::builder_names(f, &s.bake.cwd)?,
            None => vec![builder_spec(s.builder.as_deref()).name],
        };
        let names: Vec<&str> = builders.iter().map(String::as_str).collect();
        specs = crate::prepare::platforms::split(specs, &names);
    }
    // The record each target last pointed to (what a run that changed
    // nothing finds), read while the rest is worked out, and on one engine
    // the images they name asked about (docs/engine-local.md).
    let recent = if s.force || s.fleet.is_some() {
        None
    } else {
        let _rt = rt.enter();
        kiln_engine::run::Recent::read_ahead(
            store.clone(),
            &specs,
            one_engine.then(|| s.store.endpoint.clone()),
        )
    };
    let (nodes, placement, eligible, fleet_planned) = match &s.fleet {
        Some(f) => {
            let (n, p, e, planned) =
                fleet_plan(f, s.costs.as_deref(), &s.bake.cwd, &s.store.history, &specs)?;
            (n, p, e, Some(planned))
        }
        None => Default::default(),
    };
    // A fleet node's endpoint says how it builds (an engine address, or a
    // buildx builder's name); --driver buildx asks for builders only.
    if buildx && let Some(n) = nodes.iter().find(|n| n.builder.is_none()) {
        return Err(CliError::usage(format!(
            "node {}: --driver buildx builds through buildx builders, but its endpoint {} is a Docker engine address",
            n.name, n.endpoint.host
        ))
        .with_hint("name the node's buildx builder as its endpoint (`docker buildx ls` lists them; a docker context is a docker-driver builder), or drop --driver buildx to build on the engines"));
    }
    let on_engine = if s.fleet.is_some() {
        nodes.iter().any(|n| n.builder.is_none())
    } else {
        !buildx
    };
    crate::prepare::spec::check_grants(&specs, &s.allow, on_engine)?;
    crate::prepare::spec::apply_cache_policies(
        s.driver,
        s.fleet.is_some(),
        &s.cache,
        &nodes,
        &planned,
        &mut specs,
    );
    // What recording the run reads of the history (the costs it learned,
    // each target's last build) is read while the preflight waits for the
    // engine's answers.
    crate::costs::read_ahead(&s.store.history, |h| {
        crate::report::record::last_builds(h);
    });
    // Preflight: nothing starts while an input the run cannot build is
    // missing. (Without an engine the run itself reports it unreachable.)
    // A fleet run checks every node that may build a target needing it.
    let fleet = s.fleet.as_ref().map(|_| (nodes.as_slice(), &eligible));
    let builder = (buildx && s.fleet.is_none()).then(|| builder_spec(s.builder.as_deref()));
    verdict(&check(
        &planned,
        &specs,
        &s.store,
        fleet,
        builder.as_ref(),
        true,
        rt,
    )?)?;
    // The compiler cache: probed, then handed to every build as a secret
    // (the file lives as long as this guard).
    let compiler_cache = match &s.compiler_cache {
        Some(location) => crate::prepare::compiler_cache::compiler_cache(
            location,
            s.require_compiler_cache,
            s.force_recache,
            &mut specs,
        )?,
        None => None,
    };
    // The schedule kiln plans (on a fleet, the one that places targets;
    // on one engine, the same policy over its slots): the live view's
    // expected times and the report's planned lanes.
    let lanes: Vec<(String, usize)> = if s.fleet.is_some() {
        nodes
            .iter()
            .map(|n| (n.name.clone(), n.slots.max(1)))
            .collect()
    } else {
        vec![(
            builder
                .as_ref()
                .map(|b| b.name.clone())
                .unwrap_or_else(|| s.store.endpoint.host.clone()),
            s.jobs.max(1),
        )]
    };
    // Off a fleet only the live view reads it (its expected times): other
    // progress modes do not plan it (the report plans what the run did).
    let live_view = matches!(
        s.progress,
        crate::cli::Progress::Tty | crate::cli::Progress::Auto
    ) && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let schedule = match fleet_planned {
        Some(p) => p,
        None if !live_view => Default::default(),
        None => crate::prepare::fleet::plan_for_report(
            &specs,
            crate::prepare::fleet::ReportNodes::One {
                name: &lanes[0].0,
                slots: lanes[0].1,
            },
            &Default::default(),
            s.costs.as_deref(),
            &s.bake.cwd,
            &s.store.history,
        )
        .unwrap_or_default(),
    };
    let project = s
        .bake
        .project_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kiln".into());
    for spec in &mut specs {
        crate::prepare::names::name_build(spec, &project, &run_id);
    }
    Ok(Prepared {
        run_id,
        project,
        planned,
        specs,
        nodes,
        placement,
        eligible,
        builder,
        lanes,
        schedule,
        compiler_cache,
        recent,
    })
}
