//! The preflight check `kiln build` runs first and `kiln preflight` runs
//! alone: every image the run needs and does not build itself, looked for
//! on the engine (or every fleet node that may need it) and in registries.
//!
//! Must never: build, pull or tag anything: the engines and registries are
//! only asked what they hold.

use kiln_engine::preflight::{Checked, Need, Status};

use super::engine::engine_error;
use super::plan::Planned;
use crate::error::{CliError, Kind};
use crate::settings::StoreSettings;

/// The images the run needs from outside: external images of the needed
/// stages (after arg resolution) and `docker-image://` contexts, minus what
/// targets of the run produce. A target that names no platform is read on
/// `platform` (the one engine's, else this machine's), as its build and its
/// key read it: BuildKit gives every `FROM` the target platform's
/// `TARGETARCH`, and `FROM base-${TARGETARCH}` names a stage.
pub fn needs(planned: &Planned, specs: &[kiln_engine::BuildSpec], platform: &str) -> Vec<Need> {
    let in_run: std::collections::HashSet<&str> = planned
        .plan
        .targets
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    // The keys' early gathering (its own thread) analyses the same
    // Dockerfiles from the first target on, and a memo keeps each
    // analysis: read from the last target back, the two meet in the middle
    // instead of both analysing each one.
    let mut images: Vec<Vec<String>> = vec![Vec::new(); specs.len()];
    for (spec, images) in specs.iter().zip(images.iter_mut()).rev() {
        // A Dockerfile that cannot be analysed is reported by the build.
        let platform = kiln_engine::inputs::key_platform(spec, platform);
        *images = kiln_engine::inputs::external_images(spec, &platform).unwrap_or_default();
    }
    let mut pairs = Vec::new();
    for (spec, images) in specs.iter().zip(images) {
        for image in images {
            pairs.push((spec.name.clone(), image));
        }
        for src in spec.contexts.values() {
            if let kiln_engine::ContextSource::Image {
                reference,
                producer: None,
            } = src
            {
                pairs.push((spec.name.clone(), reference.clone()));
            }
        }
    }
    let pairs: Vec<(String, String)> = pairs
        .into_iter()
        .filter(|(_, r)| {
            !planned
                .graph
                .producers(r)
                .iter()
                .any(|p| in_run.contains(p))
        })
        .collect();
    kiln_engine::preflight::needs(pairs, |r| {
        planned
            .graph
            .producers(r)
            .into_iter()
            .map(String::from)
            .collect()
    })
}

/// A fleet run's nodes and, per target, the nodes that may build it.
pub type FleetNodes<'a> = (
    &'a [kiln_engine::run::NodeSpec],
    &'a std::collections::HashMap<String, Vec<usize>>,
);

/// Checks every needed image. With `require_engine` (a build), an engine
/// that does not answer is the error (exit 3 with how to start one);
/// otherwise images are looked for in registries only. With a fleet, every
/// node that may build a target needing an image is asked instead of the
/// one engine (a node that does not answer is left to the run).
pub fn check(
    planned: &Planned,
    specs: &[kiln_engine::BuildSpec],
    st: &StoreSettings,
    fleet: Option<FleetNodes<'_>>,
    builder: Option<&kiln_engine::driver::buildx::BuilderSpec>,
    require_engine: bool,
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<Checked>, CliError> {
    // One engine is a fleet of one node that may build everything.
    let single;
    let (nodes, eligible) = match fleet {
        Some(f) => (f.0, Some(f.1)),
        None => {
            single = [kiln_engine::run::NodeSpec {
                name: st.endpoint.host.clone(),
                endpoint: st.endpoint.clone(),
                slots: 1,
                builder: builder.cloned(),
                memory_gb: None,
            }];
            (&single[..], None)
        }
    };
    let mut fleet_nodes = Vec::new();
    for n in nodes {
        // A builder that keeps no image store has no engine to look in:
        // what it needs must be in a registry.
        let engine = match rt.block_on(kiln_engine::run::node_engine(n)) {
            Ok(e) => e,
            Err(e) if require_engine && eligible.is_none() => {
                return Err(engine_error(e, &n.endpoint));
            }
            Err(e) => {
                // Said, never silent: what the engine holds is not known,
                // so images are looked for in registries only.
                eprintln!(
                    "warning: {}; images are looked for in registries only",
                    engine_error(e, &n.endpoint).message
                );
                None
            }
        };
        fleet_nodes.push(kiln_engine::preflight::FleetNode {
            name: n.name.clone(),
            engine,
        });
    }
    // The platform a target without one is built for: the one engine's;
    // a builder's or a fleet's nodes' are not asked here, so this
    // machine's (what the keys read ahead on, too).
    let platform = match (eligible, builder, fleet_nodes.first()) {
        (
            None,
            None,
            Some(kiln_engine::preflight::FleetNode {
                engine: Some(e), ..
            }),
        ) => e.platform.clone(),
        _ => crate::settings::local_platform(),
    };
    let needs = needs(planned, specs, &platform);
    // On the one engine's containerd image store, the images the targets
    // need are asked in one round, waited for. Each target's tags and
    // unique reference (what the run's skips confirm) are asked in rounds
    // started here and not waited for: the run meets them (when the engine
    // was connected to early they are being asked already, and nothing is
    // asked twice). Through the Engine API an inspect names every tag of
    // its image: the run's own round answers them.
    if eligible.is_none()
        && let Some(e) = fleet_nodes.first().and_then(|n| n.engine.as_ref())
        && e.image_store == kiln_engine::driver::local::ImageStore::Containerd
    {
        let _rt = rt.enter();
        e.ask_early(engine_images(specs));
        let refs: Vec<String> = needs.iter().map(|n| n.reference.clone()).collect();
        let asking = e.clone();
        let answered = tokio::spawn(async move {
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            asking.prefetch(&refs).await;
        });
        // In a build, until the engine has answered, this thread gathers
        // what the keys read of the targets' own files, from the last target
        // back: the thread gathering them from the first yields to every
        // other (nice +5), and on two cores it was the run's critical path.
        // Not past the answer: a preflight that fails says so without
        // waiting for more files to be hashed. (`kiln preflight` makes no
        // keys.)
        if require_engine {
            kiln_engine::inputs::pregather_from_last(
                specs,
                &platform,
                &kiln_engine::hashing::StatCache::shared(&st.stat_cache),
                || !answered.is_finished(),
            );
        }
        // A round that failed is asked again by whoever needs it.
        let _ = rt.block_on(answered);
    }
    if needs.is_empty() {
        return Ok(Vec::new());
    }
    let registry = kiln_engine::registry::Registry::new(std::time::Duration::from_secs(30))
        .map_err(|e| CliError::env(e.to_string()))?;
    Ok(rt.block_on(kiln_engine::preflight::check_fleet(
        &fleet_nodes,
        &registry,
        needs,
        |need| match eligible {
            Some(e) => may_build(need, e),
            None => vec![0],
        },
    )))
}

/// Each target whose image an engine would hold (a multi-platform target's
/// or a platform unit's is in its registry) and has tags: its name and
/// tags, what a skip confirms in the engine.
pub fn engine_images(specs: &[kiln_engine::BuildSpec]) -> Vec<(String, Vec<String>)> {
    specs
        .iter()
        .filter(|sp| !sp.registry_only() && !sp.tags.is_empty())
        .map(|sp| (sp.name.clone(), sp.tags.clone()))
        .collect()
}

/// The nodes that may build some target needing the image, in node order.
fn may_build(need: &Need, eligible: &std::collections::HashMap<String, Vec<usize>>) -> Vec<usize> {
    let mut ks: Vec<usize> = need
        .needed_by
        .iter()
        .filter_map(|t| eligible.get(t))
        .flatten()
        .copied()
        .collect();
    ks.sort_unstable();
    ks.dedup();
    ks
}

/// The error for a failed check, or `Ok` when every image is available.
pub fn verdict(checked: &[Checked]) -> Result<(), CliError> {
    if checked.iter().all(Checked::ok) {
        return Ok(());
    }
    let text = kiln_engine::preflight::render(checked);
    let kind = if checked
        .iter()
        .any(|c| matches!(c.status, Status::Invalid { .. }))
    {
        Kind::User
    } else if checked
        .iter()
        .any(|c| matches!(c.status, Status::Auth { .. } | Status::Unreachable { .. }))
    {
        Kind::Environment
    } else {
        Kind::Failed
    };
    Err(CliError {
        kind,
        message: format!("preflight: {}", text.trim_end()),
        hint: Some(
            "nothing was built; only a 404 counts as missing — 401/403 mean credentials or a proxy, and an unreachable registry is an infrastructure problem".into(),
        ),
    })
}
