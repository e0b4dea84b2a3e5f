//! Dockerfile analysis: which stages a target needs and what those stages read.
//!
//! [`analyze`] parses a Dockerfile (with `parse-dockerfile`), resolves stages the way
//! BuildKit's `dockerfile2llb` does, and reports for the stages the target actually needs
//! (BuildKit builds only the stages reachable from the target) the build args that can
//! influence them, the build-context paths they read (`COPY`/`ADD` sources, bind mounts),
//! remote sources, mounts, external images, and a canonical text of those stages for a
//! content key. See the crate README for the exact rules and the canonical text.
//!
//! It is pure: no file system (except [`analyze_file`], which only reads the file), no
//! network, no environment. Resolving images to digests, matching context paths against
//! `.dockerignore` and hashing belong to the caller.

mod error;
mod heredoc;
pub mod lex;
mod mount;
mod step;
mod text;
pub use step::step_line;

pub use error::DockerfileError;
pub use mount::{Mount, MountKind};

use parse_dockerfile as pd;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use text::Lines;

/// The version of [`Analysis::needed_text`]'s format; it is its first line.
pub const NEEDED_TEXT_VERSION: &str = "kiln-dockerfile-needed-text v1";

/// Build args BuildKit sets itself from the platforms (usable in `FROM` without a
/// declaration; inside a stage only once declared). A key should include the platform
/// instead of their values.
pub const AUTOMATIC_ARGS: [&str; 8] = [
    "TARGETPLATFORM",
    "TARGETOS",
    "TARGETARCH",
    "TARGETVARIANT",
    "BUILDPLATFORM",
    "BUILDOS",
    "BUILDARCH",
    "BUILDVARIANT",
];

/// Build args BuildKit passes to `RUN` without a declaration and keeps out of its cache
/// key; kiln does the same: they are consumed only when a needed stage declares them.
pub const PROXY_ARGS: [&str; 10] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "FTP_PROXY",
    "ftp_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The parser directives at the top of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Directives {
    /// `# syntax=` (the frontend image), if given.
    pub syntax: Option<String>,
    /// `# escape=`: `\` unless set to `` ` ``.
    pub escape: char,
    /// `# check=`, if given.
    pub check: Option<String>,
}

/// The kind of an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
#[expect(missing_docs, reason = "the Dockerfile keywords speak for themselves")]
pub enum InstructionKind {
    Add,
    Arg,
    Cmd,
    Copy,
    Entrypoint,
    Env,
    Expose,
    From,
    Healthcheck,
    Label,
    Maintainer,
    Onbuild,
    Run,
    Shell,
    Stopsignal,
    User,
    Volume,
    Workdir,
}

/// One instruction as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Instruction {
    /// Its keyword.
    pub kind: InstructionKind,
    /// The source text, from the keyword to the end of its last line (continuation lines,
    /// interior comments and heredoc bodies included).
    pub text: String,
    /// 1-based first line.
    pub line: usize,
    /// 1-based last line.
    pub end_line: usize,
}

/// One `ARG` declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArgDecl {
    /// The name, as written (build args are case-sensitive).
    pub name: String,
    /// The default as written (before expansion), if any.
    pub default: Option<String>,
    /// The value the build sees at this point: the build arg given, else the expanded
    /// default, else (inside a stage, no default) the global value; `None` = unset.
    pub value: Option<String>,
    /// 1-based line.
    pub line: usize,
}

/// What a stage starts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FromSource {
    /// An earlier stage, by index.
    Stage(usize),
    /// An image reference or a named context (`--build-context`); the caller maps names.
    Image(String),
    /// `scratch`.
    Scratch,
}

/// How a stage depends on another stage or on an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DepVia {
    /// `FROM`.
    From,
    /// `COPY --from=`.
    CopyFrom,
    /// `RUN --mount=…,from=`.
    MountFrom,
}

/// What a `--from` (or `FROM`) points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum DepTarget {
    /// A stage, by index.
    Stage(usize),
    /// An image or named context.
    Image(String),
}

/// One dependency of a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageDep {
    /// 1-based line of the instruction.
    pub line: usize,
    /// Which instruction makes it.
    pub via: DepVia,
    /// What it points at.
    pub target: DepTarget,
}

/// What kind of path a context source is, judged from its text alone (no I/O).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    /// `.`, `/`, `./` or empty: the whole context.
    Whole,
    /// Ends with `/`: a directory (an error at build time if it is a file).
    Directory,
    /// Contains `*`, `?` or `[`: a glob, matched by the caller as BuildKit does.
    Glob,
    /// A file or a directory: only the context can tell.
    Path,
}

/// Which instruction reads a context source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceVia {
    /// `COPY` without `--from`.
    Copy,
    /// `ADD` of a local path.
    Add,
    /// `RUN --mount=type=bind` without `from`.
    BindMount,
}

/// A path a needed stage reads from the build context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextSource {
    /// The stage that reads it.
    pub stage: usize,
    /// 1-based line of the instruction.
    pub line: usize,
    /// Which instruction.
    pub via: SourceVia,
    /// The path after expansion, as written otherwise (relative to the context root; a
    /// leading `/` or `./` means the same).
    pub path: String,
    /// The path as written, before expansion.
    pub raw: String,
    /// File, directory, glob or the whole context.
    pub kind: PathKind,
    /// `COPY --exclude=` patterns (expanded), which narrow what is read.
    pub excludes: Vec<String>,
}

/// The kind of a remote `ADD` source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteKind {
    /// `http(s)://…`.
    Http,
    /// A git repository (`git@…`, `git://…`, `…​.git`, `https://…#ref`).
    Git,
}

/// An `ADD` of a URL or git repository in a needed stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteSource {
    /// The stage.
    pub stage: usize,
    /// 1-based line.
    pub line: usize,
    /// HTTP or git.
    pub kind: RemoteKind,
    /// The URL after expansion.
    pub url: String,
    /// The URL as written, before expansion.
    pub raw: String,
    /// `--checksum=`, if given (pins an HTTP source).
    pub checksum: Option<String>,
}

/// One stage of the Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stage {
    /// 0-based position.
    pub index: usize,
    /// `AS name`, lowercased as BuildKit does.
    pub name: Option<String>,
    /// The `FROM` image text as written.
    pub from_raw: String,
    /// What the stage starts from, after expanding the global ARGs.
    pub from: FromSource,
    /// `FROM --platform=`, expanded (platform args the caller did not pass expand empty).
    pub platform: Option<String>,
    /// Its instructions, `FROM` first.
    pub instructions: Vec<Instruction>,
    /// Its `ARG` declarations, in order.
    pub args: Vec<ArgDecl>,
    /// The stages and images it reads, in order.
    pub deps: Vec<StageDep>,
    /// Its build-context reads.
    pub context_sources: Vec<ContextSource>,
    /// Its remote `ADD` sources.
    pub remote_sources: Vec<RemoteSource>,
    /// Its `RUN --mount`s (all kinds).
    pub mounts: Vec<Mount>,
}

/// What [`analyze`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Analysis {
    /// Parser directives.
    pub directives: Directives,
    /// The ARGs declared before the first `FROM`.
    pub global_args: Vec<ArgDecl>,
    /// Every stage, in file order.
    pub stages: Vec<Stage>,
    /// The target stage's index.
    pub target: usize,
    /// The stages the target needs, itself included, in ascending order.
    pub needed: Vec<usize>,
    /// The build args that can influence the needed stages, with the value the build sees:
    /// the build arg given, else the default of the first declaration that has one (per
    /// declaration values are in [`Stage::args`]; the defaults are also in
    /// [`Self::needed_text`]).
    pub consumed_args: BTreeMap<String, Option<String>>,
    /// The consumed args that BuildKit sets from the platform ([`AUTOMATIC_ARGS`]).
    pub automatic_args: BTreeSet<String>,
    /// The build args given whose name starts with `BUILDKIT_`: frontend options that
    /// apply without a declaration (e.g. `BUILDKIT_CONTEXT_KEEP_GIT_DIR`).
    pub frontend_args: BTreeMap<String, String>,
    /// Build-context reads of the needed stages.
    pub context_sources: Vec<ContextSource>,
    /// Remote `ADD` sources of the needed stages.
    pub remote_sources: Vec<RemoteSource>,
    /// `RUN --mount`s of the needed stages other than binds of the context or of a
    /// stage/image (cache, tmpfs, secret, ssh).
    pub mounts: Vec<Mount>,
    /// Every external image (or named context) the needed stages read, first use first,
    /// without duplicates.
    pub images: Vec<String>,
    /// The canonical text of the needed stages (see the crate README).
    pub needed_text: String,
}

/// Reads `path` and runs [`analyze`] on it.
///
/// # Errors
/// [`DockerfileError::Io`] if the file cannot be read, else as [`analyze`].
pub fn analyze_file(
    path: &std::path::Path,
    target_stage: Option<&str>,
    build_args: &BTreeMap<String, String>,
) -> Result<Analysis, DockerfileError> {
    let text = std::fs::read_to_string(path).map_err(|e| DockerfileError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    analyze(&text, target_stage, build_args)
}

/// Analyses `text` for the stage `target_stage` (default: the last stage) with the given
/// build args.
///
/// # Errors
/// A [`DockerfileError`] with the line when the text is not a Dockerfile BuildKit would
/// build for this target.
pub fn analyze(
    text: &str,
    target_stage: Option<&str>,
    build_args: &BTreeMap<String, String>,
) -> Result<Analysis, DockerfileError> {
    let masked = heredoc::mask(text);
    let parse_text = masked.as_ref().map_or(text, |m| m.text.as_str());
    let df = pd::parse(parse_text).map_err(|e| DockerfileError::Parse {
        line: e.line(),
        column: e.column(),
        message: format!("{e:#}"),
    })?;
    let mut a = Analyzer::new(text, &df, build_args);
    if let Some(m) = &masked {
        a.bodies = m.bodies.clone();
    }
    a.run(target_stage)
}

struct Global {
    value: Option<String>,
    /// The globals (transitively) its value came from.
    deps: BTreeSet<String>,
}

struct Analyzer<'t, 'd> {
    text: &'t str,
    df: &'d pd::Dockerfile<'t>,
    lines: Lines,
    escape: char,
    build_args: &'d BTreeMap<String, String>,
    globals: BTreeMap<String, Global>,
    global_decls: Vec<(ArgDecl, String)>,
    /// RUN heredoc bodies the parser was not shown (`heredoc`), by the
    /// offset of their RUN keyword, with the end of their last terminator.
    bodies: BTreeMap<usize, (Vec<std::ops::Range<usize>>, usize)>,
}

/// The per-stage variable scope: ENV (inherited from a parent stage) over ARG.
#[derive(Clone, Default)]
struct Scope {
    env: BTreeMap<String, String>,
    args: BTreeMap<String, Option<String>>,
}

impl Scope {
    fn get(&self, name: &str) -> Option<String> {
        if let Some(v) = self.env.get(name) {
            return Some(v.clone());
        }
        self.args.get(name).cloned().flatten()
    }
}

/// Per-stage facts gathered before `needed` is known; errors are kept for later because
/// BuildKit reports expansion errors only for stages it builds.
struct StageWork {
    stage: Stage,
    /// Global ARGs (and automatic args) this stage consumes.
    consumed_globals: BTreeSet<String>,
    /// Canonical text of the stage, one entry per instruction.
    canonical: Vec<String>,
    /// The first expansion error, reported only if the stage is needed.
    deferred: Option<DockerfileError>,
    /// Scope at the end (ENV passes to child stages).
    end_env: BTreeMap<String, String>,
}

fn kind_of(i: &pd::Instruction<'_>) -> InstructionKind {
    use pd::Instruction as I;
    match i {
        I::Add(_) => InstructionKind::Add,
        I::Arg(_) => InstructionKind::Arg,
        I::Cmd(_) => InstructionKind::Cmd,
        I::Copy(_) => InstructionKind::Copy,
        I::Entrypoint(_) => InstructionKind::Entrypoint,
        I::Env(_) => InstructionKind::Env,
        I::Expose(_) => InstructionKind::Expose,
        I::From(_) => InstructionKind::From,
        I::Healthcheck(_) => InstructionKind::Healthcheck,
        I::Label(_) => InstructionKind::Label,
        I::Maintainer(_) => InstructionKind::Maintainer,
        I::Onbuild(_) => InstructionKind::Onbuild,
        I::Run(_) => InstructionKind::Run,
        I::Shell(_) => InstructionKind::Shell,
        I::Stopsignal(_) => InstructionKind::Stopsignal,
        I::User(_) => InstructionKind::User,
        I::Volume(_) => InstructionKind::Volume,
        _ => InstructionKind::Workdir,
    }
}

fn path_kind(p: &str) -> PathKind {
    let t = p.trim();
    if matches!(t, "" | "." | "./" | "/" | "/.") {
        PathKind::Whole
    } else if t.contains(['*', '?', '[']) {
        PathKind::Glob
    } else if t.ends_with('/') || t.ends_with("/.") {
        PathKind::Directory
    } else {
        PathKind::Path
    }
}

fn remote_kind(src: &str) -> Option<RemoteKind> {
    let lower = src.to_ascii_lowercase();
    let is_url = lower.starts_with("http://") || lower.starts_with("https://");
    if lower.starts_with("git@")
        || lower.starts_with("git://")
        || lower.starts_with("ssh://")
        || (is_url && (lower.contains(".git#") || lower.ends_with(".git")))
    {
        Some(RemoteKind::Git)
    } else if is_url {
        Some(RemoteKind::Http)
    } else {
        None
    }
}

/// Levenshtein distance, for the "did you mean" hint.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Splits `NAME[=value]` words of an `ARG`.
fn arg_words(text: &str, escape: char) -> Vec<(String, Option<String>)> {
    lex::split_words(text, escape)
        .into_iter()
        .map(|w| match w.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (w, None),
        })
        .collect()
}

impl<'t, 'd> Analyzer<'t, 'd> {
    fn new(
        text: &'t str,
        df: &'d pd::Dockerfile<'t>,
        build_args: &'d BTreeMap<String, String>,
    ) -> Self {
        let escape = df
            .parser_directives
            .escape
            .as_ref()
            .map_or('\\', |e| e.value.value);
        Self {
            text,
            df,
            lines: Lines::new(text),
            escape,
            build_args,
            globals: BTreeMap::new(),
            global_decls: Vec::new(),
            bodies: BTreeMap::new(),
        }
    }

    fn line(&self, offset: usize) -> usize {
        self.lines.line_of(offset)
    }

    fn extent(&self, inst: &pd::Instruction<'_>) -> (Instruction, String) {
        let (mut range, mut heredocs) = text::instruction_extent(self.text, inst);
        if let Some((extra, end)) = self.bodies.get(&range.start) {
            heredocs.extend(extra.iter().cloned());
            range.end = range.end.max(*end);
        }
        let line = self.line(range.start);
        let end_line = self.line(range.end.saturating_sub(1).max(range.start));
        let canonical = text::canonical(self.text, range.clone(), &heredocs, &self.lines);
        (
            Instruction {
                kind: kind_of(inst),
                text: self.text.get(range).unwrap_or_default().to_string(),
                line,
                end_line: end_line.max(line),
            },
            canonical,
        )
    }

    /// Expands a word in the global scope (global ARGs and automatic args).
    fn expand_global(&self, word: &str) -> Result<lex::Expanded, lex::LexError> {
        lex::expand(word, self.escape, &|name| {
            if let Some(g) = self.globals.get(name) {
                return g.value.clone();
            }
            if AUTOMATIC_ARGS.contains(&name) {
                return self.build_args.get(name).cloned();
            }
            None
        })
    }

    fn expand_scoped(&self, word: &str, scope: &Scope) -> Result<lex::Expanded, lex::LexError> {
        lex::expand(word, self.escape, &|name| scope.get(name))
    }

    fn run(mut self, target_stage: Option<&str>) -> Result<Analysis, DockerfileError> {
        let directives = Directives {
            syntax: self
                .df
                .parser_directives
                .syntax
                .as_ref()
                .map(|d| d.value.value.to_string()),
            escape: self.escape,
            check: self
                .df
                .parser_directives
                .check
                .as_ref()
                .map(|d| d.value.value.to_string()),
        };

        self.globals_pass()?;

        let mut works: Vec<StageWork> = Vec::new();
        let insts = &self.df.instructions;
        let starts: Vec<usize> = insts
            .iter()
            .enumerate()
            .filter(|(_, i)| matches!(i, pd::Instruction::From(_)))
            .map(|(n, _)| n)
            .collect();
        for (index, &start) in starts.iter().enumerate() {
            let end = starts.get(index + 1).copied().unwrap_or(insts.len());
            let work = self.stage_pass(index, &insts[start], &insts[start + 1..end], &works)?;
            works.push(work);
        }

        // Forward references by `--from` are resolved against all names, so check them
        // once every stage is known.
        let names: Vec<Option<String>> = works.iter().map(|w| w.stage.name.clone()).collect();
        for w in &mut works {
            self.resolve_from_refs(w, &names)?;
        }

        let target = match target_stage {
            None => works.len().saturating_sub(1),
            Some(t) => {
                let lower = t.to_lowercase();
                match names
                    .iter()
                    .position(|n| n.as_deref() == Some(lower.as_str()))
                {
                    Some(i) => i,
                    None => {
                        let named: Vec<String> = names.iter().flatten().cloned().collect();
                        let suggestion = named
                            .iter()
                            .map(|n| (distance(&lower, n), n))
                            .filter(|(d, n)| *d <= (n.chars().count() / 3).max(2))
                            .min()
                            .map(|(_, n)| n.clone());
                        return Err(DockerfileError::UnknownTarget {
                            target: t.to_string(),
                            suggestion,
                            stages: named,
                        });
                    }
                }
            }
        };

        // Reachability from the target.
        let mut needed_set = BTreeSet::new();
        let mut todo = vec![target];
        while let Some(i) = todo.pop() {
            if !needed_set.insert(i) {
                continue;
            }
            for d in &works[i].stage.deps {
                if let DepTarget::Stage(s) = d.target {
                    todo.push(s);
                }
            }
        }
        let needed: Vec<usize> = needed_set.iter().copied().collect();
        for &i in &needed {
            if let Some(e) = &works[i].deferred {
                return Err(e.clone());
            }
        }

        // Consumed args: stage declarations, then the globals used in FROM lines or
        // imported by a value-less redeclaration (with the globals their values came from).
        let mut consumed: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut automatic = BTreeSet::new();
        let mut globals_used = BTreeSet::new();
        for &i in &needed {
            let w = &works[i];
            for a in &w.stage.args {
                let v = self
                    .build_args
                    .get(&a.name)
                    .cloned()
                    .or_else(|| a.value.clone());
                let e = consumed.entry(a.name.clone()).or_insert(None);
                if e.is_none() {
                    *e = v;
                }
                if AUTOMATIC_ARGS.contains(&a.name.as_str()) {
                    automatic.insert(a.name.clone());
                }
            }
            globals_used.extend(w.consumed_globals.iter().cloned());
        }
        let mut closure = BTreeSet::new();
        let mut todo: Vec<String> = globals_used.into_iter().collect();
        while let Some(g) = todo.pop() {
            if !closure.insert(g.clone()) {
                continue;
            }
            if let Some(gl) = self.globals.get(&g) {
                todo.extend(gl.deps.iter().cloned());
            }
        }
        for g in &closure {
            if AUTOMATIC_ARGS.contains(&g.as_str()) && !self.globals.contains_key(g) {
                automatic.insert(g.clone());
                consumed
                    .entry(g.clone())
                    .or_insert_with(|| self.build_args.get(g).cloned());
                continue;
            }
            if let Some(gl) = self.globals.get(g) {
                let e = consumed.entry(g.clone()).or_insert(None);
                if e.is_none() {
                    *e = gl.value.clone();
                }
                if AUTOMATIC_ARGS.contains(&g.as_str()) {
                    automatic.insert(g.clone());
                }
            }
        }

        let frontend_args = self
            .build_args
            .iter()
            .filter(|(k, _)| k.starts_with("BUILDKIT_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();

        let mut context_sources = Vec::new();
        let mut remote_sources = Vec::new();
        let mut mounts = Vec::new();
        let mut images: Vec<String> = Vec::new();
        for &i in &needed {
            let s = &works[i].stage;
            context_sources.extend(s.context_sources.iter().cloned());
            remote_sources.extend(s.remote_sources.iter().cloned());
            mounts.extend(
                s.mounts
                    .iter()
                    .filter(|m| m.kind != MountKind::Bind)
                    .cloned(),
            );
            for d in &s.deps {
                if let DepTarget::Image(img) = &d.target
                    && !images.contains(img)
                {
                    images.push(img.clone());
                }
            }
        }

        // The canonical text.
        let mut out = String::new();
        out.push_str(NEEDED_TEXT_VERSION);
        out.push('\n');
        if let Some(s) = &directives.syntax {
            out.push_str(&format!("# syntax={s}\n"));
        }
        if directives.escape != '\\' {
            out.push_str(&format!("# escape={}\n", directives.escape));
        }
        if let Some(c) = &directives.check {
            out.push_str(&format!("# check={c}\n"));
        }
        for (decl, canon) in &self.global_decls {
            if closure.contains(&decl.name) {
                out.push_str(canon);
                out.push('\n');
            }
        }
        for &i in &needed {
            for c in &works[i].canonical {
                out.push_str(c);
                out.push('\n');
            }
        }

        Ok(Analysis {
            directives,
            global_args: self.global_decls.iter().map(|(d, _)| d.clone()).collect(),
            stages: works.into_iter().map(|w| w.stage).collect(),
            target,
            needed,
            consumed_args: consumed,
            automatic_args: automatic,
            frontend_args,
            context_sources,
            remote_sources,
            mounts,
            images,
            needed_text: out,
        })
    }

    fn globals_pass(&mut self) -> Result<(), DockerfileError> {
        let df = self.df;
        for inst in df
            .instructions
            .iter()
            .take_while(|i| !matches!(i, pd::Instruction::From(_)))
        {
            let pd::Instruction::Arg(arg) = inst else {
                continue;
            };
            let line = self.line(arg.arg.span.start);
            let (_, canon) = self.extent(inst);
            for (name, default) in arg_words(&arg.arguments.value, self.escape) {
                let (value, deps) = if let Some(v) = self.build_args.get(&name) {
                    (Some(v.clone()), BTreeSet::new())
                } else if let Some(d) = &default {
                    let e = self
                        .expand_global(d)
                        .map_err(|e| DockerfileError::invalid(line, format!("ARG {name}: {e}")))?;
                    (Some(e.value), e.used)
                } else {
                    (None, BTreeSet::new())
                };
                self.global_decls.push((
                    ArgDecl {
                        name: name.clone(),
                        default,
                        value: value.clone(),
                        line,
                    },
                    canon.clone(),
                ));
                self.globals.insert(name, Global { value, deps });
            }
        }
        Ok(())
    }

    fn stage_pass(
        &self,
        index: usize,
        from_inst: &pd::Instruction<'_>,
        body: &[pd::Instruction<'_>],
        earlier: &[StageWork],
    ) -> Result<StageWork, DockerfileError> {
        let pd::Instruction::From(from) = from_inst else {
            return Err(DockerfileError::invalid(
                1,
                "internal: a stage must start with FROM",
            ));
        };
        let from_line = self.line(from.from.span.start);
        let mut deferred: Option<DockerfileError> = None;
        let mut defer = |e: DockerfileError| {
            if deferred.is_none() {
                deferred = Some(e);
            }
        };
        let mut consumed_globals = BTreeSet::new();

        let name = from.as_.as_ref().map(|(_, n)| n.value.to_lowercase());
        let from_raw = from.image.value.to_string();
        let image = match self.expand_global(&from_raw) {
            Ok(e) => {
                consumed_globals.extend(e.used);
                e.value
            }
            Err(e) => {
                defer(DockerfileError::invalid(from_line, format!("FROM: {e}")));
                from_raw.clone()
            }
        };
        let mut platform = None;
        for f in &from.options {
            match &*f.name.value {
                "platform" => {
                    let v = f
                        .value
                        .as_ref()
                        .map(|v| v.value.to_string())
                        .unwrap_or_default();
                    match self.expand_global(&v) {
                        Ok(e) => {
                            consumed_globals.extend(e.used);
                            platform = Some(e.value);
                        }
                        Err(e) => defer(DockerfileError::invalid(
                            from_line,
                            format!("FROM --platform: {e}"),
                        )),
                    }
                }
                other => {
                    return Err(DockerfileError::invalid(
                        from_line,
                        format!("unknown flag --{other} for FROM"),
                    ));
                }
            }
        }
        if image.trim().is_empty() {
            defer(DockerfileError::invalid(
                from_line,
                format!("base name ({from_raw}) should not be blank"),
            ));
        }
        // FROM sees only stages defined before it: `FROM x AS x` names an image.
        let lower = image.to_lowercase();
        let from_src = if image == "scratch" {
            FromSource::Scratch
        } else if let Some(w) = earlier
            .iter()
            .find(|w| w.stage.name.as_deref() == Some(lower.as_str()))
        {
            FromSource::Stage(w.stage.index)
        } else {
            FromSource::Image(image.clone())
        };
        let mut deps = Vec::new();
        match &from_src {
            FromSource::Stage(i) => deps.push(StageDep {
                line: from_line,
                via: DepVia::From,
                target: DepTarget::Stage(*i),
            }),
            FromSource::Image(img) => deps.push(StageDep {
                line: from_line,
                via: DepVia::From,
                target: DepTarget::Image(img.clone()),
            }),
            FromSource::Scratch => {}
        }

        let mut scope = Scope::default();
        if let FromSource::Stage(i) = from_src {
            scope.env = earlier[i].end_env.clone();
        }

        let (from_ins, from_canon) = self.extent(from_inst);
        let mut instructions = vec![from_ins];
        let mut canonical = vec![from_canon];
        let mut args = Vec::new();
        let mut context_sources = Vec::new();
        let mut remote_sources = Vec::new();
        let mut mounts = Vec::new();

        for inst in body {
            let (ins, canon) = self.extent(inst);
            let line = ins.line;
            instructions.push(ins);
            canonical.push(canon);
            match inst {
                pd::Instruction::Arg(a) => {
                    for (name, default) in arg_words(&a.arguments.value, self.escape) {
                        let value = if let Some(v) = self.build_args.get(&name) {
                            Some(v.clone())
                        } else if let Some(d) = &default {
                            match self.expand_scoped(d, &scope) {
                                Ok(e) => Some(e.value),
                                Err(e) => {
                                    defer(DockerfileError::invalid(
                                        line,
                                        format!("ARG {name}: {e}"),
                                    ));
                                    None
                                }
                            }
                        } else if let Some(g) = self.globals.get(&name) {
                            // A value-less redeclaration imports the global value.
                            consumed_globals.insert(name.clone());
                            g.value.clone()
                        } else {
                            None
                        };
                        scope.args.insert(name.clone(), value.clone());
                        args.push(ArgDecl {
                            name,
                            default,
                            value,
                            line,
                        });
                    }
                }
                pd::Instruction::Env(e) => {
                    let words = lex::split_words(&e.arguments.value, self.escape);
                    let mut pairs = Vec::new();
                    if words.first().is_some_and(|w| !w.contains('=')) {
                        // Legacy `ENV name value…`.
                        let raw = e.arguments.value.trim_start();
                        let (n, v) = raw
                            .split_once(char::is_whitespace)
                            .map_or((raw, ""), |(n, v)| (n, v.trim()));
                        pairs.push((n.to_string(), v.to_string()));
                    } else {
                        for w in words {
                            match w.split_once('=') {
                                Some((n, v)) => pairs.push((n.to_string(), v.to_string())),
                                None => {
                                    return Err(DockerfileError::invalid(
                                        line,
                                        format!("ENV names can not be blank or lack a value: {w}"),
                                    ));
                                }
                            }
                        }
                    }
                    let before = scope.clone();
                    for (n, v) in pairs {
                        match self.expand_scoped(&v, &before) {
                            Ok(x) => {
                                scope.env.insert(n, x.value);
                            }
                            Err(err) => {
                                defer(DockerfileError::invalid(line, format!("ENV: {err}")))
                            }
                        }
                    }
                }
                pd::Instruction::Copy(c) => {
                    self.copy_like(
                        SourceVia::Copy,
                        &c.options,
                        &c.src,
                        &c.dest,
                        CopyCtx {
                            index,
                            line,
                            scope: &scope,
                        },
                        &mut deps,
                        &mut context_sources,
                        &mut remote_sources,
                        &mut defer,
                    )?;
                }
                pd::Instruction::Add(c) => {
                    self.copy_like(
                        SourceVia::Add,
                        &c.options,
                        &c.src,
                        &c.dest,
                        CopyCtx {
                            index,
                            line,
                            scope: &scope,
                        },
                        &mut deps,
                        &mut context_sources,
                        &mut remote_sources,
                        &mut defer,
                    )?;
                }
                pd::Instruction::Run(r) => {
                    for f in &r.options {
                        let v = f.value.as_ref().map(|v| v.value.to_string());
                        match &*f.name.value {
                            "mount" => {
                                let Some(v) = v else {
                                    return Err(DockerfileError::invalid(
                                        line,
                                        "--mount needs a value",
                                    ));
                                };
                                let fields = mount::split_csv(&v).map_err(|e| {
                                    DockerfileError::invalid(line, format!("--mount: {e}"))
                                })?;
                                let mut expanded = Vec::new();
                                for fld in fields {
                                    match self.expand_scoped(&fld, &scope) {
                                        Ok(e) => expanded.push(e.value),
                                        Err(e) => {
                                            defer(DockerfileError::invalid(
                                                line,
                                                format!("--mount: {e}"),
                                            ));
                                            expanded.push(fld);
                                        }
                                    }
                                }
                                let m =
                                    mount::parse_mount(&expanded, index, line).map_err(|e| {
                                        DockerfileError::invalid(line, format!("--mount={v}: {e}"))
                                    })?;
                                if m.kind == MountKind::Bind && m.from.is_none() {
                                    let src = m.source.clone().unwrap_or_else(|| ".".into());
                                    context_sources.push(ContextSource {
                                        stage: index,
                                        line,
                                        via: SourceVia::BindMount,
                                        kind: path_kind(&src),
                                        raw: src.clone(),
                                        path: src,
                                        excludes: Vec::new(),
                                    });
                                }
                                if let Some(f) = &m.from
                                    && matches!(m.kind, MountKind::Bind | MountKind::Cache)
                                {
                                    deps.push(StageDep {
                                        line,
                                        via: DepVia::MountFrom,
                                        target: DepTarget::Image(f.clone()),
                                    });
                                }
                                mounts.push(m);
                            }
                            "network" | "security" | "device" => {}
                            other => {
                                return Err(DockerfileError::invalid(
                                    line,
                                    format!("unknown flag --{other} for RUN"),
                                ));
                            }
                        }
                    }
                }
                // The rest reads nothing outside the stage: its text is in the key.
                _ => {}
            }
        }

        Ok(StageWork {
            stage: Stage {
                index,
                name,
                from_raw,
                from: from_src,
                platform,
                instructions,
                args,
                deps,
                context_sources,
                remote_sources,
                mounts,
            },
            consumed_globals,
            canonical,
            deferred,
            end_env: scope.env,
        })
    }

    /// Turns `--from` values (recorded as images) into stage references where they name a
    /// stage or an index; a later stage or the stage itself is an error.
    fn resolve_from_refs(
        &self,
        w: &mut StageWork,
        names: &[Option<String>],
    ) -> Result<(), DockerfileError> {
        let me = w.stage.index;
        for d in &mut w.stage.deps {
            if d.via == DepVia::From {
                continue;
            }
            let DepTarget::Image(v) = &d.target else {
                continue;
            };
            let lower = v.to_lowercase();
            let hit = names
                .iter()
                .position(|n| n.as_deref() == Some(lower.as_str()))
                .or_else(|| {
                    v.parse::<usize>().ok().or_else(|| {
                        // A negative or huge index is an error in BuildKit too.
                        v.parse::<i64>().ok().map(|_| usize::MAX)
                    })
                });
            let Some(i) = hit else { continue };
            if i >= names.len() {
                return Err(DockerfileError::invalid(
                    d.line,
                    format!(
                        "invalid stage index {v}: the Dockerfile has {} stages",
                        names.len()
                    ),
                ));
            }
            if i == me {
                return Err(DockerfileError::invalid(
                    d.line,
                    format!("circular dependency: stage {v} refers to itself"),
                ));
            }
            if i > me {
                return Err(DockerfileError::invalid(
                    d.line,
                    format!(
                        "--from={v} refers to stage {i}, defined after this one (stage {me}); \
                         a stage can only read earlier stages"
                    ),
                ));
            }
            d.target = DepTarget::Stage(i);
        }
        // Mounts keep the name; the dependency says what it resolved to.
        Ok(())
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site per instruction kind"
    )]
    fn copy_like(
        &self,
        via: SourceVia,
        options: &[pd::Flag<'_>],
        src: &[pd::Source<'_>],
        dest: &pd::UnescapedString<'_>,
        cx: CopyCtx<'_>,
        deps: &mut Vec<StageDep>,
        context_sources: &mut Vec<ContextSource>,
        remote_sources: &mut Vec<RemoteSource>,
        defer: &mut dyn FnMut(DockerfileError),
    ) -> Result<(), DockerfileError> {
        let CopyCtx { index, line, scope } = cx;
        let kw = if via == SourceVia::Copy {
            "COPY"
        } else {
            "ADD"
        };
        let mut from = None;
        let mut excludes = Vec::new();
        let mut checksum = None;
        for f in options {
            let v = f.value.as_ref().map(|v| v.value.to_string());
            let name = &*f.name.value;
            let needs_value = |v: Option<String>| {
                v.ok_or_else(|| DockerfileError::invalid(line, format!("--{name} needs a value")))
            };
            match name {
                "from" if via == SourceVia::Copy => {
                    let v = needs_value(v)?;
                    match self.expand_scoped(&v, scope) {
                        Ok(e) => from = Some(e.value),
                        Err(e) => {
                            defer(DockerfileError::invalid(line, format!("--from: {e}")));
                            from = Some(v);
                        }
                    }
                }
                "exclude" => {
                    let v = needs_value(v)?;
                    match self.expand_scoped(&v, scope) {
                        Ok(e) => excludes.push(e.value),
                        Err(e) => defer(DockerfileError::invalid(line, format!("--exclude: {e}"))),
                    }
                }
                "checksum" if via == SourceVia::Add => checksum = Some(needs_value(v)?),
                "chown" | "chmod" => {
                    needs_value(v)?;
                }
                "link" | "parents" => {
                    if let Some(v) = v
                        && !matches!(
                            v.to_ascii_lowercase().as_str(),
                            "true" | "false" | "1" | "0"
                        )
                    {
                        return Err(DockerfileError::invalid(
                            line,
                            format!("invalid boolean value for --{name}: {v:?}"),
                        ));
                    }
                }
                "keep-git-dir" | "unpack" if via == SourceVia::Add => {}
                other => {
                    return Err(DockerfileError::invalid(
                        line,
                        format!("unknown flag --{other} for {kw}"),
                    ));
                }
            }
        }

        // Paths as written. parse-dockerfile splits the JSON form on whitespace, so the
        // JSON array is re-read here from the source text.
        let mut raw: Vec<String> = Vec::new();
        let paths: Vec<&pd::UnescapedString<'_>> = src
            .iter()
            .filter_map(|s| match s {
                pd::Source::Path(p) => Some(p),
                _ => None,
            })
            .collect();
        let json = paths
            .first()
            .filter(|p| p.value.starts_with('['))
            .and_then(|p| self.text.get(p.span.start..dest.span.end))
            .and_then(|t| serde_json::from_str::<Vec<String>>(t).ok());
        match json {
            Some(mut v) if v.len() >= 2 => {
                v.pop();
                raw = v;
            }
            _ => raw.extend(paths.iter().map(|p| p.value.to_string())),
        }

        if let Some(f) = from {
            deps.push(StageDep {
                line,
                via: DepVia::CopyFrom,
                target: DepTarget::Image(f),
            });
            return Ok(());
        }
        for r in raw {
            let path = match self.expand_scoped(&r, scope) {
                Ok(e) => e.value,
                Err(e) => {
                    defer(DockerfileError::invalid(line, format!("{kw} {r}: {e}")));
                    r.clone()
                }
            };
            if via == SourceVia::Add
                && let Some(kind) = remote_kind(&path)
            {
                remote_sources.push(RemoteSource {
                    stage: index,
                    line,
                    kind,
                    url: path,
                    raw: r.clone(),
                    checksum: checksum.clone(),
                });
                continue;
            }
            context_sources.push(ContextSource {
                stage: index,
                line,
                via,
                kind: path_kind(&path),
                path,
                raw: r,
                excludes: excludes.clone(),
            });
        }
        Ok(())
    }
}

struct CopyCtx<'s> {
    index: usize,
    line: usize,
    scope: &'s Scope,
}
