//! kiln-bake: evaluates `docker buildx bake` files (HCL native and JSON syntax)
//! exactly as buildx does, into resolved targets and groups.
//!
//! Owns: parsing, the expression language and its stdlib, variables, functions,
//! blocks, matrix, `inherits`, `--set` overrides, `--print` JSON.
//! Must never: perform I/O beyond reading the bake files it is given (and, for
//! `--print`, checking that secret source files exist, as buildx does).

pub mod ast;
pub mod diag;
pub mod eval;
mod fxhash;
pub mod json;
pub mod model;
#[doc(hidden)]
pub mod native;
pub mod parse;
pub mod resolve;
pub mod stdlib;
pub mod suggest;
pub mod syntax;
pub mod value;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as J};

pub use diag::{Diag, Diags, Pos, Source, Sources};
pub use model::{Group, Target, TargetDecl};
pub use parse::{Config, Options, VariableInfo};
pub use resolve::{LinkProblem, ResolveError, Resolved};

/// bake's default file names, in merge order (Compose names are not supported).
pub const DEFAULT_FILES: &[&str] = &[
    "docker-bake.json",
    "docker-bake.hcl",
    "docker-bake.override.json",
    "docker-bake.override.hcl",
];

const COMPOSE_FILES: &[&str] = &[
    "compose.yaml",
    "compose.yml",
    "docker-compose.yml",
    "docker-compose.yaml",
];

/// Errors from loading and evaluating bake files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Evaluation diagnostics; render them with [`Error::render`].
    #[error("{}", diag::render(.diags, .sources))]
    Eval { diags: Diags, sources: Sources },
    /// A resolution error (unknown target, bad `--set`, link problems).
    #[error("{0}")]
    Resolve(resolve::ResolveError),
    /// No bake file was found.
    #[error("couldn't find a bake definition (looked for {looked}); pass one with -f FILE")]
    NoFiles { looked: String },
    /// A file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// A file is not UTF-8 text (bad input, at the byte where it stops).
    #[error("{path}:{at}; bake files are UTF-8 (re-save it as UTF-8)")]
    NotUtf8 {
        path: String,
        at: kiln_util::NotUtf8,
    },
    /// A Compose file was given.
    #[error(
        "{path}: Compose files are not supported by kiln yet; convert the services to a docker-bake.hcl (see `docker buildx bake --print` for the equivalent definition)"
    )]
    Compose { path: String },
}

impl Error {
    /// The first diagnostic's resolved position, if any.
    pub fn position(&self) -> Option<Pos> {
        match self {
            Error::Eval { diags, sources } => diags
                .0
                .iter()
                .find_map(|d| d.span.and_then(|s| sources.pos(s))),
            _ => None,
        }
    }
}

/// A loaded, evaluated set of bake files.
#[derive(Debug)]
pub struct Bake {
    pub sources: Sources,
    pub config: Config,
}

/// The default files present in `dir`, in merge order.
pub fn default_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    for c in COMPOSE_FILES {
        let p = dir.join(c);
        if p.is_file() && !DEFAULT_FILES.iter().any(|d| dir.join(d).is_file()) {
            return Err(Error::Compose {
                path: p.display().to_string(),
            });
        }
    }
    let found: Vec<PathBuf> = DEFAULT_FILES
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    if found.is_empty() {
        return Err(Error::NoFiles {
            looked: DEFAULT_FILES.join(", "),
        });
    }
    Ok(found)
}

fn looks_like_compose(name: &str, text: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    if COMPOSE_FILES.contains(&base) || base.ends_with(".yml") || base.ends_with(".yaml") {
        return true;
    }
    // YAML with a top-level `services:` key (a line that starts with it).
    text.starts_with("services:") || text.contains("\nservices:")
}

/// Parses one file into a body, choosing the syntax by extension as bake does
/// (`.json` → JSON, `.hcl` → HCL, otherwise HCL then JSON).
pub fn parse_file(sources: &mut Sources, name: &str, text: String) -> Result<ast::Body, Error> {
    parse_file_with(sources, name, text, syntax::parse_body)
}

fn parse_file_with(
    sources: &mut Sources,
    name: &str,
    text: String,
    native: fn(&str, u32) -> Result<ast::Body, Diags>,
) -> Result<ast::Body, Error> {
    if looks_like_compose(name, &text) {
        return Err(Error::Compose {
            path: name.to_string(),
        });
    }
    // The file is kept once, in `sources`, and parsed from there.
    let id = sources.add(Source::new(name, text));
    let text = sources.files[id as usize].text.as_str();
    let r = if name.ends_with(".json") {
        json::parse_body(text, id)
    } else if name.ends_with(".hcl") {
        native(text, id)
    } else {
        native(text, id).or_else(|e| json::parse_body(text, id).map_err(|_| e))
    };
    r.map_err(|diags| Error::Eval {
        diags,
        sources: sources.clone(),
    })
}

/// The former HCL front end (`hcl-edit`), kept only as the baseline that the
/// benchmark times and the differential test compares against.
#[doc(hidden)]
pub mod baseline {
    use super::*;

    /// [`parse_file`](super::parse_file) with HCL parsed by `hcl-edit`.
    pub fn parse_file(sources: &mut Sources, name: &str, text: String) -> Result<ast::Body, Error> {
        parse_file_with(sources, name, text, native::parse_body)
    }

    pub use crate::native::{parse_body, parse_expr, parse_template};
}

/// Bake files read and parsed, not yet evaluated: what evaluations of the
/// same files with different variables share.
#[derive(Debug)]
pub struct Parsed {
    sources: Sources,
    bodies: Vec<ast::Body>,
    names: Vec<String>,
}

impl Parsed {
    /// Parses files (name, contents), in order.
    pub fn new(files: Vec<(String, String)>) -> Result<Parsed, Error> {
        let mut sources = Sources::default();
        let mut bodies = Vec::new();
        let mut names = Vec::new();
        for (name, text) in files {
            bodies.push(parse_file(&mut sources, &name, text)?);
            names.push(name);
        }
        Ok(Parsed {
            sources,
            bodies,
            names,
        })
    }

    /// Reads files from disk (`-` is stdin) and parses them.
    pub fn read(paths: &[String]) -> Result<Parsed, Error> {
        Parsed::new(read_paths(paths)?)
    }

    /// Whether a file declares the variable `name` (a top-level `variable`
    /// block): what [`Config::variables`] of an evaluation lists, known
    /// without evaluating.
    pub fn declares_variable(&self, name: &str) -> bool {
        self.bodies.iter().any(|b| {
            b.blocks
                .iter()
                .any(|bl| bl.kind == "variable" && bl.labels.first().is_some_and(|l| l.0 == name))
        })
    }

    /// Evaluates the files as one body with `opts`.
    pub fn evaluate(&self, opts: &Options) -> Result<Bake, Error> {
        let config =
            parse::parse(&self.bodies, &self.names, opts).map_err(|diags| Error::Eval {
                diags,
                sources: self.sources.clone(),
            })?;
        Ok(Bake {
            sources: self.sources.clone(),
            config,
        })
    }
}

/// Loads and evaluates files (name, contents) in order as one body.
pub fn load(files: Vec<(String, String)>, opts: &Options) -> Result<Bake, Error> {
    Parsed::new(files)?.evaluate(opts)
}

/// Reads files from disk (`-` is stdin) and evaluates them.
pub fn load_paths(paths: &[String], opts: &Options) -> Result<Bake, Error> {
    load(read_paths(paths)?, opts)
}

/// Reads files from disk (`-` is stdin), each as UTF-8 text.
fn read_paths(paths: &[String]) -> Result<Vec<(String, String)>, Error> {
    let mut files = Vec::new();
    for p in paths {
        let bytes = if p == "-" {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).map(|_| b)
        } else {
            std::fs::read(p)
        }
        .map_err(|e| Error::Read {
            path: p.clone(),
            source: e,
        })?;
        let text = kiln_util::utf8_text(bytes).map_err(|at| Error::NotUtf8 {
            path: p.clone(),
            at,
        })?;
        files.push((p.clone(), text));
    }
    Ok(files)
}

impl Bake {
    /// The warnings of the evaluation (attributes and blocks that buildx
    /// ignores), rendered like errors: message, `file:line:col` and the
    /// source line with a caret. Print them on stderr, each prefixed with
    /// `warning: `.
    pub fn render_warnings(&self) -> Vec<String> {
        self.config
            .warnings
            .iter()
            .map(|d| diag::render(&Diags::one(d.clone()), &self.sources))
            .collect()
    }

    /// `ReadTargets`: resolves requested names with `--set` overrides.
    pub fn resolve(
        &self,
        requested: &[String],
        sets: &[String],
        opts: &Options,
    ) -> Result<Resolved, Error> {
        resolve::read_targets(&self.config, requested, sets, opts).map_err(Error::Resolve)
    }
}

/// Options of the `--print` conversion.
#[derive(Clone, Debug, Default)]
pub struct PrintOptions {
    /// The invocation directory (for `cwd://` dockerfiles and secret files).
    pub cwd: PathBuf,
    /// `SOURCE_DATE_EPOCH` from the environment, added to every target's args.
    pub source_date_epoch: Option<String>,
}

/// Go `path.Clean`.
pub fn clean_path(p: &str) -> String {
    kiln_util::gopath::clean(p)
}

/// Whether a context is a remote URL (left untouched by the conversion).
pub fn is_remote(ctx: &str) -> bool {
    [
        "https://",
        "http://",
        "git://",
        "ssh://",
        "git@",
        "github.com/",
        "gitlab.com/",
        "bitbucket.org/",
    ]
    .iter()
    .any(|p| ctx.starts_with(p))
        || ctx.ends_with(".git")
        || ctx.contains(".git#")
}

/// Applies the build-option conversion that `--print` runs (context
/// cleaning, `cwd://` dockerfiles, `SOURCE_DATE_EPOCH`, secret checks).
pub fn to_build_opts(r: &mut Resolved, po: &PrintOptions) -> Result<(), Error> {
    for t in r.targets.values_mut() {
        if let Some(sde) = po.source_date_epoch.as_ref().filter(|s| !s.is_empty()) {
            t.args
                .get_or_insert_with(BTreeMap::new)
                .entry("SOURCE_DATE_EPOCH".into())
                .or_insert_with(|| Some(sde.clone()));
        }
        if let Some(ctx) = t.context.clone() {
            if ctx == "-" {
                return Err(Error::Resolve(ResolveError::from(format!(
                    "target {}: context from stdin not allowed in bake",
                    t.name
                ))));
            }
            if let Some(rest) = ctx.strip_prefix("cwd://") {
                t.context = Some(clean_path(rest));
            } else if !is_remote(&ctx) {
                t.context = Some(clean_path(&ctx));
            }
        }
        if t.dockerfile.as_deref() == Some("-") {
            return Err(Error::Resolve(ResolveError::from(format!(
                "target {}: dockerfile from stdin not allowed in bake",
                t.name
            ))));
        }
        // buildx stats secret files while creating build options.
        for s in t.secret.iter().flatten() {
            if let Some(src) = s.get("src").and_then(J::as_str) {
                let p = po.cwd.join(src);
                if !p.exists() {
                    return Err(Error::Resolve(ResolveError::from(format!(
                        "target {}: failed to stat secret source {src}: no such file or directory",
                        t.name
                    ))));
                }
            }
        }
    }
    Ok(())
}

/// The `--print` document: `{"group": {...}, "target": {...}}`.
pub fn print_json(r: &Resolved) -> J {
    let mut doc = Map::new();
    let groups: Map<String, J> = r
        .groups
        .iter()
        .map(|(k, g)| (k.clone(), g.to_json()))
        .collect();
    if !groups.is_empty() {
        doc.insert("group".into(), J::Object(groups));
    }
    let targets: Map<String, J> = r
        .targets
        .iter()
        .map(|(k, t)| (k.clone(), t.to_json(true)))
        .collect();
    doc.insert("target".into(), J::Object(targets));
    J::Object(doc)
}

/// The parse-mode document (every target and group, unresolved).
pub fn config_json(c: &Config) -> J {
    let mut doc = Map::new();
    doc.insert(
        "group".into(),
        J::Object(
            c.groups
                .iter()
                .map(|g| (g.name.clone(), g.to_json()))
                .collect(),
        ),
    );
    doc.insert(
        "target".into(),
        J::Object(
            c.targets
                .iter()
                .map(|t| (t.name.clone(), t.to_target().to_json(false)))
                .collect(),
        ),
    );
    J::Object(doc)
}

/// Go `text/tabwriter` with minwidth=1, tabwidth=8, padding=1, padchar `\t`
/// (what `bake --list` uses): every cell but the last of a row is padded
/// with tabs to its column's width.
pub fn tabwrite(rows: &[Vec<String>]) -> String {
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; ncols];
    for r in rows {
        for (i, c) in r.iter().enumerate().take(r.len().saturating_sub(1)) {
            widths[i] = widths[i].max(c.chars().count() + 1);
        }
    }
    let mut out = String::new();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            out.push_str(c);
            if i + 1 < r.len() {
                let cellw = widths[i].max(1).div_ceil(8) * 8;
                let n = cellw - c.chars().count();
                out.push_str(&"\t".repeat(n.div_ceil(8)));
            }
        }
        out.push('\n');
    }
    out
}

/// `bake --list=targets`: targets and groups sorted by name, `_`-prefixed
/// names hidden.
pub fn list_targets(c: &Config) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    for t in &c.targets {
        rows.push((
            t.name.clone(),
            t.description.as_deref().unwrap_or_default().to_string(),
        ));
    }
    for g in &c.groups {
        // buildx: the description, then the sorted members in parentheses
        // (just the members when there is no description).
        let mut d = g.description.clone().unwrap_or_default();
        if !g.targets.is_empty() {
            let mut members = g.targets.clone();
            members.sort();
            let names = members.join(", ");
            d = if d.is_empty() {
                names
            } else {
                format!("{d} ({names})")
            };
        }
        rows.push((g.name.clone(), d));
    }
    rows.retain(|(n, _)| !n.starts_with('_'));
    rows.sort();
    let mut table = vec![vec!["TARGET".to_string(), "DESCRIPTION".to_string()]];
    table.extend(rows.into_iter().map(|(n, d)| vec![n, d]));
    tabwrite(&table)
}

/// The display form of a variable's value: strings raw, null as `<null>`,
/// everything else as compact JSON.
pub fn display_value(v: &value::Value) -> String {
    match v {
        value::Value::Null(_) => "<null>".into(),
        value::Value::String(s) => s.clone(),
        other => value::to_json(other).to_string(),
    }
}

/// `bake --list=variables`.
pub fn list_variables(c: &Config) -> String {
    let mut vars: Vec<&VariableInfo> = c.variables.iter().collect();
    vars.sort_by(|a, b| a.name.cmp(&b.name));
    let mut table = vec![vec![
        "VARIABLE".into(),
        "TYPE".into(),
        "VALUE".into(),
        "DESCRIPTION".into(),
    ]];
    for v in vars {
        table.push(vec![
            v.name.clone(),
            v.ty.as_ref()
                .map(value::Type::friendly_name)
                .unwrap_or_default(),
            display_value(&v.value),
            v.description.clone().unwrap_or_default(),
        ]);
    }
    tabwrite(&table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_shows_group_descriptions_and_sorted_members() {
        let src = "group \"default\" {\n  description = \"Everything\"\n  targets = [\"b\", \"a\"]\n}\ngroup \"g\" {\n  targets = [\"b\", \"a\"]\n}\ntarget \"a\" {}\ntarget \"b\" {}\n";
        let bake = load(vec![("t.hcl".into(), src.into())], &Options::default()).unwrap();
        let out = list_targets(&bake.config);
        assert_eq!(
            out,
            "TARGET\tDESCRIPTION\na\t\nb\t\ndefault\tEverything (a, b)\ng\ta, b\n"
        );
    }
}
