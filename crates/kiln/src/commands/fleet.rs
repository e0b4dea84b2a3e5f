//! `kiln fleet --fleet FILE`: probes every node of a fleet file (a tiny
//! container reading the node's `/proc`) and shows its free memory, idle
//! cores, score (free GB + idle cores, as seed 003 weights them) and the
//! compile jobs it can afford.
//!
//! Must never: build, or change anything on a node beyond its probe
//! container (removed again), or read the bake files: the fleet file is its
//! input.

use std::io::Write;

use kiln_engine::probe::NodeFacts;
use serde::Serialize;

use crate::cli::Format;
use crate::error::CliError;
use crate::prepare::{builder_spec, endpoint, runtime};

pub struct FleetSettings {
    pub fleet: String,
    pub format: Format,
    pub gb_per_job: f64,
    pub cwd: std::path::PathBuf,
}

/// One node in `kiln fleet --format json`.
#[derive(Debug, Serialize)]
struct NodeReport {
    name: String,
    endpoint: String,
    /// `up` or `down`.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    facts: Option<NodeFacts>,
    /// For a buildx builder: its driver, buildx version and the engine
    /// behind it.
    #[serde(skip_serializing_if = "Option::is_none")]
    builder: Option<kiln_engine::driver::buildx::BuilderFacts>,
    /// The platforms the node builds natively, native first (what the
    /// schedule places platform units by).
    platforms: Vec<String>,
    /// Where they come from: `fleet` (stated in the fleet file),
    /// `builder` (`docker buildx inspect`), `engine` (its `/version`), or
    /// `unknown` (a node that is down and states none).
    platforms_from: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub fn run(s: FleetSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let text = crate::prepare::fleet::read_input(&s.cwd, &s.fleet, "fleet")?;
    let fleet = kiln_plan::schedule::Fleet::parse(&s.fleet, &text)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let rt = runtime()?;
    let reports: Vec<NodeReport> = rt.block_on(async {
        let mut tasks = Vec::new();
        for n in &fleet.nodes {
            let ep = endpoint(&n.endpoint, &s.cwd);
            let name = n.name.clone();
            let raw = n.endpoint.clone();
            let gb = s.gb_per_job;
            let stated = n.platforms.clone();
            tasks.push(tokio::spawn(async move {
                let mut r = probe_node(name, raw, ep, gb).await;
                if !stated.is_empty() {
                    (r.platforms, r.platforms_from) = (stated, "fleet");
                }
                r
            }));
        }
        let mut v = Vec::new();
        for t in tasks {
            if let Ok(r) = t.await {
                v.push(r);
            }
        }
        v
    });
    let text = match s.format {
        Format::Json => {
            let mut t = serde_json::to_string_pretty(&serde_json::json!({ "nodes": reports }))
                .map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => table(&reports),
    };
    crate::output::write(out, &text)?;
    if !reports.is_empty() && reports.iter().all(|r| r.status == "down") {
        return Err(CliError::env("no node of the fleet answers"));
    }
    Ok(())
}

/// Asks one node of the fleet what it is and what it has free: an engine
/// address is probed with the probe container; a buildx builder through
/// the engine behind it, or by buildx alone for a builder that keeps no
/// image store.
async fn probe_node(
    name: String,
    raw: String,
    ep: Option<kiln_engine::Endpoint>,
    gb: f64,
) -> NodeReport {
    let r = async {
        let (e, b) = match ep {
            Some(ep) => (
                Some(kiln_engine::driver::local::LocalEngine::connect(ep).await?),
                None,
            ),
            // Not an engine address: a buildx builder, probed
            // through the engine behind it.
            None => {
                let d =
                    kiln_engine::driver::buildx::BuildxDriver::connect(&builder_spec(Some(&raw)))
                        .await?;
                let facts = d.facts().await?;
                (
                    kiln_engine::driver::Driver::engine(&d).cloned(),
                    Some(facts),
                )
            }
        };
        // A builder that keeps no image store has no engine
        // to probe: it is up when buildx reaches its BuildKit
        // (a docker-container builder may also be `inactive`:
        // buildx starts it on the first build).
        let f = match &e {
            Some(e) => Some(kiln_engine::probe::probe(e, gb).await?),
            None => {
                let status = b.as_ref().and_then(|f| f.status.clone());
                let driver = b.as_ref().map(|f| f.driver.as_str()).unwrap_or("");
                match status.as_deref() {
                    Some("running") | None => None,
                    Some("inactive") if driver == "docker-container" => None,
                    Some(other) => {
                        return Err(kiln_engine::EngineError::Unreachable {
                            endpoint: raw.clone(),
                            detail: format!(
                                "buildx reports the builder {other}: its BuildKit does not answer"
                            ),
                        });
                    }
                }
            }
        };
        // What the schedule takes as native: for a builder, the platforms
        // given at its creation, else the first one buildx lists (the
        // rest may be emulated); for an engine, its own.
        let created = kiln_engine::driver::buildx::native_platforms(&raw);
        let platforms = match (&b, &e) {
            (Some(_), _) if !created.is_empty() => (created, "builder"),
            (Some(b), _) if !b.platforms.is_empty() => (b.platforms[..1].to_vec(), "builder"),
            (_, Some(e)) => (vec![e.platform.clone()], "engine"),
            _ => (Vec::new(), "unknown"),
        };
        Ok::<_, kiln_engine::EngineError>((f, b, platforms))
    }
    .await;
    match r {
        Ok((f, builder, (platforms, platforms_from))) => NodeReport {
            name,
            endpoint: raw,
            status: "up",
            facts: f,
            builder,
            platforms,
            platforms_from,
            error: None,
        },
        Err(e) => NodeReport {
            name,
            endpoint: raw,
            status: "down",
            facts: None,
            builder: None,
            platforms: Vec::new(),
            platforms_from: "unknown",
            error: Some(e.to_string()),
        },
    }
}

/// The fleet as a table: a row per node with its facts, or why it has
/// none.
fn table(reports: &[NodeReport]) -> String {
    let w = reports
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let platforms = |r: &NodeReport| match r.platforms.as_slice() {
        [] => "-".to_string(),
        ps => ps.join(","),
    };
    let pw = reports
        .iter()
        .map(|r| platforms(r).len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut t = format!(
        "{:<w$}  {:<10}  {:>5}  {:>7}  {:>7}  {:>6}  {:>5}  {:<pw$}  ENDPOINT\n",
        "NODE", "STATUS", "CORES", "FREE_GB", "IDLE", "SCORE", "JOBS", "PLATFORMS"
    );
    for r in reports {
        match &r.facts {
            Some(f) => t.push_str(&format!(
                "{:<w$}  {:<10}  {:>5}  {:>7.1}  {:>7.1}  {:>6.1}  {:>5}  {:<pw$}  {}{}\n",
                r.name,
                r.status,
                f.cores,
                f.free_gb,
                f.idle_cores,
                f.score,
                f.jobs,
                platforms(r),
                r.endpoint,
                r.builder
                    .as_ref()
                    .map(|b| format!(
                        "  (buildx {} {} driver on {}, engine {} with the {} image store)",
                        b.buildx, b.driver, b.engine, b.engine_version, b.image_store
                    ))
                    .unwrap_or_default()
            )),
            None => {
                // Up without facts: a builder with no engine to
                // probe; down: why.
                let note = if r.status == "up" {
                    r.builder
                        .as_ref()
                        .map(|b| format!(
                            "  (buildx {} {} driver, {}; no image store: hand-over by registry digest, memory from the fleet file)",
                            b.buildx,
                            b.driver,
                            b.engine_version,
                        ))
                        .unwrap_or_default()
                } else {
                    format!("  ({})", r.error.clone().unwrap_or_default())
                };
                t.push_str(&format!(
                    "{:<w$}  {:<10}  {:>5}  {:>7}  {:>7}  {:>6}  {:>5}  {:<pw$}  {}{}\n",
                    r.name,
                    r.status,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    platforms(r),
                    r.endpoint,
                    note
                ));
            }
        }
    }
    t
}
