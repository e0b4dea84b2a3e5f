use super::*;

fn t(name: &str) -> PlanTarget {
    PlanTarget::new(name)
}

fn edge_list(graph: &Graph) -> Vec<(&str, &str)> {
    graph.edges().map(|e| (e.from, e.to)).collect()
}

fn cycle_path(err: GraphError) -> Vec<String> {
    match err {
        GraphError::Cycle { path } => path,
        other => panic!("expected a cycle, got {other:?}"),
    }
}

#[test]
fn target_context_edge() {
    let g = Graph::new(vec![
        t("app").with_context("base", "target:base"),
        t("base"),
    ])
    .unwrap();
    let edges: Vec<Edge<'_>> = g.edges().collect();
    assert_eq!(edges.len(), 1);
    assert_eq!((edges[0].from, edges[0].to), ("base", "app"));
    assert_eq!(
        edges[0].kinds,
        [EdgeKind::TargetContext {
            name: "base".into()
        }]
    );
    assert_eq!(g.order().collect::<Vec<_>>(), ["base", "app"]);
}

#[test]
fn image_context_edge_matches_after_normalisation() {
    let g = Graph::new(vec![
        t("base").with_tag("docker.io/library/base-image:latest"),
        t("app").with_context("b", "docker-image://base-image"),
    ])
    .unwrap();
    assert_eq!(edge_list(&g), [("base", "app")]);
    assert_eq!(
        g.edge("base", "app").unwrap().kinds,
        [EdgeKind::ImageContext {
            name: "b".into(),
            reference: "base-image".into()
        }]
    );
}

#[test]
fn arg_edge_for_a_base_image_passed_through_an_arg() {
    let g = Graph::new(vec![
        t("pytorch").with_tag("registry:5000/x/pytorch:2.15"),
        t("vllm")
            .with_arg("BASE_IMAGE", "registry:5000/x/pytorch:2.15")
            .with_arg("MAX_JOBS", "8")
            .with_arg("OTHER", "registry:5000/x/pytorch:2.16"),
    ])
    .unwrap();
    assert_eq!(edge_list(&g), [("pytorch", "vllm")]);
    assert_eq!(
        g.edge("pytorch", "vllm").unwrap().kinds,
        [EdgeKind::Arg {
            name: "BASE_IMAGE".into(),
            reference: "registry:5000/x/pytorch:2.15".into()
        }]
    );
}

#[test]
fn default_tag_latest_matches_both_ways() {
    let g = Graph::new(vec![
        t("a").with_tag("reg.example/a"),
        t("b").with_tag("reg.example/b:latest"),
        t("c")
            .with_arg("A", "reg.example/a:latest")
            .with_arg("B", "reg.example/b"),
    ])
    .unwrap();
    assert_eq!(g.deps("c"), ["a", "b"]);
}

#[test]
fn digest_references_match_no_tag() {
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let g = Graph::new(vec![
        t("base").with_tag("reg.example/base:1"),
        t("app")
            .with_context("b", format!("docker-image://reg.example/base@{digest}"))
            .with_arg("B", format!("reg.example/base:1@{digest}")),
    ])
    .unwrap();
    assert_eq!(edge_list(&g), []);
    assert!(
        g.producers(&format!("reg.example/base:1@{digest}"))
            .is_empty()
    );
    assert_eq!(g.producers("reg.example/base:1"), ["base"]);
}

#[test]
fn own_tag_is_not_a_dependency() {
    let g = Graph::new(vec![
        t("app")
            .with_tag("reg.example/app:dev")
            .with_arg("CACHE_FROM", "reg.example/app:dev")
            .with_context("self", "docker-image://reg.example/app:dev"),
    ])
    .unwrap();
    assert_eq!(edge_list(&g), []);
}

#[test]
fn a_tag_produced_twice_links_every_other_producer() {
    let g = Graph::new(vec![
        t("a").with_tag("reg.example/shared:1"),
        t("b")
            .with_tag("reg.example/shared:1")
            .with_arg("BASE", "reg.example/shared:1"),
        t("c").with_arg("BASE", "reg.example/shared:1"),
    ])
    .unwrap();
    assert_eq!(g.deps("b"), ["a"]);
    assert_eq!(g.deps("c"), ["a", "b"]);
    assert_eq!(g.producers("reg.example/shared:1"), ["a", "b"]);
}

#[test]
fn several_inputs_naming_one_dependency_make_one_edge_with_every_kind() {
    let g = Graph::new(vec![
        t("base").with_tag("reg.example/base:1"),
        t("app")
            .with_context("z-img", "docker-image://reg.example/base:1")
            .with_context("a-ctx", "target:base")
            .with_arg("BASE_IMAGE", "reg.example/base:1")
            .with_arg("BASE_CONTEXT", "a-ctx"),
    ])
    .unwrap();
    let edges: Vec<Edge<'_>> = g.edges().collect();
    assert_eq!(edges.len(), 1);
    assert_eq!(
        edges[0].kinds,
        [
            EdgeKind::TargetContext {
                name: "a-ctx".into()
            },
            EdgeKind::ImageContext {
                name: "z-img".into(),
                reference: "reg.example/base:1".into()
            },
            EdgeKind::Arg {
                name: "BASE_IMAGE".into(),
                reference: "reg.example/base:1".into()
            },
        ]
    );
}

#[test]
fn other_context_kinds_make_no_edge() {
    let g = Graph::new(vec![
        t("base").with_tag("base"),
        t("app")
            .with_context("dir", "./base")
            .with_context("git", "https://github.com/org/base.git")
            .with_context("oci", "oci-layout://./base")
            .with_context("bare", "base"),
    ])
    .unwrap();
    assert_eq!(edge_list(&g), []);
}

#[test]
fn unknown_context_target_suggests_a_name() {
    let err = Graph::new(vec![
        t("pytorch-base"),
        t("triton-wheel").with_context("base-img", "target:pytorch-bse"),
    ])
    .unwrap_err();
    assert_eq!(
        err,
        GraphError::UnknownContextTarget {
            target: "triton-wheel".into(),
            context: "base-img".into(),
            name: "pytorch-bse".into(),
            suggestion: Some("pytorch-base".into()),
        }
    );
    assert_eq!(
        err.to_string(),
        "target `triton-wheel`: context `base-img` is `target:pytorch-bse`, but no target \
         `pytorch-bse` is defined\nhint: did you mean `pytorch-base`?"
    );
    let err = Graph::new(vec![t("a").with_context("x", "target:zzzzzz")]).unwrap_err();
    assert!(
        err.to_string().contains("hint: define that target"),
        "{err}"
    );
}

#[test]
fn duplicate_names_are_an_error() {
    let err = Graph::new(vec![t("a"), t("b"), t("a")]).unwrap_err();
    assert_eq!(err, GraphError::DuplicateTarget { name: "a".into() });
}

#[test]
fn cycle_names_every_member_in_edge_order() {
    // c needs b, b needs a, a needs c: a -> b -> c -> a in dependency direction.
    let err = Graph::new(vec![
        t("x"),
        t("a").with_context("c", "target:c"),
        t("b").with_context("a", "target:a"),
        t("c").with_context("b", "target:b"),
        t("downstream").with_context("a", "target:a"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string().lines().next(),
        Some("dependency cycle: a -> b -> c -> a")
    );
    assert_eq!(cycle_path(err), ["a", "b", "c", "a"]);
}

#[test]
fn cycle_starts_at_the_earliest_member_and_is_shortest() {
    // One component {a, b, c, d} with edges a -> b -> a and b -> c -> d -> a (arrows point
    // from dependency to dependent); `z` lies downstream of it, `first` is unrelated.
    let err = Graph::new(vec![
        t("first"),
        t("z").with_context("d", "target:d"),
        t("d").with_context("c", "target:c"),
        t("c").with_context("b", "target:b"),
        t("b").with_context("a", "target:a"),
        t("a")
            .with_context("b", "target:b")
            .with_context("d", "target:d"),
    ])
    .unwrap_err();
    // The earliest member in the input is d; the shortest cycle through it is d -> a -> b
    // -> c -> d (every cycle through d is that one).
    assert_eq!(cycle_path(err), ["d", "a", "b", "c", "d"]);

    let err = Graph::new(vec![
        t("a")
            .with_context("b", "target:b")
            .with_context("d", "target:d"),
        t("b").with_context("a", "target:a"),
        t("c").with_context("b", "target:b"),
        t("d").with_context("c", "target:c"),
    ])
    .unwrap_err();
    // From a, the shortest way back is a -> b -> a, not a -> b -> c -> d -> a.
    assert_eq!(cycle_path(err), ["a", "b", "a"]);
}

#[test]
fn self_reference_is_a_cycle() {
    let err = Graph::new(vec![t("a").with_context("me", "target:a")]).unwrap_err();
    assert_eq!(cycle_path(err), ["a", "a"]);
}

#[test]
fn cycles_through_registry_references_are_found() {
    let err = Graph::new(vec![
        t("a")
            .with_tag("reg.example/a:1")
            .with_arg("B", "reg.example/b:1"),
        t("b")
            .with_tag("reg.example/b:1")
            .with_context("a", "docker-image://reg.example/a:1"),
    ])
    .unwrap_err();
    assert_eq!(cycle_path(err), ["a", "b", "a"]);
}

#[test]
fn build_order_takes_the_earliest_ready_target() {
    // Input order c, a, b with c needing b: a is ready before c, b before c.
    let g = Graph::new(vec![t("c").with_context("b", "target:b"), t("a"), t("b")]).unwrap();
    assert_eq!(g.order().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(g.closure(&["c"]).unwrap(), ["b", "c"]);
    assert_eq!(g.closure(&["c", "a"]).unwrap(), ["a", "b", "c"]);
    assert_eq!(g.closure(&["a", "c", "a"]).unwrap(), ["a", "b", "c"]);
    assert_eq!(g.closure::<&str>(&[]).unwrap(), Vec::<&str>::new());
    assert_eq!(g.rank("c"), Some(2));
    assert_eq!(g.rank("nope"), None);
}

#[test]
fn closure_takes_strings_too() {
    let g = Graph::new(vec![t("a"), t("b").with_context("a", "target:a")]).unwrap();
    let requested = vec!["b".to_owned()];
    assert_eq!(g.closure(&requested).unwrap(), ["a", "b"]);
}

#[test]
fn unknown_requested_target_suggests_a_name() {
    let g = Graph::new(vec![t("vllm"), t("vllm-wheel"), t("pytorch")]).unwrap();
    let err = g.closure(&["vllm", "pytroch"]).unwrap_err();
    assert_eq!(
        err,
        GraphError::UnknownTarget {
            name: "pytroch".into(),
            suggestion: Some("pytorch".into())
        }
    );
    assert_eq!(
        err.to_string(),
        "unknown target `pytroch`\nhint: did you mean `pytorch`?"
    );
    let err = g.closure(&["tensorflow"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown target `tensorflow`\nhint: check the name against the targets and groups \
         the bake files define"
    );
}

#[test]
fn deps_and_dependents_are_in_build_order() {
    let g = Graph::new(vec![
        t("top")
            .with_context("z", "target:late")
            .with_context("a", "target:early"),
        t("late").with_context("e", "target:early"),
        t("early"),
        t("side").with_context("e", "target:early"),
    ])
    .unwrap();
    assert_eq!(
        g.order().collect::<Vec<_>>(),
        ["early", "late", "top", "side"]
    );
    assert_eq!(g.deps("top"), ["early", "late"]);
    assert_eq!(g.dependents("early"), ["late", "top", "side"]);
    assert!(g.deps("missing").is_empty());
    assert!(g.dependents("missing").is_empty());
    assert_eq!(
        edge_list(&g),
        [
            ("early", "late"),
            ("early", "top"),
            ("late", "top"),
            ("early", "side")
        ]
    );
    assert!(g.edge("top", "early").is_none());
    assert!(g.contains("side") && !g.contains("nope"));
    assert_eq!(g.len(), 4);
    assert!(!g.is_empty());
    assert_eq!(g.target("late").unwrap().contexts["e"], "target:early");
    assert_eq!(g.targets()[0].name, "top");
}

#[test]
fn empty_graph() {
    let g = Graph::new(Vec::new()).unwrap();
    assert!(g.is_empty());
    assert_eq!(g.edges().count(), 0);
    assert_eq!(g.render_mermaid(&[]), "flowchart TD\n");
}

#[test]
fn edge_kinds_serialise_for_explanations() {
    let kinds = [
        EdgeKind::TargetContext {
            name: "base-img".into(),
        },
        EdgeKind::ImageContext {
            name: "pt".into(),
            reference: "reg/pytorch:1".into(),
        },
        EdgeKind::Arg {
            name: "BASE_IMAGE".into(),
            reference: "reg/pytorch:1".into(),
        },
    ];
    let json = serde_json::to_string(&kinds).unwrap();
    assert_eq!(
        json,
        r#"[{"kind":"target-context","name":"base-img"},{"kind":"image-context","name":"pt","ref":"reg/pytorch:1"},{"kind":"arg","name":"BASE_IMAGE","ref":"reg/pytorch:1"}]"#
    );
    let back: Vec<EdgeKind> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, kinds);
    assert_eq!(kinds[0].to_string(), "context `base-img` (target:)");
    assert_eq!(
        kinds[1].to_string(),
        "context `pt` = docker-image://reg/pytorch:1"
    );
    assert_eq!(kinds[2].to_string(), "arg `BASE_IMAGE` = reg/pytorch:1");
}

#[test]
fn plan_target_round_trips_through_serde() {
    let target = t("app")
        .with_context("base", "target:base")
        .with_arg("A", "1")
        .with_tag("reg/app:1");
    let json = serde_json::to_value(&target).unwrap();
    assert_eq!(json["dockerfile"], "Dockerfile");
    assert_eq!(json["target"], serde_json::Value::Null);
    let back: PlanTarget = serde_json::from_value(json).unwrap();
    assert_eq!(back, target);
    let sparse: PlanTarget = serde_json::from_str(r#"{"name":"x"}"#).unwrap();
    assert_eq!(sparse.name, "x");
}
