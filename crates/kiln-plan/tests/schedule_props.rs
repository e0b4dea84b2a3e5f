//! Properties of both scheduling policies over random DAGs and random fleets: every
//! schedule passes the model's check (dependencies, slots, eligibility, exact timing),
//! no makespan is below the lower bound (computed here independently), kiln is never
//! worse than the baseline, and scheduling is deterministic. On tiny problems the
//! optimum is found by enumeration: no bound may exceed it.

use kiln_plan::schedule::{
    Cost, Job, Node, Policy, Problem, ProblemError, Violation, lower_bound as model_bound,
    schedule, tight_lower_bound, validate,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    jobs: Vec<Job>,
    nodes: Vec<Node>,
}

fn job() -> impl Strategy<Value = RawJob> {
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
        .prop_map(|(raw, fleet)| case_from(raw, fleet))
}

type RawJob = (Vec<prop::sample::Index>, Cost, bool);

fn case_from(raw: Vec<RawJob>, fleet: Vec<(f64, f64, u32, f64)>) -> Case {
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
                platform: None,
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
            platforms: Vec::new(),
        })
        .collect();
    Case { jobs, nodes }
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

/// Up to five targets on up to three nodes of up to two slots each.
fn tiny_case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(job(), 2..=5),
        prop::collection::vec(node(), 1..=3),
    )
        .prop_map(|(raw, fleet)| {
            let mut c = case_from(raw, fleet);
            for n in &mut c.nodes {
                n.slots = n.slots.min(2);
            }
            c
        })
}

/// The optimum makespan by enumeration. Some optimal schedule is semi-active: every
/// target starts as soon as its slot is free and its dependencies have pushed, slots
/// taking their targets in the order the schedule starts them. So trying every slot
/// for every target and every dependency-respecting order finds it.
fn optimum(p: &Problem) -> f64 {
    let todo: Vec<usize> = (0..p.jobs().len())
        .filter(|&j| !p.jobs()[j].published)
        .collect();
    let slot_node: Vec<usize> = (0..p.nodes().len())
        .flat_map(|n| std::iter::repeat_n(n, p.nodes()[n].slots as usize))
        .collect();
    let mut best = f64::INFINITY;
    // The slot of every target (indexed by target; published ones unused).
    let mut slot = vec![0usize; p.jobs().len()];
    loop {
        if todo.iter().all(|&j| p.eligible(j, slot_node[slot[j]])) {
            let mut order = todo.clone();
            permute(&mut order, 0, &mut |order| {
                if let Some(m) = simulate(p, order, &slot, &slot_node) {
                    best = best.min(m);
                }
            });
        }
        // The next assignment of slots (an odometer over the targets to build).
        let Some(i) = todo.iter().position(|&j| slot[j] + 1 < slot_node.len()) else {
            return if todo.is_empty() { 0.0 } else { best };
        };
        slot[todo[i]] += 1;
        for &j in &todo[..i] {
            slot[j] = 0;
        }
    }
}

fn permute(v: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
    if k == v.len() {
        f(v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, f);
        v.swap(k, i);
    }
}

/// The semi-active schedule of `order` (None when it is not a dependency order).
fn simulate(p: &Problem, order: &[usize], slot: &[usize], slot_node: &[usize]) -> Option<f64> {
    let mut end = vec![None::<f64>; p.jobs().len()];
    let mut free = vec![0.0f64; slot_node.len()];
    for &j in order {
        let n = slot_node[slot[j]];
        let mut ready = 0.0f64;
        let mut pulled = 0.0;
        for &d in &p.jobs()[j].deps {
            let job = &p.jobs()[d];
            if !job.published {
                ready = ready.max(end[d]?);
            }
            if job.published || slot_node[slot[d]] != n {
                pulled += job.cost.output_mb;
            }
        }
        let start = ready.max(free[slot[j]]);
        let finish = start + p.transfer_s(pulled, n) + p.build_s(j, n) + p.push_s(j, n);
        free[slot[j]] = finish;
        end[j] = Some(finish);
    }
    Some(end.iter().flatten().copied().fold(0.0, f64::max))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bounds_never_exceed_the_optimum(c in tiny_case()) {
        let Ok(p) = Problem::new(c.jobs.clone(), c.nodes.clone()) else {
            return Ok(()); // a target no node can build
        };
        let opt = optimum(&p);
        let (lb, tight) = (model_bound(&p), tight_lower_bound(&p));
        prop_assert!(lb <= tight * (1.0 + 1e-12), "lower bound {lb} > tight bound {tight}");
        prop_assert!(tight <= opt * (1.0 + 1e-9), "tight bound {tight} > optimum {opt}");
        for policy in [Policy::Kiln, Policy::Greedy] {
            let s = schedule(&p, policy);
            prop_assert!(s.makespan_s >= opt * (1.0 - 1e-9),
                "{policy:?} makespan {} below the optimum {opt}", s.makespan_s);
            prop_assert_eq!(s.tight_lower_bound_s, tight);
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
        platforms: Vec::new(),
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
        platform: None,
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
