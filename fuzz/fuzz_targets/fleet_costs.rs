//! The fleet file and the costs file (`--fleet FILE`, `--costs FILE`, TOML),
//! as `kiln schedule` uses them: parse both, build a schedule problem with one
//! target per costs entry, schedule it with both policies, check the
//! schedule against the model (`validate`, which the CLI reports as an
//! internal error) and render it as JSON, text and SVG.
//!
//! Input: UTF-8 text (invalid bytes replaced). A line `%%` splits it into the
//! fleet file and the costs file; without one, the whole text is tried as
//! both.
#![no_main]

use kiln_plan::schedule::{
    CostsFile, Fleet, Job, Policy, Problem, Report, render_svg, render_text, schedule, validate,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (fleet_text, costs_text) = match text.split_once("\n%%\n") {
        Some((f, c)) => (f, c),
        None => (&*text, &*text),
    };
    let fleet = Fleet::parse("fleet.toml", fleet_text);
    let costs = CostsFile::parse("costs.toml", costs_text);
    // The error messages are rendered with a caret under the source line.
    if let Err(e) = &fleet {
        let _ = e.to_string();
    }
    if let Err(e) = &costs {
        let _ = e.to_string();
    }
    let (Ok(fleet), Ok(costs)) = (fleet, costs) else {
        return;
    };

    // One target per costs entry (and two default-cost ones), with a
    // dependency shape derived from the position.
    let mut names: Vec<String> = costs.entries.iter().map(|e| e.name.clone()).collect();
    names.push("default-a".into());
    names.push("default-b".into());
    let default_costs = vec!["default-a".to_string(), "default-b".to_string()];
    let jobs: Vec<Job> = names
        .iter()
        .enumerate()
        .take(48)
        .map(|(i, name)| Job {
            name: name.clone(),
            deps: match i % 4 {
                0 => vec![],
                1 => vec![i - 1],
                2 => vec![i / 2],
                _ => vec![0, i - 1],
            },
            cost: costs
                .get(name)
                .copied()
                .unwrap_or(kiln_plan::schedule::DEFAULT_COST),
            published: i % 7 == 5,
        })
        .collect();
    let Ok(problem) = Problem::new(jobs, fleet.nodes.clone()) else {
        return;
    };
    for policy in [Policy::Kiln, Policy::Greedy] {
        let s = schedule(&problem, policy);
        if let Err(v) = validate(&problem, &s.assignments) {
            panic!("the {} schedule breaks the model: {:?}", policy.name(), v);
        }
        let _ = serde_json::to_string_pretty(&Report::new(&problem, &s, &default_costs));
        let _ = render_text(&problem, &s, &default_costs, 80, policy == Policy::Kiln);
        let _ = render_svg(&problem, &s);
    }
});
