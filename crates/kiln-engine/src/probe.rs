//! Node facts for the fleet: free memory and idle cores, read by a tiny
//! probe container on the node (its `/proc`, i.e. the node's machine), and
//! the score seed 003 ranks nodes by — free GB plus idle cores, weighted
//! equally on purpose (a cold compile runs one process per core at 1–2 GB
//! each, so memory bounds a big node) — and the compile job count a node
//! can afford (available memory / GB per job).
//!
//! Must never: change anything on the node beyond the probe container,
//! which is removed.

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
    WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;
use serde::Serialize;

use crate::driver::local::LocalEngine;
use crate::error::EngineError;

/// The image the probe runs (dev-env imports it on every node).
pub const PROBE_IMAGE: &str = "kiln/busybox:latest";

/// What a node reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeFacts {
    pub cores: u32,
    pub memory_gb: f64,
    /// `MemAvailable`.
    pub free_gb: f64,
    /// Cores times the idle share of CPU time over the probe's sample.
    pub idle_cores: f64,
    /// free GB + idle cores.
    pub score: f64,
    /// Compile jobs the node can afford now: `floor(free_gb / gb_per_job)`,
    /// at least 1.
    pub jobs: u32,
}

/// `(idle, total)` jiffies of the `cpu` line of `/proc/stat`.
fn cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
    if v.len() < 4 {
        return None;
    }
    // idle + iowait count as idle.
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((idle, v.iter().sum()))
}

/// Parses the probe's output: `/proc/meminfo`, then two `cpu` lines of
/// `/proc/stat` taken a moment apart, then `nproc`.
pub fn parse(text: &str, gb_per_job: f64) -> Option<NodeFacts> {
    let kb = |key: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<f64>()
            .ok()
    };
    let total = kb("MemTotal:")? / 1024.0 / 1024.0;
    let avail = kb("MemAvailable:")? / 1024.0 / 1024.0;
    let cpus: Vec<(u64, u64)> = text.lines().filter_map(cpu_line).collect();
    let cores: u32 = text
        .lines()
        .rev()
        .find_map(|l| l.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)?;
    let idle_share = match cpus.as_slice() {
        [a, b, ..] if b.1 > a.1 => (b.0.saturating_sub(a.0)) as f64 / (b.1 - a.1) as f64,
        _ => 0.0,
    };
    let idle_cores = (f64::from(cores) * idle_share.clamp(0.0, 1.0) * 10.0).round() / 10.0;
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let free_gb = round(avail);
    let jobs = if gb_per_job > 0.0 {
        ((avail / gb_per_job).floor() as u32).max(1)
    } else {
        cores
    };
    Some(NodeFacts {
        cores,
        memory_gb: round(total),
        free_gb,
        idle_cores,
        score: round(free_gb + idle_cores),
        jobs,
    })
}

const SCRIPT: &str =
    "cat /proc/meminfo; head -n1 /proc/stat; sleep 0.5; head -n1 /proc/stat; nproc";

/// Runs the probe container on `engine` and reads the facts.
pub async fn probe(engine: &LocalEngine, gb_per_job: f64) -> Result<NodeFacts, EngineError> {
    let docker = engine.docker();
    let fail = |what: &str, e: bollard::errors::Error| {
        EngineError::Build(format!("probing {}: {what}: {e}", engine.endpoint.host))
    };
    let name = format!(
        "kiln-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let body = ContainerCreateBody {
        image: Some(PROBE_IMAGE.into()),
        cmd: Some(vec!["sh".into(), "-c".into(), SCRIPT.into()]),
        host_config: Some(HostConfig {
            // Dev engines run without a bridge network.
            network_mode: Some("host".into()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let opts = CreateContainerOptionsBuilder::default().name(&name).build();
    docker
        .create_container(Some(opts), body)
        .await
        .map_err(|e| fail(&format!("creating a container from {PROBE_IMAGE}"), e))?;
    let result = async {
        docker
            .start_container(&name, None)
            .await
            .map_err(|e| fail("starting the probe", e))?;
        let mut wait =
            docker.wait_container(&name, Some(WaitContainerOptionsBuilder::default().build()));
        while let Some(w) = wait.next().await {
            w.map_err(|e| fail("waiting for the probe", e))?;
        }
        let mut logs = docker.logs(
            &name,
            Some(LogsOptionsBuilder::default().stdout(true).build()),
        );
        let mut text = String::new();
        while let Some(chunk) = logs.next().await {
            let chunk = chunk.map_err(|e| fail("reading the probe's output", e))?;
            text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        parse(&text, gb_per_job).ok_or_else(|| {
            EngineError::Build(format!(
                "probing {}: unexpected output from the probe: {}",
                engine.endpoint.host,
                text.lines().take(3).collect::<Vec<_>>().join(" | ")
            ))
        })
    }
    .await;
    let _ = docker
        .remove_container(
            &name,
            Some(RemoveContainerOptionsBuilder::default().force(true).build()),
        )
        .await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   16777216 kB\ncpu  100 0 100 800 0 0 0 0 0 0\ncpu  150 0 150 1700 0 0 0 0 0 0\n2\n";

    #[test]
    fn facts_score_and_jobs_come_from_proc() {
        let f = parse(OUT, 2.0).unwrap();
        assert_eq!(f.cores, 2);
        assert_eq!(f.memory_gb, 23.4);
        assert_eq!(f.free_gb, 16.0);
        // 900 idle of 1000 jiffies: 90 % of 2 cores.
        assert_eq!(f.idle_cores, 1.8);
        assert_eq!(f.score, 17.8);
        assert_eq!(f.jobs, 8);
        assert_eq!(parse(OUT, 32.0).unwrap().jobs, 1, "at least one job");
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(parse("", 2.0), None);
        assert_eq!(parse("MemTotal: x kB\n", 2.0), None);
    }
}
