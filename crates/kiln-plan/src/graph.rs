//! The dependency graph between targets: derivation, build order, closure.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};

use crate::error::GraphError;
use crate::reference::ImageRef;
use crate::target::PlanTarget;
use kiln_util::suggest;

/// The prefix of a named context that builds another target of the same bake run.
const TARGET_PREFIX: &str = "target:";
/// The prefix of a named context that is a registry image.
const IMAGE_PREFIX: &str = "docker-image://";

/// Why one target depends on another: the input of the dependent that names the
/// dependency. Serialised as `{"kind": "target-context", "name": …}` and so on, with the
/// reference under `ref`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EdgeKind {
    /// A named context `name = "target:DEPENDENCY"`.
    TargetContext {
        /// The context's name.
        name: String,
    },
    /// A named context `name = "docker-image://REF"` where `REF` is a tag the dependency
    /// produces.
    ImageContext {
        /// The context's name.
        name: String,
        /// The reference as written, without the `docker-image://` prefix.
        #[serde(rename = "ref")]
        reference: String,
    },
    /// A build arg whose value is an image reference equal to a tag the dependency produces
    /// (a base image passed through an arg).
    Arg {
        /// The arg's name.
        name: String,
        /// The arg's value as written.
        #[serde(rename = "ref")]
        reference: String,
    },
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TargetContext { name } => write!(f, "context `{name}` (target:)"),
            Self::ImageContext { name, reference } => {
                write!(f, "context `{name}` = {IMAGE_PREFIX}{reference}")
            }
            Self::Arg { name, reference } => write!(f, "arg `{name}` = {reference}"),
        }
    }
}

/// One dependency edge, pointing from the dependency to its dependent, with every input of
/// the dependent that names the dependency (at least one; contexts first, in name order,
/// then args in name order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Edge<'a> {
    /// The target that must be built first.
    pub from: &'a str,
    /// The target that consumes it.
    pub to: &'a str,
    /// Why `to` depends on `from`.
    pub kinds: &'a [EdgeKind],
}

#[derive(Debug, Clone)]
struct EdgeData {
    from: usize,
    to: usize,
    kinds: Vec<EdgeKind>,
}

/// The dependency graph of a set of targets: a DAG with a fixed, deterministic build order.
///
/// Edges run from a dependency to its dependent and come from a target's inputs: `target:`
/// contexts, `docker-image://` contexts naming another target's tag, and build args whose
/// value is another target's tag. Construction fails on a cycle, so every `Graph` is
/// acyclic. The build order is the topological order that, whenever several targets are
/// ready, takes the one that came first in the input.
#[derive(Debug, Clone)]
pub struct Graph {
    targets: Vec<PlanTarget>,
    index: HashMap<String, usize>,
    /// Normalised `domain/path:tag` → producing targets, in input order.
    tags: HashMap<String, Vec<usize>>,
    edges: Vec<EdgeData>,
    /// Per target, the ids of its incoming edges, sorted by the dependency's rank.
    deps: Vec<Vec<usize>>,
    /// Per target, its dependents, sorted by rank.
    dependents: Vec<Vec<usize>>,
    /// Every target in build order.
    order: Vec<usize>,
    /// Position of each target in `order`.
    rank: Vec<usize>,
}

impl Graph {
    /// Builds the graph of `targets`, deriving every edge, in O(V + E + V log V) time (tags
    /// are looked up in a hash index; the log factor is the ready queue of the ordering).
    ///
    /// A target never depends on itself through its own tag. A reference produced by
    /// several targets makes the referrer depend on all of them.
    ///
    /// # Errors
    ///
    /// [`GraphError::DuplicateTarget`] for a name given twice,
    /// [`GraphError::UnknownContextTarget`] for `target:NAME` naming no target, and
    /// [`GraphError::Cycle`] when the dependencies are cyclic.
    pub fn new(targets: Vec<PlanTarget>) -> Result<Self, GraphError> {
        let n = targets.len();
        let mut index = HashMap::with_capacity(n);
        for (i, target) in targets.iter().enumerate() {
            if index.insert(target.name.clone(), i).is_some() {
                return Err(GraphError::DuplicateTarget {
                    name: target.name.clone(),
                });
            }
        }

        let mut tags: HashMap<String, Vec<usize>> = HashMap::with_capacity(n);
        for (i, target) in targets.iter().enumerate() {
            for key in target.tags.iter().filter_map(|t| tag_key(t)) {
                let producers = tags.entry(key).or_default();
                // The same tag written twice (`x` and `x:latest`) is one production.
                if producers.last() != Some(&i) {
                    producers.push(i);
                }
            }
        }

        let mut edges: Vec<EdgeData> = Vec::new();
        let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        // Edge id of (dependency → current target), reset per target.
        let mut edge_of: HashMap<usize, usize> = HashMap::new();
        for (to, target) in targets.iter().enumerate() {
            edge_of.clear();
            let mut add = |from: usize, kind: EdgeKind| {
                let id = *edge_of.entry(from).or_insert_with(|| {
                    edges.push(EdgeData {
                        from,
                        to,
                        kinds: Vec::new(),
                    });
                    deps[to].push(edges.len() - 1);
                    dependents[from].push(to);
                    edges.len() - 1
                });
                edges[id].kinds.push(kind);
            };
            for (context, value) in &target.contexts {
                if let Some(name) = value.strip_prefix(TARGET_PREFIX) {
                    let Some(&from) = index.get(name) else {
                        return Err(GraphError::UnknownContextTarget {
                            target: target.name.clone(),
                            context: context.clone(),
                            name: name.to_owned(),
                            suggestion: suggest(name, targets.iter().map(|t| t.name.as_str()))
                                .map(str::to_owned),
                        });
                    };
                    add(
                        from,
                        EdgeKind::TargetContext {
                            name: context.clone(),
                        },
                    );
                } else if let Some(reference) = value.strip_prefix(IMAGE_PREFIX) {
                    for from in producers(&tags, reference, to) {
                        add(
                            from,
                            EdgeKind::ImageContext {
                                name: context.clone(),
                                reference: reference.to_owned(),
                            },
                        );
                    }
                }
            }
            for (arg, value) in &target.args {
                for from in producers(&tags, value, to) {
                    add(
                        from,
                        EdgeKind::Arg {
                            name: arg.clone(),
                            reference: value.clone(),
                        },
                    );
                }
            }
        }

        let order = build_order(n, &deps, &dependents)
            .map_err(|remaining| cycle_error(&targets, &remaining, &dependents))?;
        let mut rank = vec![0; n];
        for (position, &v) in order.iter().enumerate() {
            rank[v] = position;
        }
        for incoming in &mut deps {
            incoming.sort_unstable_by_key(|&e| rank[edges[e].from]);
        }
        for outgoing in &mut dependents {
            outgoing.sort_unstable_by_key(|&v| rank[v]);
        }

        Ok(Self {
            targets,
            index,
            tags,
            edges,
            deps,
            dependents,
            order,
            rank,
        })
    }

    /// The number of targets.
    #[must_use]
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// Whether the graph has no targets.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Whether a target named `name` exists.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The target named `name`.
    #[must_use]
    pub fn target(&self, name: &str) -> Option<&PlanTarget> {
        self.index.get(name).map(|&i| &self.targets[i])
    }

    /// Every target, in input order.
    #[must_use]
    pub fn targets(&self) -> &[PlanTarget] {
        &self.targets
    }

    /// Every target name in build order (dependencies first).
    #[must_use]
    pub fn order(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.order.iter().map(|&v| self.name(v))
    }

    /// The requested targets and all their transitive dependencies, in build order
    /// (dependencies first; among targets that could go next, the one first in the input).
    /// Duplicates in `requested` are ignored; the result does not depend on its order.
    /// O(V + E) time.
    ///
    /// # Errors
    ///
    /// [`GraphError::UnknownTarget`] for the first requested name that is not a target,
    /// with the closest known name as a suggestion.
    pub fn closure<S: AsRef<str>>(&self, requested: &[S]) -> Result<Vec<&str>, GraphError> {
        let mut marked = vec![false; self.len()];
        let mut stack = Vec::new();
        for name in requested {
            let v = self.lookup(name.as_ref())?;
            if !marked[v] {
                marked[v] = true;
                stack.push(v);
            }
        }
        while let Some(v) = stack.pop() {
            for &e in &self.deps[v] {
                let dep = self.edges[e].from;
                if !marked[dep] {
                    marked[dep] = true;
                    stack.push(dep);
                }
            }
        }
        Ok(self.in_order(&marked).map(|v| self.name(v)).collect())
    }

    /// The direct dependencies of `name`, in build order; empty for an unknown name.
    #[must_use]
    pub fn deps(&self, name: &str) -> Vec<&str> {
        self.index.get(name).map_or_else(Vec::new, |&v| {
            self.deps[v]
                .iter()
                .map(|&e| self.name(self.edges[e].from))
                .collect()
        })
    }

    /// The targets that depend directly on `name`, in build order; empty for an unknown
    /// name.
    #[must_use]
    pub fn dependents(&self, name: &str) -> Vec<&str> {
        self.index.get(name).map_or_else(Vec::new, |&v| {
            self.dependents[v].iter().map(|&d| self.name(d)).collect()
        })
    }

    /// Every edge, grouped by dependent in build order, each group's dependencies in build
    /// order.
    pub fn edges(&self) -> impl Iterator<Item = Edge<'_>> + '_ {
        self.order
            .iter()
            .flat_map(move |&v| self.deps[v].iter().map(move |&e| self.edge_at(e)))
    }

    /// The edge from `dependency` to `dependent`, if `dependent` depends directly on it.
    #[must_use]
    pub fn edge(&self, dependency: &str, dependent: &str) -> Option<Edge<'_>> {
        let from = *self.index.get(dependency)?;
        let to = *self.index.get(dependent)?;
        self.deps[to]
            .iter()
            .find(|&&e| self.edges[e].from == from)
            .map(|&e| self.edge_at(e))
    }

    /// The targets whose tags include `reference` after normalisation, in input order; empty
    /// when nothing here produces it (or it is pinned by digest).
    #[must_use]
    pub fn producers(&self, reference: &str) -> Vec<&str> {
        producers(&self.tags, reference, usize::MAX)
            .map(|v| self.name(v))
            .collect()
    }

    /// Position of `name` in the build order.
    #[must_use]
    pub fn rank(&self, name: &str) -> Option<usize> {
        self.index.get(name).map(|&v| self.rank[v])
    }

    pub(crate) fn name(&self, v: usize) -> &str {
        &self.targets[v].name
    }

    pub(crate) fn deps_of(&self, v: usize) -> impl Iterator<Item = usize> + '_ {
        self.deps[v].iter().map(|&e| self.edges[e].from)
    }

    /// The marked targets' ids, in build order.
    pub(crate) fn in_order<'m>(
        &self,
        marked: &'m [bool],
    ) -> impl Iterator<Item = usize> + use<'_, 'm> {
        self.order.iter().copied().filter(|&v| marked[v])
    }

    /// Marks the known names of `subset`, ignoring unknown ones.
    pub(crate) fn mark(&self, subset: &[&str]) -> Vec<bool> {
        let mut marked = vec![false; self.len()];
        for name in subset {
            if let Some(&v) = self.index.get(*name) {
                marked[v] = true;
            }
        }
        marked
    }

    fn lookup(&self, name: &str) -> Result<usize, GraphError> {
        self.index
            .get(name)
            .copied()
            .ok_or_else(|| GraphError::UnknownTarget {
                name: name.to_owned(),
                suggestion: suggest(name, self.targets.iter().map(|t| t.name.as_str()))
                    .map(str::to_owned),
            })
    }

    fn edge_at(&self, e: usize) -> Edge<'_> {
        let data = &self.edges[e];
        Edge {
            from: self.name(data.from),
            to: self.name(data.to),
            kinds: &data.kinds,
        }
    }
}

/// The tag index key of a reference, `None` if it is no reference or pinned by digest.
fn tag_key(reference: &str) -> Option<String> {
    ImageRef::parse(reference)?.tag_key()
}

/// The targets producing `reference`, except `own` (a target's own tag is not a dependency).
fn producers<'t>(
    tags: &'t HashMap<String, Vec<usize>>,
    reference: &str,
    own: usize,
) -> impl Iterator<Item = usize> + 't {
    tag_key(reference)
        .and_then(|key| tags.get(&key))
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .copied()
        .filter(move |&v| v != own)
}

/// Kahn's algorithm with a min-heap on input position: the unique topological order that
/// always takes the earliest ready target. `Err` carries the targets left over by a cycle.
fn build_order(
    n: usize,
    deps: &[Vec<usize>],
    dependents: &[Vec<usize>],
) -> Result<Vec<usize>, Vec<bool>> {
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&v| waiting[v] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(v)) = ready.pop() {
        order.push(v);
        for &d in &dependents[v] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err(waiting.iter().map(|&w| w > 0).collect())
    }
}

/// Names one cycle among the `remaining` targets: within the strongly connected component
/// holding the earliest cyclic target, the shortest cycle through that target.
fn cycle_error(
    targets: &[PlanTarget],
    remaining: &[bool],
    dependents: &[Vec<usize>],
) -> GraphError {
    let mut graph: DiGraph<usize, ()> = DiGraph::new();
    let mut node: Vec<Option<NodeIndex>> = vec![None; targets.len()];
    for (v, _) in remaining.iter().enumerate().filter(|(_, r)| **r) {
        node[v] = Some(graph.add_node(v));
    }
    for (v, &from) in node.iter().enumerate() {
        let Some(from) = from else { continue };
        for &d in &dependents[v] {
            if let Some(to) = node[d] {
                graph.add_edge(from, to, ());
            }
        }
    }
    let mut component = vec![usize::MAX; targets.len()];
    let mut best: Option<(usize, usize)> = None; // (earliest member, component id)
    for (id, scc) in tarjan_scc(&graph).iter().enumerate() {
        let members: Vec<usize> = scc.iter().map(|&x| graph[x]).collect();
        let cyclic = members.len() > 1 || dependents[members[0]].contains(&members[0]);
        if !cyclic {
            continue;
        }
        for &m in &members {
            component[m] = id;
        }
        let first = members.iter().copied().min().unwrap_or(usize::MAX);
        if best.is_none_or(|(b, _)| first < b) {
            best = Some((first, id));
        }
    }
    let Some((start, id)) = best else {
        unreachable!("Kahn's algorithm left targets over, so some component is cyclic")
    };

    // Breadth-first from `start` along edges inside its component back to `start`.
    let mut parent = vec![usize::MAX; targets.len()];
    let mut queue = VecDeque::from([start]);
    let mut last = start;
    'search: while let Some(v) = queue.pop_front() {
        for &d in &dependents[v] {
            if d == start {
                last = v;
                break 'search;
            }
            if component[d] == id && parent[d] == usize::MAX {
                parent[d] = v;
                queue.push_back(d);
            }
        }
    }
    let mut between = Vec::new();
    let mut v = last;
    while v != start {
        between.push(v);
        v = parent[v];
    }
    let path = std::iter::once(start)
        .chain(between.into_iter().rev())
        .chain(std::iter::once(start))
        .map(|v| targets[v].name.clone())
        .collect();
    GraphError::Cycle { path }
}

#[cfg(test)]
mod tests;
