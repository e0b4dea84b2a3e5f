//! Dockerfile rules, on `kiln-dockerfile`'s analysis of every stage: ARG
//! order against RUN (per-commit args declared early, job counts), secrets
//! in ARG/ENV/LABEL values, and git sources on branches. Findings point at
//! the instruction's line.

use std::collections::BTreeMap;
use std::path::Path;

use kiln_dockerfile::dockerfile::{
    DockerfileError, Instruction, InstructionKind, RemoteKind, Stage, analyze, lex,
};

use crate::build::{ArgKind, ArgUse, check_arg};
use crate::names;
use crate::rules::*;
use crate::{Collector, Loc, display_path};

/// Lints one Dockerfile on disk.
pub fn lint(path: &Path, c: &mut Collector) {
    if let Some(text) = crate::read(path, c) {
        lint_text(&display_path(path), &text, c);
    }
}

/// Lints Dockerfile text, reported under `file`.
pub fn lint_text(file: &str, text: &str, c: &mut Collector) {
    let a = match analyze(text, None, &BTreeMap::new()) {
        Ok(a) => a,
        Err(e) => {
            let (line, col) = match &e {
                DockerfileError::Parse { line, column, .. } => (*line, *column),
                other => (other.line().unwrap_or(1), 1),
            };
            let msg = match e {
                DockerfileError::Parse { message, .. }
                | DockerfileError::Invalid { message, .. } => message,
                other => other.to_string(),
            };
            c.add(PARSE_ERROR, &Loc::new(file, line, col), msg);
            return;
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let loc = |line: usize| {
        let col = lines
            .get(line.wrapping_sub(1))
            .map_or(1, |l| l.len() - l.trim_start().len() + 1);
        Loc::new(file, line, col)
    };
    let escape = a.directives.escape;
    for g in &a.global_args {
        check_decl_value(&g.name, g.default.as_deref(), &loc(g.line), c);
    }
    for s in &a.stages {
        stage(s, escape, &loc, c);
    }
}

fn stage_name(s: &Stage) -> String {
    s.name
        .clone()
        .map_or_else(|| format!("#{}", s.index), |n| format!("\"{n}\""))
}

/// ARG defaults, ENV and LABEL values: credentials, tokens in URLs, branch refs.
fn check_decl_value(name: &str, value: Option<&str>, loc: &Loc, c: &mut Collector) {
    let Some(v) = value else { return };
    // Job counts and SOURCE_DATE_EPOCH are judged by where they reach RUN
    // (stage rules) or how they are passed (bake, workflows), not by defaults.
    if names::is_credential_name(name) && !v.trim().is_empty() {
        c.add(
            SECRET_IN_ARG,
            loc,
            format!("{name} has a credential as its default value; it is stored in the image config and history"),
        );
    } else if let Some(why) = names::url_secret(v) {
        c.add(
            SECRET_IN_ARG,
            loc,
            format!("{name} holds {why}; it is stored in the image config and history"),
        );
    }
    if names::is_git_ref_var(name)
        && !v.contains(':')
        && !v.contains('$')
        && names::ref_kind(v) == names::RefKind::Branch
    {
        c.add(
            MOVING_REF,
            loc,
            format!("{name} defaults to {v:?}, a branch, not a tag or commit"),
        );
    }
}

/// `KEY=value` pairs of an ENV or LABEL instruction (and the legacy
/// `ENV KEY value` form).
fn pairs(i: &Instruction, escape: char) -> Vec<(String, String)> {
    let body = i.text.trim_start();
    let body = body
        .split_once(char::is_whitespace)
        .map_or("", |(_, rest)| rest);
    let words = lex::split_words(body, escape);
    if i.kind == InstructionKind::Env && words.first().is_some_and(|w| !w.contains('=')) {
        let mut it = words.into_iter();
        let k = it.next().unwrap_or_default();
        return vec![(k, it.collect::<Vec<_>>().join(" "))];
    }
    words
        .into_iter()
        .filter_map(|w| {
            w.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn stage(s: &Stage, escape: char, loc: &dyn Fn(usize) -> Loc, c: &mut Collector) {
    let ins = &s.instructions;
    let last_layer = ins.iter().rposition(|i| {
        matches!(
            i.kind,
            InstructionKind::Run | InstructionKind::Copy | InstructionKind::Add
        )
    });
    for arg in &s.args {
        let Some(at) = ins
            .iter()
            .position(|i| i.kind == InstructionKind::Arg && i.line == arg.line)
        else {
            continue;
        };
        let runs_after: Vec<&Instruction> = ins[at + 1..]
            .iter()
            .filter(|i| i.kind == InstructionKind::Run)
            .collect();
        let here = loc(arg.line);
        check_decl_value(&arg.name, arg.default.as_deref(), &here, c);
        if names::is_volatile_name(&arg.name) {
            let early: Vec<usize> = ins
                .iter()
                .enumerate()
                .skip(at + 1)
                .filter(|(k, i)| i.kind == InstructionKind::Run && Some(*k) < last_layer)
                .map(|(_, i)| i.line)
                .collect();
            if !early.is_empty() {
                c.add(
                    EARLY_VOLATILE,
                    &here,
                    format!(
                        "ARG {} in stage {} changes every commit and is declared before {} RUN step{} (line{} {}): each new value re-runs them",
                        arg.name,
                        stage_name(s),
                        runs_after.len(),
                        if runs_after.len() == 1 { "" } else { "s" },
                        if runs_after.len() == 1 { "" } else { "s" },
                        list_lines(&runs_after),
                    ),
                );
            }
        }
        if names::is_jobs_name(&arg.name) && !runs_after.is_empty() {
            c.add(
                JOBS_ARG,
                &here,
                format!(
                    "ARG {} in stage {} reaches the RUN step{} at line{} {}: a different job count is a different cache key{}",
                    arg.name,
                    stage_name(s),
                    if runs_after.len() == 1 { "" } else { "s" },
                    if runs_after.len() == 1 { "" } else { "s" },
                    list_lines(&runs_after),
                    if arg.default.is_none() {
                        " (without a default it enters the key only when a value is passed, and then one key per count)"
                    } else {
                        ""
                    },
                ),
            );
        }
    }
    for i in ins {
        if matches!(i.kind, InstructionKind::Env | InstructionKind::Label) {
            for (k, v) in pairs(i, escape) {
                let kind = if i.kind == InstructionKind::Env {
                    ArgKind::Env
                } else {
                    ArgKind::Label
                };
                let a = ArgUse {
                    name: &k,
                    values: vec![v],
                    loc: loc(i.line),
                    kind,
                };
                check_arg(&a, c);
            }
        }
    }
    for r in &s.remote_sources {
        let here = loc(r.line);
        if let Some(why) = names::url_secret(&r.url) {
            c.add(
                SECRET_IN_ARG,
                &here,
                format!("ADD source {} is {why}", r.url),
            );
        }
        if r.kind != RemoteKind::Git {
            continue;
        }
        let Some(gref) = names::git_url_ref(&r.url) else {
            continue;
        };
        // A ref written as a variable (`#${TRITON_REF}`) is the bake
        // file's to give: with no value here it is not a missing ref.
        let ref_from_variable = r.raw.split_once('#').is_some_and(|(_, f)| f.contains('$'));
        match names::ref_kind(&gref) {
            names::RefKind::Empty if ref_from_variable => {}
            names::RefKind::Empty => c.add(
                MOVING_REF,
                &here,
                format!(
                    "ADD {} names no ref, so it clones the default branch",
                    r.url
                ),
            ),
            names::RefKind::Branch => c.add(
                MOVING_REF,
                &here,
                format!(
                    "ADD {} clones {gref:?}, a branch, not a tag or commit",
                    r.url
                ),
            ),
            _ => {}
        }
    }
}

fn list_lines(ins: &[&Instruction]) -> String {
    let mut v: Vec<String> = ins.iter().take(5).map(|i| i.line.to_string()).collect();
    if ins.len() > 5 {
        v.push("…".into());
    }
    v.join(", ")
}
