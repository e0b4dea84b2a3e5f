//! Scheduling a plan over a fleet of builder nodes: the fleet and costs files, the
//! schedule model, two policies, the check every schedule must pass, and the renderings
//! (`kiln schedule`'s JSON, a terminal Gantt chart, an SVG one).
//!
//! The model (docs/scheduling.md has it in full): a target built on node `n` first pulls
//! the output of every dependency that is published or was built on another node
//! (`output_mb * 8 / link_mbps_n` seconds each), then builds (`work_s / speed_n`), then
//! pushes its own output (`output_mb * 8 / link_mbps_n`); all three occupy one of the
//! node's `slots`. It may start once every dependency has finished pushing. Nodes with
//! less memory than its `min_memory_gb` are not eligible. An already-published target
//! costs nothing and is available from the registry at time 0.
//!
//! Pure like the rest of the crate: the caller reads the files and passes their text;
//! nothing here touches a clock, a file or a daemon. Both policies are deterministic
//! (ties go to the lower index: plan order for targets, file order for nodes) and
//! run in O(targets × nodes × slots) plus the heap and gap searches, so 10,000 targets
//! on 100 nodes schedule in well under a second.

mod greedy;
mod input;
mod list;
mod model;
mod order;
mod render;
mod units;

pub use input::{Cost, CostEntry, CostsFile, DEFAULT_COST, Fleet, InputError, MAX_SLOTS, Node};
pub use model::{
    Assignment, EMULATION_SLOWDOWN, Job, Problem, ProblemError, Violation, lower_bound, makespan,
    tight_lower_bound, validate,
};
pub use render::{Report, ReportAssignment, render_svg, render_text};
pub use units::{PlanJob, split, unit_name};

/// How targets are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Critical path first, earliest finish with transfers, gaps filled, the best of a
    /// few orderings (never worse than `Greedy`).
    Kiln,
    /// Seed 003's balancer: the longest ready target to the idle node that finishes it
    /// soonest.
    Greedy,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Kiln => "kiln",
            Policy::Greedy => "greedy",
        }
    }
}

/// A schedule: assignments ordered by start, then node, then plan order.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub policy: Policy,
    pub assignments: Vec<Assignment>,
    pub makespan_s: f64,
    /// [`lower_bound`]: the contract's bound (longest chain, total work over the fleet).
    pub lower_bound_s: f64,
    /// [`tight_lower_bound`]: also proven, never below `lower_bound_s`.
    pub tight_lower_bound_s: f64,
}

/// Schedules every target of `p` that is not already published.
pub fn schedule(p: &Problem, policy: Policy) -> Schedule {
    let mut assignments = match policy {
        Policy::Kiln => list::schedule(p),
        Policy::Greedy => greedy::schedule(p),
    };
    assignments.sort_by(|a, b| {
        a.start_s
            .total_cmp(&b.start_s)
            .then(a.node.cmp(&b.node))
            .then(a.job.cmp(&b.job))
    });
    Schedule {
        policy,
        makespan_s: makespan(&assignments),
        lower_bound_s: lower_bound(p),
        tight_lower_bound_s: tight_lower_bound(p),
        assignments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, speed: f64, link_mbps: f64, memory_gb: f64) -> Node {
        Node {
            name: name.into(),
            endpoint: name.into(),
            cores: 16,
            memory_gb,
            speed,
            link_mbps,
            slots: 1,
            platforms: Vec::new(),
        }
    }

    fn job(name: &str, deps: &[usize], work_s: f64, output_mb: f64) -> Job {
        Job {
            name: name.into(),
            deps: deps.to_vec(),
            cost: Cost {
                work_s,
                output_mb,
                min_memory_gb: 0.0,
            },
            published: false,
            platform: None,
        }
    }

    #[test]
    fn timing_of_a_chain_across_nodes() {
        // b must run on `big` (memory); a is faster on `fast`, so b pulls a's output.
        let mut b = job("b", &[0], 100.0, 10.0);
        b.cost.min_memory_gb = 64.0;
        let p = Problem::new(
            vec![job("a", &[], 1000.0, 100.0), b],
            vec![node("fast", 4.0, 80.0, 16.0), node("big", 1.0, 8.0, 128.0)],
        )
        .unwrap();
        let s = schedule(&p, Policy::Kiln);
        validate(&p, &s.assignments).unwrap();
        let a = s.assignments[0];
        assert_eq!(
            (a.node, a.start_s, a.build_s, a.push_s),
            (0, 0.0, 250.0, 10.0)
        );
        let b = s.assignments[1];
        assert_eq!(b.node, 1);
        assert_eq!(
            (b.start_s, b.pull_s, b.build_s, b.push_s),
            (260.0, 100.0, 100.0, 10.0)
        );
        assert_eq!(s.makespan_s, 470.0);
        assert_eq!(s.lower_bound_s, 350.0);
    }

    #[test]
    fn tight_bound_counts_chains_against_the_fastest_slots() {
        // Two independent chains of 4000 s of work each. One fast slot (speed 2) and two
        // slow ones (0.5): the chain term is 2000 s, the fleet term 8000 / 3; but the two
        // chains can use only two slots at once, at most 2 + 0.5, so 8000 / 2.5.
        let jobs = vec![
            job("a1", &[], 2000.0, 0.0),
            job("b1", &[], 2000.0, 0.0),
            job("a2", &[0], 2000.0, 0.0),
            job("b2", &[1], 2000.0, 0.0),
        ];
        let mut slow = node("slow", 0.5, 8.0, 8.0);
        slow.slots = 2;
        let p = Problem::new(jobs, vec![node("fast", 2.0, 8.0, 8.0), slow]).unwrap();
        assert_eq!(lower_bound(&p), 8000.0 / 3.0);
        assert_eq!(tight_lower_bound(&p), 8000.0 / 2.5);
        for policy in [Policy::Kiln, Policy::Greedy] {
            assert!(schedule(&p, policy).makespan_s >= 8000.0 / 2.5);
        }
    }

    #[test]
    fn tight_bound_counts_pushes_and_memory_classes() {
        // The chain pays its cheapest build + push: on `fast` 100 + 100, on `wide` 200 + 10.
        let p = Problem::new(
            vec![job("a", &[], 200.0, 80.0)],
            vec![node("fast", 2.0, 6.4, 8.0), node("wide", 1.0, 64.0, 8.0)],
        )
        .unwrap();
        assert_eq!(lower_bound(&p), 100.0);
        assert_eq!(tight_lower_bound(&p), 200.0);
        // Three independent 64 GB targets fit only on `big` (speed 1, one slot): 3000 s,
        // though the fleet as a whole has four times that speed.
        let big = |n: &str| {
            let mut j = job(n, &[], 1000.0, 0.0);
            j.cost.min_memory_gb = 64.0;
            j
        };
        let p = Problem::new(
            vec![big("x"), big("y"), big("z")],
            vec![node("big", 1.0, 8.0, 128.0), node("small", 3.0, 8.0, 16.0)],
        )
        .unwrap();
        assert_eq!(lower_bound(&p), 1000.0);
        assert_eq!(tight_lower_bound(&p), 3000.0);
        assert_eq!(schedule(&p, Policy::Kiln).makespan_s, 3000.0);
    }

    #[test]
    fn published_costs_nothing_but_is_pulled_everywhere() {
        let mut a = job("a", &[], 1000.0, 100.0);
        a.published = true;
        let p = Problem::new(
            vec![a, job("b", &[0], 10.0, 0.0)],
            vec![node("n", 1.0, 800.0, 8.0)],
        )
        .unwrap();
        for policy in [Policy::Kiln, Policy::Greedy] {
            let s = schedule(&p, policy);
            validate(&p, &s.assignments).unwrap();
            assert_eq!(s.assignments.len(), 1);
            assert_eq!(s.assignments[0].pull_s, 1.0);
            assert_eq!(s.makespan_s, 11.0);
        }
    }

    #[test]
    fn no_eligible_node_names_the_target() {
        let mut a = job("pytorch", &[], 1.0, 1.0);
        a.cost.min_memory_gb = 200.0;
        let e = Problem::new(vec![a], vec![node("n", 1.0, 1.0, 122.0)]).unwrap_err();
        assert!(e.to_string().starts_with(
            "target `pytorch` needs min_memory_gb 200, but no node of the fleet has that much memory (the most is 122 GB, on `n`)"
        ));
    }

    #[test]
    fn validate_catches_each_kind() {
        let p = Problem::new(
            vec![job("a", &[], 10.0, 8.0), job("b", &[0], 10.0, 8.0)],
            vec![node("n", 1.0, 8.0, 8.0)],
        )
        .unwrap();
        let good = schedule(&p, Policy::Greedy).assignments;
        validate(&p, &good).unwrap();
        let mut early = good.clone();
        early[1].start_s -= 1.0;
        early[1].end_s -= 1.0;
        let v = validate(&p, &early).unwrap_err();
        assert!(
            matches!(v[0], Violation::StartsBeforeDependency { .. }),
            "{v:?}"
        );
        let mut slow = good.clone();
        slow[0].build_s += 1.0;
        let v = validate(&p, &slow).unwrap_err();
        assert!(v.iter().any(|x| matches!(
            x,
            Violation::Timing {
                phase: "build_s",
                ..
            }
        )));
        let v = validate(&p, &good[..1]).unwrap_err();
        assert_eq!(v, [Violation::Unassigned { target: "b".into() }]);
        let mut overlap = good.clone();
        overlap[1].start_s = 5.0;
        overlap[1].end_s = 5.0 + 10.0 + 1.0;
        overlap[1].pull_s = 0.0;
        let v = validate(&p, &overlap).unwrap_err();
        assert!(
            v.iter().any(|x| matches!(x, Violation::Slots { .. })),
            "{v:?}"
        );
    }
}
