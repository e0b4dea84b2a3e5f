//! `kiln build`: plans the requested targets and builds them on the local
//! engine (or a fleet, or a buildx builder), with progress on stderr and a
//! run summary on stdout. This module is the orchestration alone, in three
//! steps: [`prepare`] (bake files, plan, specs, cache policy, preflight,
//! compiler cache, store), the run (`kiln_engine::run`, stopped by the
//! first signal, `crate::signals`), and [`finish`] (what sccache counted,
//! sizes, the run report and history, the summary).
//!
//! Must never: print progress itself (that is `crate::progress`'s) or
//! format the summary (`crate::output::summary`).

use std::io::Write;
use std::sync::Arc;

use kiln_engine::{RunOptions, RunSummary, TargetStatus};

use crate::cli::Format;
use crate::error::{CliError, Kind};
use crate::prepare::{engine_error, open_store, runtime};

pub use crate::settings::BuildSettings;

pub fn run(mut s: BuildSettings, out: &mut dyn Write) -> Result<(), CliError> {
    // One runtime for the preflight and the run: what the preflight
    // started or learned of the engine carries over.
    let rt = runtime()?;
    let (store, stat_cache) = open_store(&s.store)?;
    let p = crate::prepare::build::prepare(&mut s, &rt, &store)?;
    let stats = crate::progress::reporter(
        s.progress,
        &p.lanes,
        p.specs.iter().map(|sp| sp.name.clone()).collect(),
        p.schedule.expected_s.clone().into_iter().collect(),
    );
    let opts = RunOptions {
        claim_ttl: kiln_engine::claims::ttl_from_env().map_err(CliError::usage)?,
        claim_wait: s.claim_wait,
        run_id: p.run_id.clone(),
        nodes: p.nodes.clone(),
        placement: p.placement.clone(),
        eligible: p.eligible.clone(),
        gb_per_job: s.gb_per_job,
        jobs: s.jobs,
        builder: p.builder.clone(),
        log_dir: s
            .store
            .stat_cache
            .parent()
            .map(|d| d.join("logs").join(&p.run_id)),
        fail_fast: s.fail_fast,
        require_store: s.require_store,
        force: s.force,
        store: store.clone(),
        stat_cache: stat_cache.clone(),
        recent: p.recent.clone(),
    };
    // SIGINT or SIGTERM stops the run: its tasks are dropped, which kills
    // every build child (`kill_on_drop`) and removes its temporary
    // directory; records are only ever written after a build succeeded, so
    // nothing unfinished is recorded. A second signal while it stops, or
    // any signal after the run, exits at once (crate::signals).
    let signals = crate::signals::Signals::watch();
    let reporter: Arc<dyn kiln_engine::Reporter> = stats.clone();
    let endpoint = s.store.endpoint.clone();
    let result = rt.block_on(async {
        let first = async {
            match &signals {
                Some(s) => s.first().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = kiln_engine::run(endpoint, p.specs.clone(), opts, reporter) => Ok(r),
            code = first => Err(code),
        }
    });
    let result = match result {
        Ok(r) => {
            if let Some(sig) = &signals {
                // From here a signal ends kiln at once.
                sig.run_ended();
            }
            r
        }
        Err(code) => {
            // The build process groups first (the CLI and its buildx
            // plugin), then the tasks.
            kiln_engine::proc::terminate_all(std::time::Duration::from_secs(5));
            rt.shutdown_timeout(std::time::Duration::from_secs(10));
            let _ = stat_cache.save(&s.store.stat_cache);
            return Err(interrupted(code));
        }
    };
    // The stat cache is worth keeping even when a build failed.
    if let Err(e) = stat_cache.save(&s.store.stat_cache) {
        eprintln!("warning: could not save the stat cache: {e}");
    }
    let mut summary = result.map_err(|e| engine_error(e, &s.store.endpoint))?;
    summary.stamps = p.planned.stamps.clone();
    if let Ok(counted) = stats.stats.lock() {
        for t in &mut summary.targets {
            t.compiler_cache = counted.get(&t.name).copied();
        }
    }
    drop(p.compiler_cache);
    let sizes = rt.block_on(crate::costs::output_sizes(&summary));
    let metadata = s.metadata_file.as_ref().map(|path| {
        let doc = rt.block_on(async {
            // The run's one engine holds what was not pushed; a fleet pushed
            // every target.
            let engine = match &s.fleet {
                None => kiln_engine::driver::local::LocalEngine::connect(s.store.endpoint.clone())
                    .await
                    .ok(),
                Some(_) => None,
            };
            crate::output::metadata::document(&summary, &p.specs, engine.as_ref()).await
        });
        crate::output::metadata::write(path, &doc)
    });
    let finished = finish(&s, &p.project, &p.specs, &p.lanes, summary, &sizes, out);
    // Everything the run started has ended and what it learned is written:
    // the runtime's idle threads end with the process instead of being
    // joined one by one.
    rt.shutdown_background();
    match metadata {
        Some(Err(e)) if finished.is_ok() => Err(CliError::env(e)),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            finished
        }
        _ => finished,
    }
}

/// The error of a run stopped by a signal (`code`: 130 or 143).
fn interrupted(code: u8) -> CliError {
    CliError {
        kind: crate::error::Kind::Interrupted(code),
        message: format!(
            "interrupted by {}: the builds that were running are stopped and nothing unfinished was recorded",
            if code == crate::error::exit::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            }
        ),
        hint: Some("run the same command again: what finished is recorded and skipped".into()),
    }
}

/// After the run: the run report and the history row (with learned
/// costs), the failures on stderr, the summary on stdout, and the exit
/// code — the error a run that stopped mid-way stopped on, else failure
/// when a target did not build.
fn finish(
    s: &BuildSettings,
    project: &str,
    specs: &[kiln_engine::BuildSpec],
    lanes: &[(String, usize)],
    mut summary: RunSummary,
    sizes: &std::collections::BTreeMap<String, f64>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // What sccache could not read or write is compiled again next time:
    // never silent.
    for t in &summary.targets {
        if let Some(c) = t.compiler_cache.filter(|c| c.errors > 0) {
            eprintln!(
                "warning: [{}] the compiler cache failed {} time(s) (sccache's read/write errors and timeouts): what it could not store is compiled again next time; run with SCCACHE_LOG=debug to see why",
                t.name, c.errors
            );
        }
    }
    // The run report's plan covers the work the run did: what it skipped
    // was available from the start (with the costs known before this run).
    let skipped: std::collections::BTreeSet<String> = summary
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::Skipped)
        .map(|t| t.name.clone())
        .collect();
    let on = match &s.fleet {
        Some(f) => crate::prepare::fleet::ReportNodes::Fleet(f),
        None => crate::prepare::fleet::ReportNodes::One {
            name: &lanes[0].0,
            slots: lanes[0].1,
        },
    };
    let (costs, cwd, history) = (s.costs.as_deref(), &s.bake.cwd, &s.store.history);
    let report_plan =
        crate::prepare::fleet::plan_for_report(specs, on, &skipped, costs, cwd, history)
            .unwrap_or_default();
    let tags: std::collections::HashMap<String, Vec<String>> = specs
        .iter()
        .map(|sp| (sp.name.clone(), sp.tags.clone()))
        .collect();
    let recorded = crate::report::record::record_build(
        &crate::report::record::Recording {
            history: &s.store.history,
            fleet: s.fleet.is_some(),
            project,
            specs,
            planned: &report_plan,
            tags: &tags,
            speeds: &crate::prepare::fleet::speeds(s.fleet.as_deref()),
            sizes,
        },
        &summary,
    );
    summary.run_id = recorded.id;
    let page = recorded
        .report
        .and_then(|(json, report)| write_page(&json, report));
    crate::output::summary::failures(&summary);
    let text = match s.format {
        Format::Json => {
            let mut t =
                serde_json::to_string_pretty(&summary).map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => crate::output::summary::text(&summary, &tags, page.as_deref()),
    };
    crate::output::write(out, &text)?;
    // The run stopped mid-way (its engine, store or a tool lost): what
    // finished is recorded above; the exit code is the error's.
    if let Some(e) = summary.stop_error.take() {
        let e = Arc::try_unwrap(e)
            .unwrap_or_else(|shared| kiln_engine::EngineError::Tool(shared.to_string()));
        let mut err = engine_error(e, &s.store.endpoint);
        err.hint = Some(match err.hint.take() {
            Some(h) => format!(
                "{h}; what finished before the run stopped is recorded and is skipped next time"
            ),
            None => "what finished before the run stopped is recorded (kiln report, kiln history) and is skipped next time".into(),
        });
        return Err(err);
    }
    if summary.failed() {
        let n = summary.targets.iter().filter(|t| !t.status.ok()).count();
        return Err(CliError {
            kind: Kind::Failed,
            message: format!("{n} target(s) did not build"),
            hint: None,
        });
    }
    Ok(())
}

/// Writes the page of the run recorded at `json` beside it
/// (`.kiln/runs/<id>.html`) and returns its path, shown relative to the
/// working directory when it is below it. The page is what `kiln report`
/// renders of that file: the report as recorded, read back the way
/// [`crate::report::load`] reads it.
fn write_page(
    json: &std::path::Path,
    mut report: crate::report::RunReport,
) -> Option<std::path::PathBuf> {
    crate::report::normalize(&mut report);
    let html = json.with_extension("html");
    if let Err(e) = std::fs::write(&html, crate::report::html::render(&report)) {
        eprintln!(
            "warning: could not write the run's page {}: {e}",
            html.display()
        );
        return None;
    }
    let cwd = std::env::current_dir().ok();
    Some(
        cwd.as_deref()
            .and_then(|c| html.strip_prefix(c).ok())
            .map_or(html.clone(), std::path::Path::to_path_buf),
    )
}
