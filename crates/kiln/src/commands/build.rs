//! `kiln build`: plans the requested targets and builds them on the local
//! engine, with live progress on stderr and a run summary on stdout.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use kiln_engine::events::{Event, StepState};
use kiln_engine::{Reporter, RunOptions, TargetStatus};

use crate::cli::{Format, Progress};
use crate::error::{CliError, Kind};
use crate::prepare::{
    apply_buildx_cache, apply_local_cache, build_plan, builder_spec, check, engine_error,
    fleet_plan, load, open_store, runtime, specs_for, verdict,
};
use crate::settings::{BakeSettings, StoreSettings};

pub struct BuildSettings {
    pub bake: BakeSettings,
    pub targets: Vec<String>,
    pub jobs: usize,
    pub fail_fast: bool,
    pub require_store: bool,
    /// `--claim-wait` (or `KILN_CLAIM_WAIT`).
    pub claim_wait: std::time::Duration,
    pub push: bool,
    pub progress: Progress,
    pub format: Format,
    pub force: bool,
    pub store: StoreSettings,
    pub cache: kiln_plan::cache::CacheSettings,
    pub fleet: Option<String>,
    pub costs: Option<String>,
    pub gb_per_job: f64,
    pub driver: crate::cli::DriverKind,
    /// `--builder` (or `KILN_BUILDER`).
    pub builder: Option<String>,
    /// `--run-id`.
    pub run_id: Option<String>,
    /// `--compiler-cache` (or `KILN_COMPILER_CACHE`).
    pub compiler_cache: Option<String>,
    pub require_compiler_cache: bool,
    pub force_recache: bool,
}

/// This run's id: `--run-id`, else `$RUN_ID`, else made of the pid and
/// the time. `Err` for one that cannot be part of a build name.
fn run_id(flag: Option<&str>, env: Option<&str>) -> Result<String, CliError> {
    let given = flag.or(env.filter(|v| !v.is_empty()));
    match given {
        Some(id)
            if !id.is_empty()
                && id.len() <= 128
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
        {
            Ok(id.to_string())
        }
        Some(id) => Err(CliError::usage(format!(
            "run id {id:?} is not 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
        ))
        .with_hint("it names builds in BuildKit's history (<project>/<target>/<arch>/<run-id>); pass --run-id with such a value")),
        None => Ok(format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        )),
    }
}

/// The name of `spec`'s build in BuildKit's history,
/// `<project>/<target>/<arch>/<run-id>`, unless the bake file names it
/// itself (`args = { BUILDKIT_BUILD_NAME = ... }`). A frontend option, not a
/// Dockerfile ARG: no key or layer-cache key changes with it.
pub fn name_build(spec: &mut kiln_engine::BuildSpec, project: &str, run_id: &str) {
    if spec.args.contains_key("BUILDKIT_BUILD_NAME") {
        return;
    }
    let arch = |p: &str| p.split('/').nth(1).unwrap_or(p).to_string();
    let arch = if spec.platforms.is_empty() {
        arch(&crate::settings::local_platform())
    } else {
        spec.platforms
            .iter()
            .map(|p| arch(p))
            .collect::<Vec<_>>()
            .join("+")
    };
    spec.args.insert(
        "BUILDKIT_BUILD_NAME".into(),
        format!("{project}/{}/{arch}/{run_id}", spec.name),
    );
}

/// `image (reason)`, or whichever of the two there is.
fn image_and_reason(image: Option<&str>, reason: Option<&str>) -> String {
    match (image, reason) {
        (Some(i), Some(r)) => format!("{i} ({r})"),
        (Some(x), None) | (None, Some(x)) => x.to_string(),
        (None, None) => String::new(),
    }
}

/// What the summary shows as a target's image: the first tag the bake
/// file asked for (`+N` more), or the reference kiln made when it asked
/// for none.
fn shown_image(r: &kiln_engine::TargetResult, tags: Option<&Vec<String>>) -> Option<String> {
    if !r.status.ok() {
        return None;
    }
    match tags.map(Vec::as_slice) {
        Some([one]) => Some(one.clone()),
        Some([first, rest @ ..]) => Some(format!("{first} (+{} more)", rest.len())),
        _ => r.image.clone(),
    }
}

/// The summary's last line: how many targets did what, and where the
/// images are.
fn totals(summary: &kiln_engine::RunSummary, several_nodes: bool) -> String {
    let count = |st: TargetStatus| summary.targets.iter().filter(|t| t.status == st).count();
    let cutoff = summary
        .targets
        .iter()
        .filter(|t| {
            t.status == TargetStatus::Skipped
                && t.reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("early cutoff"))
        })
        .count();
    let mut line = format!(
        "{} target(s): {} built, {} skipped",
        summary.targets.len(),
        count(TargetStatus::Built),
        count(TargetStatus::Skipped)
    );
    if cutoff > 0 {
        line.push_str(&format!(" ({cutoff} by early cutoff)"));
    }
    let failed = count(TargetStatus::Failed);
    let blocked = count(TargetStatus::Blocked);
    if failed + blocked > 0 {
        line.push_str(&format!(", {failed} failed, {blocked} blocked"));
    }
    let node = summary
        .targets
        .first()
        .map(|t| t.node.as_str())
        .unwrap_or("");
    if several_nodes {
        line.push_str("; images on the nodes in the NODE column, pushed ones in the registry");
    } else if !node.is_empty() {
        line.push_str(&format!("; images on {node}"));
    }
    line.push_str(&format!("; run {}", summary.run_id));
    line.push('\n');
    line
}

/// Plain lines on stderr.
struct PlainReporter {
    out: Mutex<std::io::Stderr>,
}

impl Reporter for PlainReporter {
    fn event(&self, e: &Event) {
        let line = match e {
            Event::TargetStarted {
                target,
                driver,
                node,
                ..
            } => format!("[{target}] building ({driver}) on {node}"),
            Event::Key {
                target,
                key,
                files,
                read_files,
                ..
            } => format!(
                "[{target}] key {} ({files} file(s), {read_files} read)",
                key.as_deref().unwrap_or("(pending)")
            ),
            Event::Warning { target, message } if target.is_empty() => {
                format!("warning: {message}")
            }
            Event::Warning { target, message } => format!("[{target}] warning: {message}"),
            Event::Waiting { target, message } => format!("[{target}] {message}"),
            Event::Step {
                target,
                step,
                state,
                duration_s,
                error,
            } => match state {
                StepState::Started => format!("[{target}] {step}"),
                StepState::Cached => format!("[{target}] {step} CACHED"),
                StepState::Done => {
                    format!("[{target}] {step} DONE {:.1}s", duration_s.unwrap_or(0.0))
                }
                StepState::Error => format!(
                    "[{target}] {step} ERROR: {}",
                    error.clone().unwrap_or_default()
                ),
            },
            Event::Log { target, line, .. } => format!("[{target}]   {line}"),
            Event::TargetFinished {
                target,
                status,
                duration_s,
                image,
                reason,
            } => {
                let extra = image_and_reason(image.as_deref(), reason.as_deref());
                format!("[{target}] {status} in {duration_s:.1}s {extra}")
            }
            Event::Pushed {
                target,
                reference,
                digest,
            } => format!("[{target}] pushed {reference}@{digest}"),
        };
        if let Ok(mut o) = self.out.lock() {
            let _ = writeln!(o, "{line}");
        }
    }
}

/// Passes every event on, counting sccache's `--show-stats` lines per
/// target (`Event::Log`).
struct StatsReporter {
    inner: Arc<dyn Reporter>,
    stats: Mutex<std::collections::HashMap<String, kiln_store::compiler_cache::Stats>>,
}

impl Reporter for StatsReporter {
    fn event(&self, e: &Event) {
        if let Event::Log { target, line, .. } = e
            && let Ok(mut m) = self.stats.lock()
        {
            let mut s = m.get(target).copied().unwrap_or_default();
            if s.line(line) {
                m.insert(target.clone(), s);
            }
        }
        self.inner.event(e);
    }
}

/// Probes the compiler cache at `location` for reads and writes, and
/// hands every build its settings as the secret `kiln-sccache` (a target
/// that declares a secret of that id keeps its own). A cache that fails
/// the probe stops the run with `require`, else is a warning and no build
/// gets it.
fn compiler_cache(
    location: &str,
    require: bool,
    force_recache: bool,
    specs: &mut [kiln_engine::BuildSpec],
) -> Result<Option<kiln_engine::proc::TempDir>, CliError> {
    use kiln_store::compiler_cache::{CompilerCache, SECRET_ID};
    let fail = |why: String| -> Result<Option<kiln_engine::proc::TempDir>, CliError> {
        if require {
            return Err(CliError::env(format!("compiler cache {why}")).with_hint(
                "fix the store or its credentials (a policy must grant writes, and s3:ListBucket so a missing object is a 404), or drop --require-compiler-cache to build without it",
            ));
        }
        eprintln!("warning: compiler cache {why}; builds compile without it");
        Ok(None)
    };
    let cache = match CompilerCache::open(location) {
        Ok(c) => c,
        Err(e) => return Err(CliError::usage(format!("--compiler-cache: {e}"))),
    };
    let p = cache.probe();
    if let Some(why) = &p.write {
        return fail(format!(
            "{} cannot be written ({why}): a cache that takes no writes caches nothing",
            cache.shown()
        ));
    }
    if let Some(why) = &p.read {
        return fail(format!("{} cannot be read back ({why})", cache.shown()));
    }
    if let Some(why) = &p.missing {
        eprintln!(
            "warning: compiler cache {}: an object that is not there is not answered as missing ({why}); sccache counts such lookups as errors, not misses (on S3, grant s3:ListBucket)",
            cache.shown()
        );
    }
    // A private directory (0700) holding the file (0600), removed when
    // the run ends, as the job-count secret's.
    let dir = kiln_engine::proc::TempDir::new("compiler-cache")
        .map_err(|e| CliError::env(e.to_string()))?;
    let secret = kiln_engine::jobs::write_private_secret(
        dir.path(),
        SECRET_ID,
        &cache.secret_text(force_recache),
    )
    .map_err(|e| CliError::env(e.to_string()))?;
    for spec in specs.iter_mut() {
        if !spec.secrets.iter().any(|x| x.id == SECRET_ID) {
            spec.secrets.push(secret.clone());
        }
    }
    Ok(Some(dir))
}

/// One JSON object per event on stderr.
struct JsonReporter {
    out: Mutex<std::io::Stderr>,
}

impl Reporter for JsonReporter {
    fn event(&self, e: &Event) {
        if let (Ok(mut o), Ok(text)) = (self.out.lock(), serde_json::to_string(e)) {
            let _ = writeln!(o, "{text}");
        }
    }
}

/// The permanent terminal line of a finished target, or none for a target
/// skipped as up to date: that one gets its single line in the summary, and
/// the terminal keeps what happened in this run.
fn terminal_line(
    target: &str,
    status: &str,
    duration_s: f64,
    image: Option<&str>,
    reason: Option<&str>,
) -> Option<String> {
    let up_to_date = status == "skipped" && reason.is_some_and(|r| r.starts_with("up to date"));
    if up_to_date {
        return None;
    }
    let mark = match status {
        "built" => "✔",
        "skipped" => "=",
        _ => "✘",
    };
    Some(format!(
        "{mark} {target} {status} in {duration_s:.1}s {}",
        image_and_reason(image, reason)
    ))
}

/// The live view on a terminal (`crate::live`): one line per node and
/// slot with its target, elapsed against expected time and step, and the
/// queue, redrawn in place every [`crate::live::TICK`] and on each event;
/// a finished target leaves one permanent line above them.
struct TtyReporter {
    inner: Arc<TtyInner>,
}

struct TtyInner {
    bars: indicatif::MultiProgress,
    state: Mutex<(crate::live::LaneView, Vec<indicatif::ProgressBar>)>,
    total: usize,
    finished: std::sync::atomic::AtomicUsize,
}

impl TtyReporter {
    fn new(view: crate::live::LaneView, total: usize) -> TtyReporter {
        let inner = Arc::new(TtyInner {
            bars: indicatif::MultiProgress::with_draw_target(
                indicatif::ProgressDrawTarget::stderr(),
            ),
            state: Mutex::new((view, Vec::new())),
            total,
            finished: std::sync::atomic::AtomicUsize::new(0),
        });
        let weak = Arc::downgrade(&inner);
        // Elapsed times move while no event comes: a ticker redraws until
        // the run is over (or the reporter is gone).
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(crate::live::TICK);
                let Some(inner) = weak.upgrade() else { break };
                if inner.over() {
                    break;
                }
                inner.redraw();
            }
        });
        TtyReporter { inner }
    }
}

impl TtyInner {
    fn over(&self) -> bool {
        self.finished.load(std::sync::atomic::Ordering::Relaxed) >= self.total
    }

    /// Draws the lanes and the queue (or, once every target finished,
    /// takes them away so the summary follows the permanent lines).
    fn redraw(&self) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let (view, bars) = &mut *st;
        if self.over() {
            for pb in bars.drain(..) {
                pb.finish_and_clear();
                self.bars.remove(&pb);
            }
            return;
        }
        let lines = view.lines(std::time::Instant::now());
        if lines.len() != bars.len() {
            for pb in bars.drain(..) {
                pb.finish_and_clear();
                self.bars.remove(&pb);
            }
            for _ in &lines {
                let pb = self.bars.add(indicatif::ProgressBar::new_spinner());
                pb.set_style(
                    indicatif::ProgressStyle::with_template("{wide_msg}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                bars.push(pb);
            }
        }
        for (pb, l) in bars.iter().zip(lines) {
            pb.set_message(l);
        }
    }
}

impl Reporter for TtyReporter {
    fn event(&self, e: &Event) {
        let inner = &self.inner;
        let now = std::time::Instant::now();
        match e {
            Event::TargetStarted {
                target, node, slot, ..
            } => {
                if let Ok(mut st) = inner.state.lock() {
                    st.0.started(target, node, *slot, now);
                }
            }
            Event::Step {
                target,
                step,
                state,
                ..
            } => {
                let mark = match state {
                    StepState::Cached => " (cached)",
                    StepState::Error => " (error)",
                    _ => "",
                };
                if let Ok(mut st) = inner.state.lock() {
                    st.0.step(target, &format!("{step}{mark}"));
                }
            }
            Event::TargetFinished {
                target,
                status,
                duration_s,
                image,
                reason,
            } => {
                if let Ok(mut st) = inner.state.lock() {
                    st.0.finished(target, status);
                }
                inner
                    .finished
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if let Some(line) = terminal_line(
                    target,
                    status,
                    *duration_s,
                    image.as_deref(),
                    reason.as_deref(),
                ) {
                    inner.bars.suspend(|| eprintln!("{line}"));
                }
            }
            Event::Pushed {
                target,
                reference,
                digest,
            } => {
                let _ = inner
                    .bars
                    .println(format!("  {target} pushed {reference}@{digest}"));
            }
            Event::Warning { target, message } => {
                let line = if target.is_empty() {
                    format!("! {message}")
                } else {
                    format!("! {target}: {message}")
                };
                let _ = inner.bars.println(line);
            }
            Event::Waiting { target, message } => {
                let _ = inner.bars.println(format!("  {target}: {message}"));
            }
            Event::Log { .. } | Event::Key { .. } => return,
        }
        inner.redraw();
    }
}

pub fn run(mut s: BuildSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let env_run_id = std::env::var("RUN_ID").ok();
    let run_id = run_id(s.run_id.as_deref(), env_run_id.as_deref())?;
    // --run-id is the bake variable RUN_ID too (unless --var sets it): the
    // bake file's own build names then carry it.
    if s.run_id.is_some() {
        s.bake
            .opts
            .vars
            .entry("RUN_ID".into())
            .or_insert_with(|| run_id.clone());
    }
    let bake = load(&s.bake)?;
    let planned = build_plan(&bake, &s.bake, &s.targets)?;
    let mut specs = specs_for(&bake, &planned, &s.bake.cwd, s.push || s.fleet.is_some())?;
    if s.fleet.is_some()
        && let Some(untagged) = specs.iter().find(|sp| sp.tags.is_empty())
    {
        return Err(CliError::usage(format!(
            "target {}: a fleet run hands every target to the next through the registry by digest, so each needs a tag to push",
            untagged.name
        ))
        .with_hint(format!(
            "give it one, e.g. --set {}.tags=REGISTRY/{}:dev",
            untagged.name, untagged.name
        )));
    }
    let buildx = s.driver == crate::cli::DriverKind::Buildx;
    let (nodes, placement, eligible, fleet_planned) = match &s.fleet {
        Some(f) => {
            let (n, p, e, planned) =
                fleet_plan(f, s.costs.as_deref(), &s.bake.cwd, &s.store.history, &specs)?;
            (n, p, e, Some(planned))
        }
        None => Default::default(),
    };
    // A fleet node's endpoint says how it builds (an engine address, or a
    // buildx builder's name); --driver buildx asks for builders only.
    if buildx && let Some(n) = nodes.iter().find(|n| n.builder.is_none()) {
        return Err(CliError::usage(format!(
            "node {}: --driver buildx builds through buildx builders, but its endpoint {} is a Docker engine address",
            n.name, n.endpoint.host
        ))
        .with_hint("name the node's buildx builder as its endpoint (`docker buildx ls` lists them; a docker context is a docker-driver builder), or drop --driver buildx to build on the engines"));
    }
    let (uses_buildx, uses_engine) = if s.fleet.is_some() {
        (
            nodes.iter().any(|n| n.builder.is_some()),
            nodes.iter().any(|n| n.builder.is_none()),
        )
    } else {
        (buildx, !buildx)
    };
    // Each driver reads its own policy fields, so a fleet of both kinds
    // gets both.
    let mut notices = std::collections::BTreeSet::new();
    for spec in &mut specs {
        if uses_buildx {
            apply_buildx_cache(spec, &planned, &s.cache);
        }
        if uses_engine {
            let n = apply_local_cache(spec, &planned, &s.cache);
            if spec.push {
                notices.extend(n);
            }
        }
    }
    for n in &notices {
        eprintln!("note: {n}");
    }
    // Preflight: nothing starts while an input the run cannot build is
    // missing. (Without an engine the run itself reports it unreachable.)
    // A fleet run checks every node that may build a target needing it.
    let fleet = s.fleet.as_ref().map(|_| (nodes.as_slice(), &eligible));
    let builder = (buildx && s.fleet.is_none()).then(|| builder_spec(s.builder.as_deref()));
    verdict(&check(
        &planned,
        &specs,
        &s.store,
        fleet,
        builder.as_ref(),
        true,
    )?)?;
    // The compiler cache: probed, then handed to every build as a secret
    // (the file lives as long as this guard).
    let _compiler_cache = match &s.compiler_cache {
        Some(location) => compiler_cache(
            location,
            s.require_compiler_cache,
            s.force_recache,
            &mut specs,
        )?,
        None => None,
    };
    let (store, stat_cache) = open_store(&s.store)?;
    // The schedule kiln plans (on a fleet, the one that places targets;
    // on one engine, the same policy over its slots): the live view's
    // expected times and the report's planned lanes.
    let lanes: Vec<(String, usize)> = if s.fleet.is_some() {
        nodes
            .iter()
            .map(|n| (n.name.clone(), n.slots.max(1)))
            .collect()
    } else {
        vec![(
            builder
                .as_ref()
                .map(|b| b.name.clone())
                .unwrap_or_else(|| s.store.endpoint.host.clone()),
            s.jobs.max(1),
        )]
    };
    let schedule_plan = match fleet_planned {
        Some(p) => p,
        None => crate::prepare::fleet::plan_for_report(
            &specs,
            crate::prepare::fleet::ReportNodes::One {
                name: &lanes[0].0,
                slots: lanes[0].1,
            },
            &Default::default(),
            s.costs.as_deref(),
            &s.bake.cwd,
            &s.store.history,
        )
        .unwrap_or_default(),
    };
    let reporter: Arc<dyn Reporter> = match s.progress {
        Progress::Json => Arc::new(JsonReporter {
            out: Mutex::new(std::io::stderr()),
        }),
        Progress::Plain => Arc::new(PlainReporter {
            out: Mutex::new(std::io::stderr()),
        }),
        Progress::Auto if std::io::stderr().is_terminal() => Arc::new(TtyReporter::new(
            crate::live::LaneView::new(
                &lanes,
                specs.iter().map(|sp| sp.name.clone()).collect(),
                schedule_plan.expected_s.clone().into_iter().collect(),
            ),
            specs.len(),
        )),
        Progress::Auto => Arc::new(PlainReporter {
            out: Mutex::new(std::io::stderr()),
        }),
    };
    // sccache's counters from every build's log lines.
    let stats = Arc::new(StatsReporter {
        inner: reporter,
        stats: Mutex::new(Default::default()),
    });
    let reporter: Arc<dyn Reporter> = stats.clone();
    let project = s
        .bake
        .project_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kiln".into());
    for spec in &mut specs {
        name_build(spec, &project, &run_id);
    }
    let claim_ttl = kiln_engine::claims::ttl_from_env().map_err(CliError::usage)?;
    let opts = RunOptions {
        claim_ttl,
        claim_wait: s.claim_wait,
        run_id: run_id.clone(),
        nodes,
        placement,
        eligible,
        gb_per_job: s.gb_per_job,
        jobs: s.jobs,
        builder,
        log_dir: s
            .store
            .stat_cache
            .parent()
            .map(|d| d.join("logs").join(&run_id)),
        fail_fast: s.fail_fast,
        require_store: s.require_store,
        force: s.force,
        store: store.clone(),
        stat_cache: stat_cache.clone(),
    };
    let rt = runtime()?;
    let endpoint = s.store.endpoint.clone();
    let tags: std::collections::HashMap<String, Vec<String>> = specs
        .iter()
        .map(|sp| (sp.name.clone(), sp.tags.clone()))
        .collect();
    // What the run report needs of the specs once they are handed over.
    let report_specs = specs.clone();
    // SIGINT or SIGTERM stops the run: its tasks are dropped, which kills
    // every build child (`kill_on_drop`) and removes its temporary
    // directory; records are only ever written after a build succeeded, so
    // nothing unfinished is recorded. A second signal while it stops, or
    // any signal after the run, exits at once (crate::signals).
    let signals = crate::signals::Signals::watch();
    let result = rt.block_on(async {
        let first = async {
            match &signals {
                Some(s) => s.first().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = kiln_engine::run(endpoint, specs, opts, reporter) => Ok(r),
            code = first => Err(code),
        }
    });
    if let (Ok(_), Some(s)) = (&result, &signals) {
        // From here a signal ends kiln at once (crate::signals).
        s.run_ended();
    }
    let result = match result {
        Ok(r) => r,
        Err(code) => {
            // The build process groups first (the CLI and its buildx
            // plugin), then the tasks.
            kiln_engine::proc::terminate_all(std::time::Duration::from_secs(5));
            rt.shutdown_timeout(std::time::Duration::from_secs(10));
            let _ = stat_cache.save(&s.store.stat_cache);
            return Err(CliError {
                kind: crate::error::Kind::Interrupted(code),
                message: format!(
                    "interrupted by {}: the builds that were running are stopped and nothing unfinished was recorded",
                    if code == crate::error::exit::SIGINT {
                        "SIGINT"
                    } else {
                        "SIGTERM"
                    }
                ),
                hint: Some(
                    "run the same command again: what finished is recorded and skipped".into(),
                ),
            });
        }
    };
    // The stat cache is worth keeping even when a build failed.
    if let Err(e) = stat_cache.save(&s.store.stat_cache) {
        eprintln!("warning: could not save the stat cache: {e}");
    }
    let mut summary = result.map_err(|e| engine_error(e, &s.store.endpoint))?;
    summary.stamps = planned.stamps.clone();
    if let Ok(counted) = stats.stats.lock() {
        for t in &mut summary.targets {
            t.compiler_cache = counted.get(&t.name).copied();
            // What sccache could not read or write is compiled again
            // next time: never silent.
            if let Some(c) = t.compiler_cache.filter(|c| c.errors > 0) {
                eprintln!(
                    "warning: [{}] the compiler cache failed {} time(s) (sccache's read/write errors and timeouts): what it could not store is compiled again next time; run with SCCACHE_LOG=debug to see why",
                    t.name, c.errors
                );
            }
        }
    }
    // What was built and how long it took, normalised by the node's speed
    // (from the fleet file; 1.0 on a single engine), for learned costs.
    let speeds: std::collections::HashMap<String, f64> = s
        .fleet
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok().map(|t| (f.clone(), t)))
        .and_then(|(f, t)| kiln_plan::schedule::Fleet::parse(&f, &t).ok())
        .map(|fl| fl.nodes.into_iter().map(|n| (n.name, n.speed)).collect())
        .unwrap_or_default();
    let sizes = rt.block_on(crate::costs::output_sizes(&summary));
    // The run report and the run's row in the history, from what the run
    // recorded. Its plan covers the work the run did: what it skipped was
    // available from the start (with the costs known before this run).
    let skipped: std::collections::BTreeSet<String> = summary
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::Skipped)
        .map(|t| t.name.clone())
        .collect();
    let report_plan = crate::prepare::fleet::plan_for_report(
        &report_specs,
        match &s.fleet {
            Some(f) => crate::prepare::fleet::ReportNodes::Fleet(f),
            None => crate::prepare::fleet::ReportNodes::One {
                name: &lanes[0].0,
                slots: lanes[0].1,
            },
        },
        &skipped,
        s.costs.as_deref(),
        &s.bake.cwd,
        &s.store.history,
    )
    .unwrap_or_default();
    summary.run_id = record_run(
        &s,
        &project,
        &summary,
        &report_specs,
        &report_plan,
        &tags,
        &speeds,
        &sizes,
    );
    crate::costs::record(
        &s.store.history,
        &summary,
        |node| speeds.get(node).copied().unwrap_or(1.0),
        |target| sizes.get(target).copied(),
    );
    // Failures: the failing step and the tail of its log, on stderr.
    for t in summary
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::Failed)
    {
        eprintln!(
            "error: target {} failed: {}",
            t.name,
            t.error.clone().unwrap_or_default()
        );
        if let Some(step) = &t.failed_step {
            eprintln!("  step: {step}");
        }
        for l in &t.log_tail {
            eprintln!("  | {l}");
        }
    }
    let text = match s.format {
        Format::Json => {
            let mut t =
                serde_json::to_string_pretty(&summary).map_err(|e| CliError::env(e.to_string()))?;
            t.push('\n');
            t
        }
        Format::Text => {
            let w = summary
                .targets
                .iter()
                .map(|t| t.name.len())
                .max()
                .unwrap_or(6)
                .max(6);
            // The node column only when more than one node worked.
            let nodes: std::collections::BTreeSet<&str> =
                summary.targets.iter().map(|t| t.node.as_str()).collect();
            let nw = if nodes.len() > 1 {
                nodes.iter().map(|n| n.len()).max().unwrap_or(4).max(4) + 2
            } else {
                0
            };
            let node_col = |n: &str| {
                if nw == 0 {
                    String::new()
                } else {
                    format!("{n:<w$}", w = nw)
                }
            };
            let mut t = format!(
                "{:<w$}  {:<7}  {}{:>7}  {:>6}  IMAGE / REASON\n",
                "TARGET",
                "STATUS",
                node_col("NODE"),
                "TIME",
                "CACHED"
            );
            for r in &summary.targets {
                let status = r.status.as_str();
                let cached = if r.status == TargetStatus::Built || r.steps.total > 0 {
                    format!("{}/{}", r.steps.cached, r.steps.total)
                } else {
                    "-".into()
                };
                t.push_str(&format!(
                    "{:<w$}  {:<7}  {}{:>6.1}s  {:>6}  {}\n",
                    r.name,
                    status,
                    node_col(&r.node),
                    r.duration_s,
                    cached,
                    image_and_reason(
                        shown_image(r, tags.get(&r.name)).as_deref(),
                        r.reason
                            .as_deref()
                            .or_else(|| r.error.as_deref().and_then(|e| e.lines().next()))
                    )
                ));
            }
            for r in &summary.targets {
                if let Some(c) = &r.compiler_cache {
                    t.push_str(&format!(
                        "compiler cache: {}: {} hit(s), {} miss(es) of {} compile request(s){}\n",
                        r.name,
                        c.hits,
                        c.misses,
                        c.requests,
                        if c.errors > 0 {
                            format!(", {} error(s)", c.errors)
                        } else {
                            String::new()
                        }
                    ));
                }
            }
            t.push_str(&totals(&summary, nw > 0));
            if let Some(why) = &summary.stopped {
                t.push_str(&format!("the run stopped: {why}\n"));
            }
            t
        }
    };
    crate::output::write(out, &text)?;
    // The run stopped mid-way (its engine, store or a tool lost): what
    // finished is recorded above; the exit code is the error's.
    if let Some(e) = summary.stop_error.take() {
        let e = std::sync::Arc::try_unwrap(e)
            .unwrap_or_else(|shared| kiln_engine::EngineError::Tool(shared.to_string()));
        let mut err = engine_error(e, &s.store.endpoint);
        err.hint = Some(match err.hint.take() {
            Some(h) => format!("{h}; what finished before the run stopped is recorded and is skipped next time"),
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

/// Records the run: its report (`.kiln/runs/<run-id>.json`, what `kiln
/// report` renders) and its row in the build history (`kiln history`), and
/// returns the id it was recorded under (`<run-id>.2`, ... when the id was
/// already recorded: the earlier run is kept). Failures are warnings: the
/// images are built either way.
#[allow(clippy::too_many_arguments)]
fn record_run(
    s: &BuildSettings,
    project: &str,
    summary: &kiln_engine::RunSummary,
    specs: &[kiln_engine::BuildSpec],
    planned: &crate::report::Planned,
    tags: &std::collections::HashMap<String, Vec<String>>,
    speeds: &std::collections::HashMap<String, f64>,
    sizes: &std::collections::BTreeMap<String, f64>,
) -> String {
    let deps: std::collections::HashMap<String, Vec<String>> = specs
        .iter()
        .map(|sp| (sp.name.clone(), sp.deps.clone()))
        .collect();
    // Time saved counts learned costs only: a default guess is not a saving.
    let costs: std::collections::HashMap<String, f64> = crate::costs::learned(&s.store.history)
        .into_iter()
        .map(|(t, c)| (t, c.work_s))
        .collect();
    let driver = if s.fleet.is_some() {
        format!("fleet of {}", summary.nodes.len())
    } else {
        summary
            .targets
            .iter()
            .find(|t| t.status != TargetStatus::Blocked)
            .map(|t| t.driver.clone())
            .unwrap_or_else(|| "engine".into())
    };
    let cx = crate::report::Context {
        project: project.to_string(),
        driver,
        planned,
        deps: &deps,
        tags,
        costs: &costs,
        speeds,
        sizes,
    };
    let mut report = crate::report::build(summary, &cx);
    let kiln_dir = s
        .store
        .history
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| std::path::PathBuf::from(".kiln"));
    match crate::report::save(&kiln_dir, &mut report) {
        Ok(path) if report.run.id != summary.run_id => eprintln!(
            "note: run id {} is already recorded, so this run is recorded as {} ({}); the earlier run is kept",
            summary.run_id,
            report.run.id,
            path.display()
        ),
        Ok(_) => {}
        Err(e) => eprintln!(
            "warning: could not record the run in {}: {e}",
            crate::report::runs_dir(&kiln_dir).display()
        ),
    }
    let entry = kiln_store::history::RunEntry {
        id: report.run.id.clone(),
        project: report.run.project.clone(),
        started_at: report.run.started_at.clone(),
        wall_s: report.run.wall_s,
        failed: report.run.failed,
        targets: report
            .targets
            .iter()
            .map(|t| kiln_store::history::RunTarget {
                target: t.name.clone(),
                outcome: t.outcome.clone(),
                node: t.node.clone(),
                duration_s: t.duration_s,
                expected_s: t.expected_s,
            })
            .collect(),
    };
    let r = kiln_store::history::History::open(&s.store.history).and_then(|h| h.record_run(&entry));
    if let Err(e) = r {
        eprintln!("warning: could not record the run in the build history: {e}");
    }
    report.run.id
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_ids_come_from_the_flag_then_the_environment_and_are_checked() {
        assert_eq!(super::run_id(Some("ci-42"), Some("env")).unwrap(), "ci-42");
        assert_eq!(super::run_id(None, Some("gh.7_1")).unwrap(), "gh.7_1");
        let made = super::run_id(None, Some("")).unwrap();
        assert!(made.chars().all(|c| c.is_ascii_hexdigit()), "{made}");
        for bad in ["a/b", "has space", ""] {
            let e = super::run_id(Some(bad), None).unwrap_err();
            assert!(e.message.contains("run id"), "{}", e.message);
        }
        let mut spec = kiln_engine::BuildSpec {
            name: "app".into(),
            platforms: vec!["linux/arm64".into(), "linux/amd64".into()],
            ..Default::default()
        };
        super::name_build(&mut spec, "proj", "r1");
        assert_eq!(spec.args["BUILDKIT_BUILD_NAME"], "proj/app/arm64+amd64/r1");
        spec.args
            .insert("BUILDKIT_BUILD_NAME".into(), "mine".into());
        super::name_build(&mut spec, "proj", "r2");
        assert_eq!(
            spec.args["BUILDKIT_BUILD_NAME"], "mine",
            "the bake file's own name stays"
        );
    }

    use super::terminal_line;

    /// A no-op on a terminal names each up-to-date target once (in the
    /// summary), not twice; what happened in this run keeps its line.
    #[test]
    fn a_terminal_shows_up_to_date_targets_only_in_the_summary() {
        let up = Some("up to date (built 2026-12-02T05:00:00Z on n)");
        assert_eq!(terminal_line("a", "skipped", 0.0, None, up), None);
        let line = terminal_line("a", "skipped", 0.1, None, Some("early cutoff")).unwrap();
        assert!(
            line.starts_with("= a skipped in 0.1s early cutoff"),
            "{line}"
        );
        let line = terminal_line("b", "built", 2.0, Some("r/b:1"), None).unwrap();
        assert!(line.starts_with("✔ b built in 2.0s r/b:1"), "{line}");
        let line = terminal_line("c", "failed", 1.0, None, Some("exit 1")).unwrap();
        assert!(line.starts_with("✘ c failed"), "{line}");
    }
}
