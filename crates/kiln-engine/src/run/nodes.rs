//! The run's builder nodes: what a node is given (`NodeSpec`), a
//! connected node with its build slots and lanes, connecting them all,
//! placing a ready target on one, and the compile-job count one build on a
//! node is handed.
//!
//! Must never: decide whether a target builds, or talk to the record store.

use std::collections::HashMap;
use std::sync::Arc;

use crate::driver::local::LocalEngine;
use crate::driver::{Driver, EngineDriver};
use crate::error::EngineError;
use crate::events::{Event, Reporter};
use crate::spec::Endpoint;

/// One builder node of a fleet run.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub endpoint: Endpoint,
    /// A buildx builder: the node builds through it (`crate::buildx`),
    /// and `endpoint` is unused (the builder's engine is found from it).
    pub builder: Option<crate::driver::buildx::BuilderSpec>,
    /// Concurrent builds on the node.
    pub slots: usize,
    /// The node's memory as the fleet file states it: the job count of a
    /// builder that keeps no engine kiln can probe comes from it.
    pub memory_gb: Option<f64>,
}

/// A connected node.
pub(super) struct Node {
    pub(super) name: String,
    /// How it builds (the scheduler never asks which driver it is).
    pub(super) driver: Arc<dyn Driver>,
    /// Where its images live: `driver.engine()`; `None` for a builder
    /// that keeps no image store (registry only).
    pub(super) engine: Option<LocalEngine>,
    /// The fleet file's memory for the node, if any.
    pub(super) memory_gb: Option<f64>,
    /// One permit per concurrent BuildKit build.
    pub(super) slots: tokio::sync::Semaphore,
    pub(super) capacity: usize,
    pub(super) resolver: crate::keys::Resolver,
    pub(super) alive: std::sync::atomic::AtomicBool,
    /// The job count one build on this node is handed: set from the
    /// fleet's probe at the start, or probed when the first build that
    /// wants it starts (a run that builds none probes nothing).
    pub(super) jobs: tokio::sync::OnceCell<u32>,
    /// Which of its build slots are busy: a build takes the lowest free
    /// one, so the run summary can say which lane it ran on.
    pub(super) lanes: std::sync::Mutex<Vec<bool>>,
}

/// A build slot taken on a node; freed when dropped.
pub(super) struct Lane<'a> {
    lanes: &'a std::sync::Mutex<Vec<bool>>,
    pub(super) index: usize,
}

impl Node {
    /// Takes the lowest free lane (the caller holds a slot permit, so one
    /// is free; a full table still yields a lane past the end).
    pub(super) fn take_lane(&self) -> Lane<'_> {
        let mut l = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let index = l.iter().position(|b| !b).unwrap_or(l.len());
        if index == l.len() {
            l.push(true);
        } else {
            l[index] = true;
        }
        Lane {
            lanes: &self.lanes,
            index,
        }
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        let mut l = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = l.get_mut(self.index) {
            *b = false;
        }
    }
}

impl Node {
    pub(super) fn alive(&self) -> bool {
        self.alive.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Node {
    /// Marks the node as gone: it gets no more work in this run.
    pub(super) fn lose(&self) {
        self.alive
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The driver of a node: its buildx builder when it names one, else its
/// Docker engine.
async fn connect(ns: &NodeSpec) -> Result<Arc<dyn Driver>, EngineError> {
    Ok(match &ns.builder {
        Some(b) => Arc::new(crate::driver::buildx::BuildxDriver::connect(b).await?),
        None => Arc::new(EngineDriver {
            engine: LocalEngine::connect(ns.endpoint.clone()).await?,
        }),
    })
}

/// The engine where a node's images live: its own, or the one behind its
/// buildx builder; `None` for a builder that keeps no image store.
pub async fn node_engine(ns: &NodeSpec) -> Result<Option<LocalEngine>, EngineError> {
    Ok(connect(ns).await?.engine().cloned())
}

/// Connects every node of the run: the fleet's (a node that does not
/// answer gets no work, with a warning; none answering is an error), or
/// the one engine or builder of a single-node run. On a fleet, each
/// node's job count is probed now.
pub(super) async fn connect_all(
    node_specs: &[NodeSpec],
    fleet: bool,
    gb_per_job: f64,
    reporter: &dyn Reporter,
) -> Result<Vec<Node>, EngineError> {
    let registry = crate::registry::Registry::new(std::time::Duration::from_secs(30)).ok();
    let mut nodes = Vec::new();
    for ns in node_specs {
        match connect(ns).await {
            Ok(driver) => {
                let engine = driver.engine().cloned();
                let jobs = tokio::sync::OnceCell::new();
                if fleet
                    && let Some(e) = &engine
                    && let Ok(f) = crate::probe::probe(e, gb_per_job).await
                {
                    let _ = jobs.set(crate::jobs::per_build(f.jobs, ns.slots));
                }
                nodes.push(Node {
                    name: ns.name.clone(),
                    resolver: crate::keys::Resolver::new(engine.clone(), registry.clone())
                        .with_platform(driver.platform()),
                    driver,
                    engine,
                    memory_gb: ns.memory_gb,
                    slots: tokio::sync::Semaphore::new(ns.slots.max(1)),
                    capacity: ns.slots.max(1),
                    alive: std::sync::atomic::AtomicBool::new(true),
                    jobs,
                    lanes: std::sync::Mutex::new(vec![false; ns.slots.max(1)]),
                });
            }
            Err(e) if fleet => reporter.event(&Event::Warning {
                target: String::new(),
                message: format!("node {} does not answer and gets no work: {e}", ns.name),
            }),
            Err(e) => return Err(e),
        }
    }
    if nodes.is_empty() {
        return Err(EngineError::Unreachable {
            endpoint: node_specs
                .iter()
                .map(|n| n.endpoint.host.clone())
                .collect::<Vec<_>>()
                .join(", "),
            detail: "no node of the fleet answers".into(),
        });
    }
    Ok(nodes)
}

/// What placement needs to know of a node.
struct Slot<'a> {
    name: &'a str,
    alive: bool,
    capacity: usize,
}

/// The node a ready target goes to (see [`choose_among`]).
pub(super) fn choose(
    nodes: &[Node],
    placement: &HashMap<String, String>,
    eligible: &HashMap<String, Vec<String>>,
    target: &str,
    queued: &[usize],
) -> Option<usize> {
    let slots: Vec<Slot<'_>> = nodes
        .iter()
        .map(|n| Slot {
            name: &n.name,
            alive: n.alive(),
            capacity: n.capacity,
        })
        .collect();
    choose_among(&slots, placement, eligible, target, queued)
}

/// The node a ready target goes to: its placement when that node is alive
/// and eligible, else the live eligible node with the most free slots
/// (queued work counted), lowest index first. `None` when no live node may
/// build it.
fn choose_among(
    nodes: &[Slot<'_>],
    placement: &HashMap<String, String>,
    eligible: &HashMap<String, Vec<String>>,
    target: &str,
    queued: &[usize],
) -> Option<usize> {
    let may = |n: &Slot<'_>| {
        n.alive
            && eligible
                .get(target)
                .is_none_or(|v| v.iter().any(|e| e == n.name))
    };
    if let Some(name) = placement.get(target)
        && let Some(k) = nodes.iter().position(|n| n.name == name && may(n))
    {
        return Some(k);
    }
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| may(n))
        .max_by(|(a, na), (b, nb)| {
            let free = |k: usize, n: &Slot<'_>| n.capacity as i64 - queued[k] as i64;
            free(*a, na).cmp(&free(*b, nb)).then(b.cmp(a))
        })
        .map(|(k, _)| k)
}

/// The job count one build on `node` is handed: the node's affordable jobs
/// (free memory / GB per job) divided by its build slots, at least 1,
/// probed once per node. When the probe fails, the engine's CPU count
/// (`docker info`) divided by the slots stands in, else 1, with a warning:
/// the build goes on either way.
pub(super) async fn node_jobs(
    node: &Node,
    gb_per_job: f64,
    reporter: &dyn Reporter,
    target: &str,
) -> u32 {
    *node
        .jobs
        .get_or_init(|| async {
            let Some(engine) = &node.engine else {
                return declared_jobs(node, gb_per_job, reporter, target);
            };
            match crate::probe::probe(engine, gb_per_job).await {
                Ok(f) => crate::jobs::per_build(f.jobs, node.capacity),
                Err(e) => {
                    let cpus = engine.cpus().await;
                    let n = crate::jobs::per_build(cpus.unwrap_or(1), node.capacity);
                    let source = match cpus {
                        Some(c) => format!(
                            "the engine's {c} CPUs over {} build slots",
                            node.capacity
                        ),
                        None => "the engine's CPU count is unknown too".into(),
                    };
                    reporter.event(&Event::Warning {
                        target: target.to_string(),
                        message: format!(
                            "could not read node {}'s free memory ({e}); builds there are handed kiln-jobs = {n} ({source})",
                            node.name
                        ),
                    });
                    n
                }
            }
        })
        .await
}

/// The job count of a builder with no engine kiln can probe: the fleet
/// file's memory over the GB per job and the node's slots; without a
/// fleet file, 1, with a warning saying how to hand more.
fn declared_jobs(node: &Node, gb_per_job: f64, reporter: &dyn Reporter, target: &str) -> u32 {
    match node.memory_gb {
        Some(gb) => {
            let jobs = (gb / gb_per_job.max(0.001)).floor().max(1.0) as u32;
            crate::jobs::per_build(jobs, node.capacity)
        }
        None => {
            reporter.event(&Event::Warning {
                target: target.to_string(),
                message: format!(
                    "{} keeps no engine kiln can ask for free memory; builds there are handed kiln-jobs = 1 (describe it as a fleet node with memory_gb to hand more)",
                    node.driver.describe()
                ),
            });
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_falls_back_to_live_eligible_nodes_with_free_slots() {
        let nodes = |alive: [bool; 3]| {
            ["a", "b", "c"]
                .into_iter()
                .zip(alive)
                .zip([1, 2, 1])
                .map(|((name, alive), capacity)| Slot {
                    name,
                    alive,
                    capacity,
                })
                .collect::<Vec<_>>()
        };
        let placement: HashMap<String, String> = [("t".to_string(), "c".to_string())].into();
        let none: HashMap<String, Vec<String>> = HashMap::new();
        let unplaced: HashMap<String, String> = HashMap::new();
        let all_up = nodes([true; 3]);
        // The placement wins while its node is alive, even if busy.
        assert_eq!(
            choose_among(&all_up, &placement, &none, "t", &[0, 0, 5]),
            Some(2)
        );
        // Its node dead: the live node with the most free slots (b has 2).
        let c_dead = nodes([true, true, false]);
        assert_eq!(
            choose_among(&c_dead, &placement, &none, "t", &[0, 0, 0]),
            Some(1)
        );
        // Queued work counts; ties go to the lower index.
        assert_eq!(
            choose_among(&c_dead, &placement, &none, "t", &[0, 1, 0]),
            Some(0)
        );
        // Memory eligibility: only c may build t; c dead → nowhere.
        let only_c: HashMap<String, Vec<String>> =
            [("t".to_string(), vec!["c".to_string()])].into();
        assert_eq!(
            choose_among(&all_up, &unplaced, &only_c, "t", &[0, 0, 0]),
            Some(2)
        );
        assert_eq!(
            choose_among(&c_dead, &placement, &only_c, "t", &[0, 0, 0]),
            None
        );
        // A placement on an ineligible node is not followed.
        let only_a: HashMap<String, Vec<String>> =
            [("t".to_string(), vec!["a".to_string()])].into();
        assert_eq!(
            choose_among(&all_up, &placement, &only_a, "t", &[0, 0, 0]),
            Some(0)
        );
        assert_eq!(
            choose_among(&nodes([false; 3]), &unplaced, &none, "t", &[0, 0, 0]),
            None
        );
    }
}
