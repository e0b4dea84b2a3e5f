//! Properties of the build order over random DAGs and random cycles.

use std::collections::{BTreeSet, HashMap};

use kiln_plan::{Graph, GraphError, PlanTarget};
use proptest::prelude::*;

/// A random acyclic graph: node k may depend only on nodes with a smaller k, and the
/// input list is a shuffle of the nodes, so input order is not a topological order.
#[derive(Debug, Clone)]
struct Dag {
    n: usize,
    /// (dependency, dependent, how it is wired: 0 target:, 1 docker-image://, 2 arg)
    edges: Vec<(usize, usize, u8)>,
    input: Vec<usize>,
    requested: Vec<usize>,
}

fn dag() -> impl Strategy<Value = Dag> {
    (1usize..28)
        .prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec((0..n, 0..n, 0u8..3), 0..n * 3),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                prop::collection::vec(0..n, 0..5),
            )
        })
        .prop_map(|(n, raw, input, requested)| Dag {
            n,
            edges: raw
                .into_iter()
                .filter(|(a, b, _)| a != b)
                .map(|(a, b, kind)| (a.min(b), a.max(b), kind))
                .collect(),
            input,
            requested,
        })
}

fn name(k: usize) -> String {
    format!("n{k}")
}

/// Tags are written in varied but equivalent forms, so matching relies on normalisation.
fn tag(k: usize) -> String {
    match k % 3 {
        0 => format!("n{k}"),
        1 => format!("docker.io/library/n{k}:latest"),
        _ => format!("reg.example:5000/team/n{k}:v{k}"),
    }
}

fn reference(k: usize) -> String {
    match k % 3 {
        0 => format!("index.docker.io/library/n{k}"),
        1 => format!("n{k}:latest"),
        _ => format!("reg.example:5000/team/n{k}:v{k}"),
    }
}

fn targets(n: usize, edges: &[(usize, usize, u8)], input: &[usize]) -> Vec<PlanTarget> {
    let mut targets: Vec<PlanTarget> = (0..n)
        .map(|k| PlanTarget::new(name(k)).with_tag(tag(k)))
        .collect();
    for &(from, to, kind) in edges {
        let t = &mut targets[to];
        match kind {
            0 => {
                t.contexts
                    .insert(format!("c{from}"), format!("target:{}", name(from)));
            }
            1 => {
                t.contexts.insert(
                    format!("i{from}"),
                    format!("docker-image://{}", reference(from)),
                );
            }
            _ => {
                t.args.insert(format!("A{from}"), reference(from));
            }
        }
    }
    input.iter().map(|&k| targets[k].clone()).collect()
}

/// The reference order: repeatedly take the ready target earliest in the input.
fn reference_order(
    members: &BTreeSet<usize>,
    deps: &HashMap<usize, BTreeSet<usize>>,
    position: &[usize],
) -> Vec<usize> {
    let mut done = BTreeSet::new();
    let mut order = Vec::new();
    while order.len() < members.len() {
        let next = members
            .iter()
            .copied()
            .filter(|k| !done.contains(k))
            .filter(|k| deps.get(k).is_none_or(|d| d.is_subset(&done)))
            .min_by_key(|&k| position[k])
            .expect("acyclic");
        done.insert(next);
        order.push(next);
    }
    order
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn closure_is_exactly_the_closure_in_dependency_order(dag in dag()) {
        let graph = Graph::new(targets(dag.n, &dag.edges, &dag.input)).unwrap();
        let mut deps: HashMap<usize, BTreeSet<usize>> = HashMap::new();
        for &(from, to, _) in &dag.edges {
            deps.entry(to).or_default().insert(from);
        }
        let expected_edges: BTreeSet<(String, String)> =
            dag.edges.iter().map(|&(f, t, _)| (name(f), name(t))).collect();
        let edges: Vec<(String, String)> =
            graph.edges().map(|e| (e.from.to_owned(), e.to.to_owned())).collect();
        prop_assert_eq!(edges.len(), expected_edges.len(), "one edge per pair");
        prop_assert_eq!(edges.into_iter().collect::<BTreeSet<_>>(), expected_edges);

        let requested: Vec<String> = dag.requested.iter().map(|&k| name(k)).collect();
        let closure = graph.closure(&requested).unwrap();

        // Exactly the transitive closure, once each.
        let mut expected = BTreeSet::new();
        let mut stack = dag.requested.clone();
        while let Some(k) = stack.pop() {
            if expected.insert(k) {
                stack.extend(deps.get(&k).into_iter().flatten().copied());
            }
        }
        let got: BTreeSet<String> = closure.iter().map(|s| (*s).to_owned()).collect();
        prop_assert_eq!(got.len(), closure.len(), "no duplicates");
        prop_assert_eq!(got, expected.iter().map(|&k| name(k)).collect::<BTreeSet<_>>());

        // Every dependency precedes its dependent.
        let at: HashMap<&str, usize> = closure.iter().enumerate().map(|(i, s)| (*s, i)).collect();
        for &(from, to, _) in &dag.edges {
            if let Some(&t) = at.get(name(to).as_str()) {
                prop_assert!(at[name(from).as_str()] < t, "{} before {}", name(from), name(to));
            }
        }

        // The tie-break is input order: it equals the naive earliest-ready order.
        let mut position = vec![0; dag.n];
        for (i, &k) in dag.input.iter().enumerate() {
            position[k] = i;
        }
        let naive: Vec<String> = reference_order(&expected, &deps, &position).into_iter().map(name).collect();
        prop_assert_eq!(&closure, &naive);

        // The request's order and repetitions do not matter.
        let mut shuffled = requested.clone();
        shuffled.reverse();
        shuffled.extend(requested.iter().cloned());
        prop_assert_eq!(graph.closure(&shuffled).unwrap(), closure);
    }

    #[test]
    fn a_planted_cycle_is_reported_as_a_real_cycle(
        dag in dag(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..5),
    ) {
        let mut members: Vec<usize> = picks.iter().map(|i| i.index(dag.n)).collect();
        members.dedup();
        let mut edges = dag.edges.clone();
        for (i, &from) in members.iter().enumerate() {
            let to = members[(i + 1) % members.len()];
            edges.push((from, to, [0, 1, 2][i % 3]));
        }
        let edge_set: BTreeSet<(String, String)> =
            edges.iter().map(|&(f, t, _)| (name(f), name(t))).collect();
        let result = Graph::new(targets(dag.n, &edges, &dag.input));
        // A single member is planted as `target:` on itself (kind 0), which is a cycle too.
        let Err(GraphError::Cycle { path }) = result else {
            prop_assert!(false, "expected a cycle, got {:?}", result.map(|_| ()));
            return Ok(());
        };
        prop_assert!(path.len() >= 2);
        prop_assert_eq!(path.first(), path.last());
        let distinct: BTreeSet<&String> = path[..path.len() - 1].iter().collect();
        prop_assert_eq!(distinct.len(), path.len() - 1, "each member once: {:?}", path);
        for pair in path.windows(2) {
            prop_assert!(edge_set.contains(&(pair[0].clone(), pair[1].clone())), "{:?} is not an edge", pair);
        }
    }
}
