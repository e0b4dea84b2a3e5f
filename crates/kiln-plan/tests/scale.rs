//! Fifty thousand targets: construction and closure stay linear.

use std::time::Instant;

use kiln_plan::{Graph, GraphError, PlanTarget};

const N: usize = 50_000;

fn targets() -> Vec<PlanTarget> {
    (0..N)
        .map(|i| {
            let mut t = PlanTarget::new(format!("target-{i}"))
                .with_tag(format!("registry.example:5000/stack/target-{i}:v1"))
                .with_arg("JOBS", "8")
                .with_arg("NOTE", format!("built from target-{i}"));
            if i > 0 {
                t = t.with_context("parent", format!("target:target-{}", i / 2));
            }
            if i > 1 {
                t = t.with_arg(
                    "BASE_IMAGE",
                    format!("registry.example:5000/stack/target-{}:v1", i - 1),
                );
            }
            if i % 7 == 0 && i > 10 {
                t = t.with_context(
                    "img",
                    format!(
                        "docker-image://registry.example:5000/stack/target-{}:v1",
                        i - 10
                    ),
                );
            }
            t
        })
        .collect()
}

#[test]
fn fifty_thousand_targets() {
    let started = Instant::now();
    let graph = Graph::new(targets()).unwrap();
    let last = format!("target-{}", N - 1);
    let closure = graph.closure(&[last.as_str()]).unwrap();
    // The BASE_IMAGE chain reaches every target from target-1 up; target-0 via parents.
    assert_eq!(closure.len(), N);
    assert_eq!(closure.first(), Some(&"target-0"));
    assert_eq!(closure.last(), Some(&last.as_str()));
    assert_eq!(
        graph.closure(&["target-3"]).unwrap(),
        ["target-0", "target-1", "target-2", "target-3"]
    );
    let err = graph.closure(&["target-1234x"]).unwrap_err();
    assert!(
        matches!(
            err,
            GraphError::UnknownTarget {
                suggestion: Some(_),
                ..
            }
        ),
        "{err}"
    );
    // Generous: a quadratic step over 50,000 targets would take minutes even optimised.
    assert!(
        started.elapsed().as_secs() < 60,
        "took {:?}",
        started.elapsed()
    );
}
