//! The fleet plan of a `--fleet` run: its nodes and where kiln's schedule
//! places each target.

use std::path::Path;

use kiln_engine::BuildSpec;

use super::engine::{builder_spec, endpoint};
use crate::error::CliError;

/// Reads a TOML input file of the fleet feature.
fn read_input(path: &str, what: &str) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read the {what} {path}: {e}")))
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
    let fleet = Fleet::parse(fleet_path, &read_input(fleet_path, "fleet file")?)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let costs = match costs {
        Some(p) => CostsFile::parse(p, &read_input(p, "costs file")?)
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
