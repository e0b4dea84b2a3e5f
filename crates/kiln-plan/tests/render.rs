//! Renderings of awkward names must stay valid mermaid and Graphviz.

use kiln_plan::{Graph, PlanTarget};

fn awkward() -> Graph {
    Graph::new(vec![
        PlanTarget::new("end"),
        PlanTarget::new("web.v1-2").with_context("e", "target:end"),
        PlanTarget::new("web_v1_2").with_context("e", "target:end"),
        PlanTarget::new("odd\"name#1<x>")
            .with_context("a", "target:web.v1-2")
            .with_context("b", "target:web_v1_2"),
        PlanTarget::new(r"back\slash").with_context("o", "target:odd\"name#1<x>"),
        PlanTarget::new("unrendered"),
    ])
    .unwrap()
}

#[test]
fn mermaid_with_awkward_names() {
    let graph = awkward();
    let subset: Vec<&str> = graph.order().filter(|n| *n != "unrendered").collect();
    insta::assert_snapshot!(graph.render_mermaid(&subset));
}

#[test]
fn dot_with_awkward_names() {
    let graph = awkward();
    let subset: Vec<&str> = graph.order().filter(|n| *n != "unrendered").collect();
    insta::assert_snapshot!(graph.render_dot(&subset));
}

#[test]
fn unknown_subset_names_are_ignored() {
    let graph = awkward();
    assert_eq!(
        graph.render_mermaid(&["end", "no-such-target"]),
        "flowchart TD\n    t_end[\"end\"]\n"
    );
}
