//! The fleet plan of a `--fleet` run: its nodes and where kiln's schedule
//! places each target.

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

/// Nodes, preferred placement and memory eligibility of a fleet run.
pub type FleetPlan = (
    Vec<kiln_engine::run::NodeSpec>,
    std::collections::HashMap<String, usize>,
    std::collections::HashMap<String, Vec<usize>>,
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
    use kiln_plan::schedule::{CostsFile, Fleet, Job, Policy, Problem, schedule};
    let fleet = Fleet::parse(fleet_path, &read_input(cwd, fleet_path, "fleet")?)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let costs = match costs {
        Some(p) => CostsFile::parse(p, &read_input(cwd, p, "costs")?)
            .map_err(|e| CliError::usage(e.to_string()))?,
        None => CostsFile::default(),
    };
    let mut nodes = Vec::new();
    for n in &fleet.nodes {
        // An endpoint that is not an engine address names a buildx builder.
        let (endpoint, builder) = match endpoint(&n.endpoint, cwd) {
            Some(e) => (e, None),
            // Its engine is found from the builder when the run connects;
            // until then the builder's name stands for it in messages.
            None => (
                kiln_engine::Endpoint {
                    host: format!("buildx builder {}", n.endpoint),
                    docker_cli: "/usr/bin/docker".into(),
                },
                Some(builder_spec(Some(&n.endpoint))),
            ),
        };
        nodes.push(kiln_engine::run::NodeSpec {
            name: n.name.clone(),
            endpoint,
            slots: n.slots as usize,
            builder,
            memory_gb: Some(n.memory_gb),
        });
    }
    let index: std::collections::HashMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, sp)| (sp.name.as_str(), i))
        .collect();
    let learned = crate::costs::learned(history);
    let jobs = specs
        .iter()
        .map(|sp| Job {
            name: sp.name.clone(),
            deps: sp
                .deps
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect(),
            cost: crate::costs::cost_of(&sp.name, &costs, &learned).0,
            published: false,
        })
        .collect();
    let problem =
        Problem::new(jobs, fleet.nodes.clone()).map_err(|e| CliError::usage(e.to_string()))?;
    let plan = schedule(&problem, Policy::Kiln);
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
    Ok((nodes, placement, eligible))
}
