//! The schedule model (docs/scheduling.md): what a target costs on a node, when it may
//! start, what occupies a slot — and [`validate`], which checks any schedule against it.
//! The policies and a real run's recorded timings are checked by the same function.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use super::input::{Cost, Node};
use super::order::Time;

/// One target to schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub name: String,
    /// Indices of the targets it needs (into [`Problem::jobs`]).
    pub deps: Vec<usize>,
    pub cost: Cost,
    /// Already built and published for its key: it costs nothing, occupies no node and
    /// is available in the registry from time 0.
    pub published: bool,
    /// The one platform this unit builds (normalised, [`crate::platform`]): a platform
    /// unit of a multi-platform target, or a target that names a single platform.
    /// `None`: the target builds for whatever node it lands on.
    pub platform: Option<String>,
}

/// How many times longer a build takes on a node that emulates its platform than on a
/// native node of the same speed: the middle of the 5–20× a compile under QEMU takes.
/// A unit goes to a node that emulates its platform only when no node of the fleet
/// builds it natively.
pub const EMULATION_SLOWDOWN: f64 = 10.0;

/// Targets and the fleet, checked: dependencies acyclic and in range, costs finite and
/// not negative, every target that must be built eligible on some node.
#[derive(Clone, Debug)]
pub struct Problem {
    jobs: Vec<Job>,
    nodes: Vec<Node>,
    /// A topological order (dependencies first; input order breaks ties).
    order: Vec<usize>,
    children: Vec<Vec<usize>>,
    /// Per job: no node of the fleet builds its platform natively, so every node may
    /// build it under emulation.
    emulated_everywhere: Vec<bool>,
}

/// Why targets and a fleet do not form a schedulable problem.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProblemError {
    #[error("the fleet has no node")]
    NoNodes,
    #[error(
        "node `{node}`: {field} must be positive (speed, link_mbps and slots are), got {value}"
    )]
    BadNode {
        node: String,
        field: &'static str,
        value: f64,
    },
    #[error("node `{node}` is defined more than once")]
    DuplicateNode { node: String },
    #[error("target `{target}`: {field} must be a finite number of 0 or more, got {value}")]
    BadCost {
        target: String,
        field: &'static str,
        value: f64,
    },
    #[error("target `{target}` depends on target #{dep}, which does not exist")]
    BadDependency { target: String, dep: usize },
    #[error("the dependencies of target `{target}` form a cycle")]
    Cycle { target: String },
    #[error(
        "target `{target}` needs min_memory_gb {min_memory_gb}, but no node of the fleet has that much memory (the most is {largest_gb} GB, on `{largest_node}`)\nhint: lower the target's min_memory_gb in the costs file, or add a node with enough memory to the fleet"
    )]
    NoEligibleNode {
        target: String,
        min_memory_gb: f64,
        largest_gb: f64,
        largest_node: String,
    },
}

impl Problem {
    pub fn new(jobs: Vec<Job>, nodes: Vec<Node>) -> Result<Problem, ProblemError> {
        if nodes.is_empty() {
            return Err(ProblemError::NoNodes);
        }
        for (i, n) in nodes.iter().enumerate() {
            for (field, value) in [
                ("speed", n.speed),
                ("link_mbps", n.link_mbps),
                ("slots", f64::from(n.slots)),
                ("memory_gb", n.memory_gb),
            ] {
                if !(value.is_finite() && value > 0.0) {
                    return Err(ProblemError::BadNode {
                        node: n.name.clone(),
                        field,
                        value,
                    });
                }
            }
            if nodes[..i].iter().any(|m| m.name == n.name) {
                return Err(ProblemError::DuplicateNode {
                    node: n.name.clone(),
                });
            }
        }
        let largest = nodes.iter().fold(
            &nodes[0],
            |a, b| if b.memory_gb > a.memory_gb { b } else { a },
        );
        let mut children = vec![Vec::new(); jobs.len()];
        let mut indegree = vec![0usize; jobs.len()];
        for (i, j) in jobs.iter().enumerate() {
            for (field, value) in [
                ("work_s", j.cost.work_s),
                ("output_mb", j.cost.output_mb),
                ("min_memory_gb", j.cost.min_memory_gb),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(ProblemError::BadCost {
                        target: j.name.clone(),
                        field,
                        value,
                    });
                }
            }
            if !j.published && j.cost.min_memory_gb > largest.memory_gb {
                return Err(ProblemError::NoEligibleNode {
                    target: j.name.clone(),
                    min_memory_gb: j.cost.min_memory_gb,
                    largest_gb: largest.memory_gb,
                    largest_node: largest.name.clone(),
                });
            }
            for &d in &j.deps {
                if d >= jobs.len() || d == i {
                    return Err(ProblemError::BadDependency {
                        target: j.name.clone(),
                        dep: d,
                    });
                }
                children[d].push(i);
                indegree[i] += 1;
            }
        }
        // Kahn's algorithm, smallest index first, so the order is deterministic.
        let mut ready: BinaryHeap<Reverse<usize>> = (0..jobs.len())
            .filter(|&i| indegree[i] == 0)
            .map(Reverse)
            .collect();
        let mut order = Vec::with_capacity(jobs.len());
        while let Some(Reverse(i)) = ready.pop() {
            order.push(i);
            for &c in &children[i] {
                indegree[c] -= 1;
                if indegree[c] == 0 {
                    ready.push(Reverse(c));
                }
            }
        }
        if let Some(i) = (0..jobs.len()).find(|&i| indegree[i] > 0) {
            return Err(ProblemError::Cycle {
                target: jobs[i].name.clone(),
            });
        }
        let emulated_everywhere = jobs
            .iter()
            .map(|j| match &j.platform {
                Some(p) => !nodes
                    .iter()
                    .any(|n| crate::platform::builds_natively(&n.platforms, p)),
                None => false,
            })
            .collect();
        Ok(Problem {
            jobs,
            nodes,
            order,
            children,
            emulated_everywhere,
        })
    }

    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// A topological order of the jobs.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The jobs that depend on `j`.
    pub fn children(&self, j: usize) -> &[usize] {
        &self.children[j]
    }

    /// Whether node `n` may build job `j`: it has the memory `j` needs, and builds
    /// `j`'s platform natively unless no node of the fleet does.
    pub fn eligible(&self, j: usize, n: usize) -> bool {
        self.has_memory(j, n) && (!self.emulates(j, n) || self.emulated_everywhere[j])
    }

    /// Whether node `n` has the memory job `j` needs.
    pub fn has_memory(&self, j: usize, n: usize) -> bool {
        self.nodes[n].memory_gb >= self.jobs[j].cost.min_memory_gb
    }

    /// Whether node `n` would build job `j`'s platform under emulation.
    pub fn emulates(&self, j: usize, n: usize) -> bool {
        self.jobs[j]
            .platform
            .as_deref()
            .is_some_and(|p| !crate::platform::builds_natively(&self.nodes[n].platforms, p))
    }

    /// The speed at which node `n` builds job `j`: its `speed`, divided by
    /// [`EMULATION_SLOWDOWN`] when it emulates `j`'s platform.
    pub fn speed_for(&self, j: usize, n: usize) -> f64 {
        if self.emulates(j, n) {
            self.nodes[n].speed / EMULATION_SLOWDOWN
        } else {
            self.nodes[n].speed
        }
    }

    /// Seconds to move `mb` megabytes over node `n`'s link.
    pub fn transfer_s(&self, mb: f64, n: usize) -> f64 {
        mb * 8.0 / self.nodes[n].link_mbps
    }

    /// The build phase of `j` on `n`: `work_s / speed` (0 when published), ten times
    /// that under emulation ([`Problem::speed_for`]).
    pub fn build_s(&self, j: usize, n: usize) -> f64 {
        if self.jobs[j].published {
            0.0
        } else {
            self.jobs[j].cost.work_s / self.speed_for(j, n)
        }
    }

    /// The push phase of `j` on `n`: `output_mb * 8 / link_mbps` (0 when published).
    pub fn push_s(&self, j: usize, n: usize) -> f64 {
        if self.jobs[j].published {
            0.0
        } else {
            self.transfer_s(self.jobs[j].cost.output_mb, n)
        }
    }

    /// Megabytes `j` pulls when built on `n`: the output of every dependency that is
    /// published or was built on another node (`node_of` gives where a built one ran).
    pub fn pulled_mb(&self, j: usize, n: usize, node_of: impl Fn(usize) -> Option<usize>) -> f64 {
        self.jobs[j]
            .deps
            .iter()
            .filter(|&&d| self.jobs[d].published || node_of(d) != Some(n))
            .map(|&d| self.jobs[d].cost.output_mb)
            .fold(0.0, |a, b| a + b) // `sum` of nothing is -0.0
    }

    /// The phases of `j` on `n` — pull, build, push — with the built dependencies placed
    /// as `node_of` says.
    pub fn phases(&self, j: usize, n: usize, node_of: &[Option<usize>]) -> [f64; 3] {
        [
            self.transfer_s(self.pulled_mb(j, n, |d| node_of[d]), n),
            self.build_s(j, n),
            self.push_s(j, n),
        ]
    }

    /// The fastest speed at which an eligible node builds `j`.
    pub fn fastest_eligible_speed(&self, j: usize) -> f64 {
        (0..self.nodes.len())
            .filter(|&n| self.eligible(j, n))
            .map(|n| self.speed_for(j, n))
            .fold(0.0, f64::max)
    }
}

/// One target placed on one node. `start_s` is when the node starts on it (its pulls
/// first), `end_s` when its push completes:
/// `end_s = start_s + pull_s + build_s + push_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Assignment {
    pub job: usize,
    pub node: usize,
    pub start_s: f64,
    pub pull_s: f64,
    pub build_s: f64,
    pub push_s: f64,
    pub end_s: f64,
}

/// The lower bound on any schedule's makespan: the longer of the longest dependency
/// chain (each target at its fastest eligible node's speed, transfers free) and the
/// total work spread perfectly over every slot of every node (`Σ work_s / Σ speed ×
/// slots`). Published targets count 0 and are available at 0, so a chain does not run
/// through them.
pub fn lower_bound(p: &Problem) -> f64 {
    let mut finish = vec![0.0f64; p.jobs.len()];
    let mut chain = 0.0f64;
    let mut work = 0.0;
    for &j in &p.order {
        let job = &p.jobs[j];
        // A published target is in the registry at 0, whatever it was built from.
        if job.published {
            continue;
        }
        let ready = job.deps.iter().map(|&d| finish[d]).fold(0.0, f64::max);
        work += job.cost.work_s;
        finish[j] = ready + job.cost.work_s / p.fastest_eligible_speed(j);
        chain = chain.max(finish[j]);
    }
    let capacity: f64 = p.nodes.iter().map(|n| n.speed * f64::from(n.slots)).sum();
    chain.max(work / capacity)
}

/// A tighter lower bound than [`lower_bound`], still proven for every schedule of the
/// model (docs/scheduling.md, "The tight bound"). The largest of:
///
/// - the longest dependency chain where each target takes the least
///   `build_s + push_s` over its eligible nodes (its push precedes its dependents);
/// - for `k` disjoint dependency chains of total work `W_1 + … + W_k`: their targets run
///   one at a time per chain, so at most `k` slots serve them at once and
///   `makespan ≥ (W_1 + … + W_k) / (s_1 + … + s_k)` with `s` the slot speeds, fastest
///   first (the preemptive bound for uniform machines, Horvath–Lam–Sethi 1977). The
///   chains are taken greedily, heaviest path first, one per slot but the last;
/// - for each memory requirement `m`: the work of the targets needing at least `m` GB
///   over the speed × slots of the nodes that have it (the last is the whole fleet,
///   [`lower_bound`]'s work term).
///
/// Published targets cost nothing and are left out of every term.
pub fn tight_lower_bound(p: &Problem) -> f64 {
    let n_jobs = p.jobs.len();
    let todo = |j: usize| !p.jobs[j].published;
    // Chain term with the cheapest build + push per target.
    let mut finish = vec![0.0f64; n_jobs];
    let mut bound = 0.0f64;
    for &j in &p.order {
        if !todo(j) {
            continue;
        }
        let ready = p.jobs[j]
            .deps
            .iter()
            .map(|&d| finish[d])
            .fold(0.0, f64::max);
        let own = (0..p.nodes.len())
            .filter(|&n| p.eligible(j, n))
            .map(|n| p.build_s(j, n) + p.push_s(j, n))
            .fold(f64::INFINITY, f64::min);
        finish[j] = ready + own;
        bound = bound.max(finish[j]);
    }
    // Disjoint chains against the fastest slots.
    let mut slot_speeds: Vec<f64> = p
        .nodes
        .iter()
        .flat_map(|n| std::iter::repeat_n(n.speed, n.slots as usize))
        .collect();
    slot_speeds.sort_by(|a, b| b.total_cmp(a));
    let mut taken: Vec<bool> = (0..n_jobs).map(|j| !todo(j)).collect();
    let mut heaviest = vec![0.0f64; n_jobs];
    let mut via = vec![usize::MAX; n_jobs];
    let (mut chain_work, mut chain_speed) = (0.0, 0.0);
    for &speed in slot_speeds.iter().take(slot_speeds.len().saturating_sub(1)) {
        // The heaviest path through the targets no chain has taken yet.
        let mut end = None;
        for &j in &p.order {
            if taken[j] {
                continue;
            }
            let (best, from) = p.jobs[j]
                .deps
                .iter()
                .filter(|&&d| !taken[d])
                .map(|&d| (heaviest[d], d))
                .fold((0.0, usize::MAX), |a, b| if b.0 > a.0 { b } else { a });
            heaviest[j] = best + p.jobs[j].cost.work_s;
            via[j] = from;
            if end.is_none_or(|e: usize| heaviest[j] > heaviest[e]) {
                end = Some(j);
            }
        }
        let Some(mut j) = end else { break };
        chain_work += heaviest[j];
        chain_speed += speed;
        bound = bound.max(chain_work / chain_speed);
        loop {
            taken[j] = true;
            if via[j] == usize::MAX {
                break;
            }
            j = via[j];
        }
    }
    // Work per memory class against the nodes that can build it.
    let mut needs: Vec<f64> = (0..n_jobs)
        .filter(|&j| todo(j))
        .map(|j| p.jobs[j].cost.min_memory_gb)
        .collect();
    needs.sort_by(f64::total_cmp);
    needs.dedup();
    for m in needs {
        let work: f64 = (0..n_jobs)
            .filter(|&j| todo(j) && p.jobs[j].cost.min_memory_gb >= m)
            .map(|j| p.jobs[j].cost.work_s)
            .sum();
        let capacity: f64 = p
            .nodes
            .iter()
            .filter(|n| n.memory_gb >= m)
            .map(|n| n.speed * f64::from(n.slots))
            .sum();
        bound = bound.max(work / capacity);
    }
    bound.max(lower_bound(p))
}

/// The latest end of a set of assignments (0 for none).
pub fn makespan(assignments: &[Assignment]) -> f64 {
    assignments.iter().map(|a| a.end_s).fold(0.0, f64::max)
}

/// Floating-point slack in comparisons: a millionth of a second per second of schedule.
fn eps(t: f64) -> f64 {
    1e-6 * t.abs().max(1.0)
}

/// One way a schedule breaks the model.
#[derive(Clone, Debug, PartialEq)]
pub enum Violation {
    UnknownIndex {
        job: usize,
        node: usize,
    },
    Unassigned {
        target: String,
    },
    AssignedTwice {
        target: String,
    },
    PublishedAssigned {
        target: String,
    },
    Ineligible {
        target: String,
        node: String,
        min_memory_gb: f64,
        memory_gb: f64,
    },
    /// Placed on a node that emulates its platform while another builds it natively.
    Emulated {
        target: String,
        node: String,
        platform: String,
    },
    NegativeStart {
        target: String,
        start_s: f64,
    },
    StartsBeforeDependency {
        target: String,
        dependency: String,
        start_s: f64,
        dependency_end_s: f64,
    },
    Timing {
        target: String,
        phase: &'static str,
        expected_s: f64,
        actual_s: f64,
    },
    Slots {
        node: String,
        at_s: f64,
        running: usize,
        slots: u32,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::UnknownIndex { job, node } => {
                write!(
                    f,
                    "assignment of job #{job} to node #{node}: no such job or node"
                )
            }
            Violation::Unassigned { target } => write!(f, "`{target}` is not scheduled"),
            Violation::AssignedTwice { target } => write!(f, "`{target}` is scheduled twice"),
            Violation::PublishedAssigned { target } => {
                write!(f, "`{target}` is already published but scheduled")
            }
            Violation::Ineligible {
                target,
                node,
                min_memory_gb,
                memory_gb,
            } => write!(
                f,
                "`{target}` needs {min_memory_gb} GB but runs on `{node}` ({memory_gb} GB)"
            ),
            Violation::Emulated {
                target,
                node,
                platform,
            } => write!(
                f,
                "`{target}` is built under emulation on `{node}`, though a node of the fleet builds {platform} natively"
            ),
            Violation::NegativeStart { target, start_s } => {
                write!(f, "`{target}` starts at {start_s} s, before 0")
            }
            Violation::StartsBeforeDependency {
                target,
                dependency,
                start_s,
                dependency_end_s,
            } => write!(
                f,
                "`{target}` starts at {start_s} s, before its dependency `{dependency}` finishes pushing at {dependency_end_s} s"
            ),
            Violation::Timing {
                target,
                phase,
                expected_s,
                actual_s,
            } => write!(
                f,
                "`{target}`: {phase} is {actual_s} s, the model gives {expected_s} s"
            ),
            Violation::Slots {
                node,
                at_s,
                running,
                slots,
            } => write!(
                f,
                "node `{node}` runs {running} targets at {at_s} s but has {slots} slot(s)"
            ),
        }
    }
}

/// Checks a schedule against the model: every target that is not published assigned
/// exactly once (published ones never), on an eligible node, starting at or after 0 and
/// after every dependency has finished pushing, with its phases exactly as the model
/// gives them (pulls from the dependencies' actual placement) and `end = start + pull +
/// build + push`; and on each node at most `slots` assignments overlapping (intervals
/// are `[start, end)`; an empty one occupies nothing). Returns every violation found.
pub fn validate(p: &Problem, assignments: &[Assignment]) -> Result<(), Vec<Violation>> {
    let mut out = Vec::new();
    let mut placed: Vec<Option<&Assignment>> = vec![None; p.jobs.len()];
    for a in assignments {
        if a.job >= p.jobs.len() || a.node >= p.nodes.len() {
            out.push(Violation::UnknownIndex {
                job: a.job,
                node: a.node,
            });
            continue;
        }
        let target = || p.jobs[a.job].name.clone();
        if p.jobs[a.job].published {
            out.push(Violation::PublishedAssigned { target: target() });
        } else if placed[a.job].is_some() {
            out.push(Violation::AssignedTwice { target: target() });
        } else {
            placed[a.job] = Some(a);
        }
    }
    for (j, job) in p.jobs.iter().enumerate() {
        if !job.published && placed[j].is_none() {
            out.push(Violation::Unassigned {
                target: job.name.clone(),
            });
        }
    }
    for a in placed.iter().flatten() {
        let (j, n) = (a.job, a.node);
        let job = &p.jobs[j];
        if !p.has_memory(j, n) {
            out.push(Violation::Ineligible {
                target: job.name.clone(),
                node: p.nodes[n].name.clone(),
                min_memory_gb: job.cost.min_memory_gb,
                memory_gb: p.nodes[n].memory_gb,
            });
        } else if !p.eligible(j, n) {
            out.push(Violation::Emulated {
                target: job.name.clone(),
                node: p.nodes[n].name.clone(),
                platform: job.platform.clone().unwrap_or_default(),
            });
        }
        if a.start_s.is_nan() || a.start_s < 0.0 {
            out.push(Violation::NegativeStart {
                target: job.name.clone(),
                start_s: a.start_s,
            });
        }
        for &d in &job.deps {
            if let Some(b) = placed[d]
                && a.start_s < b.end_s - eps(b.end_s)
            {
                out.push(Violation::StartsBeforeDependency {
                    target: job.name.clone(),
                    dependency: p.jobs[d].name.clone(),
                    start_s: a.start_s,
                    dependency_end_s: b.end_s,
                });
            }
        }
        let pull = p.transfer_s(p.pulled_mb(j, n, |d| placed[d].map(|b| b.node)), n);
        for (phase, expected, actual) in [
            ("pull_s", pull, a.pull_s),
            ("build_s", p.build_s(j, n), a.build_s),
            ("push_s", p.push_s(j, n), a.push_s),
            ("end_s", a.start_s + pull + a.build_s + a.push_s, a.end_s),
        ] {
            let off = (expected - actual).abs();
            if off.is_nan() || off > eps(expected) {
                out.push(Violation::Timing {
                    target: job.name.clone(),
                    phase,
                    expected_s: expected,
                    actual_s: actual,
                });
            }
        }
    }
    let mut by_node: Vec<Vec<&Assignment>> = vec![Vec::new(); p.nodes.len()];
    // A zero-length assignment occupies no slot.
    for a in placed.iter().flatten().filter(|a| a.end_s > a.start_s) {
        by_node[a.node].push(a);
    }
    for (n, list) in by_node.iter_mut().enumerate() {
        list.sort_by(|a, b| a.start_s.total_cmp(&b.start_s).then(a.job.cmp(&b.job)));
        let mut running: BinaryHeap<Reverse<Time>> = BinaryHeap::new();
        for a in list.iter() {
            while running
                .peek()
                .is_some_and(|Reverse(end)| end.0 <= a.start_s + eps(a.start_s))
            {
                running.pop();
            }
            running.push(Reverse(Time(a.end_s)));
            let slots = p.nodes[n].slots;
            if running.len() > slots as usize {
                out.push(Violation::Slots {
                    node: p.nodes[n].name.clone(),
                    at_s: a.start_s,
                    running: running.len(),
                    slots,
                });
            }
        }
    }
    if out.is_empty() { Ok(()) } else { Err(out) }
}
