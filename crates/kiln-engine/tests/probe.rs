//! The node probe against the real engine (`DOCKER_HOST` from
//! `scripts/dev-env env`): the facts it reports are the machine's own.
//! Without an engine it says it was skipped, unless `KILN_E2E=1`.

use kiln_engine::Endpoint;
use kiln_engine::driver::local::LocalEngine;

#[tokio::test]
async fn the_probe_reports_this_machines_cores_and_memory() {
    let Some(host) = std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()) else {
        assert!(
            std::env::var("KILN_E2E").as_deref() != Ok("1"),
            "KILN_E2E=1 but DOCKER_HOST is not set (export $(scripts/dev-env env))"
        );
        eprintln!("skipped: DOCKER_HOST is not set (export $(scripts/dev-env env))");
        return;
    };
    let engine = LocalEngine::connect(Endpoint {
        host,
        docker_cli: "/usr/bin/docker".into(),
    })
    .await
    .expect("engine");
    let f = kiln_engine::probe::probe(&engine, 2.0)
        .await
        .expect("probe");
    let cores = std::thread::available_parallelism().unwrap().get() as u32;
    assert_eq!(f.cores, cores, "{f:?}");
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    let total_gb = total_kb / 1024.0 / 1024.0;
    assert!((f.memory_gb - total_gb).abs() < 0.2, "{f:?} vs {total_gb}");
    assert!(f.free_gb > 0.0 && f.free_gb <= f.memory_gb, "{f:?}");
    assert!(
        f.idle_cores >= 0.0 && f.idle_cores <= f64::from(cores),
        "{f:?}"
    );
    assert!((f.score - (f.free_gb + f.idle_cores)).abs() < 0.11, "{f:?}");
    // 2 GB per job of the available memory (rounding of free_gb aside).
    let want = ((f.free_gb / 2.0).floor() as u32).max(1);
    assert!(f.jobs.abs_diff(want) <= 1, "{f:?}");
}
