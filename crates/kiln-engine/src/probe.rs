//! Node facts for the fleet: free memory and idle cores, read by a tiny
//! probe container on the node (its `/proc`, i.e. the node's machine), and
//! the score seed 003 ranks nodes by — free GB plus idle cores, weighted
//! equally on purpose (a cold compile runs one process per core at 1–2 GB
//! each, so memory bounds a big node) — and the compile job count a node
//! can afford (available memory / GB per job).
//!
//! The probe container (labelled [`PROBE_LABEL`]`=1`) is removed whatever
//! happens to the probe: the engine removes it when it exits (auto-remove),
//! the probe removes it when done, and a probe whose future is dropped
//! (Ctrl-C, a timeout, the run's task aborted) removes it from a task on
//! the runtime. What a process killed outright leaves (a container created
//! but never started) the next probe on that engine sweeps: stopped or
//! never-started probe containers older than a minute.
//!
//! Must never: change anything on the node beyond probe containers, which
//! are removed; touch a running probe container (a concurrent probe's).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;
use serde::Serialize;

use crate::driver::local::{LocalEngine, request_bound};
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

/// The label every probe container carries (value `1`): what a later
/// probe sweeps leftovers by.
pub const PROBE_LABEL: &str = "kiln.probe";

/// How old a stopped or never-started probe container must be before a
/// probe sweeps it as a leftover (a concurrent probe's container is
/// younger: it lives for about a second).
const LEFTOVER_AGE: Duration = Duration::from_secs(60);

/// Removes the probe container when dropped while armed: the probe's
/// future was dropped between creating the container and removing it.
struct Removal {
    docker: Docker,
    name: String,
    /// The engine said it created the container (else a create request
    /// may still be in flight).
    created: bool,
    armed: bool,
}

impl Drop for Removal {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let task = remove_dropped(
            self.docker.clone(),
            std::mem::take(&mut self.name),
            self.created,
        );
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(task);
            }
            // Dropped outside a runtime: a thread of its own, best effort
            // (the next probe's sweep catches what this misses).
            Err(_) => {
                let _ = std::thread::Builder::new()
                    .name("kiln-probe-removal".into())
                    .spawn(move || {
                        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                        {
                            rt.block_on(task);
                        }
                    });
            }
        }
    }
}

fn force() -> bollard::query_parameters::RemoveContainerOptions {
    RemoveContainerOptionsBuilder::default().force(true).build()
}

/// Removes the container of a dropped probe. A create request still in
/// flight when the probe was dropped may land after a first removal found
/// nothing: then it looks again, a little later.
async fn remove_dropped(docker: Docker, name: String, created: bool) {
    use bollard::errors::Error::DockerResponseServerError;
    for _ in 0..4 {
        match tokio::time::timeout(
            request_bound(),
            docker.remove_container(&name, Some(force())),
        )
        .await
        {
            Ok(Ok(())) => return,
            // Gone (auto-removed after it exited), or the engine removes
            // it already.
            Ok(Err(DockerResponseServerError {
                status_code: 404 | 409,
                ..
            })) if created => return,
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Removes probe containers that earlier, interrupted processes left on
/// the engine: labelled, stopped or never started, and older than
/// [`LEFTOVER_AGE`]. Best effort; a running probe container is never
/// touched.
async fn sweep_leftovers(docker: &Docker) {
    let label = format!("{PROBE_LABEL}=1");
    let filters: HashMap<&str, Vec<&str>> = HashMap::from([
        ("label", vec![label.as_str()]),
        ("status", vec!["created", "exited"]),
    ]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let Ok(Ok(found)) =
        tokio::time::timeout(request_bound(), docker.list_containers(Some(opts))).await
    else {
        return;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    for c in found {
        let (Some(id), Some(created)) = (c.id, c.created) else {
            continue;
        };
        if now.saturating_sub(created) < LEFTOVER_AGE.as_secs() as i64 {
            continue;
        }
        let _ = tokio::time::timeout(request_bound(), docker.remove_container(&id, Some(force())))
            .await;
    }
}

/// Runs the probe container on `engine` and reads the facts. The container
/// is gone afterwards, also when this future is dropped before it finished.
pub async fn probe(engine: &LocalEngine, gb_per_job: f64) -> Result<NodeFacts, EngineError> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let docker = engine.docker();
    let fail = |what: &str, e: bollard::errors::Error| {
        EngineError::Build(format!("probing {}: {what}: {e}", engine.endpoint.host))
    };
    sweep_leftovers(docker).await;
    let name = format!(
        "kiln-probe-{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let body = ContainerCreateBody {
        image: Some(PROBE_IMAGE.into()),
        cmd: Some(vec!["sh".into(), "-c".into(), SCRIPT.into()]),
        labels: Some(HashMap::from([(PROBE_LABEL.into(), "1".into())])),
        host_config: Some(HostConfig {
            // Dev engines run without a bridge network.
            network_mode: Some("host".into()),
            // The engine removes it once it exited, even if this process
            // is gone by then.
            auto_remove: Some(true),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    // Armed before the create request: a probe dropped while it is in
    // flight still removes what it may create.
    let mut removal = Removal {
        docker: docker.clone(),
        name: name.clone(),
        created: false,
        armed: true,
    };
    let opts = CreateContainerOptionsBuilder::default().name(&name).build();
    if let Err(e) = docker.create_container(Some(opts), body).await {
        // The engine answered: nothing was created.
        removal.armed = false;
        return Err(fail(&format!("creating a container from {PROBE_IMAGE}"), e));
    }
    removal.created = true;
    let result = async {
        // Attached before it starts (as `docker run --rm`): the output
        // streams until the container exits, after which the engine
        // removes it, logs and all.
        let attach = docker
            .attach_container(
                &name,
                Some(
                    AttachContainerOptionsBuilder::default()
                        .stdout(true)
                        .stream(true)
                        .build(),
                ),
            )
            .await
            .map_err(|e| fail("attaching to the probe", e))?;
        docker
            .start_container(&name, None)
            .await
            .map_err(|e| fail("starting the probe", e))?;
        let mut output = attach.output;
        let mut text = String::new();
        while let Some(chunk) = output.next().await {
            match chunk.map_err(|e| fail("reading the probe's output", e))? {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    text.push_str(&String::from_utf8_lossy(&message));
                }
                _ => {}
            }
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
    // Usually auto-removed already; this covers a probe that failed before
    // its container ran.
    let _ = tokio::time::timeout(
        request_bound(),
        docker.remove_container(&name, Some(force())),
    )
    .await;
    removal.armed = false;
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
