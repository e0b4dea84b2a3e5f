//! Total orders on times and priorities, so heaps and ties are deterministic, and the
//! ready set both policies draw from.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::model::Problem;

/// A time or priority in seconds, ordered by `f64::total_cmp`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Time(pub f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A ready job in a max-heap: the highest key first, then the lowest index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ready {
    pub key: Time,
    pub job: usize,
}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ready {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .cmp(&other.key)
            .then_with(|| other.job.cmp(&self.job))
    }
}

/// The targets to build whose built dependencies are all done, highest key first;
/// published targets never enter (they are done at 0).
pub struct Frontier<'a> {
    p: &'a Problem,
    key: &'a [f64],
    waiting: Vec<usize>,
    ready: BinaryHeap<Ready>,
}

impl<'a> Frontier<'a> {
    pub fn new(p: &'a Problem, key: &'a [f64]) -> Self {
        let jobs = p.jobs();
        let waiting: Vec<usize> = jobs
            .iter()
            .map(|j| j.deps.iter().filter(|&&d| !jobs[d].published).count())
            .collect();
        let ready = (0..jobs.len())
            .filter(|&j| !jobs[j].published && waiting[j] == 0)
            .map(|job| Ready {
                key: Time(key[job]),
                job,
            })
            .collect();
        Frontier {
            p,
            key,
            waiting,
            ready,
        }
    }

    pub fn pop(&mut self) -> Option<Ready> {
        self.ready.pop()
    }

    /// Puts back targets taken out and not placed.
    pub fn restore(&mut self, r: impl IntoIterator<Item = Ready>) {
        self.ready.extend(r);
    }

    /// Marks `j` done: dependents with nothing else to wait for become ready.
    pub fn done(&mut self, j: usize) {
        let jobs = self.p.jobs();
        for &c in self.p.children(j) {
            if !jobs[c].published {
                self.waiting[c] -= 1;
                if self.waiting[c] == 0 {
                    self.ready.push(Ready {
                        key: Time(self.key[c]),
                        job: c,
                    });
                }
            }
        }
    }
}
