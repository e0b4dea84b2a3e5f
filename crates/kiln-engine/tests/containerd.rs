//! The containerd image store read directly, against the dev engine's
//! (`DOCKER_HOST` from `scripts/dev-env env`, dockerd on the containerd
//! store). Without an engine it says it was skipped, unless `KILN_E2E=1`.

use kiln_engine::driver::containerd;

#[test]
fn a_connection_kept_from_a_runtime_that_is_gone_is_replaced() {
    let e2e = std::env::var("KILN_E2E").as_deref() == Ok("1");
    let Some(host) = std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()) else {
        assert!(
            !e2e,
            "KILN_E2E=1 but DOCKER_HOST is not set (export $(scripts/dev-env env))"
        );
        eprintln!("skipped: DOCKER_HOST is not set (export $(scripts/dev-env env))");
        return;
    };
    let Some(store) = containerd::discover(&host, None) else {
        // An engine on the classic store, or a socket kiln may not read.
        assert!(
            !e2e,
            "KILN_E2E=1 but no containerd store was found behind {host}"
        );
        eprintln!("skipped: no containerd image store kiln may read behind {host}");
        return;
    };
    let names = vec![
        "docker.io/kiln/busybox:latest".to_string(),
        "docker.io/kiln/never-made:none".to_string(),
    ];
    let ask = |rt: &tokio::runtime::Runtime| rt.block_on(containerd::images(&store, &names));
    let first_rt = tokio::runtime::Runtime::new().unwrap();
    let first = ask(&first_rt).expect("the store answers");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].0, names[0]);
    assert!(first[0].1.starts_with("sha256:"), "{first:?}");
    // Asked again on the same runtime: the kept connection answers.
    assert_eq!(ask(&first_rt).expect("asked again"), first);
    // That runtime ends (a preflight's, before a run's): its connection's
    // task is gone with it, and the next question still gets its answer.
    drop(first_rt);
    let next_rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(ask(&next_rt).expect("on a new runtime"), first);
    assert_eq!(ask(&next_rt).expect("and again"), first);
}
