//! The command-line interface (clap types). Resolved once into
//! settings structs (`settings.rs`) that the commands receive.
//!
//! Must never: resolve or act on a value: clap reads the arguments (and
//! the environment variables some flags name), the settings resolve them,
//! the commands act.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// kiln builds graphs of container images on BuildKit, from the
/// `docker buildx bake` files you already have.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the resolved targets as `docker buildx bake --print` does.
    Print(PrintArgs),
    /// Show the build graph: targets in build order with their dependencies.
    Plan(PlanArgs),
    /// Build targets (and everything they need) on the local engine,
    /// skipping those whose content key is already recorded.
    Build(Box<BuildArgs>),
    /// Say what changed in a target's inputs since its last recorded build.
    Why(WhyArgs),
    /// Find cache and hygiene defects in bake files, Dockerfiles and CI workflows.
    Lint(LintArgs),
    /// Read a BuildKit progress log and say whether the cache worked.
    Diagnose(DiagnoseArgs),
    /// Schedule the plan over a fleet of builder nodes (or simulate it).
    Schedule(ScheduleArgs),
    /// Check that every image the run needs and does not build exists.
    Preflight(PreflightArgs),
    /// Probe the nodes of a fleet: free memory, idle cores, score, jobs.
    Fleet(FleetArgs),
    /// The bake file's variables: list them, document them, check the document.
    Vars(VarsArgs),
    /// Check every pinned ref (`*_REF`, `*_VERSION`) against its upstream repository.
    Versions(VersionsArgs),
    /// Show a recorded run: one self-contained HTML page (Gantt chart,
    /// graph, cache health), or the same facts as text or JSON.
    Report(ReportArgs),
    /// The runs in the build history: outcomes and durations over time,
    /// learned costs and how far the last predictions were off.
    History(HistoryArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// PowerShell (e.g. `kiln completions bash > /etc/bash_completion.d/kiln`).
    Completions(CompletionsArgs),
    /// Keys that sign records, so that only trusted writers make kiln skip
    /// a build (docs/trust.md).
    Keys(KeysArgs),
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub command: KeysCommand,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a new ed25519 signing key: write its secret file (readable by
    /// you only, never replaced) and print its public key as NAME:BASE64,
    /// what runs that trust it take with --trusted-key.
    Generate {
        /// The key's name (letters, digits, `-`, `_`, `.`): records it signs
        /// name it as their signer.
        #[arg(value_name = "NAME")]
        name: String,
        /// Where to write the secret key (default: NAME.key).
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The bake file whose project's runs to read (its directory's
    /// `.kiln/runs`); default: the current directory's.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<String>,
    /// A run id (`kiln history` lists them) or a recorded run's JSON file;
    /// default: the last run.
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// Where to write (`-`: stdout). Default for html: beside the recorded
    /// run (`.kiln/runs/<run-id>.html`), its path printed; text and JSON go
    /// to stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The bake file whose project's history to read (its directory's
    /// `.kiln/history.sqlite`); default: the current directory's.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<String>,
    /// Only this target's builds.
    #[arg(value_name = "TARGET")]
    pub target: Option<String>,
    /// How many runs, newest first.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct VersionsArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Do not ask the registry which images built from each pin it holds.
    #[arg(long)]
    pub no_registry: bool,
}

#[derive(Debug, Args)]
pub struct VarsArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    /// `list` (default): effective values and where each came from; `doc`:
    /// write the Markdown tables into the document; `check`: exit 1 with the
    /// diff when the document has drifted from the bake file.
    #[arg(value_enum, default_value_t = VarsAction::List)]
    pub action: VarsAction,
    /// Output format of `list`.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The document `doc` writes and `check` compares (default: VARIABLES.md
    /// beside the first bake file).
    #[arg(long, value_name = "FILE")]
    pub doc: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VarsAction {
    List,
    Doc,
    Check,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The fleet file (TOML: `[[node]]` entries).
    #[arg(long, value_name = "FILE")]
    pub fleet: String,
    /// Memory per compile job when deriving a node's job count.
    #[arg(long, value_name = "GB", default_value_t = 2.0)]
    pub gb_per_job: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct PreflightArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Check for a run on the nodes of this fleet file: a local-only image
    /// must be on every node that may build a target needing it.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<String>,
    /// Per-target costs (their `min_memory_gb` decides which nodes may
    /// build a target).
    #[arg(long, value_name = "FILE", requires = "fleet")]
    pub costs: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Targets or groups (default: `default`).
    #[arg(value_name = "TARGET|GROUP")]
    pub targets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// The fleet file (TOML: `[[node]]` entries).
    #[arg(long, value_name = "FILE")]
    pub fleet: String,
    /// Per-target costs (TOML: `[target.NAME] work_s, output_mb, min_memory_gb`).
    #[arg(long, value_name = "FILE")]
    pub costs: Option<String>,
    /// Use only the files: no engine, registry or record store is asked
    /// (nothing counts as already built).
    #[arg(long)]
    pub simulate: bool,
    /// The scheduling policy.
    #[arg(long, value_enum, default_value_t = SchedulePolicy::Kiln)]
    pub policy: SchedulePolicy,
    /// Output format (text draws a Gantt chart per node).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write the Gantt chart as SVG to this file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
    /// Targets or groups to schedule (default: `default`).
    #[arg(value_name = "TARGET|GROUP")]
    pub targets: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulePolicy {
    /// Critical-path-first list scheduling, earliest finish with transfers.
    Kiln,
    /// The baseline: longest eligible target to the node that finishes it soonest.
    Greedy,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Files or directories to check (default: the current directory).
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub format: LintFormat,
    /// Judge every bake file as kiln builds it (kiln applies its cache
    /// policy, so missing cache refs are not findings). Default: per bake
    /// file, kiln's unless a workflow of its repository runs bake on it.
    #[arg(long)]
    pub kiln: bool,
    /// Judge every bake file as `docker buildx bake` builds it (missing
    /// cache refs are findings).
    #[arg(long, conflicts_with = "kiln")]
    pub buildx: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
    Sarif,
}

#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The log (BuildKit plain progress or buildx rawjson); `-` or nothing reads stdin.
    #[arg(value_name = "LOG")]
    pub log: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// kiln's recorded input manifest(s) for the build (JSON), to tell
    /// legitimate rebuilds from cache failures.
    #[arg(long, value_name = "FILE")]
    pub inputs: Option<String>,
}

/// How kiln names layer-cache refs.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The repository for layer-cache refs (default: each target's first
    /// tag's repository).
    #[arg(long, value_name = "REGISTRY/REPO", env = "KILN_CACHE_REPO")]
    pub cache_repo: Option<String>,
    /// The writer scope of cache refs (e.g. `ci`, `dev`): writers in
    /// different scopes never overwrite each other's cache.
    #[arg(long, value_name = "SCOPE", env = "KILN_CACHE_SCOPE")]
    pub cache_scope: Option<String>,
}

/// Where the engine and the record store are.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// The Docker engine (default: $DOCKER_HOST, then scripts/dev-env's socket).
    #[arg(long, value_name = "URL")]
    pub host: Option<String>,
    /// The record store: a directory, or oci://HOST[:PORT]/REPO
    /// (default: .kiln/store in the current directory).
    #[arg(long, value_name = "LOCATION", env = "KILN_STORE")]
    pub store: Option<String>,
    /// A record store read after --store, never written (repeatable, or
    /// comma-separated in KILN_READ_STORES): a pull request's job reads
    /// the main branch's records and writes only its own store.
    #[arg(
        long = "read-store",
        value_name = "LOCATION",
        env = "KILN_READ_STORES",
        value_delimiter = ','
    )]
    pub read_stores: Vec<String>,
    /// The key this run signs its records with: the file `kiln keys
    /// generate` wrote (docs/trust.md).
    #[arg(long, value_name = "FILE", env = "KILN_SIGNING_KEY")]
    pub signing_key: Option<std::path::PathBuf>,
    /// A public key NAME:BASE64 whose signed records count as built
    /// (repeatable, or comma-separated in KILN_TRUSTED_KEYS). With none,
    /// every writer of the store is trusted.
    #[arg(
        long = "trusted-key",
        value_name = "NAME:KEY",
        env = "KILN_TRUSTED_KEYS",
        value_delimiter = ','
    )]
    pub trusted_keys: Vec<String>,
}

/// Inputs shared by every command that reads bake files.
#[derive(Debug, Args)]
pub struct BakeArgs {
    /// Bake file(s), evaluated in order as one body (`-` reads stdin).
    /// Default: docker-bake.json, docker-bake.hcl, docker-bake.override.json,
    /// docker-bake.override.hcl in the current directory (or $BUILDX_BAKE_FILE).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub files: Vec<String>,
    /// Override a target attribute: `TARGET.KEY[.SUBKEY][+]=VALUE` (patterns allowed).
    #[arg(long = "set", value_name = "TARGET.KEY=VALUE")]
    pub set: Vec<String>,
    /// Set a variable: `NAME=VALUE` (wins over the environment).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub var: Vec<String>,
    /// SOURCE_DATE_EPOCH for every target whose args set none: seconds
    /// since 1970, or `none`. Default: $SOURCE_DATE_EPOCH, else 0 for
    /// plan/build/why (a constant, so a rebuild of unchanged inputs can be
    /// byte-identical); `kiln print` adds it only when given, as bake does
    /// with $SOURCE_DATE_EPOCH.
    #[arg(long = "source-date-epoch", value_name = "EPOCH|none")]
    pub source_date_epoch: Option<String>,
}

#[derive(Debug, Args)]
pub struct PrintArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    /// List targets or variables instead of printing JSON.
    #[arg(long, value_enum)]
    pub list: Option<ListKind>,
    /// Targets or groups to print (default: `default`).
    #[arg(value_name = "TARGET|GROUP")]
    pub targets: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ListKind {
    Targets,
    Variables,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Print the graph instead of the plan.
    #[arg(long, value_enum)]
    pub graph: Option<GraphFormat>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// The driver whose cache policy (and, for buildx, command lines) to show.
    #[arg(long, value_enum, default_value_t = DriverKind::Local)]
    pub driver: DriverKind,
    /// The buildx builder (`--driver buildx`).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub builder: String,
    /// Ask each registry whether the cache refs to import exist (a raw
    /// manifest request: a cache-only manifest is not an image).
    #[arg(long)]
    pub probe_cache: bool,
    /// Targets or groups to plan (default: `default`).
    #[arg(value_name = "TARGET|GROUP")]
    pub targets: Vec<String>,
}

/// How `kiln report` shows a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained page (written beside the recorded run, or to -o).
    Html,
    /// The same facts for a terminal.
    Text,
    /// The recorded run.
    Json,
    /// A job summary for a CI that renders Markdown (`$GITHUB_STEP_SUMMARY`).
    Markdown,
    /// JUnit XML: a test case per target, for CIs that show test results.
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DriverKind {
    /// The Docker engine's embedded BuildKit (`local` is the same).
    #[value(name = "engine", alias = "local")]
    Local,
    /// A `docker buildx` builder.
    Buildx,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Mermaid,
    Dot,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    /// How many targets build at once.
    #[arg(long, short = 'j', default_value_t = 2)]
    pub jobs: usize,
    /// Stop everything at the first failure (default: finish independent targets).
    #[arg(long)]
    pub fail_fast: bool,
    /// Push every target's tags to their registries.
    #[arg(long)]
    pub push: bool,
    /// Progress on stderr: bars on a terminal, otherwise plain lines (`raw`: BuildKit's
    /// whole log); or JSON events.
    #[arg(long, value_enum, default_value_t = Progress::Auto)]
    pub progress: Progress,
    /// The run summary on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Build even targets whose key is recorded, and overwrite their records.
    #[arg(long)]
    pub force: bool,
    /// This run's id (default: $RUN_ID, else generated): it names every
    /// build in BuildKit's history `<project>/<target>/<arch>/<run-id>`,
    /// and sets the bake variable RUN_ID unless `--var` does.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Stop before anything builds when the record store cannot be written
    /// (default: a warning that nothing will be recorded, and build).
    #[arg(long)]
    pub require_store: bool,
    /// Wait at most this long for another run that holds the claim on a
    /// target's key, then build it anyway (default 7200: two hours; 0
    /// builds at once; docs/store-claims.md).
    #[arg(long, value_name = "SECONDS", env = "KILN_CLAIM_WAIT")]
    pub claim_wait: Option<String>,
    /// sccache's store, handed to every build as the BuildKit secret
    /// `kiln-sccache` (never a build arg): webdav(s)://HOST[:PORT]/PATH or
    /// s3://BUCKET[/PREFIX], credentials from the environment as for
    /// `--store`. Probed for reads and writes first (docs/compiler-cache.md).
    #[arg(long, value_name = "LOCATION", env = "KILN_COMPILER_CACHE")]
    pub compiler_cache: Option<String>,
    /// Stop before anything builds when the compiler cache cannot be read
    /// and written (default: a warning, and builds compile without it).
    #[arg(long)]
    pub require_compiler_cache: bool,
    /// Recompile everything and refresh the compiler cache
    /// (`SCCACHE_RECACHE=1` in the secret).
    #[arg(long)]
    pub force_recache: bool,
    /// Spread the build over the nodes of this fleet file (every target is
    /// pushed and handed over through the registry by digest).
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<String>,
    /// Per-target costs for placing targets on fleet nodes.
    #[arg(long, value_name = "FILE", requires = "fleet")]
    pub costs: Option<String>,
    /// Memory per compile job when deriving the job count handed to builds
    /// that mount the secret `kiln-jobs` (the node's free GB / GB per job /
    /// its build slots).
    #[arg(long, value_name = "GB", default_value_t = 2.0)]
    pub gb_per_job: f64,
    /// Build on the Docker engine (`engine`) or through a `docker buildx`
    /// builder (`buildx`: registry cache `mode=max`, docs/driver-buildx.md).
    #[arg(long, value_enum, default_value_t = DriverKind::Local)]
    pub driver: DriverKind,
    /// The buildx builder for `--driver buildx` (default: $KILN_BUILDER,
    /// then $BUILDX_BUILDER, then `default`).
    #[arg(long, value_name = "NAME", env = "KILN_BUILDER")]
    pub builder: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub bake_flags: BakeFlags,
    /// Targets or groups to build (default: `default`).
    #[arg(value_name = "TARGET|GROUP")]
    pub targets: Vec<String>,
}

/// `docker buildx bake`'s own flags, with bake's meaning (docs/commands/build.md
/// says where kiln adds to it), so that a pipeline switches tools by one word.
#[derive(Debug, Args, Default)]
pub struct BakeFlags {
    /// Shorthand for `--set=*.load=true` (bake's `--load`): the images end
    /// in the Docker engine. The engine driver always keeps them there.
    #[arg(long)]
    pub load: bool,
    /// Write the build result of every target to FILE in bake's
    /// `--metadata-file` format (`containerimage.digest`, `image.name`, …),
    /// skipped targets included.
    #[arg(long, value_name = "FILE")]
    pub metadata_file: Option<std::path::PathBuf>,
    /// Do not use BuildKit's cache (`--set=*.no-cache=true`); implies
    /// `--force`, so recorded targets are built too.
    #[arg(long)]
    pub no_cache: bool,
    /// Always attempt to pull every referenced image (`--set=*.pull=true`):
    /// outside images are resolved in their registry, not the engine's
    /// copy, so a moved base tag changes the key.
    #[arg(long)]
    pub pull: bool,
    /// Shorthand for `--set=*.attest=type=provenance,VALUE` (`true`,
    /// `false`, `mode=max`, …); attestations are part of the key.
    #[arg(long, value_name = "VALUE")]
    pub provenance: Option<String>,
    /// Shorthand for `--set=*.attest=type=sbom,VALUE`.
    #[arg(long, value_name = "VALUE")]
    pub sbom: Option<String>,
    /// Allow a build to use an entitlement (`network.host`,
    /// `security.insecure`, `fs=…`), as bake's `--allow`.
    #[arg(long, value_name = "ENTITLEMENT")]
    pub allow: Vec<String>,
    /// Evaluate the build with a frontend method instead of building:
    /// `build` (the default), `check`, `outline` or `targets`.
    #[arg(long, value_name = "METHOD")]
    pub call: Option<String>,
    /// Shorthand for `--call=check`.
    #[arg(long)]
    pub check: bool,
    /// Print the options without building (`kiln print`'s JSON).
    #[arg(long)]
    pub print: bool,
    /// List targets or variables (`targets`, `variables`, or
    /// `type=targets|variables[,format=table]`) without building.
    #[arg(long, value_name = "TYPE")]
    pub list: Option<String>,
    /// bake's debug logging: refused (kiln says why).
    #[arg(short = 'D', long)]
    pub debug: bool,
}

#[derive(Debug, Args)]
pub struct WhyArgs {
    #[command(flatten)]
    pub bake: BakeArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The driver whose keys to explain: on buildx, a multi-platform
    /// target is built as platform units (`TARGET@PLATFORM`).
    #[arg(long, value_enum, default_value_t = DriverKind::Local)]
    pub driver: DriverKind,
    /// The buildx builder (`--driver buildx`).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub builder: String,
    /// The target to explain, or one platform unit of it
    /// (`TARGET@PLATFORM`).
    #[arg(value_name = "TARGET")]
    pub target: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    /// The live view on a terminal, plain lines otherwise.
    Auto,
    /// kiln's lines and each Dockerfile step: its start, cache state,
    /// result and output.
    Plain,
    /// Every line BuildKit reported, internal steps included, as plain lines.
    Raw,
    /// One JSON object per event.
    Json,
    /// The live view, and an error when stderr is not a terminal.
    Tty,
    /// No progress; failures and the summary only (bake's `quiet`).
    Quiet,
    /// No progress; failures and the summary only (bake's `none`).
    #[value(name = "none")]
    Nothing,
    /// BuildKit's raw solve status as JSON (bake's `rawjson`): refused,
    /// kiln says why (hidden from help and completions).
    #[value(hide = true)]
    Rawjson,
}
