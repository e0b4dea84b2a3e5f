//! The `ROCm` build graph of seed 003: sixteen targets, 27 edges, `pytorch-run` wired to
//! `pytorch` by a registry reference so its context resolves with and without
//! `PUBLISHED_INPUTS`.

use std::collections::{BTreeMap, BTreeSet};

use kiln_plan::{Edge, EdgeKind, Graph, PlanTarget};

const REG: &str = "registry.example:5000/rocm-pytorch";

/// The flowchart of seed 003, verbatim: node aliases, then edges.
const SEED_FLOWCHART: &str = r#"
flowchart TD
    rocm["rocm-runtime<br/><i>rocm/dev-ubuntu-26.04:10.1.0-full,<br/>pruned to one arch</i>"]
    base["pytorch-base"]
    src["pytorch-src<br/><i>source only, noarch</i>"]
    triton["triton-wheel<br/><i>noarch</i>"]
    cupy["cupy-wheel"]
    pt["pytorch"]
    ptw["pytorch-wheel"]
    run["pytorch-run"]
    test["pytorch-test"]
    aiter["aiter-wheel"]
    tv["torchvision-wheel"]
    nixl["nixl-wheel<br/><i>+ UCX from source</i>"]
    lmc["lmcache"]
    lmcw["lmcache-wheel"]
    vllm["vllm"]
    vllmw["vllm-wheel"]

    rocm --> base
    src --> pt
    src --> ptw
    rocm --> run
    base --> triton
    base --> cupy
    base --> pt
    triton --> pt
    pt --> ptw
    pt --> run
    pt --> test
    pt --> aiter
    triton --> aiter
    pt --> tv
    pt --> nixl
    pt --> lmc
    triton --> lmc
    nixl --> lmc
    cupy --> lmc
    lmc --> lmcw
    pt --> vllm
    triton --> vllm
    aiter --> vllm
    nixl --> vllm
    lmcw --> vllm
    tv --> vllm
    vllm --> vllmw
"#;

/// The seed's edges as (dependency, dependent) target names.
fn seed_edges() -> BTreeSet<(String, String)> {
    let mut alias = BTreeMap::new();
    let mut edges = BTreeSet::new();
    for line in SEED_FLOWCHART.lines().map(str::trim) {
        if let Some((id, rest)) = line.split_once("[\"") {
            let name = rest.split(['<', '"']).next().unwrap();
            alias.insert(id.to_owned(), name.to_owned());
        } else if let Some((from, to)) = line.split_once(" --> ") {
            edges.insert((alias[from].clone(), alias[to].clone()));
        }
    }
    assert_eq!(alias.len(), 16);
    edges
}

fn tag(name: &str) -> String {
    match name {
        // The only target with no architecture in its tag.
        "triton-wheel" => format!("{REG}/triton-wheel:3.5.0"),
        "pytorch" => format!("{REG}/pytorch:2.15.0-10.1.0-full-gfx942"),
        _ => format!("{REG}/{name}:10.1.0-full-gfx942"),
    }
}

/// (target, [(context name, dependency)]) as rocm-bake.hcl wires them with `target:`.
const WIRING: &[(&str, &[(&str, &str)])] = &[
    ("rocm-runtime", &[]),
    ("pytorch-base", &[("base-img", "rocm-runtime")]),
    ("pytorch-src", &[]),
    ("triton-wheel", &[("base-img", "pytorch-base")]),
    ("cupy-wheel", &[("base-img", "pytorch-base")]),
    (
        "pytorch",
        &[
            ("base-img", "pytorch-base"),
            ("pytorch-src", "pytorch-src"),
            ("triton-wheels", "triton-wheel"),
        ],
    ),
    (
        "pytorch-wheel",
        &[("pytorch-src", "pytorch-src"), ("pytorch-img", "pytorch")],
    ),
    // pytorch-run's pytorch input is added separately, as docker-image://.
    ("pytorch-run", &[("rocm-img", "rocm-runtime")]),
    ("pytorch-test", &[("pytorch-img", "pytorch")]),
    (
        "aiter-wheel",
        &[
            ("pytorch-img", "pytorch"),
            ("triton-wheels", "triton-wheel"),
        ],
    ),
    ("torchvision-wheel", &[("pytorch-img", "pytorch")]),
    ("nixl-wheel", &[("pytorch-img", "pytorch")]),
    (
        "lmcache",
        &[
            ("pytorch-img", "pytorch"),
            ("triton-wheels", "triton-wheel"),
            ("nixl-wheels", "nixl-wheel"),
            ("cupy-wheels", "cupy-wheel"),
        ],
    ),
    ("lmcache-wheel", &[("lmcache-img", "lmcache")]),
    (
        "vllm",
        &[
            ("pytorch-img", "pytorch"),
            ("triton-wheels", "triton-wheel"),
            ("aiter-wheels", "aiter-wheel"),
            ("nixl-wheels", "nixl-wheel"),
            ("lmcache-wheels", "lmcache-wheel"),
            ("torchvision-wheels", "torchvision-wheel"),
        ],
    ),
    ("vllm-wheel", &[("vllm-img", "vllm")]),
];

/// The sixteen targets. With `published`, every `target:` context collapses to a registry
/// reference passed through an arg (`PUBLISHED_INPUTS=1`); otherwise the context is
/// `target:` and the arg names the context, as in the seed's snippet.
fn rocm_targets(published: bool) -> Vec<PlanTarget> {
    WIRING
        .iter()
        .map(|&(name, inputs)| {
            let mut target = PlanTarget::new(name)
                .with_tag(tag(name))
                .with_arg("RUN_ID", "dev")
                .with_arg("GFX_ARCH", "gfx942");
            target.context = format!("docker/{name}");
            target.platforms = vec!["linux/amd64".to_owned()];
            for &(context, dependency) in inputs {
                let arg = format!("{}_IMAGE", context.to_uppercase().replace('-', "_"));
                if published {
                    target = target.with_arg(arg, tag(dependency));
                } else {
                    target = target
                        .with_context(context, format!("target:{dependency}"))
                        .with_arg(arg, context);
                }
            }
            match name {
                "rocm-runtime" => {
                    target = target.with_arg("ROCM_IMAGE", "rocm/dev-ubuntu-26.04:10.1.0-full");
                }
                "pytorch-run" => {
                    target = target
                        .with_context("pytorch-img", format!("docker-image://{}", tag("pytorch")));
                }
                _ => {}
            }
            target
        })
        .collect()
}

fn derived_edges(graph: &Graph) -> BTreeSet<(String, String)> {
    graph
        .edges()
        .map(|e| (e.from.to_owned(), e.to.to_owned()))
        .collect()
}

#[test]
fn the_rocm_graph_has_exactly_the_seed_edges() {
    let graph = Graph::new(rocm_targets(false)).unwrap();
    assert_eq!(graph.len(), 16);
    let edges: Vec<_> = graph.edges().collect();
    assert_eq!(edges.len(), 27);
    assert_eq!(derived_edges(&graph), seed_edges());

    // 26 edges come from `target:` contexts alone; pytorch-run reaches pytorch by registry.
    let (by_image, by_target): (Vec<&Edge<'_>>, Vec<&Edge<'_>>) = edges
        .iter()
        .partition(|e| matches!(e.kinds, [EdgeKind::ImageContext { .. }]));
    assert_eq!(by_target.len(), 26);
    assert!(
        by_target
            .iter()
            .all(|e| matches!(e.kinds, [EdgeKind::TargetContext { .. }]))
    );
    assert_eq!(by_image.len(), 1);
    assert_eq!(
        (by_image[0].from, by_image[0].to),
        ("pytorch", "pytorch-run")
    );
    assert_eq!(
        by_image[0].kinds,
        [EdgeKind::ImageContext {
            name: "pytorch-img".into(),
            reference: tag("pytorch"),
        }]
    );
}

#[test]
fn published_inputs_derive_the_same_graph_through_args() {
    let graph = Graph::new(rocm_targets(true)).unwrap();
    assert_eq!(derived_edges(&graph), seed_edges());
    assert!(
        graph
            .edges()
            .all(|e| !matches!(e.kinds, [EdgeKind::TargetContext { .. }, ..]))
    );
    assert_eq!(
        graph.edge("pytorch-base", "triton-wheel").unwrap().kinds,
        [EdgeKind::Arg {
            name: "BASE_IMG_IMAGE".into(),
            reference: tag("pytorch-base"),
        }]
    );
}

#[test]
fn asking_for_vllm_builds_everything_beneath_it_in_order() {
    let graph = Graph::new(rocm_targets(false)).unwrap();
    assert_eq!(
        graph.closure(&["vllm"]).unwrap(),
        [
            "rocm-runtime",
            "pytorch-base",
            "pytorch-src",
            "triton-wheel",
            "cupy-wheel",
            "pytorch",
            "aiter-wheel",
            "torchvision-wheel",
            "nixl-wheel",
            "lmcache",
            "lmcache-wheel",
            "vllm",
        ]
    );
    assert_eq!(
        graph.deps("vllm"),
        [
            "triton-wheel",
            "pytorch",
            "aiter-wheel",
            "torchvision-wheel",
            "nixl-wheel",
            "lmcache-wheel",
        ]
    );
    assert_eq!(
        graph.dependents("triton-wheel"),
        ["pytorch", "aiter-wheel", "lmcache", "vllm"]
    );
    // pytorch-run pulls in pytorch through its registry reference.
    assert_eq!(
        graph.closure(&["pytorch-run"]).unwrap(),
        [
            "rocm-runtime",
            "pytorch-base",
            "pytorch-src",
            "triton-wheel",
            "pytorch",
            "pytorch-run",
        ]
    );
}

#[test]
fn the_groups_close_over_their_members() {
    let graph = Graph::new(rocm_targets(false)).unwrap();
    let default = [
        "rocm-runtime",
        "pytorch-src",
        "pytorch-base",
        "pytorch",
        "pytorch-wheel",
        "triton-wheel",
        "aiter-wheel",
        "torchvision-wheel",
        "cupy-wheel",
        "nixl-wheel",
        "vllm",
        "vllm-wheel",
        "lmcache",
        "lmcache-wheel",
    ];
    let closure = graph.closure(&default).unwrap();
    assert_eq!(closure.len(), 14, "default is closed: {closure:?}");
    assert!(!closure.contains(&"pytorch-test") && !closure.contains(&"pytorch-run"));

    let wheels = [
        "pytorch-wheel",
        "triton-wheel",
        "aiter-wheel",
        "nixl-wheel",
        "torchvision-wheel",
        "cupy-wheel",
        "vllm-wheel",
        "lmcache-wheel",
    ];
    // Every wheel needs pytorch-base's chain, and vllm-wheel needs all of vllm's.
    assert_eq!(graph.closure(&wheels).unwrap(), closure);
}

#[test]
fn the_rocm_graph_renders_as_mermaid() {
    let graph = Graph::new(rocm_targets(false)).unwrap();
    let all: Vec<&str> = graph.order().collect();
    insta::assert_snapshot!("rocm_mermaid", graph.render_mermaid(&all));
}

#[test]
fn the_rocm_graph_renders_as_dot() {
    let graph = Graph::new(rocm_targets(false)).unwrap();
    let all: Vec<&str> = graph.order().collect();
    insta::assert_snapshot!("rocm_dot", graph.render_dot(&all));
}

#[test]
fn a_closure_renders_only_its_own_nodes_and_edges() {
    let graph = Graph::new(rocm_targets(false)).unwrap();
    let closure = graph.closure(&["lmcache-wheel"]).unwrap();
    let mermaid = graph.render_mermaid(&closure);
    insta::assert_snapshot!("lmcache_wheel_mermaid", mermaid);
    // The subset's order does not matter.
    let mut reversed = closure.clone();
    reversed.reverse();
    assert_eq!(graph.render_mermaid(&reversed), mermaid);
    assert_eq!(graph.render_dot(&reversed), graph.render_dot(&closure));
}
