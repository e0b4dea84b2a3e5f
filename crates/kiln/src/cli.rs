//! The command-line interface (clap types). Resolved once into
//! [`crate::settings`] structs that the commands receive.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// kiln builds graphs of container images on BuildKit, from the
/// `docker buildx bake` files you already have.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, about, long_about = None, disable_help_subcommand = true)]
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
    Build(BuildArgs),
    /// Say what changed in a target's inputs since its last recorded build.
    Why(WhyArgs),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DriverKind {
    /// The Docker engine's embedded BuildKit.
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
    /// Progress on stderr: bars on a terminal, otherwise plain lines; or JSON events.
    #[arg(long, value_enum, default_value_t = Progress::Auto)]
    pub progress: Progress,
    /// The run summary on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Build even targets whose key is recorded, and overwrite their records.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Targets or groups to build (default: `default`).
    #[arg(value_name = "TARGET|GROUP")]
    pub targets: Vec<String>,
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
    /// The target to explain.
    #[arg(value_name = "TARGET")]
    pub target: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    Auto,
    Plain,
    Json,
}
