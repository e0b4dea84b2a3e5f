//! Hands named contexts over on an engine without named-context support.
//!
//! bake passes `contexts = { base = "target:base" }` to BuildKit as a named
//! context; dockerd 20.10's embedded BuildKit ignores them. kiln builds the
//! dependency first, gives its image a unique local reference, and then
//! replaces the context name with that reference wherever the build would
//! look it up:
//!
//! - `FROM <name>` (when `<name>` is not an earlier stage),
//! - `COPY --from=<name>` / `ADD --from=<name>`,
//! - `RUN --mount=...,from=<name>`,
//! - `ARG X=<name>` defaults, and build args whose value is `<name>` (the
//!   seeds' pattern: `FROM ${BASE_IMAGE}` with `BASE_IMAGE = "base-img"`).
//!
//! The rewritten Dockerfile is what is sent to the engine; the user's file is
//! never modified.
//!
//! Must never: read or write a file or talk to the engine (it is a pure
//! function of the text, the args and the references it is given), or
//! replace a stage's name: a `FROM`, `--from` or `from=` naming an earlier
//! stage means that stage.

use std::collections::{BTreeMap, HashSet};

/// A Dockerfile and build args with context names replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    pub dockerfile: String,
    pub args: BTreeMap<String, String>,
    /// Context names that were actually referenced.
    pub used: Vec<String>,
}

/// Splits a Dockerfile into logical instructions (joining `\` line
/// continuations), keeping the original text of each for reassembly.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.split_inclusive('\n') {
        cur.push_str(line);
        let trimmed = line.trim_end_matches(['\n', '\r']).trim_end();
        let is_comment = trimmed.trim_start().starts_with('#');
        if trimmed.ends_with('\\') && !is_comment {
            continue;
        }
        out.push(std::mem::take(&mut cur));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn unquote(s: &str) -> &str {
    let t = s.trim();
    if t.len() >= 2
        && ((t.starts_with('"') && t.ends_with('"')) || (t.starts_with('\'') && t.ends_with('\'')))
    {
        &t[1..t.len() - 1]
    } else {
        t
    }
}

/// Replaces the named contexts in `refs` (context name → image reference).
pub fn rewrite(
    dockerfile: &str,
    args: &BTreeMap<String, String>,
    refs: &BTreeMap<String, String>,
) -> Rewritten {
    let mut used: Vec<String> = Vec::new();
    let mark = |name: &str, used: &mut Vec<String>| {
        if !used.iter().any(|u| u == name) {
            used.push(name.to_string());
        }
    };
    let mut stages: HashSet<String> = HashSet::new();
    let mut out = String::with_capacity(dockerfile.len() + 64);
    for ins in instructions(dockerfile) {
        let body = ins.trim_start();
        let keyword: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect::<String>()
            .to_ascii_uppercase();
        let rewritten = match keyword.as_str() {
            "FROM" => {
                // FROM [--platform=...] image [AS name]
                let mut words: Vec<String> = ins.split_whitespace().map(String::from).collect();
                let mut image_idx = None;
                for (i, w) in words.iter().enumerate().skip(1) {
                    if w == "\\" || w.starts_with("--") {
                        continue;
                    }
                    image_idx = Some(i);
                    break;
                }
                let mut changed = false;
                if let Some(i) = image_idx {
                    let image = words[i].clone();
                    if let Some(r) = refs
                        .get(&image)
                        .filter(|_| !stages.contains(&image.to_ascii_lowercase()))
                    {
                        mark(&image, &mut used);
                        words[i] = r.clone();
                        changed = true;
                    }
                }
                if let Some(as_idx) = words.iter().position(|w| w.eq_ignore_ascii_case("as"))
                    && let Some(n) = words.get(as_idx + 1)
                {
                    stages.insert(n.to_ascii_lowercase());
                }
                changed.then(|| format!("{}\n", words.join(" ")))
            }
            "COPY" | "ADD" | "RUN" => {
                let mut changed = false;
                let mut words: Vec<String> = Vec::new();
                for w in ins.split(' ') {
                    let mut w = w.to_string();
                    if let Some(rest) = w.strip_prefix("--from=") {
                        let name = rest.trim_end_matches(['\n', '\r']);
                        if let Some(r) = refs
                            .get(name)
                            .filter(|_| !stages.contains(&name.to_ascii_lowercase()))
                        {
                            mark(name, &mut used);
                            let tail = &rest[name.len()..];
                            w = format!("--from={r}{tail}");
                            changed = true;
                        }
                    } else if let Some(rest) = w.strip_prefix("--mount=") {
                        let mut parts: Vec<String> = rest.split(',').map(String::from).collect();
                        for p in &mut parts {
                            if let Some(name) = p.strip_prefix("from=") {
                                let clean = name.trim_end_matches(['\n', '\r']);
                                if let Some(r) = refs
                                    .get(clean)
                                    .filter(|_| !stages.contains(&clean.to_ascii_lowercase()))
                                {
                                    mark(clean, &mut used);
                                    let tail = &name[clean.len()..];
                                    *p = format!("from={r}{tail}");
                                    changed = true;
                                }
                            }
                        }
                        w = format!("--mount={}", parts.join(","));
                    }
                    words.push(w);
                }
                changed.then(|| words.join(" "))
            }
            "ARG" => {
                // ARG NAME=default (one or more pairs)
                let mut changed = false;
                let words: Vec<String> = ins
                    .split(' ')
                    .map(|w| {
                        if let Some((k, v)) = w.split_once('=') {
                            let vt = v.trim_end_matches(['\n', '\r']);
                            let name = unquote(vt);
                            if let Some(r) = refs.get(name) {
                                mark(name, &mut used);
                                changed = true;
                                let tail = &v[vt.len()..];
                                return format!("{k}={r}{tail}");
                            }
                        }
                        w.to_string()
                    })
                    .collect();
                changed.then(|| words.join(" "))
            }
            _ => None,
        };
        out.push_str(&rewritten.unwrap_or(ins));
    }
    let mut new_args = args.clone();
    for v in new_args.values_mut() {
        if let Some(r) = refs.get(v.as_str()) {
            mark(&v.clone(), &mut used);
            *v = r.clone();
        }
    }
    Rewritten {
        dockerfile: out,
        args: new_args,
        used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> BTreeMap<String, String> {
        [
            ("base-img".to_string(), "kiln.local/base:abc".to_string()),
            ("wheels".to_string(), "kiln.local/w:def".to_string()),
        ]
        .into()
    }

    #[test]
    fn from_copy_mount_arg_and_args_are_rewritten() {
        let df = "ARG BASE_IMAGE=base-img\nFROM ${BASE_IMAGE} AS base\nFROM base-img AS direct\nFROM kiln/busybox:latest AS build\nCOPY --from=wheels /w /w\nRUN --mount=type=bind,from=wheels,target=/in cat /in/x\nCOPY --from=build /o /o\n";
        let args: BTreeMap<String, String> = [
            ("BASE_IMAGE".to_string(), "base-img".to_string()),
            ("X".to_string(), "y".to_string()),
        ]
        .into();
        let r = rewrite(df, &args, &refs());
        assert!(
            r.dockerfile
                .contains("ARG BASE_IMAGE=kiln.local/base:abc\n"),
            "{}",
            r.dockerfile
        );
        assert!(
            r.dockerfile
                .contains("FROM kiln.local/base:abc AS direct\n"),
            "{}",
            r.dockerfile
        );
        assert!(
            r.dockerfile
                .contains("COPY --from=kiln.local/w:def /w /w\n"),
            "{}",
            r.dockerfile
        );
        assert!(
            r.dockerfile
                .contains("--mount=type=bind,from=kiln.local/w:def,target=/in"),
            "{}",
            r.dockerfile
        );
        assert!(
            r.dockerfile.contains("COPY --from=build /o /o\n"),
            "stages are not contexts"
        );
        assert_eq!(r.args["BASE_IMAGE"], "kiln.local/base:abc");
        assert_eq!(r.args["X"], "y");
        assert_eq!(r.used, ["base-img", "wheels"]);
    }

    #[test]
    fn a_stage_named_like_a_context_wins_after_its_definition() {
        let df =
            "FROM kiln/busybox AS wheels\nRUN true\nFROM kiln/busybox\nCOPY --from=wheels /a /a\n";
        let r = rewrite(df, &BTreeMap::new(), &refs());
        assert!(r.dockerfile.contains("COPY --from=wheels /a /a"));
        assert!(r.used.is_empty());
    }

    #[test]
    fn continuation_lines_are_kept() {
        let df = "FROM kiln/busybox\nRUN --mount=type=bind,from=wheels,target=/in \\\n    ls /in\n";
        let r = rewrite(df, &BTreeMap::new(), &refs());
        assert!(
            r.dockerfile
                .contains("from=kiln.local/w:def,target=/in \\\n    ls /in\n"),
            "{}",
            r.dockerfile
        );
    }

    #[test]
    fn unrelated_text_is_untouched() {
        let df = "# syntax=docker/dockerfile:1\nFROM kiln/busybox\nRUN echo base-img\n";
        assert_eq!(rewrite(df, &BTreeMap::new(), &refs()).dockerfile, df);
    }
}
