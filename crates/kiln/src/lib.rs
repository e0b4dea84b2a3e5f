//! kiln: builds graphs of container images on BuildKit, correctly cached,
//! from `docker buildx bake` files. This crate is the command line: it parses
//! arguments, resolves them into settings, runs one command, and maps errors
//! to the documented exit codes (see [`error::exit`]).
//!
//! stdout carries data only; messages and errors go to stderr.
//!
//! Must never: write a message or an error to stdout, or do a command's
//! work here: `run` parses, resolves settings and dispatches, and the
//! command does the rest.

pub mod cli;
pub mod commands;
pub mod costs;
pub mod error;
pub mod live;
pub mod output;
pub mod prepare;
pub mod progress;
pub mod report;
pub mod settings;
pub mod signals;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::CliError;
use crate::settings::{BakeSettings, StoreSettings};

/// Runs kiln with the given arguments and returns the process exit code.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                error::exit::USAGE
            } else {
                error::exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match dispatch(cli, &mut out) {
        Ok(()) => ExitCode::from(error::exit::OK),
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}

fn dispatch(cli: Cli, out: &mut dyn std::io::Write) -> Result<(), CliError> {
    match cli.command {
        Command::Print(a) => {
            let s = commands::print::PrintSettings {
                bake: BakeSettings::resolve(&a.bake)?,
                list: a.list,
                targets: a.targets,
            };
            commands::print::run(s, out)
        }
        Command::Plan(a) => {
            let bake = BakeSettings::resolve(&a.bake)?;
            let store = StoreSettings::resolve(&a.store, &bake.cwd, &bake.project_dir());
            let s = commands::plan::PlanSettings {
                bake,
                store,
                cache: settings::cache_settings(&a.cache),
                driver: a.driver,
                builder: a.builder,
                probe_cache: a.probe_cache,
                format: a.format,
                graph: a.graph,
                targets: a.targets,
            };
            commands::plan::run(s, out)
        }
        Command::Build(a) => build(*a, out),
        Command::Keys(a) => match a.command {
            cli::KeysCommand::Generate { name, out: file } => {
                commands::keys::generate(&name, file.as_deref(), out)
            }
        },
        Command::Why(a) => {
            let bake = BakeSettings::resolve(&a.bake)?;
            let store = StoreSettings::resolve(&a.store, &bake.cwd, &bake.project_dir());
            let s = commands::why::WhySettings {
                bake,
                store,
                format: a.format,
                builder: (a.driver == cli::DriverKind::Buildx)
                    .then(|| prepare::builder_spec(Some(&a.builder))),
                target: a.target,
            };
            commands::why::run(s, out)
        }
        Command::Lint(a) => {
            let s = commands::lint::LintSettings {
                paths: a.paths,
                format: a.format,
                view: if a.kiln {
                    kiln_lint::View::Kiln
                } else if a.buildx {
                    kiln_lint::View::Buildx
                } else {
                    kiln_lint::View::Auto
                },
            };
            commands::lint::run(s, out)
        }
        Command::Report(a) => {
            let s = commands::report::ReportSettings {
                kiln_dir: project_kiln_dir(a.file.as_deref())?,
                run: a.run,
                output: a.output,
                format: a.format,
            };
            commands::report::run(s, out)
        }
        Command::History(a) => {
            let s = commands::history::HistorySettings {
                history: project_kiln_dir(a.file.as_deref())?.join("history.sqlite"),
                target: a.target,
                format: a.format,
                limit: a.limit,
            };
            commands::history::run(s, out)
        }
        Command::Diagnose(a) => {
            let s = commands::diagnose::DiagnoseSettings {
                log: a.log.filter(|l| l != "-"),
                format: a.format,
                inputs: a.inputs,
            };
            commands::diagnose::run(s, out)
        }
        Command::Schedule(a) => {
            let bake = BakeSettings::resolve(&a.bake)?;
            let store = StoreSettings::resolve(&a.store, &bake.cwd, &bake.project_dir());
            let s = commands::schedule::ScheduleSettings {
                bake,
                store,
                fleet: a.fleet,
                costs: a.costs,
                simulate: a.simulate,
                policy: a.policy,
                format: a.format,
                svg: a.svg,
                targets: a.targets,
            };
            commands::schedule::run(s, out)
        }
        Command::Preflight(a) => {
            let bake = BakeSettings::resolve(&a.bake)?;
            let store = StoreSettings::resolve(&a.store, &bake.cwd, &bake.project_dir());
            let s = commands::preflight::PreflightSettings {
                bake,
                store,
                fleet: a.fleet,
                costs: a.costs,
                format: a.format,
                targets: a.targets,
            };
            commands::preflight::run(s, out)
        }
        Command::Fleet(a) => {
            let cwd = std::env::current_dir()
                .map_err(|e| CliError::env(format!("cannot read the current directory: {e}")))?;
            let s = commands::fleet::FleetSettings {
                fleet: a.fleet,
                format: a.format,
                gb_per_job: a.gb_per_job,
                cwd,
            };
            commands::fleet::run(s, out)
        }
        Command::Vars(a) => {
            let s = commands::vars::VarsSettings {
                bake: BakeSettings::resolve(&a.bake)?,
                action: a.action,
                format: a.format,
                doc: a.doc,
            };
            commands::vars::run(s, out)
        }
        Command::Versions(a) => {
            let s = commands::versions::VersionsSettings {
                bake: BakeSettings::resolve(&a.bake)?,
                format: a.format,
                registry: !a.no_registry,
            };
            commands::versions::run(s, out)
        }
        Command::Completions(a) => {
            let mut script = Vec::new();
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(a.shell, &mut cmd, "kiln", &mut script);
            crate::output::write(out, &String::from_utf8_lossy(&script))
        }
    }
}

/// The `.kiln` directory of the project of bake file `file` (its
/// directory), or of the current directory: where runs, history and
/// records live (`settings::StoreSettings`).
fn project_kiln_dir(file: Option<&str>) -> Result<std::path::PathBuf, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::env(format!("cannot read the current directory: {e}")))?;
    let dir = match file {
        Some(f) => {
            let p = cwd.join(f);
            if !p.is_file() {
                return Err(CliError::usage(format!("-f {f}: no such file"))
                    .with_hint("name the project's bake file, or run kiln in its directory"));
            }
            p.parent().map(std::path::Path::to_path_buf).unwrap_or(cwd)
        }
        None => cwd,
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    Ok(dir.join(".kiln"))
}

/// `kiln build`: bake's own flags first (they may ask for `kiln print`'s
/// output instead), then the build's settings.
fn build(a: cli::BuildArgs, out: &mut dyn std::io::Write) -> Result<(), CliError> {
    let mut bake = BakeSettings::resolve(&a.bake)?;
    let f = &a.bake_flags;
    if let Some(instead) = settings::apply_bake_flags(f, a.progress, &mut bake)? {
        let list = match instead {
            settings::Instead::Print => None,
            settings::Instead::List(k) => Some(k),
        };
        let s = commands::print::PrintSettings {
            bake,
            list,
            targets: a.targets,
        };
        return commands::print::run(s, out);
    }
    let store = StoreSettings::resolve(&a.store, &bake.cwd, &bake.project_dir());
    let s = commands::build::BuildSettings {
        bake,
        store,
        cache: settings::cache_settings(&a.cache),
        // bake's --no-cache builds everything; kiln's records would
        // otherwise skip what they hold.
        force: a.force || f.no_cache,
        allow: f.allow.clone(),
        metadata_file: f.metadata_file.clone(),
        fleet: a.fleet,
        costs: a.costs,
        gb_per_job: a.gb_per_job,
        driver: a.driver,
        builder: a.builder,
        targets: a.targets,
        jobs: a.jobs,
        fail_fast: a.fail_fast,
        require_store: a.require_store,
        claim_wait: kiln_engine::claims::wait_from(a.claim_wait.as_deref())
            .map_err(|e| CliError::usage(format!("--claim-wait: {e}")))?,
        compiler_cache: a.compiler_cache.filter(|c| !c.is_empty()),
        require_compiler_cache: a.require_compiler_cache,
        force_recache: a.force_recache,
        run_id: a.run_id,
        push: a.push,
        progress: a.progress,
        format: a.format,
    };
    commands::build::run(s, out)
}
