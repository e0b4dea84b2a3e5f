//! The baseline policy, seed 003's balancer: whenever a slot frees, among the targets
//! whose dependencies have all finished pushing, the longest (by `work_s`) goes to the
//! idle node that would finish it soonest, transfers included. No lookahead: a target
//! never waits for a busy node, and nothing is placed in a gap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::model::{Assignment, Problem};
use super::order::{Frontier, Time};

pub(super) fn schedule(p: &Problem) -> Vec<Assignment> {
    let jobs = p.jobs();
    let nodes = p.nodes();
    let work: Vec<f64> = jobs.iter().map(|j| j.cost.work_s).collect();
    let mut ready = Frontier::new(p, &work);
    let mut free: Vec<u32> = nodes.iter().map(|n| n.slots).collect();
    let mut free_total: u64 = free.iter().map(|&s| u64::from(s)).sum();
    let mut node_of: Vec<Option<usize>> = vec![None; jobs.len()];
    let mut running: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    let mut out = Vec::with_capacity(jobs.len());
    let mut stash = Vec::new();
    let mut now = 0.0;
    loop {
        while free_total > 0 {
            let Some(r) = ready.pop() else { break };
            let j = r.job;
            let mut best: Option<(f64, usize, [f64; 3])> = None;
            for n in (0..nodes.len()).filter(|&n| free[n] > 0 && p.eligible(j, n)) {
                let phases = p.phases(j, n, &node_of);
                let end = now + phases[0] + phases[1] + phases[2];
                if best.is_none_or(|(e, _, _)| end < e) {
                    best = Some((end, n, phases));
                }
            }
            let Some((end, n, [pull_s, build_s, push_s])) = best else {
                stash.push(r);
                continue;
            };
            free[n] -= 1;
            free_total -= 1;
            node_of[j] = Some(n);
            running.push(Reverse((Time(end), j)));
            out.push(Assignment {
                job: j,
                node: n,
                start_s: now,
                pull_s,
                build_s,
                push_s,
                end_s: end,
            });
        }
        ready.restore(stash.drain(..));
        let Some(Reverse((Time(t), _))) = running.peek().copied() else {
            break;
        };
        now = t;
        while let Some(&Reverse((Time(end), j))) = running.peek() {
            if end > now {
                break;
            }
            running.pop();
            if let Some(n) = node_of[j] {
                free[n] += 1;
                free_total += 1;
            }
            ready.done(j);
        }
    }
    out
}
