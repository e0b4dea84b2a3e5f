//! GitHub Actions workflows: the `docker build`, `docker buildx build|bake`
//! command lines of `run:` steps and `docker/build-push-action` steps become
//! [`Build`]s; bake calls (`docker buildx bake`, `docker/bake-action`) are
//! also recorded as [`BakeCall`]s, which decide how bake files are judged
//! (the `view` module, which reads them).
//!
//! Values are followed the way the runner would produce them: shell
//! assignments earlier in the step (an assignment inside `if`/`case`/a loop
//! or after `&&`/`||` adds a possible value instead of replacing it), `for`
//! loops (each item), step, job and workflow `env`, `$GITHUB_ENV`, step
//! outputs written to `$GITHUB_OUTPUT` and job outputs. Unknown values stay
//! symbolic (`${IMAGE_TAG}`, `${GITHUB_SHA}`, `${{ inputs.tag }}`). Findings
//! point at the flag inside the `run:` block (block scalars included).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::build::{
    ArgKind, ArgUse, Build, CacheEntry, DockerfileSource, check_arg, is_commit_time_value,
};
use crate::names;
use crate::rules::*;
use crate::shell::{self, Command, Lookup, Sep, Word};
use crate::yaml::{self, Node, Pos, Scalar};
use crate::{Collector, Loc, display_path};

/// Flags of `docker build` / `buildx build` / `buildx bake` that take a value.
const VALUE_FLAGS: &[&str] = &[
    "add-host",
    "allow",
    "annotation",
    "attest",
    "build-arg",
    "build-context",
    "builder",
    "cache-from",
    "cache-to",
    "call",
    "cgroup-parent",
    "cpu-period",
    "cpu-quota",
    "cpu-shares",
    "cpuset-cpus",
    "cpuset-mems",
    "file",
    "iidfile",
    "isolation",
    "label",
    "memory",
    "memory-swap",
    "metadata-file",
    "network",
    "no-cache-filter",
    "output",
    "platform",
    "policy",
    "progress",
    "secret",
    "security-opt",
    "set",
    "shm-size",
    "ssh",
    "tag",
    "target",
    "ulimit",
    "var",
];

/// Short flags that take a value, and their long names.
const SHORT_FLAGS: &[(&str, &str)] = &[
    ("t", "tag"),
    ("f", "file"),
    ("o", "output"),
    ("m", "memory"),
];

/// A `KEY: value` map (`env:`), in order, with value positions.
type EnvMap = Vec<(String, String, Pos)>;

fn env_map(n: Option<&Node>) -> EnvMap {
    n.map(|n| {
        n.entries()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string(), v.pos())))
            .collect()
    })
    .unwrap_or_default()
}

fn env_get<'a>(m: &'a EnvMap, name: &str) -> Option<&'a str> {
    m.iter()
        .find(|(k, ..)| k == name)
        .map(|(_, v, _)| v.as_str())
}

/// One shell variable of a step.
#[derive(Debug, Clone)]
struct ShVar {
    /// Its possible values (each a word with positions).
    alts: Vec<Word>,
    /// A `for` loop variable: the loop runs with each of `alts`.
    items: bool,
}

#[derive(Default)]
struct Shell {
    vars: HashMap<String, ShVar>,
    depth: usize,
}

struct Job<'a> {
    id: String,
    wf_env: &'a EnvMap,
    env: EnvMap,
    dyn_env: HashMap<String, Vec<String>>,
    outputs: HashMap<(String, String), Vec<String>>,
    buildx_default: bool,
    matrix: bool,
    workdir: Option<String>,
}

/// The values a step's text can see.
struct Scope<'a> {
    job: &'a Job<'a>,
    step_env: &'a EnvMap,
    shell: Option<&'a Shell>,
    job_outputs: &'a HashMap<(String, String), Vec<String>>,
}

impl Scope<'_> {
    fn env(&self, name: &str) -> Option<Vec<String>> {
        let vals = if let Some(v) = env_get(self.step_env, name) {
            vec![v.to_string()]
        } else if let Some(v) = self.job.dyn_env.get(name) {
            v.clone()
        } else {
            vec![
                env_get(&self.job.env, name)
                    .or_else(|| env_get(self.job.wf_env, name))?
                    .to_string(),
            ]
        };
        keep_per_commit_name(name, vals)
    }
}

/// A per-commit variable (`IMAGE_TAG`, `GIT_SHA`…) whose value comes from
/// elsewhere (`${{ inputs.tag }}`, `$(git rev-parse …)`) stays symbolic: its
/// name says more about it than the expression it is fed from.
fn keep_per_commit_name(name: &str, vals: Vec<String>) -> Option<Vec<String>> {
    if names::is_per_commit_var(name) && vals.iter().all(|v| v.contains('$')) {
        None
    } else {
        Some(vals)
    }
}

impl Lookup for Scope<'_> {
    fn var(&self, name: &str) -> Option<Vec<String>> {
        if let Some(v) = self.shell.and_then(|s| s.vars.get(name)) {
            return keep_per_commit_name(name, v.alts.iter().map(|w| w.text.clone()).collect());
        }
        self.env(name)
    }
    fn expr(&self, expr: &str) -> Option<Vec<String>> {
        let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        let parts: Vec<&str> = e.split('.').collect();
        match parts.as_slice() {
            ["env", name] => self.env(name),
            ["steps", id, "outputs", name] => self
                .job
                .outputs
                .get(&((*id).to_string(), (*name).to_string()))
                .cloned(),
            ["needs", id, "outputs", name] => self
                .job_outputs
                .get(&((*id).to_string(), (*name).to_string()))
                .cloned(),
            _ => None,
        }
    }
}

struct Wf<'c> {
    file: String,
    repo: PathBuf,
    lines: Vec<String>,
    job_outputs: HashMap<(String, String), Vec<String>>,
    c: &'c mut Collector,
}

/// The repository a workflow belongs to: the parent of `.github`.
fn repo_root(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    if dir.file_name().is_some_and(|n| n == "workflows")
        && let Some(gh) = dir
            .parent()
            .filter(|g| g.file_name().is_some_and(|n| n == ".github"))
    {
        return gh.parent().unwrap_or(Path::new(".")).to_path_buf();
    }
    dir.to_path_buf()
}

/// Lints one workflow file.
pub fn lint(path: &Path, c: &mut Collector) {
    if let Some(text) = crate::read(path, c) {
        lint_text(&display_path(path), &text, &repo_root(path), c);
    }
}

/// Lints workflow text, reported under `file`; `repo` is the directory
/// command lines run in (Dockerfiles are looked up there).
pub fn lint_text(file: &str, text: &str, repo: &Path, c: &mut Collector) {
    let file = file.to_string();
    let root = match yaml::parse(text) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            c.add(
                PARSE_ERROR,
                &Loc::new(&file, e.pos.line, e.pos.col),
                e.message,
            );
            return;
        }
    };
    let mut w = Wf {
        file,
        repo: repo.to_path_buf(),
        lines: text.lines().map(str::to_string).collect(),
        job_outputs: HashMap::new(),
        c,
    };
    let wf_env = env_map(root.get("env"));
    w.check_env_sde(&wf_env);
    if let Some(jobs) = root.get("jobs") {
        for (k, job) in jobs.entries() {
            if let Some(id) = k.as_str() {
                w.job(id, job, &wf_env);
            }
        }
    }
}

fn split_word(w: &Word, seps: &[char]) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = Word::default();
    for (ch, p) in w.text.chars().zip(w.pos.iter().copied()) {
        if seps.contains(&ch) {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.text.push(ch);
            cur.pos.push(p);
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|w| {
            let lead = w.text.len() - w.text.trim_start().len();
            let t = w.tail(lead);
            Word {
                text: t.text.trim_end().to_string(),
                pos: t.pos,
                bare_var: None,
            }
        })
        .filter(|w| !w.text.is_empty())
        .collect()
}

/// A flag of a docker command line.
struct Flag {
    name: String,
    value: Option<Word>,
    pos: Pos,
}

fn parse_flags(args: &[Word]) -> (Vec<Flag>, Vec<Word>) {
    let mut flags = Vec::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        let t = w.text.as_str();
        if t == "--" {
            positional.extend(args[i + 1..].iter().cloned());
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            if let Some(eq) = long.find('=') {
                flags.push(Flag {
                    name: long[..eq].to_string(),
                    value: Some(w.tail(2 + eq + 1)),
                    pos: w.start(),
                });
            } else if VALUE_FLAGS.contains(&long) {
                flags.push(Flag {
                    name: long.to_string(),
                    value: args.get(i + 1).cloned(),
                    pos: w.start(),
                });
                i += 1;
            } else {
                flags.push(Flag {
                    name: long.to_string(),
                    value: None,
                    pos: w.start(),
                });
            }
        } else if let Some(short) = t.strip_prefix('-').filter(|s| !s.is_empty()) {
            let key = &short[..short.chars().next().map_or(0, char::len_utf8)];
            match SHORT_FLAGS.iter().find(|(s, _)| *s == key) {
                Some((_, long)) if short.len() > key.len() => {
                    let at = 1 + key.len() + usize::from(short[key.len()..].starts_with('='));
                    flags.push(Flag {
                        name: (*long).to_string(),
                        value: Some(w.tail(at)),
                        pos: w.start(),
                    });
                }
                Some((_, long)) => {
                    flags.push(Flag {
                        name: (*long).to_string(),
                        value: args.get(i + 1).cloned(),
                        pos: w.start(),
                    });
                    i += 1;
                }
                None => flags.push(Flag {
                    name: short.to_string(),
                    value: None,
                    pos: w.start(),
                }),
            }
        } else {
            positional.push(w.clone());
        }
        i += 1;
    }
    (flags, positional)
}

fn richest(alts: &[Word]) -> Option<&Word> {
    alts.iter().max_by_key(|w| w.text.len())
}

/// Replaces `${name}` in `w` with `with` (a self-reference in an assignment).
fn splice(w: &Word, name: &str, with: Option<&Word>) -> Word {
    let token = format!("${{{name}}}");
    let mut out = Word::default();
    let mut i = 0;
    let chars: Vec<char> = w.text.chars().collect();
    let tok: Vec<char> = token.chars().collect();
    while i < chars.len() {
        if chars[i..].starts_with(&tok) {
            if let Some(r) = with {
                out.text.push_str(&r.text);
                out.pos.extend(r.pos.iter().copied());
            }
            i += tok.len();
        } else {
            out.text.push(chars[i]);
            out.pos.push(w.pos.get(i).copied().unwrap_or_default());
            i += 1;
        }
    }
    out
}

fn assignment(w: &Word) -> Option<(String, usize)> {
    let eq = w.text.find('=')?;
    let name = &w.text[..eq];
    let first = name.chars().next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then(|| (name.to_string(), eq))
}

impl Wf<'_> {
    fn loc(&self, p: Pos) -> Loc {
        Loc::new(&self.file, p.line, p.col)
    }

    fn scalar_word(&self, s: &Scalar) -> Word {
        let lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        let (chars, pos) = yaml::scalar_text(s, &lines);
        Word {
            text: chars.into_iter().collect(),
            pos,
            bare_var: None,
        }
    }

    fn check_env_sde(&mut self, env: &EnvMap) {
        for (k, v, p) in env {
            if k == "SOURCE_DATE_EPOCH" && is_commit_time_value(v) {
                let loc = self.loc(*p);
                self.c.add(
                    SDE_FROM_COMMIT,
                    &loc,
                    "SOURCE_DATE_EPOCH is set from the commit time; every commit changes the cache key of WORKDIR and everything after it",
                );
            }
        }
    }

    fn job(&mut self, id: &str, job: &Node, wf_env: &EnvMap) {
        let env = env_map(job.get("env"));
        self.check_env_sde(&env);
        let mut j = Job {
            id: id.to_string(),
            wf_env,
            env,
            dyn_env: HashMap::new(),
            outputs: HashMap::new(),
            buildx_default: false,
            matrix: job.get("strategy").and_then(|s| s.get("matrix")).is_some(),
            workdir: job
                .get("defaults")
                .and_then(|d| d.get("run"))
                .and_then(|r| r.get("working-directory"))
                .and_then(Node::as_str)
                .map(str::to_string),
        };
        if let Some(steps) = job.get("steps") {
            for step in steps.items() {
                self.step(&mut j, step);
            }
        }
        let empty = EnvMap::new();
        for (k, v) in job.get("outputs").map(Node::entries).unwrap_or_default() {
            let (Some(k), Some(v)) = (k.as_str(), v.as_str()) else {
                continue;
            };
            let scope = Scope {
                job: &j,
                step_env: &empty,
                shell: None,
                job_outputs: &self.job_outputs,
            };
            let vals = shell::resolve(v, &scope);
            self.job_outputs
                .insert((id.to_string(), k.to_string()), vals);
        }
    }

    fn step(&mut self, j: &mut Job<'_>, step: &Node) {
        let step_env = env_map(step.get("env"));
        self.check_env_sde(&step_env);
        let name = step
            .get("name")
            .and_then(Node::as_str)
            .or_else(|| step.get("id").and_then(Node::as_str))
            .map(str::to_string);
        if let Some(uses) = step.get("uses").and_then(Node::as_str) {
            let with = step.get("with");
            if uses.starts_with("docker/setup-buildx-action") {
                if with
                    .and_then(|w| w.get("install"))
                    .and_then(Node::as_str)
                    .is_some_and(names::truthy)
                {
                    j.buildx_default = true;
                }
                for key in ["buildkitd-config-inline", "config-inline"] {
                    if let Some(s) = with.and_then(|w| w.get(key)).and_then(Node::as_scalar) {
                        self.buildkitd_config(s);
                    }
                }
            } else if uses.starts_with("docker/build-push-action") {
                let pos = step.get("uses").map_or_else(|| step.pos(), Node::pos);
                self.push_action(j, &step_env, with, pos, name.as_deref());
            } else if uses.starts_with("docker/bake-action") {
                let pos = step.get("uses").map_or_else(|| step.pos(), Node::pos);
                self.bake_action(j, &step_env, with, pos);
            }
        }
        if let Some(run) = step.get("run").and_then(Node::as_scalar) {
            let workdir = step
                .get("working-directory")
                .and_then(Node::as_str)
                .map(str::to_string)
                .or_else(|| j.workdir.clone());
            let id = step.get("id").and_then(Node::as_str).map(str::to_string);
            let ctx = StepCtx {
                id,
                name,
                workdir,
                env: step_env,
            };
            self.run(j, &ctx, run);
        }
    }

    /// `[registry."host"]` sections of a buildkitd config with `http = true`.
    fn buildkitd_config(&mut self, s: &Scalar) {
        let w = self.scalar_word(s);
        let mut host = String::new();
        for line in split_word(&w, &['\n']) {
            let t = line.text.trim();
            if let Some(h) = t.strip_prefix("[registry.") {
                host = h.trim_end_matches(']').trim_matches('"').to_string();
            } else if t.starts_with('[') {
                host.clear();
            } else if let Some((k, v)) = t.split_once('=')
                && k.trim() == "http"
                && names::truthy(v)
                && names::is_tls_only_registry(&host)
            {
                let loc = self.loc(line.start());
                self.c.add(
                    INSECURE_TLS,
                    &loc,
                    format!("buildkitd config sets http = true for {host}, which serves only TLS"),
                );
            }
        }
    }

    fn run(&mut self, j: &mut Job<'_>, ctx: &StepCtx, run: &Scalar) {
        let w = self.scalar_word(run);
        let cmds = shell::parse(&w.text.chars().collect::<Vec<_>>(), &w.pos);
        let mut sh = Shell::default();
        for cmd in cmds {
            self.command(j, ctx, &mut sh, cmd);
        }
    }

    fn command(&mut self, j: &mut Job<'_>, ctx: &StepCtx, sh: &mut Shell, cmd: Command) {
        let mut words = cmd.words;
        let after_and_or = matches!(cmd.after, Sep::And | Sep::Or);
        while let Some(first) = words.first().map(|w| w.text.clone()) {
            match first.as_str() {
                "then" | "else" | "do" | "{" | "}" | "!" | "elif" => {
                    words.remove(0);
                }
                "if" | "while" | "until" => {
                    sh.depth += 1;
                    words.remove(0);
                }
                "case" | "select" => {
                    sh.depth += 1;
                    words.clear();
                }
                "fi" | "done" | "esac" => {
                    sh.depth = sh.depth.saturating_sub(1);
                    words.remove(0);
                }
                "for" => {
                    if let Some(name) = words.get(1) {
                        let items: Vec<Word> = if words.get(2).is_some_and(|w| w.text == "in") {
                            words[3..].to_vec()
                        } else {
                            Vec::new()
                        };
                        sh.vars.insert(
                            name.text.clone(),
                            ShVar {
                                alts: items,
                                items: true,
                            },
                        );
                    }
                    sh.depth += 1;
                    words.clear();
                }
                _ => break,
            }
        }
        if words.is_empty() {
            return;
        }
        let cond = after_and_or || sh.depth > 0;
        let n_assign = words.iter().take_while(|w| assignment(w).is_some()).count();
        if n_assign == words.len() {
            for w in &words {
                self.assign(j, ctx, sh, w, cond);
            }
            return;
        }
        let mut rest = &words[n_assign..];
        while let Some(f) = rest.first() {
            match f.text.as_str() {
                "sudo" | "time" | "exec" | "command" | "nice" | "eval" => rest = &rest[1..],
                "env" => {
                    let n = rest[1..]
                        .iter()
                        .take_while(|w| assignment(w).is_some())
                        .count();
                    rest = &rest[1 + n..];
                }
                _ => break,
            }
        }
        let Some(first) = rest.first() else { return };
        match first.text.as_str() {
            "export" | "declare" | "local" | "readonly" | "typeset" => {
                for w in &rest[1..] {
                    if assignment(w).is_some() {
                        self.assign(j, ctx, sh, w, cond);
                    }
                }
            }
            "echo" | "printf" => self.echo(j, ctx, sh, rest, &cmd.redirects, cond),
            "docker" => {
                let expanded = expand(sh, rest, 0);
                self.docker(j, ctx, sh, &expanded);
            }
            _ => {}
        }
    }

    fn assign(&mut self, j: &Job<'_>, ctx: &StepCtx, sh: &mut Shell, w: &Word, cond: bool) {
        let Some((name, eq)) = assignment(w) else {
            return;
        };
        let mut value = w.tail(eq + 1);
        let current = sh.vars.get(&name).and_then(|v| richest(&v.alts)).cloned();
        if value.text.contains(&format!("${{{name}}}")) {
            value = splice(&value, &name, current.as_ref());
        }
        if name == "SOURCE_DATE_EPOCH" {
            let scope = Scope {
                job: j,
                step_env: &ctx.env,
                shell: Some(sh),
                job_outputs: &self.job_outputs,
            };
            if shell::resolve(&value.text, &scope)
                .iter()
                .any(|v| is_commit_time_value(v))
            {
                let loc = self.loc(w.start());
                self.c.add(
                    SDE_FROM_COMMIT,
                    &loc,
                    "SOURCE_DATE_EPOCH is set from the commit time; every commit changes the cache key of WORKDIR and everything after it",
                );
            }
        }
        let var = sh.vars.entry(name).or_insert(ShVar {
            alts: Vec::new(),
            items: false,
        });
        var.items = false;
        if cond {
            if !var.alts.iter().any(|a| a.text == value.text) && var.alts.len() < 8 {
                var.alts.push(value);
            }
        } else {
            var.alts = vec![value];
        }
    }

    /// `echo "name=value" >> $GITHUB_OUTPUT` / `$GITHUB_ENV`.
    fn echo(
        &mut self,
        j: &mut Job<'_>,
        ctx: &StepCtx,
        sh: &Shell,
        words: &[Word],
        redirects: &[(String, Word)],
        cond: bool,
    ) {
        let Some(target) = redirects
            .iter()
            .find(|(op, _)| op.starts_with('>'))
            .map(|(_, t)| t.text.clone())
        else {
            return;
        };
        let to_output = target.contains("GITHUB_OUTPUT");
        let to_env = target.contains("GITHUB_ENV");
        if !to_output && !to_env {
            return;
        }
        let payload: Vec<&str> = words[1..]
            .iter()
            .map(|w| w.text.as_str())
            .skip_while(|t| t.starts_with('-'))
            .collect();
        let line = payload.join(" ");
        let Some((name, value)) = line.split_once('=') else {
            return;
        };
        let name = name.trim().to_string();
        let vals = {
            let scope = Scope {
                job: j,
                step_env: &ctx.env,
                shell: Some(sh),
                job_outputs: &self.job_outputs,
            };
            shell::resolve(value, &scope)
        };
        let first_word = words.get(1).map_or_else(Pos::default, Word::start);
        if to_env && name == "SOURCE_DATE_EPOCH" && vals.iter().any(|v| is_commit_time_value(v)) {
            let loc = self.loc(first_word);
            self.c.add(
                SDE_FROM_COMMIT,
                &loc,
                "SOURCE_DATE_EPOCH is set from the commit time; every commit changes the cache key of WORKDIR and everything after it",
            );
        }
        let slot = if to_output {
            let Some(id) = &ctx.id else { return };
            j.outputs.entry((id.clone(), name)).or_default()
        } else {
            j.dyn_env.entry(name).or_default()
        };
        if !cond {
            slot.clear();
        }
        for v in vals {
            if !slot.contains(&v) && slot.len() < 8 {
                slot.push(v);
            }
        }
    }

    fn docker(&mut self, j: &Job<'_>, ctx: &StepCtx, sh: &Shell, ws: &[Word]) {
        let mut i = 1;
        while let Some(w) = ws.get(i) {
            match w.text.as_str() {
                "--context" | "-c" | "--host" | "-H" | "--config" | "-l" | "--log-level"
                | "--tlscacert" | "--tlscert" | "--tlskey" => i += 2,
                "-D" | "--debug" | "--tls" | "--tlsverify" => i += 1,
                t if t.starts_with("--") && t.contains('=') => i += 1,
                _ => break,
            }
        }
        let sub = ws.get(i).map(|w| w.text.as_str());
        let next = ws.get(i + 1).map(|w| w.text.as_str());
        let (buildx, bake, start, label) = match (sub, next) {
            (Some("build"), _) => (j.buildx_default, false, i + 1, "docker build"),
            (Some("image"), Some("build")) => {
                (j.buildx_default, false, i + 2, "docker image build")
            }
            (Some("bake"), _) => (true, true, i + 1, "docker bake"),
            (Some("buildx"), _) => {
                let mut k = i + 1;
                while let Some(w) = ws.get(k) {
                    match w.text.as_str() {
                        "--builder" => k += 2,
                        "-D" | "--debug" => k += 1,
                        t if t.starts_with("--builder=") => k += 1,
                        _ => break,
                    }
                }
                match ws.get(k).map(|w| w.text.as_str()) {
                    Some("build" | "b") => (true, false, k + 1, "docker buildx build"),
                    Some("bake") => (true, true, k + 1, "docker buildx bake"),
                    _ => return,
                }
            }
            _ => return,
        };
        let (flags, positional) = parse_flags(ws.get(start..).unwrap_or_default());
        let job_outputs = self.job_outputs.clone();
        let scope = Scope {
            job: j,
            step_env: &ctx.env,
            shell: Some(sh),
            job_outputs: &job_outputs,
        };
        let what = match &ctx.name {
            Some(n) => format!("`{label}` in step \"{n}\""),
            None => format!("`{label}` in job \"{}\"", j.id),
        };
        if bake {
            let files = flags
                .iter()
                .filter(|f| f.name == "file")
                .filter_map(|f| f.value.as_ref())
                .flat_map(|v| shell::resolve(&v.text, &scope))
                .collect();
            self.record_bake(label, ws[0].start(), ctx.workdir.as_deref(), files);
            self.bake_call(&flags, &scope);
            return;
        }
        let mut b = Build::new(what, self.loc(ws[0].start()), j.id.clone());
        b.buildx = buildx;
        b.matrix = j.matrix;
        let mut file: Option<String> = None;
        for f in &flags {
            let Some(v) = &f.value else {
                if f.name == "push" {
                    b.pushes = true;
                }
                continue;
            };
            let loc = self.loc(f.pos);
            match f.name.as_str() {
                "push" => b.pushes |= names::truthy(&v.text),
                "tag" => b.tags.push(shell::resolve(&v.text, &scope)),
                "cache-from" | "cache-to" => {
                    for text in bind_loops(sh, &v.text, 0) {
                        let alts = shell::resolve(&text, &scope);
                        let entries = CacheEntry::parse(&alts, loc.clone());
                        if f.name == "cache-from" {
                            b.cache_from.extend(entries);
                        } else {
                            b.cache_to.extend(entries);
                        }
                    }
                }
                "output" => self.output(&mut b, &shell::resolve(&v.text, &scope), &loc),
                "build-arg" | "label" => {
                    let kind = if f.name == "label" {
                        ArgKind::Label
                    } else {
                        ArgKind::BuildArg
                    };
                    self.arg_of(&mut b, &v.text, kind, loc, &scope);
                }
                "platform" => {
                    let p = shell::resolve(&v.text, &scope);
                    b.platforms = p
                        .first()
                        .map_or(1, |s| s.split(',').filter(|x| !x.is_empty()).count())
                        .max(1);
                }
                "file" => file = shell::resolve(&v.text, &scope).into_iter().next(),
                "target" => b.target = shell::resolve(&v.text, &scope).into_iter().next(),
                _ => {}
            }
        }
        let context = positional.first().map(|w| {
            (
                shell::resolve(&w.text, &scope)
                    .into_iter()
                    .next()
                    .unwrap_or_default(),
                w.start(),
            )
        });
        b.dockerfile =
            self.dockerfile_of(ctx.workdir.as_deref(), context.as_ref(), file.as_deref());
        self.register(&b);
        self.c.builds.push(b);
    }

    /// A `NAME=value` build arg or label of `b` (a bare `NAME` takes its
    /// value from the environment): recorded, checked, inline cache noted.
    fn arg_of(&mut self, b: &mut Build, text: &str, kind: ArgKind, loc: Loc, scope: &Scope<'_>) {
        let (name, values) = match text.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), shell::resolve(v, scope)),
            None => (text.trim().to_string(), Vec::new()),
        };
        if kind == ArgKind::BuildArg
            && let Some(first) = values.first()
        {
            b.args.insert(name.clone(), first.clone());
        }
        let a = ArgUse {
            name: &name,
            values,
            loc: loc.clone(),
            kind,
        };
        if check_arg(&a, self.c) {
            b.inline_arg = Some(loc);
        }
    }

    fn register(&mut self, b: &Build) {
        if let Some(DockerfileSource::Path(p)) = &b.dockerfile
            && p.is_file()
        {
            self.c.dockerfiles.insert(p.clone());
        }
    }

    /// `--output`: pushes, and insecure registries.
    fn output(&mut self, b: &mut Build, alts: &[String], loc: &Loc) {
        let Some(first) = alts.first() else { return };
        let attrs: HashMap<&str, &str> = first
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let ty = attrs.get("type").copied().unwrap_or("");
        if ty == "registry"
            || (ty == "image" && attrs.get("push").is_some_and(|v| names::truthy(v)))
        {
            b.pushes = true;
        }
        if attrs
            .get("registry.insecure")
            .is_some_and(|v| names::truthy(v))
            && let Some(host) = attrs
                .get("name")
                .into_iter()
                .flat_map(|n| n.split(';'))
                .map(names::registry_host)
                .find(|h| names::is_tls_only_registry(h))
        {
            self.c.add(
                INSECURE_TLS,
                loc,
                format!("output marks {host} insecure (plain HTTP), but {host} serves only TLS"),
            );
        }
    }

    /// The Dockerfile a command line builds: `-f` relative to the step's
    /// directory, else `Dockerfile` in the context. A git context is checked
    /// for a moving ref.
    fn dockerfile_of(
        &mut self,
        workdir: Option<&str>,
        context: Option<&(String, Pos)>,
        file: Option<&str>,
    ) -> Option<DockerfileSource> {
        let cwd = self.repo.join(workdir.unwrap_or("."));
        let mut local_ctx = None;
        if let Some((ctx, pos)) = context {
            if let Some(why) = names::url_secret(ctx) {
                let loc = self.loc(*pos);
                self.c
                    .add(SECRET_IN_ARG, &loc, format!("build context {ctx} is {why}"));
            }
            if let Some(r) = names::git_url_ref(ctx) {
                if matches!(
                    names::ref_kind(&r),
                    names::RefKind::Branch | names::RefKind::Empty
                ) {
                    let loc = self.loc(*pos);
                    self.c.add(
                        MOVING_REF,
                        &loc,
                        format!(
                            "git context {ctx} {}",
                            if r.is_empty() {
                                "names no ref, so it builds the default branch".to_string()
                            } else {
                                format!("builds {r:?}, a branch")
                            }
                        ),
                    );
                }
            } else if ctx != "-" && !ctx.contains("://") && !ctx.contains('$') {
                local_ctx = Some(cwd.join(ctx));
            }
        }
        let path = match file {
            Some(f) if f.contains('$') || f == "-" => return None,
            Some(f) => cwd.join(f),
            None => local_ctx?.join("Dockerfile"),
        };
        Some(DockerfileSource::Path(path))
    }

    /// Records a bake call (which bake files CI builds with bake, see
    /// the `view` module).
    fn record_bake(&mut self, what: &str, pos: Pos, workdir: Option<&str>, files: Vec<String>) {
        let call = BakeCall {
            what: what.to_string(),
            loc: self.loc(pos),
            dir: self.repo.join(workdir.unwrap_or(".")),
            files,
        };
        self.c.bake_calls.push(call);
    }

    /// A `docker/bake-action` step: its `files` (newline- or
    /// comma-separated) relative to its `workdir` (default: the repository).
    fn bake_action(&mut self, j: &Job<'_>, step_env: &EnvMap, with: Option<&Node>, pos: Pos) {
        let job_outputs = self.job_outputs.clone();
        let scope = Scope {
            job: j,
            step_env,
            shell: None,
            job_outputs: &job_outputs,
        };
        let get = |k: &str| with.and_then(|w| w.get(k)).and_then(Node::as_scalar);
        let files: Vec<String> = get("files")
            .map(|s| split_word(&self.scalar_word(s), &['\n', ',']))
            .unwrap_or_default()
            .iter()
            .flat_map(|w| shell::resolve(&w.text, &scope))
            .collect();
        let workdir =
            get("workdir").and_then(|s| shell::resolve(&s.value, &scope).into_iter().next());
        self.record_bake("docker/bake-action", pos, workdir.as_deref(), files);
    }

    /// `docker buildx bake --set …`: the args it forces on targets.
    fn bake_call(&mut self, flags: &[Flag], scope: &Scope<'_>) {
        for f in flags.iter().filter(|f| f.name == "set") {
            let Some(v) = &f.value else { continue };
            let Some((key, value)) = v.text.split_once('=') else {
                continue;
            };
            let loc = self.loc(f.pos);
            let parts: Vec<&str> = key.splitn(3, '.').collect();
            match parts.as_slice() {
                [_, "args", name] => {
                    let a = ArgUse {
                        name,
                        values: shell::resolve(value, scope),
                        loc: loc.clone(),
                        kind: ArgKind::BuildArg,
                    };
                    if check_arg(&a, self.c) {
                        self.c.add(
                            INLINE_CACHE,
                            &loc,
                            "`docker buildx bake` sets BUILDKIT_INLINE_CACHE as a build arg; under buildx it exports no registry cache",
                        );
                    }
                }
                [_, "labels", name] => {
                    let a = ArgUse {
                        name,
                        values: shell::resolve(value, scope),
                        loc,
                        kind: ArgKind::Label,
                    };
                    check_arg(&a, self.c);
                }
                [_, "cache-from" | "cache-to"] => {
                    for e in CacheEntry::parse(&shell::resolve(value, scope), loc) {
                        if let Some(host) = e.insecure_tls_host() {
                            self.c.add(
                                INSECURE_TLS,
                                &e.loc,
                                format!("cache marks {host} insecure (plain HTTP), but {host} serves only TLS"),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn push_action(
        &mut self,
        j: &Job<'_>,
        step_env: &EnvMap,
        with: Option<&Node>,
        pos: Pos,
        name: Option<&str>,
    ) {
        let job_outputs = self.job_outputs.clone();
        let scope = Scope {
            job: j,
            step_env,
            shell: None,
            job_outputs: &job_outputs,
        };
        let what = match name {
            Some(n) => format!("docker/build-push-action step \"{n}\""),
            None => format!("docker/build-push-action in job \"{}\"", j.id),
        };
        let mut b = Build::new(what, self.loc(pos), j.id.clone());
        b.matrix = j.matrix;
        let get = |k: &str| with.and_then(|w| w.get(k)).and_then(Node::as_scalar);
        let items = |wf: &Self, k: &str, seps: &[char]| -> Vec<Word> {
            get(k).map_or_else(Vec::new, |s| split_word(&wf.scalar_word(s), seps))
        };
        if let Some(p) = get("push") {
            let v = p.value.trim();
            b.pushes = !v.is_empty() && !v.eq_ignore_ascii_case("false");
        }
        for t in items(self, "tags", &['\n', ',']) {
            b.tags.push(shell::resolve(&t.text, &scope));
        }
        for (key, to) in [("cache-from", false), ("cache-to", true)] {
            for e in items(self, key, &['\n']) {
                let entries =
                    CacheEntry::parse(&shell::resolve(&e.text, &scope), self.loc(e.start()));
                if to {
                    b.cache_to.extend(entries);
                } else {
                    b.cache_from.extend(entries);
                }
            }
        }
        for o in items(self, "outputs", &['\n']) {
            let alts = shell::resolve(&o.text, &scope);
            let loc = self.loc(o.start());
            self.output(&mut b, &alts, &loc);
        }
        for (key, kind) in [
            ("build-args", ArgKind::BuildArg),
            ("labels", ArgKind::Label),
        ] {
            for a in items(self, key, &['\n']) {
                let loc = self.loc(a.start());
                self.arg_of(&mut b, &a.text, kind, loc, &scope);
            }
        }
        b.platforms = items(self, "platforms", &['\n', ',']).len().max(1);
        b.target = get("target").map(|s| s.value.clone());
        let context = get("context").map(|s| {
            (
                shell::resolve(&s.value, &scope)
                    .into_iter()
                    .next()
                    .unwrap_or_default(),
                s.start,
            )
        });
        let file = get("file").and_then(|s| shell::resolve(&s.value, &scope).into_iter().next());
        // The action's default context is the repository (git context of the
        // commit being built), which is the checkout here.
        let context = context.or_else(|| Some((".".to_string(), pos)));
        b.dockerfile = self.dockerfile_of(None, context.as_ref(), file.as_deref());
        self.register(&b);
        self.c.builds.push(b);
    }
}

struct StepCtx {
    id: Option<String>,
    name: Option<String>,
    workdir: Option<String>,
    env: EnvMap,
}

/// Expands unquoted `$VAR` words that hold several words (flags kept in a
/// variable) into those words, with their positions.
fn expand(sh: &Shell, words: &[Word], depth: usize) -> Vec<Word> {
    let mut out = Vec::new();
    for w in words {
        let var = w.bare_var.as_ref().and_then(|n| sh.vars.get(n));
        match var {
            Some(v) if depth < 4 => {
                let chosen = if v.items {
                    v.alts.first()
                } else {
                    richest(&v.alts)
                };
                if let Some(ch) = chosen {
                    out.extend(expand(sh, &shell::split_fields(ch), depth + 1));
                }
            }
            _ => out.push(w.clone()),
        }
    }
    out
}

/// One text per iteration of the `for` loops whose variables it uses.
fn bind_loops(sh: &Shell, text: &str, depth: usize) -> Vec<String> {
    if depth < 3 {
        for name in names::referenced_vars(text) {
            if let Some(v) = sh.vars.get(&name).filter(|v| v.items && !v.alts.is_empty()) {
                let token = format!("${{{name}}}");
                return v
                    .alts
                    .iter()
                    .flat_map(|item| bind_loops(sh, &text.replace(&token, &item.text), depth + 1))
                    .take(16)
                    .collect();
            }
        }
    }
    vec![text.to_string()]
}

/// A bake call in a workflow: a `run:` step's `docker buildx bake` /
/// `docker bake`, or a `docker/bake-action` step.
#[derive(Clone, Debug)]
pub struct BakeCall {
    /// `docker buildx bake`, `docker bake` or `docker/bake-action`.
    pub what: String,
    pub loc: Loc,
    /// The directory it runs in: the repository root joined with the step's
    /// working directory (`run:`) or the action's `workdir`.
    pub dir: PathBuf,
    /// Every value its `-f`/`--file` flags (the action's `files`) can have,
    /// relative to `dir`; empty when it names none, so bake reads the
    /// default names (`docker-bake.hcl`, …) in `dir`.
    pub files: Vec<String>,
}

/// A value kiln cannot know (`${{ matrix.file }}`, `$FILE`) or stdin.
fn unknown(s: &str) -> bool {
    s.contains('$') || s == "-"
}

impl BakeCall {
    /// Whether the call can read `file`. A file or directory that is not
    /// known (an expression, a variable, stdin) counts as reading it: a CI
    /// that runs bake is evidence enough that bake builds the file.
    #[must_use]
    pub fn reads(&self, file: &Path) -> bool {
        let Ok(target) = std::fs::canonicalize(file) else {
            return false;
        };
        if unknown(&self.dir.to_string_lossy()) {
            return true;
        }
        let dir = std::fs::canonicalize(&self.dir).ok();
        if self.files.is_empty() {
            let default = target
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| kiln_bake::DEFAULT_FILES.contains(&n));
            return default && dir.as_deref() == target.parent();
        }
        self.files.iter().any(|f| {
            unknown(f)
                || std::fs::canonicalize(self.dir.join(f))
                    .ok()
                    .is_some_and(|p| p == target)
        })
    }
}
