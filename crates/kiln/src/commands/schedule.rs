//! `kiln schedule`: the plan scheduled over a fleet of builder nodes, as a Gantt
//! chart, JSON or SVG (docs/scheduling.md).
//!
//! Costs come from the build history, then the costs file, then the
//! documented default; targets the engine and the record store predict as
//! already built cost nothing (neither the history nor they are asked with
//! `--simulate`). The model and the policies are in `kiln_plan::schedule`;
//! this command reads the files and reports.
//!
//! Must never: build, or probe the fleet's nodes (the schedule is a model
//! of the fleet file), or write a file but the one `--svg` names.

use std::io::{IsTerminal, Write};

use kiln_plan::schedule::{
    CostsFile, Fleet, PlanJob, Policy, Problem, Report, render_svg, render_text, schedule, split,
    validate,
};

use crate::cli::{Format, SchedulePolicy};
use crate::error::CliError;
use crate::prepare::fleet::read_input;
use crate::prepare::{build_plan, predictions};
use crate::settings::{BakeSettings, StoreSettings};

pub struct ScheduleSettings {
    pub bake: BakeSettings,
    pub store: StoreSettings,
    pub fleet: String,
    pub costs: Option<String>,
    pub simulate: bool,
    pub policy: SchedulePolicy,
    pub format: Format,
    pub svg: Option<String>,
    pub targets: Vec<String>,
}

/// Chart columns when stdout is not a terminal (stable for snapshots and pipes).
const CHART_WIDTH: usize = 100;

pub fn run(s: ScheduleSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let cwd = &s.bake.cwd;
    let fleet = Fleet::parse(&s.fleet, &read_input(cwd, &s.fleet, "fleet")?)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let costs = match &s.costs {
        Some(f) => CostsFile::parse(f, &read_input(cwd, f, "costs")?)
            .map_err(|e| CliError::usage(e.to_string()))?,
        None => CostsFile::default(),
    };
    let (bake, views) = crate::prepare::stamps::load(&s.bake)?;
    let planned = build_plan(&bake, views.as_ref(), &s.bake, &s.targets)?;
    if let Some(f) = &s.costs {
        for e in &costs.entries {
            if !bake.config.targets.iter().any(|t| t.name == e.name) {
                eprintln!(
                    "warning: {f}:{}:{}: the bake files define no target `{}`; its costs are not used",
                    e.line, e.col, e.name
                );
            }
        }
    }
    let published: Vec<String> = if s.simulate {
        Vec::new()
    } else {
        predictions(&bake, &planned, &s.bake, &s.store, None)?
            .into_iter()
            .filter(|p| matches!(p.action, kiln_engine::keys::Action::Skip))
            .map(|p| p.name)
            .collect()
    };
    let targets = &planned.plan.targets;
    let index = |name: &str| targets.iter().position(|t| t.name == name);
    // Learned costs first (not with --simulate, which reads only the
    // files given), then the costs file, then the default.
    let learned = if s.simulate {
        Default::default()
    } else {
        crate::costs::learned(&s.store.history)
    };
    let mut default_costs = Vec::new();
    // A target of several platforms is one unit per platform, each placed
    // on a node that builds it natively where the fleet has one.
    let plan_jobs: Vec<PlanJob> = targets
        .iter()
        .map(|t| PlanJob {
            name: t.name.clone(),
            deps: t.deps.iter().filter_map(|d| index(d)).collect(),
            platforms: t.platforms.clone(),
            cost: {
                let (c, src) = crate::costs::cost_of(&t.name, &costs, &learned);
                if src == crate::costs::Source::Default {
                    default_costs.push(t.name.clone());
                }
                c
            },
            published: published.contains(&t.name),
        })
        .collect();
    let (jobs, _) = split(&plan_jobs);
    let problem = Problem::new(jobs, fleet.nodes).map_err(|e| {
        let text = e.to_string();
        match text.split_once("\nhint: ") {
            Some((m, h)) => CliError::usage(m).with_hint(h),
            None => CliError::usage(text),
        }
    })?;
    let policy = match s.policy {
        SchedulePolicy::Kiln => Policy::Kiln,
        SchedulePolicy::Greedy => Policy::Greedy,
    };
    let sched = schedule(&problem, policy);
    if let Err(v) = validate(&problem, &sched.assignments) {
        return Err(CliError::env(format!(
            "internal error: the {} schedule breaks the model: {}",
            policy.name(),
            v[0]
        )));
    }
    if let Some(svg) = &s.svg {
        std::fs::write(cwd.join(svg), render_svg(&problem, &sched))
            .map_err(|e| CliError::env(format!("cannot write {svg}: {e}")))?;
    }
    let text = match s.format {
        Format::Json => {
            let mut t =
                serde_json::to_string_pretty(&Report::new(&problem, &sched, &default_costs))
                    .map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => {
            let terminal = std::io::stdout().is_terminal();
            let width = if terminal {
                let label = problem
                    .nodes()
                    .iter()
                    .map(|n| n.name.chars().count() + 2)
                    .max()
                    .unwrap_or(0);
                std::env::var("COLUMNS")
                    .ok()
                    .and_then(|c| c.parse::<usize>().ok())
                    .map_or(CHART_WIDTH, |c| c.saturating_sub(label + 3).max(40))
            } else {
                CHART_WIDTH
            };
            let color = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            render_text(&problem, &sched, &default_costs, width, color)
        }
    };
    crate::output::write(out, &text)
}
