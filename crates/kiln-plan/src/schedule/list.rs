//! kiln's policy: list scheduling by critical path, earliest finish with transfers,
//! insertion into idle gaps, and a small deterministic portfolio.
//!
//! One pass takes the ready target with the highest priority (ties: lowest index) and
//! puts it where it finishes earliest — over every eligible node and every slot of it,
//! in the earliest gap long enough for its pulls, build and push that opens after its
//! dependencies finished pushing (a target may wait for a busy fast node, or fill a
//! hole left earlier). Equal finishes go to the node that pulls less (a chain stays on
//! one node), then to the first node.
//!
//! The candidates, in order: the upward rank with mean costs (HEFT: the mean build and
//! push over eligible nodes plus, per edge, the mean pull); the baseline's own schedule
//! (so kiln is never worse than it); the optimistic rank (the fastest eligible node, no
//! pulls); twice the rank of the best schedule so far with each target's actual
//! duration (what became critical goes first); twice that rank with slack placement
//! (a target that can finish before its latest finish on a slower node goes there,
//! leaving fast nodes to critical work); then up to 200 perturbations of that rank
//! (each target's raised by a random 0–30 %, from a fixed seed). Passes after the
//! first stop at a budget of targets × slots evaluations, so large graphs get fewer.
//! The first candidate with the smallest makespan wins.

use super::greedy;
use super::model::{Assignment, Problem, makespan};
use super::order::{Frontier, Ready};

pub(super) fn schedule(p: &Problem) -> Vec<Assignment> {
    let mut best = pass(p, &mean_rank(p), None);
    let consider = |candidate: Vec<Assignment>, best: &mut Vec<Assignment>| {
        if makespan(&candidate) < makespan(best) {
            *best = candidate;
        }
    };
    // The baseline costs no gap searches: always a candidate.
    consider(greedy::schedule(p), &mut best);
    // Each further pass costs about targets × slots gap searches.
    let slots: usize = p.nodes().iter().map(|n| n.slots as usize).sum();
    let per_pass = (p.jobs().len() * slots).max(1);
    let mut passes = BUDGET / per_pass;
    let mut affordable = || {
        let ok = passes > 0;
        passes = passes.saturating_sub(1);
        ok
    };
    if affordable() {
        consider(pass(p, &optimistic_rank(p), None), &mut best);
    }
    for _ in 0..2 {
        if affordable() {
            consider(pass(p, &actual_rank(p, &best), None), &mut best);
        }
    }
    for _ in 0..2 {
        if affordable() {
            let prio = actual_rank(p, &best);
            let m = makespan(&best);
            let dur = durations(p, &best);
            let latest: Vec<f64> = (0..prio.len()).map(|j| m - (prio[j] - dur[j])).collect();
            consider(pass(p, &prio, Some(&latest)), &mut best);
        }
    }
    // Perturbed orderings of the best schedule's critical path.
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..SEARCH_PASSES {
        if !affordable() {
            break;
        }
        let prio: Vec<f64> = actual_rank(p, &best)
            .into_iter()
            .map(|r| r * (1.0 + 0.3 * unit(&mut rng)))
            .collect();
        consider(pass(p, &prio, None), &mut best);
    }
    best
}

/// Target × slot evaluations the passes after the first may spend together: every
/// variant for graphs of a few thousand targets, three for 10,000 targets on 100 nodes.
const BUDGET: usize = 4_000_000;
/// Perturbed passes at most.
const SEARCH_PASSES: usize = 200;

/// A uniform number in [0, 1) from a xorshift64* state: deterministic, no dependency.
fn unit(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

/// `rank(j) = own(j) + max over built children c of (edge(j) + rank(c))`, in reverse
/// topological order.
fn upward(p: &Problem, own: impl Fn(usize) -> f64, edge: impl Fn(usize) -> f64) -> Vec<f64> {
    let jobs = p.jobs();
    let mut rank = vec![0.0; jobs.len()];
    for &j in p.order().iter().rev() {
        let tail = p
            .children(j)
            .iter()
            .filter(|&&c| !jobs[c].published)
            .map(|&c| rank[c])
            .fold(f64::NEG_INFINITY, f64::max);
        rank[j] = own(j)
            + if tail.is_finite() {
                edge(j) + tail
            } else {
                0.0
            };
    }
    rank
}

/// HEFT's upward rank: mean build, push and pulls of published inputs over the eligible
/// nodes; each edge costs the mean pull over all nodes.
fn mean_rank(p: &Problem) -> Vec<f64> {
    let nodes = p.nodes();
    let jobs = p.jobs();
    let mean_inv_link: f64 =
        nodes.iter().map(|n| 1.0 / n.link_mbps).sum::<f64>() / nodes.len() as f64;
    upward(
        p,
        |j| {
            let eligible: Vec<usize> = (0..nodes.len()).filter(|&n| p.eligible(j, n)).collect();
            let k = eligible.len().max(1) as f64;
            let inv_speed = eligible
                .iter()
                .map(|&n| 1.0 / p.speed_for(j, n))
                .sum::<f64>()
                / k;
            let inv_link = eligible
                .iter()
                .map(|&n| 1.0 / nodes[n].link_mbps)
                .sum::<f64>()
                / k;
            let published_in: f64 = jobs[j]
                .deps
                .iter()
                .filter(|&&d| jobs[d].published)
                .map(|&d| jobs[d].cost.output_mb)
                .sum();
            jobs[j].cost.work_s * inv_speed
                + (jobs[j].cost.output_mb + published_in) * 8.0 * inv_link
        },
        |j| jobs[j].cost.output_mb * 8.0 * mean_inv_link,
    )
}

/// The critical path at best: each target on its fastest eligible node, pushing over
/// the fastest eligible link, pulling nothing.
fn optimistic_rank(p: &Problem) -> Vec<f64> {
    let nodes = p.nodes();
    let jobs = p.jobs();
    upward(
        p,
        |j| {
            let link = (0..nodes.len())
                .filter(|&n| p.eligible(j, n))
                .map(|n| nodes[n].link_mbps)
                .fold(0.0, f64::max);
            jobs[j].cost.work_s / p.fastest_eligible_speed(j) + jobs[j].cost.output_mb * 8.0 / link
        },
        |_| 0.0,
    )
}

/// The critical path of an existing schedule: each target's actual duration there.
fn actual_rank(p: &Problem, s: &[Assignment]) -> Vec<f64> {
    let dur = durations(p, s);
    upward(p, |j| dur[j], |_| 0.0)
}

fn durations(p: &Problem, s: &[Assignment]) -> Vec<f64> {
    let mut dur = vec![0.0; p.jobs().len()];
    for a in s {
        dur[a.job] = a.end_s - a.start_s;
    }
    dur
}

/// One slot of a node: its busy intervals, sorted and disjoint, and an upper bound on
/// its largest idle gap (so most searches end at once).
#[derive(Clone, Default)]
struct Lane {
    busy: Vec<(f64, f64)>,
    max_gap: f64,
}

impl Lane {
    fn tail(&self) -> f64 {
        self.busy.last().map_or(0.0, |b| b.1)
    }

    /// The earliest start at or after `ready` of a gap of `dur` seconds.
    fn earliest(&self, ready: f64, dur: f64) -> f64 {
        if dur <= 0.0 {
            return ready; // an empty interval occupies nothing
        }
        let tail = self.tail();
        if ready >= tail || dur > self.max_gap {
            return ready.max(tail);
        }
        let mut start = ready;
        for &(s, e) in &self.busy[self.busy.partition_point(|&(_, e)| e <= ready)..] {
            if start + dur <= s {
                break;
            }
            start = start.max(e);
        }
        start
    }

    fn insert(&mut self, start: f64, end: f64) {
        let tail = self.tail();
        if start >= tail {
            self.max_gap = self.max_gap.max(start - tail);
            self.busy.push((start, end));
        } else {
            // Splitting a gap leaves max_gap an upper bound.
            let at = self.busy.partition_point(|&(s, _)| s <= start);
            self.busy.insert(at, (start, end));
        }
    }
}

/// One list-scheduling pass with the given priorities. With `latest` (each target's
/// latest finish that keeps the makespan), a target goes to the slowest node that
/// finishes it in time, keeping fast nodes for critical work; otherwise (or when no
/// node is in time) to the earliest finish.
fn pass(p: &Problem, prio: &[f64], latest: Option<&[f64]>) -> Vec<Assignment> {
    let jobs = p.jobs();
    let nodes = p.nodes();
    let mut ready = Frontier::new(p, prio);
    let mut lanes: Vec<Vec<Lane>> = nodes
        .iter()
        .map(|n| vec![Lane::default(); n.slots as usize])
        .collect();
    let mut node_of: Vec<Option<usize>> = vec![None; jobs.len()];
    let mut end = vec![0.0f64; jobs.len()];
    let mut out = Vec::with_capacity(jobs.len());
    let mut hosts: Vec<usize> = Vec::new();
    while let Some(Ready { job: j, .. }) = ready.pop() {
        let est = jobs[j].deps.iter().map(|&d| end[d]).fold(0.0, f64::max);
        // Only a node holding a dependency pulls less than all of them.
        let all_mb = jobs[j]
            .deps
            .iter()
            .map(|&d| jobs[d].cost.output_mb)
            .fold(0.0, |a, b| a + b);
        hosts.clear();
        hosts.extend(jobs[j].deps.iter().filter_map(|&d| node_of[d]));
        let deadline = latest.map_or(f64::NEG_INFINITY, |l| l[j]);
        let mut best: Option<Place> = None;
        let mut in_time: Option<Place> = None; // the slowest node finishing by `deadline`
        for n in (0..nodes.len()).filter(|&n| p.eligible(j, n)) {
            let phases = if hosts.contains(&n) {
                p.phases(j, n, &node_of)
            } else {
                [p.transfer_s(all_mb, n), p.build_s(j, n), p.push_s(j, n)]
            };
            let dur = phases[0] + phases[1] + phases[2];
            // Neither criterion can prefer a node that cannot finish in time.
            if best.is_some_and(|b| est + dur > b.finish) && est + dur > deadline {
                continue;
            }
            let (lane, start) = lanes[n]
                .iter()
                .enumerate()
                .map(|(k, l)| (k, l.earliest(est, dur)))
                .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
            let here = Place {
                finish: start + dur,
                node: n,
                lane,
                start,
                phases,
            };
            if best.is_none_or(|b| {
                here.finish < b.finish || (here.finish == b.finish && phases[0] < b.phases[0])
            }) {
                best = Some(here);
            }
            if here.finish <= deadline
                && in_time.is_none_or(|b| {
                    let (new, old) = (nodes[n].speed, nodes[b.node].speed);
                    new < old || (new == old && here.finish < b.finish)
                })
            {
                in_time = Some(here);
            }
        }
        let Some(Place {
            finish,
            node: n,
            lane,
            start,
            phases: [pull_s, build_s, push_s],
        }) = in_time.or(best)
        else {
            continue; // Problem::new guarantees an eligible node.
        };
        if finish > start {
            lanes[n][lane].insert(start, finish);
        }
        node_of[j] = Some(n);
        end[j] = finish;
        out.push(Assignment {
            job: j,
            node: n,
            start_s: start,
            pull_s,
            build_s,
            push_s,
            end_s: finish,
        });
        ready.done(j);
    }
    out
}

/// A candidate place for a target.
#[derive(Clone, Copy)]
struct Place {
    finish: f64,
    node: usize,
    lane: usize,
    start: f64,
    phases: [f64; 3],
}

#[cfg(test)]
mod tests {
    use super::Lane;

    #[test]
    fn finds_gaps() {
        let mut lane = Lane::default();
        for (s, e) in [(0.0, 10.0), (30.0, 40.0), (15.0, 20.0)] {
            lane.insert(s, e);
        }
        assert_eq!(lane.busy, [(0.0, 10.0), (15.0, 20.0), (30.0, 40.0)]);
        assert_eq!(lane.earliest(0.0, 5.0), 10.0);
        assert_eq!(lane.earliest(0.0, 6.0), 20.0);
        assert_eq!(lane.earliest(12.0, 3.0), 12.0);
        assert_eq!(lane.earliest(12.0, 4.0), 20.0);
        assert_eq!(lane.earliest(25.0, 11.0), 40.0);
        assert_eq!(lane.earliest(25.0, 20.0), 40.0);
        assert_eq!(lane.earliest(50.0, 1.0), 50.0);
        assert_eq!(Lane::default().earliest(3.0, 1.0), 3.0);
    }
}
