//! Properties of both scheduling policies over random DAGs and random fleets: every
//! schedule passes the model's check (dependencies, slots, eligibility, exact timing),
//! no makespan is below the lower bound (computed here independently), kiln is never
//! worse than the baseline, and scheduling is deterministic.

use kiln_plan::schedule::{
    Cost, Job, Node, Policy, Problem, ProblemError, Violation, schedule, validate,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    jobs: Vec<Job>,
    nodes: Vec<Node>,
}

fn job() -> impl Strategy<Value = (Vec<prop::sample::Index>, Cost, bool)> {
    (
        prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        (
            prop_oneof![Just(0.0), 1.0..7200.0f64],
            prop_oneof![Just(0.0), 1.0..20_000.0f64],
            prop::sample::select(vec![0.0, 0.0, 0.0, 8.0, 32.0, 64.0, 100.0]),
        )
            .prop_map(|(work_s, output_mb, min_memory_gb)| Cost {
                work_s,
                output_mb,
                min_memory_gb,
            }),
        prop::bool::weighted(0.1),
    )
}

fn node() -> impl Strategy<Value = (f64, f64, u32, f64)> {
    (
        0.25..4.0f64,
        10.0..10_000.0f64,
        1u32..=3,
        prop::sample::select(vec![8.0, 16.0, 32.0, 64.0, 128.0]),
    )
}

/// Target k depends on up to three earlier targets; node 0 can build anything.
fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(job(), 16..=200),
        prop::collection::vec(node(), 2..=8),
    )
        .prop_map(|(raw, fleet)| {
            let jobs = raw
                .into_iter()
                .enumerate()
                .map(|(i, (picks, cost, published))| {
                    let mut deps: Vec<usize> = if i == 0 {
                        Vec::new()
                    } else {
                        picks.iter().map(|x| x.index(i)).collect()
                    };
                    deps.sort_unstable();
                    deps.dedup();
                    Job {
                        name: format!("t{i:03}"),
                        deps,
                        cost,
                        published,
                    }
                })
                .collect();
            let nodes = fleet
                .into_iter()
                .enumerate()
                .map(|(i, (speed, link_mbps, slots, memory_gb))| Node {
                    name: format!("n{i}"),
                    endpoint: format!("unix:///n{i}.sock"),
                    cores: 16,
                    memory_gb: if i == 0 { 128.0 } else { memory_gb },
                    speed,
                    link_mbps,
                    slots,
                })
                .collect();
            Case { jobs, nodes }
        })
}

/// The lower bound, written out again: the longest chain of targets to build (a
/// published one is ready at 0) with each at the fastest node that has its memory, or
/// all work spread over every slot.
fn lower_bound(c: &Case) -> f64 {
    let mut finish = vec![0.0f64; c.jobs.len()];
    let mut work = 0.0;
    for (i, j) in c.jobs.iter().enumerate() {
        if j.published {
            continue; // in the registry at 0
        }
        let start = j.deps.iter().map(|&d| finish[d]).fold(0.0, f64::max);
        let fastest = c
            .nodes
            .iter()
            .filter(|n| n.memory_gb >= j.cost.min_memory_gb)
            .map(|n| n.speed)
            .fold(0.0, f64::max);
        work += j.cost.work_s;
        finish[i] = start + j.cost.work_s / fastest;
    }
    let capacity: f64 = c.nodes.iter().map(|n| n.speed * f64::from(n.slots)).sum();
    finish.iter().copied().fold(work / capacity, f64::max)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn schedules_obey_the_model(c in case()) {
        let p = Problem::new(c.jobs.clone(), c.nodes.clone()).unwrap();
        let lb = lower_bound(&c);
        let kiln = schedule(&p, Policy::Kiln);
        let greedy = schedule(&p, Policy::Greedy);
        for s in [&kiln, &greedy] {
            if let Err(v) = validate(&p, &s.assignments) {
                prop_assert!(false, "{:?}: {}", s.policy, v[0]);
            }
            prop_assert!((s.lower_bound_s - lb).abs() <= 1e-9 * lb.max(1.0),
                "lower bound {} != {lb}", s.lower_bound_s);
            prop_assert!(s.makespan_s >= lb * (1.0 - 1e-9),
                "{:?}: makespan {} < lower bound {lb}", s.policy, s.makespan_s);
            let built = c.jobs.iter().filter(|j| !j.published).count();
            prop_assert_eq!(s.assignments.len(), built);
        }
        prop_assert!(kiln.makespan_s <= greedy.makespan_s,
            "kiln {} > greedy {}", kiln.makespan_s, greedy.makespan_s);
        prop_assert_eq!(&schedule(&p, Policy::Kiln), &kiln);
        prop_assert_eq!(&schedule(&p, Policy::Greedy), &greedy);
    }

    #[test]
    fn validate_rejects_broken_schedules(c in case(), pick in any::<prop::sample::Index>()) {
        let p = Problem::new(c.jobs.clone(), c.nodes.clone()).unwrap();
        let s = schedule(&p, Policy::Kiln).assignments;
        prop_assume!(!s.is_empty());
        let k = pick.index(s.len());
        let name = c.jobs[s[k].job].name.clone();

        let mut missing = s.clone();
        missing.remove(k);
        let unassigned = Violation::Unassigned { target: name.clone() };
        prop_assert!(validate(&p, &missing).unwrap_err().contains(&unassigned));

        let mut twice = s.clone();
        twice.push(s[k]);
        let twice_v = Violation::AssignedTwice { target: name };
        prop_assert!(validate(&p, &twice).unwrap_err().contains(&twice_v));

        // Stretching an assignment without moving its end breaks the timing.
        let mut stretched = s.clone();
        stretched[k].build_s = 2.0 * stretched[k].build_s + 1.0;
        let v = validate(&p, &stretched).unwrap_err();
        prop_assert!(v.iter().any(|x| matches!(x, Violation::Timing { .. })), "{:?}", v);

        // Every assignment moved to the start of the run: each one with a built
        // dependency now starts before that dependency ends (or a node overflows).
        let mut early = s.clone();
        for a in &mut early {
            a.end_s -= a.start_s;
            a.start_s = 0.0;
        }
        let has_dep = s.iter().any(|a| c.jobs[a.job].deps.iter().any(|&d| !c.jobs[d].published
            && s.iter().any(|b| b.job == d && b.end_s - b.start_s > 1e-3)));
        if has_dep {
            prop_assert!(validate(&p, &early).is_err());
        }
    }
}

#[test]
fn ineligible_target_is_an_error() {
    let nodes = vec![Node {
        name: "small".into(),
        endpoint: "small".into(),
        cores: 16,
        memory_gb: 15.0,
        speed: 1.0,
        link_mbps: 100.0,
        slots: 1,
    }];
    let jobs = vec![Job {
        name: "pytorch".into(),
        deps: vec![],
        cost: Cost {
            work_s: 1.0,
            output_mb: 1.0,
            min_memory_gb: 48.0,
        },
        published: false,
    }];
    let e = Problem::new(jobs.clone(), nodes.clone()).unwrap_err();
    assert!(
        matches!(e, ProblemError::NoEligibleNode { ref target, min_memory_gb, .. }
        if target == "pytorch" && min_memory_gb == 48.0)
    );
    // A published target is never built, so its memory does not matter.
    let mut published = jobs;
    published[0].published = true;
    let p = Problem::new(published, nodes).unwrap();
    assert!(schedule(&p, Policy::Kiln).assignments.is_empty());
}
