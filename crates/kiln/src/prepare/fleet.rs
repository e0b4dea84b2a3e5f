//! The fleet plan of a `--fleet` run: its nodes and where kiln's schedule
//! places each target.
//!
//! Must never: contact a node (the run connects to each; until then a
//! builder's name stands for its engine), or write the build history
//! (learned costs are only read here).

use std::path::Path;

use kiln_engine::BuildSpec;

use super::engine::{builder_spec, endpoint};
use crate::error::CliError;

/// Reads a fleet or costs file named on the command line (`what`:
/// `fleet` or `costs`, the flag that names it), relative to `cwd`. What
/// the user named and cannot be used (missing, unreadable, not UTF-8) is
/// bad input, exit 2, with where and what to do.
pub fn read_input(cwd: &Path, file: &str, what: &str) -> Result<String, CliError> {
    let bytes = std::fs::read(cwd.join(file)).map_err(|e| {
        let err = CliError::usage(format!("cannot read the {what} file {file}: {e}"));
        if e.kind() == std::io::ErrorKind::NotFound {
            err.with_hint(format!(
                "check the path given with --{what}; examples/fleet/ has a fleet and a costs file"
            ))
        } else {
            err
        }
    })?;
    kiln_util::utf8_text(bytes).map_err(|at| {
        CliError::usage(format!("{file}:{at}")).with_hint(format!(
            "the {what} file is TOML, which is UTF-8: re-save it as UTF-8"
        ))
    })
}

/// The buildx builders a fleet file names as its nodes' endpoints (an
/// endpoint that is not an engine address).
pub fn builder_names(fleet_path: &str, cwd: &Path) -> Result<Vec<String>, CliError> {
    let fleet =
        kiln_plan::schedule::Fleet::parse(fleet_path, &read_input(cwd, fleet_path, "fleet")?)
            .map_err(|e| CliError::usage(e.to_string()))?;
    Ok(fleet
        .nodes
        .into_iter()
        .filter(|n| endpoint(&n.endpoint, cwd).is_none())
        .map(|n| n.endpoint)
        .collect())
}

/// Nodes, preferred placement and memory eligibility of a fleet run, and
/// the schedule planned (for the run report).
pub type FleetPlan = (
    Vec<kiln_engine::run::NodeSpec>,
    std::collections::HashMap<String, usize>,
    std::collections::HashMap<String, Vec<usize>>,
    crate::report::Planned,
);

/// The nodes of a fleet run and where the schedule places each target
/// (kiln's policy over the costs file; docs/scheduling.md).
pub fn fleet_plan(
    fleet_path: &str,
    costs: Option<&str>,
    cwd: &Path,
    history: &Path,
    specs: &[BuildSpec],
) -> Result<FleetPlan, CliError> {
    use kiln_plan::schedule::{CostsFile, Fleet};
    let fleet = Fleet::parse(fleet_path, &read_input(cwd, fleet_path, "fleet")?)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let costs = match costs {
        Some(p) => CostsFile::parse(p, &read_input(cwd, p, "costs")?)
            .map_err(|e| CliError::usage(e.to_string()))?,
        None => CostsFile::default(),
    };
    let mut nodes = Vec::new();
    let mut fleet = fleet;
    for n in &mut fleet.nodes {
        // An endpoint that is not an engine address names a buildx builder.
        let (endpoint, builder) = match endpoint(&n.endpoint, cwd) {
            Some(e) => {
                // Platforms the fleet file leaves out: the engine's own, as
                // kiln last asked it (no request before the run).
                if n.platforms.is_empty() {
                    n.platforms = kiln_engine::driver::local::recalled_platform(&e.host)
                        .and_then(|p| kiln_plan::platform::normalize(&p).ok())
                        .into_iter()
                        .collect();
                }
                (e, None)
            }
            // Its engine is found from the builder when the run connects;
            // until then the builder's name stands for it in messages.
            None => {
                // Platforms the fleet file leaves out: those buildx's
                // instance store gives the builder (without a process).
                if n.platforms.is_empty() {
                    n.platforms = kiln_engine::driver::buildx::native_platforms(&n.endpoint)
                        .iter()
                        .filter_map(|p| kiln_plan::platform::normalize(p).ok())
                        .collect();
                }
                (
                    kiln_engine::Endpoint {
                        host: format!("buildx builder {}", n.endpoint),
                        docker_cli: "/usr/bin/docker".into(),
                    },
                    Some(builder_spec(Some(&n.endpoint))),
                )
            }
        };
        nodes.push(kiln_engine::run::NodeSpec {
            name: n.name.clone(),
            endpoint,
            slots: n.slots as usize,
            builder,
            memory_gb: Some(n.memory_gb),
        });
    }
    let (problem, plan, guessed) = plan_on(
        specs,
        fleet.nodes.clone(),
        &costs,
        history,
        &Default::default(),
    )?;
    // Said before anything builds: a platform no node builds natively.
    for a in &plan.assignments {
        if problem.emulates(a.job, a.node)
            && let Some(p) = &problem.jobs()[a.job].platform
        {
            eprintln!(
                "note: {} goes to node {} under emulation: no node of the fleet builds {p} natively (state a node's platforms in the fleet file, or add a {p} node)",
                specs[a.job].name,
                problem.nodes()[a.node].name
            );
        }
    }
    let placement = plan
        .assignments
        .iter()
        .map(|a| (specs[a.job].name.clone(), a.node))
        .collect();
    let eligible = (0..specs.len())
        .map(|j| {
            let ks = (0..fleet.nodes.len())
                .filter(|&k| problem.eligible(j, k))
                .collect();
            (specs[j].name.clone(), ks)
        })
        .collect();
    let planned = planned(specs, &problem, &plan, &guessed);
    Ok((nodes, placement, eligible, planned))
}

/// kiln's schedule of `specs` on `nodes` with learned (else file, else
/// default) costs, every target assumed built.
fn plan_on(
    specs: &[BuildSpec],
    nodes: Vec<kiln_plan::schedule::Node>,
    costs: &kiln_plan::schedule::CostsFile,
    history: &Path,
    published: &std::collections::BTreeSet<String>,
) -> Result<
    (
        kiln_plan::schedule::Problem,
        kiln_plan::schedule::Schedule,
        std::collections::BTreeSet<String>,
    ),
    CliError,
> {
    use kiln_plan::schedule::{Job, Policy, Problem, schedule};
    let index: std::collections::HashMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, sp)| (sp.name.as_str(), i))
        .collect();
    let learned = crate::costs::learned(history);
    let mut guessed = std::collections::BTreeSet::new();
    let jobs = specs
        .iter()
        .map(|sp| Job {
            name: sp.name.clone(),
            deps: sp
                .deps
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect(),
            cost: if sp.join.is_empty() {
                // A platform unit costs what its target costs per platform.
                let of = sp.unit.as_ref().map_or(&sp.name, |u| &u.target);
                let (c, source) = crate::costs::cost_as(&sp.name, of, costs, &learned);
                if source == crate::costs::Source::Default && !published.contains(&sp.name) {
                    guessed.insert(sp.name.clone());
                }
                c
            } else {
                // A join builds nothing and moves only manifests.
                kiln_plan::schedule::Cost {
                    work_s: 0.0,
                    output_mb: 0.0,
                    min_memory_gb: 0.0,
                }
            },
            published: published.contains(&sp.name),
            // A target of one platform goes to a node that builds it
            // natively (where the fleet has one); one of several is built
            // on one node for all of them.
            platform: match &sp.platforms[..] {
                [one] => Some(kiln_plan::platform::normalize(one).unwrap_or_else(|_| one.clone())),
                _ => None,
            },
        })
        .collect();
    let problem = Problem::new(jobs, nodes).map_err(|e| CliError::usage(e.to_string()))?;
    let plan = schedule(&problem, Policy::Kiln);
    Ok((problem, plan, guessed))
}

/// The report's view of a schedule: each target's node, lane, start and
/// end, and the build time expected there — none for a target whose cost
/// is the default guess (`guessed`: no history, no costs file).
fn planned(
    specs: &[BuildSpec],
    problem: &kiln_plan::schedule::Problem,
    plan: &kiln_plan::schedule::Schedule,
    guessed: &std::collections::BTreeSet<String>,
) -> crate::report::Planned {
    let name = |k: usize| problem.nodes()[k].name.clone();
    let rows: Vec<(String, String, f64, f64)> = plan
        .assignments
        .iter()
        .map(|a| (specs[a.job].name.clone(), name(a.node), a.start_s, a.end_s))
        .collect();
    let slots = problem
        .nodes()
        .iter()
        .map(|n| (n.name.clone(), n.slots as usize))
        .collect();
    crate::report::Planned {
        makespan_s: Some(plan.makespan_s),
        lower_bound_s: Some(plan.lower_bound_s),
        targets: crate::report::planned_slots(&rows, &slots),
        expected_s: plan
            .assignments
            .iter()
            .filter(|a| !guessed.contains(&specs[a.job].name))
            .map(|a| (specs[a.job].name.clone(), a.build_s))
            .collect(),
        guessed: guessed.len(),
    }
}

/// The schedule kiln plans for `specs` on one engine or builder (`node`,
/// `slots` builds at once, speed 1) or on the fleet of `fleet_file`, with
/// the costs it would use (learned, else the costs file, else the
/// default), the targets in `published` already available (a run's
/// skipped targets: the plan then covers the work the run did). `None`
/// when a file cannot be read (the run itself does not need this).
pub fn plan_for_report(
    specs: &[BuildSpec],
    on: ReportNodes<'_>,
    published: &std::collections::BTreeSet<String>,
    costs: Option<&str>,
    cwd: &Path,
    history: &Path,
) -> Option<crate::report::Planned> {
    use kiln_plan::schedule::{CostsFile, Fleet};
    let costs = match costs {
        Some(p) => CostsFile::parse(p, &read_input(cwd, p, "costs").ok()?).ok()?,
        None => CostsFile::default(),
    };
    let nodes = match on {
        ReportNodes::Fleet(file) => {
            Fleet::parse(file, &read_input(cwd, file, "fleet").ok()?)
                .ok()?
                .nodes
        }
        ReportNodes::One { name, slots } => vec![kiln_plan::schedule::Node {
            name: name.to_string(),
            endpoint: name.to_string(),
            cores: 16,
            // One engine: memory never decides where a target goes.
            memory_gb: f64::MAX / 4.0,
            speed: 1.0,
            // Nothing crosses a network on one node.
            link_mbps: 1e9,
            slots: u32::try_from(slots.max(1)).unwrap_or(1),
            platforms: Vec::new(),
        }],
    };
    let (problem, plan, guessed) = plan_on(specs, nodes, &costs, history, published).ok()?;
    Some(planned(specs, &problem, &plan, &guessed))
}

/// The nodes a report's plan is made for.
pub enum ReportNodes<'a> {
    /// The fleet file of a `--fleet` run.
    Fleet(&'a str),
    /// One engine or builder.
    One { name: &'a str, slots: usize },
}

/// Each node's relative speed from the fleet file (`speed`, 1.0 when it
/// says none); empty without a fleet or when the file cannot be read (a
/// node then counts as 1.0): what learned costs are normalised by.
pub fn speeds(fleet: Option<&str>) -> std::collections::HashMap<String, f64> {
    fleet
        .and_then(|f| std::fs::read_to_string(f).ok().map(|t| (f, t)))
        .and_then(|(f, t)| kiln_plan::schedule::Fleet::parse(f, &t).ok())
        .map(|fl| fl.nodes.into_iter().map(|n| (n.name, n.speed)).collect())
        .unwrap_or_default()
}
