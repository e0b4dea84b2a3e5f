//! `kiln build`: plans the requested targets and builds them on the local
//! engine, with live progress on stderr and a run summary on stdout.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kiln_engine::events::{Event, StepState};
use kiln_engine::{
    BuildSpec, ContextSource, Endpoint, EngineError, Reporter, RunOptions, SecretSpec, TargetStatus,
};

use crate::cli::{Format, Progress};
use crate::commands::plan::{Planned, build_plan};
use crate::error::{CliError, Kind};
use crate::settings::{BakeSettings, StoreSettings};

pub struct BuildSettings {
    pub bake: BakeSettings,
    pub targets: Vec<String>,
    pub jobs: usize,
    pub fail_fast: bool,
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
}

/// The buildx builder a `--driver buildx` run uses: `--builder`, then
/// `KILN_BUILDER`, then `BUILDX_BUILDER`, then `default`; buildx runs as
/// `$KILN_DOCKER` (default `docker` on the PATH).
pub(crate) fn builder_spec(name: Option<&str>) -> kiln_engine::buildx::BuilderSpec {
    let name = name
        .map(String::from)
        .or_else(|| std::env::var("BUILDX_BUILDER").ok().filter(|b| !b.is_empty()))
        .unwrap_or_else(|| "default".into());
    kiln_engine::buildx::BuilderSpec {
        name,
        docker: std::env::var_os("KILN_DOCKER")
            .map(Into::into)
            .unwrap_or_else(|| "docker".into()),
    }
}

/// Reads a TOML input file of the fleet feature.
fn read_input(path: &str, what: &str) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read the {what} {path}: {e}")))
}

/// The nodes of a fleet run and where the schedule places each target
/// (kiln's policy over the costs file; docs/scheduling.md).
/// Nodes, preferred placement and memory eligibility of a fleet run.
pub(crate) type FleetPlan = (
    Vec<kiln_engine::run::NodeSpec>,
    std::collections::HashMap<String, usize>,
    std::collections::HashMap<String, Vec<usize>>,
);

pub(crate) fn fleet_plan(
    fleet_path: &str,
    costs: Option<&str>,
    cwd: &Path,
    history: &Path,
    specs: &[BuildSpec],
) -> Result<FleetPlan, CliError> {
    use kiln_plan::schedule::{CostsFile, Fleet, Job, Policy, Problem, schedule};
    let fleet = Fleet::parse(fleet_path, &read_input(fleet_path, "fleet file")?)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let costs = match costs {
        Some(p) => CostsFile::parse(p, &read_input(p, "costs file")?)
            .map_err(|e| CliError::usage(e.to_string()))?,
        None => CostsFile::default(),
    };
    let mut nodes = Vec::new();
    for n in &fleet.nodes {
        // An endpoint that is not an engine address names a buildx builder.
        let (endpoint, builder) = match crate::commands::fleet::endpoint(&n.endpoint, cwd) {
            Some(e) => (e, None),
            None => (
                crate::commands::fleet::endpoint("unix:///var/run/docker.sock", cwd)
                    .expect("a unix endpoint"),
                Some(builder_spec(Some(&n.endpoint))),
            ),
        };
        nodes.push(kiln_engine::run::NodeSpec {
            name: n.name.clone(),
            endpoint,
            slots: n.slots as usize,
            builder,
        });
    }
    let index: std::collections::HashMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, sp)| (sp.name.as_str(), i))
        .collect();
    let learned = super::costs::learned(history);
    let jobs = specs
        .iter()
        .map(|sp| Job {
            name: sp.name.clone(),
            deps: sp
                .deps
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect(),
            cost: super::costs::cost_of(&sp.name, &costs, &learned).0,
            published: false,
        })
        .collect();
    let problem =
        Problem::new(jobs, fleet.nodes.clone()).map_err(|e| CliError::usage(e.to_string()))?;
    let plan = schedule(&problem, Policy::Kiln);
    let placement = plan
        .assignments
        .iter()
        .map(|a| (specs[a.job].name.clone(), a.node))
        .collect();
    let eligible = (0..specs.len())
        .map(|j| {
            let ks = (0..fleet.nodes.len())
                .filter(|&k| problem.eligible(j, k))
                .collect();
            (specs[j].name.clone(), ks)
        })
        .collect();
    Ok((nodes, placement, eligible))
}

fn abs(cwd: &Path, p: &str) -> PathBuf {
    let p = p.strip_prefix("cwd://").unwrap_or(p);
    let path = Path::new(p);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    // Drop `.` components so messages show clean paths.
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// Applies the local driver's cache policy to a spec: inline cache and
/// `cache-from` of the previously pushed image for targets that push.
pub fn apply_local_cache(
    spec: &mut BuildSpec,
    planned: &Planned,
    settings: &kiln_plan::cache::CacheSettings,
) -> Vec<String> {
    let Some(t) = planned.targets.get(&spec.name) else {
        return Vec::new();
    };
    let policies = crate::commands::plan::cache_policy(
        t,
        settings,
        kiln_plan::cache::Driver::Local,
        spec.push,
    );
    let Some(p) = policies.first() else {
        return Vec::new();
    };
    spec.inline_cache = p.inline;
    spec.cache_from = p
        .from
        .iter()
        .filter(|e| e.kind() == "registry")
        .filter_map(|e| e.reference().map(String::from))
        .collect();
    p.notices.clone()
}

/// Applies the buildx driver's cache policy to a spec: the stable registry
/// ref and the per-commit tag imported, the stable ref exported `mode=max`
/// (docs/cache-policy.md).
pub fn apply_buildx_cache(
    spec: &mut BuildSpec,
    planned: &Planned,
    settings: &kiln_plan::cache::CacheSettings,
) {
    let Some(t) = planned.targets.get(&spec.name) else {
        return;
    };
    spec.buildx_cache = crate::commands::plan::cache_policy(
        t,
        settings,
        kiln_plan::cache::Driver::Buildx,
        spec.push,
    )
    .into_iter()
    .next();
}

/// The build spec of one planned target; `push` forces pushing its tags.
pub fn spec_for(
    planned: &Planned,
    name: &str,
    cwd: &Path,
    push: bool,
) -> Result<BuildSpec, CliError> {
    let t = planned
        .targets
        .get(name)
        .ok_or_else(|| CliError::usage(format!("target {name} was planned but not resolved")))?;
    check_supported(name, t)?;
    let context_str = t.context.clone().unwrap_or_else(|| ".".into());
    if kiln_bake::is_remote(&context_str) {
        return Err(CliError::usage(format!(
            "target {name}: remote build contexts ({context_str}) are not supported by the local engine driver yet"
        )));
    }
    let context = abs(cwd, &context_str);
    let df = t.dockerfile.clone().unwrap_or_else(|| "Dockerfile".into());
    let dockerfile = if let Some(rest) = df.strip_prefix("cwd://") {
        cwd.join(rest)
    } else if Path::new(&df).is_absolute() {
        PathBuf::from(&df)
    } else {
        context.join(&df)
    };
    let mut contexts = std::collections::BTreeMap::new();
    for (k, v) in t.contexts.clone().unwrap_or_default() {
        let src = if let Some(n) = v.strip_prefix("target:") {
            ContextSource::Target {
                name: n.to_string(),
            }
        } else if let Some(r) = v.strip_prefix("docker-image://") {
            let producer = planned
                .graph
                .producers(r)
                .into_iter()
                .find(|p| *p != name)
                .map(String::from);
            ContextSource::Image {
                reference: r.to_string(),
                producer,
            }
        } else {
            ContextSource::Local { path: v.clone() }
        };
        contexts.insert(k, src);
    }
    let secrets = t
        .secret
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|e| SecretSpec {
            id: e
                .get("id")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string(),
            src: e.get("src").and_then(|v| v.as_str()).map(|p| abs(cwd, p)),
            env: e.get("env").and_then(|v| v.as_str()).map(String::from),
        })
        .collect();
    let outputs_push = t.output.iter().flatten().any(|e| {
        e.get("type").and_then(|v| v.as_str()) == Some("registry")
            || e.get("push").and_then(|v| v.as_str()) == Some("true")
    });
    let strip = |m: Option<std::collections::BTreeMap<String, Option<String>>>| {
        m.unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect()
    };
    Ok(BuildSpec {
        name: name.to_string(),
        context,
        dockerfile,
        dockerfile_inline: t.dockerfile_inline.clone(),
        args: strip(t.args.clone()),
        labels: strip(t.labels.clone()),
        tags: t.tags.clone().unwrap_or_default(),
        target: t.target.clone(),
        platforms: t.platforms.clone().unwrap_or_default(),
        network: t
            .network
            .clone()
            .filter(|n| !n.is_empty() && n != "default"),
        no_cache: t.no_cache.unwrap_or(false),
        contexts,
        secrets,
        deps: planned
            .graph
            .deps(name)
            .into_iter()
            .map(String::from)
            .collect(),
        push: push || outputs_push,
        cache_from: Vec::new(),
        inline_cache: false,
        buildx_cache: None,
    })
}

/// Refuses attributes the local engine driver cannot honour, rather than
/// building something other than what the bake file asks for.
fn check_supported(name: &str, t: &kiln_bake::Target) -> Result<(), CliError> {
    let mut missing = Vec::new();
    for o in t.output.iter().flatten() {
        let ty = o.get("type").and_then(|v| v.as_str()).unwrap_or("");
        if !matches!(ty, "image" | "docker" | "registry" | "cacheonly") {
            missing.push(format!("output type={ty}"));
        }
    }
    if t.ssh.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("ssh".into());
    }
    if t.ulimits.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("ulimits".into());
    }
    if t.shm_size.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("shm-size".into());
    }
    if t.extra_hosts.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("extra-hosts".into());
    }
    if t.call.as_deref().is_some_and(|c| c != "build") {
        missing.push(format!("call={}", t.call.as_deref().unwrap_or("")));
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "target {name}: the local engine driver cannot honour {} yet",
        missing.join(", ")
    ))
    .with_hint("remove them for local builds (e.g. --set NAME.output=type=docker), or build this target with docker buildx bake"))
}

/// `image (reason)`, or whichever of the two there is.
fn image_and_reason(image: Option<&str>, reason: Option<&str>) -> String {
    match (image, reason) {
        (Some(i), Some(r)) => format!("{i} ({r})"),
        (Some(x), None) | (None, Some(x)) => x.to_string(),
        (None, None) => String::new(),
    }
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
            Event::Warning { target, message } => format!("[{target}] warning: {message}"),
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

/// Live status lines on a terminal: one line per running target.
struct TtyReporter {
    bars: indicatif::MultiProgress,
    per_target: Mutex<std::collections::HashMap<String, indicatif::ProgressBar>>,
}

impl Reporter for TtyReporter {
    fn event(&self, e: &Event) {
        let Ok(mut map) = self.per_target.lock() else {
            return;
        };
        match e {
            Event::TargetStarted { target, .. } => {
                let pb = self.bars.add(indicatif::ProgressBar::new_spinner());
                pb.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} {prefix:.bold} {elapsed:>4} {wide_msg}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                pb.set_prefix(target.clone());
                pb.enable_steady_tick(std::time::Duration::from_millis(120));
                map.insert(target.clone(), pb);
            }
            Event::Step {
                target,
                step,
                state,
                ..
            } => {
                if let Some(pb) = map.get(target) {
                    let mark = match state {
                        StepState::Cached => " (cached)",
                        StepState::Error => " (error)",
                        _ => "",
                    };
                    pb.set_message(format!("{step}{mark}"));
                }
            }
            Event::TargetFinished {
                target,
                status,
                duration_s,
                image,
                reason,
            } => {
                let msg = format!(
                    "{status} in {duration_s:.1}s {}",
                    image_and_reason(image.as_deref(), reason.as_deref())
                );
                // A finished target leaves one permanent line; its spinner goes
                // away so nothing is left half-drawn when the summary prints.
                if let Some(pb) = map.remove(target) {
                    pb.finish_and_clear();
                }
                let mark = match status.as_str() {
                    "built" => "✔",
                    "skipped" => "=",
                    _ => "✘",
                };
                self.bars.suspend(|| eprintln!("{mark} {target} {msg}"));
            }
            Event::Pushed {
                target,
                reference,
                digest,
            } => {
                let _ = self
                    .bars
                    .println(format!("  {target} pushed {reference}@{digest}"));
            }
            Event::Warning { target, message } => {
                let _ = self.bars.println(format!("! {target}: {message}"));
            }
            Event::Log { .. } | Event::Key { .. } => {}
        }
    }
}

/// The build specs of a plan, in build order. A missing Dockerfile is an
/// input error found before anything builds.
pub fn specs_for(
    bake: &kiln_bake::Bake,
    planned: &Planned,
    cwd: &Path,
    push: bool,
) -> Result<Vec<BuildSpec>, CliError> {
    let specs = planned
        .plan
        .targets
        .iter()
        .map(|t| spec_for(planned, &t.name, cwd, push))
        .collect::<Result<Vec<_>, _>>()?;
    for spec in &specs {
        missing_dockerfile(bake, spec)?;
    }
    Ok(specs)
}

/// An error pointing at the target's `dockerfile` attribute when the
/// Dockerfile does not exist.
pub fn missing_dockerfile(bake: &kiln_bake::Bake, spec: &BuildSpec) -> Result<(), CliError> {
    if spec.dockerfile_inline.is_some() || spec.dockerfile.is_file() {
        return Ok(());
    }
    let msg = format!(
        "target {}: Dockerfile {} does not exist",
        spec.name,
        spec.dockerfile.display()
    );
    let span = bake
        .config
        .attr_spans
        .get(&(spec.name.clone(), "dockerfile".to_string()))
        .or_else(|| bake.config.target_spans.get(&spec.name));
    let rendered = match span {
        Some(sp) => {
            kiln_bake::diag::render(&kiln_bake::Diags::at(*sp, msg.clone(), ""), &bake.sources)
        }
        None => msg,
    };
    Err(CliError::usage(rendered).with_hint(
        "the path is relative to the target's context (bake's rule); check `dockerfile` and `context`, and the directory kiln runs in",
    ))
}

/// Opens the record store and the stat cache.
pub fn open_store(
    s: &StoreSettings,
) -> Result<
    (
        Arc<dyn kiln_store::RecordStore>,
        Arc<kiln_engine::hashing::StatCache>,
    ),
    CliError,
> {
    let store = kiln_store::open(&s.store, &s.project).map_err(|e| match e {
        kiln_store::StoreError::Invalid(m) => CliError::usage(m),
        e => CliError::env(e.to_string()),
    })?;
    let cache = kiln_engine::hashing::StatCache::load(&s.stat_cache);
    Ok((Arc::from(store), Arc::new(cache)))
}

/// A multi-threaded runtime for the engine calls.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::env(format!("cannot start the async runtime: {e}")))
}

pub fn run(s: BuildSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let bake = super::load(&s.bake)?;
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
    let mut notices = std::collections::BTreeSet::new();
    for spec in &mut specs {
        if buildx {
            apply_buildx_cache(spec, &planned, &s.cache);
            continue;
        }
        let n = apply_local_cache(spec, &planned, &s.cache);
        if spec.push {
            notices.extend(n);
        }
    }
    for n in &notices {
        eprintln!("note: {n}");
    }
    let (nodes, placement, eligible) = match &s.fleet {
        Some(f) => fleet_plan(f, s.costs.as_deref(), &s.bake.cwd, &s.store.history, &specs)?,
        None => Default::default(),
    };
    // Preflight: nothing starts while an input the run cannot build is
    // missing. (Without an engine the run itself reports it unreachable.)
    // A fleet run checks every node that may build a target needing it.
    let fleet = s.fleet.as_ref().map(|_| (nodes.as_slice(), &eligible));
    let builder = (buildx && s.fleet.is_none()).then(|| builder_spec(s.builder.as_deref()));
    super::preflight::verdict(&super::preflight::check(
        &planned,
        &specs,
        &s.store,
        fleet,
        builder.as_ref(),
        true,
    )?)?;
    let (store, stat_cache) = open_store(&s.store)?;
    let reporter: Arc<dyn Reporter> = match s.progress {
        Progress::Json => Arc::new(JsonReporter {
            out: Mutex::new(std::io::stderr()),
        }),
        Progress::Plain => Arc::new(PlainReporter {
            out: Mutex::new(std::io::stderr()),
        }),
        Progress::Auto if std::io::stderr().is_terminal() => Arc::new(TtyReporter {
            bars: indicatif::MultiProgress::with_draw_target(
                indicatif::ProgressDrawTarget::stderr(),
            ),
            per_target: Mutex::new(Default::default()),
        }),
        Progress::Auto => Arc::new(PlainReporter {
            out: Mutex::new(std::io::stderr()),
        }),
    };
    let run_id = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let opts = RunOptions {
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
        force: s.force,
        store: store.clone(),
        stat_cache: stat_cache.clone(),
    };
    let rt = runtime()?;
    let endpoint = s.store.endpoint.clone();
    let result = rt.block_on(kiln_engine::run(endpoint, specs, opts, reporter));
    // The stat cache is worth keeping even when a build failed.
    if let Err(e) = stat_cache.save(&s.store.stat_cache) {
        eprintln!("warning: could not save the stat cache: {e}");
    }
    let summary = result.map_err(|e| engine_error(e, &s.store.endpoint))?;
    // What was built and how long it took, normalised by the node's speed
    // (from the fleet file; 1.0 on a single engine), for learned costs.
    let speeds: std::collections::HashMap<String, f64> = s
        .fleet
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok().map(|t| (f.clone(), t)))
        .and_then(|(f, t)| kiln_plan::schedule::Fleet::parse(&f, &t).ok())
        .map(|fl| fl.nodes.into_iter().map(|n| (n.name, n.speed)).collect())
        .unwrap_or_default();
    let sizes = rt.block_on(super::costs::output_sizes(&summary));
    super::costs::record(
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
                t.push_str(&format!(
                    "{:<w$}  {:<7}  {}{:>6.1}s  {:>6}  {}\n",
                    r.name,
                    status,
                    node_col(&r.node),
                    r.duration_s,
                    format!("{}/{}", r.steps.cached, r.steps.total),
                    image_and_reason(r.image.as_deref(), r.reason.as_deref())
                ));
            }
            t
        }
    };
    crate::output::write(out, &text)?;
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

pub fn engine_error(e: EngineError, ep: &Endpoint) -> CliError {
    match e {
        EngineError::Unreachable { endpoint, detail } => CliError::env(format!("cannot reach the Docker engine at {endpoint}: {detail}"))
            .with_hint(format!(
                "start the project's engine with `export $(scripts/dev-env up)`, or point DOCKER_HOST/--host at a running dockerd (tried {})",
                ep.host
            )),
        EngineError::Input(m) => CliError::usage(m),
        EngineError::Build(m) => CliError { kind: Kind::Failed, message: m, hint: None },
        e @ (EngineError::Io { .. } | EngineError::Store(_) | EngineError::Tool(_)) => {
            CliError::env(e.to_string())
        }
    }
}
