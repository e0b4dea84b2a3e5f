//! The fleet's node probe against the real engine (`scripts/dev-env up`):
//! a probe whose future is dropped while its container exists (Ctrl-C, a
//! timeout, fail-fast aborting the run's task) leaves no container behind.
//! Without an engine the test says it was skipped, unless `KILN_E2E=1`.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::e2e::engine;
use kiln_engine::Endpoint;
use kiln_engine::driver::local::LocalEngine;

/// `name label-kiln.probe state` of every container on `host` whose name
/// starts with `prefix` (the probes of this test process).
fn probe_containers(host: &str, prefix: &str) -> Vec<String> {
    let o = Command::new("/usr/bin/docker")
        .args(["-H", host, "ps", "-a", "--filter"])
        .arg(format!("name={prefix}"))
        .args([
            "--format",
            "{{.Names}} kiln.probe={{.Label \"kiln.probe\"}} {{.State}}",
        ])
        .output()
        .expect("docker CLI");
    assert!(
        o.status.success(),
        "docker ps: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_probe_dropped_while_its_container_exists_leaves_no_container() {
    let Some((host, _)) = engine() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = rt
        .block_on(LocalEngine::connect(Endpoint {
            host: host.clone(),
            docker_cli: "/usr/bin/docker".into(),
        }))
        .expect("engine");
    // The probe names its container kiln-probe-<pid>-...: this process's.
    let prefix = format!("kiln-probe-{}-", std::process::id());
    assert!(
        probe_containers(&host, &prefix).is_empty(),
        "no probe of this process yet"
    );

    // Start a probe and drop its future as soon as its container shows in
    // the engine's list. A probe that finishes before the list shows its
    // container is tried again.
    let mut seen = None;
    for _ in 0..5 {
        seen = rt.block_on(async {
            let probe = kiln_engine::probe::probe(&engine, 2.0);
            tokio::pin!(probe);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                tokio::select! {
                    r = &mut probe => {
                        r.expect("the probe works");
                        return None;
                    }
                    () = tokio::time::sleep(Duration::from_millis(20)) => {
                        let (h, p) = (host.clone(), prefix.clone());
                        let now = tokio::task::spawn_blocking(move || probe_containers(&h, &p))
                            .await
                            .unwrap();
                        if !now.is_empty() {
                            // Leaving the block drops the probe's future.
                            return Some(now);
                        }
                        assert!(Instant::now() < deadline, "the probe's container never showed");
                    }
                }
            }
        });
        if seen.is_some() {
            break;
        }
    }
    let seen = seen.expect("a probe's container showed while the probe ran");
    eprintln!("dropped the probe while the engine listed: {seen:?}");

    // Within a few seconds nothing of it is left (the runtime lives on, as
    // kiln's does after a timeout or an aborted task).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = probe_containers(&host, &prefix);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = probe_containers(&host, &prefix);
    }
    assert!(
        left.is_empty(),
        "the interrupted probe left its container behind: {left:?}"
    );
    // The container carried the label a later probe sweeps leftovers by.
    assert!(
        seen.iter().all(|l| l.contains(" kiln.probe=1 ")),
        "the probe's container is labelled kiln.probe=1: {seen:?}"
    );
    drop(rt);
}
