//! Bake files: evaluated exactly as buildx does (`kiln-bake`), every target
//! that can be built turned into a [`Build`], plus the variable checks and
//! `missing-dockerfile` (each target's context and Dockerfile on disk, found
//! as bake finds them from the bake file's directory).
//!
//! Variables a CI system supplies per commit (`GIT_SHA`, `VCS_REF`,
//! `COMMIT_TIME`… with an empty default) are evaluated as the placeholder
//! `${NAME}`, so that a cache ref or `SOURCE_DATE_EPOCH` built from them
//! still shows where its value comes from. Findings point at the attribute
//! (or the key inside `args`/`labels`) that sets the value; an inherited
//! attribute points at the parent that declares it.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use kiln_bake::{Bake, Options, Target, display_value};

use crate::build::{ArgKind, ArgUse, Build, CacheEntry, DockerfileSource, check_arg};
use crate::names;
use crate::rules::*;
use crate::{Collector, Loc, display_path};

fn options() -> Options {
    Options {
        builtins: [
            ("BAKE_CMD_CONTEXT".to_string(), "cwd://".to_string()),
            ("BAKE_LOCAL_PLATFORM".to_string(), "linux/amd64".to_string()),
        ]
        .into_iter()
        .collect(),
        ..Options::default()
    }
}

/// Lints one set of bake files (merged in order, as bake merges them).
pub fn lint(files: &[PathBuf], c: &mut Collector) {
    let mut texts = Vec::new();
    for p in files {
        if let Some(t) = crate::read(p, c) {
            texts.push((display_path(p), t));
        }
    }
    lint_texts(texts, c);
}

/// Lints bake file texts `(name, text)`, merged in order.
pub fn lint_texts(texts: Vec<(String, String)>, c: &mut Collector) {
    let Some(first) = texts.first().map(|(n, _)| n.clone()) else {
        return;
    };
    let base = options();
    let bake = match kiln_bake::load(texts.clone(), &base) {
        Ok(b) => b,
        Err(e) => {
            let loc = e.position().map_or_else(
                || Loc::new(&first, 1, 1),
                |p| Loc::new(p.file, p.line, p.col),
            );
            let msg = match &e {
                kiln_bake::Error::Eval { diags, .. } => diags
                    .0
                    .first()
                    .map(kiln_bake::Diag::message)
                    .unwrap_or_default(),
                other => other.to_string(),
            };
            c.add(PARSE_ERROR, &loc, msg);
            return;
        }
    };
    let mut env = BTreeMap::new();
    for v in &bake.config.variables {
        let value = display_value(&v.value);
        let empty = value.is_empty() || value == "<null>";
        if v.source == "default"
            && ((names::is_per_commit_var(&v.name) && empty) || names::is_commit_time_var(&v.name))
        {
            env.insert(v.name.clone(), format!("${{{}}}", v.name));
        }
    }
    let opts = Options {
        env,
        ..base.clone()
    };
    let bake = if opts.env.is_empty() {
        bake
    } else {
        kiln_bake::load(texts, &opts).unwrap_or(bake)
    };
    let l = BakeLint { bake: &bake, opts };
    l.variables(c);
    l.targets(c);
}

struct BakeLint<'a> {
    bake: &'a Bake,
    opts: Options,
}

impl BakeLint<'_> {
    fn loc(&self, span: kiln_bake::ast::Span) -> Option<Loc> {
        self.bake
            .sources
            .pos(span)
            .map(|p| Loc::new(p.file, p.line, p.col))
    }

    fn target_loc(&self, name: &str) -> Loc {
        self.bake
            .config
            .target_spans
            .get(name)
            .and_then(|s| self.loc(*s))
            .unwrap_or_else(|| {
                let f = self.bake.sources.files.first().map(|s| s.name.clone());
                Loc::new(f.unwrap_or_default(), 1, 1)
            })
    }

    /// The span of `attr` as `target` gets it: its own, else the nearest
    /// parent's through `inherits`.
    fn attr_span(&self, target: &str, attr: &str, depth: usize) -> Option<kiln_bake::ast::Span> {
        let cfg = &self.bake.config;
        if let Some(s) = cfg.attr_spans.get(&(target.to_string(), attr.to_string())) {
            return Some(*s);
        }
        if depth > 16 {
            return None;
        }
        let t = cfg.targets.iter().find(|t| t.name == target)?;
        t.inherits
            .iter()
            .flatten()
            .rev()
            .find_map(|p| self.attr_span(p, attr, depth + 1))
    }

    fn attr_loc(&self, target: &str, attr: &str) -> Loc {
        self.attr_span(target, attr, 0)
            .and_then(|s| self.loc(s))
            .unwrap_or_else(|| self.target_loc(target))
    }

    /// The spans of `attr` in `target` and its ancestors, nearest first.
    fn attr_spans(
        &self,
        target: &str,
        attr: &str,
        depth: usize,
        out: &mut Vec<kiln_bake::ast::Span>,
    ) {
        let cfg = &self.bake.config;
        if let Some(s) = cfg.attr_spans.get(&(target.to_string(), attr.to_string())) {
            out.push(*s);
        }
        if depth > 16 {
            return;
        }
        if let Some(t) = cfg.targets.iter().find(|t| t.name == target) {
            for p in t.inherits.iter().flatten().rev() {
                self.attr_spans(p, attr, depth + 1, out);
            }
        }
    }

    /// Where `key` is set inside a map attribute (`args = { KEY = … }`), in
    /// the target or the parent it inherits the key from.
    fn key_loc(&self, target: &str, attr: &str, key: &str) -> Loc {
        let mut spans = Vec::new();
        self.attr_spans(target, attr, 0, &mut spans);
        spans
            .iter()
            .find_map(|span| self.key_in(*span, key))
            .unwrap_or_else(|| self.attr_loc(target, attr))
    }

    fn key_in(&self, span: kiln_bake::ast::Span, key: &str) -> Option<Loc> {
        let src = self.bake.sources.get(span.file)?;
        let text = src.text.get(span.start as usize..span.end as usize)?;
        let mut from = 0;
        while let Some(i) = text[from..].find(key) {
            let at = from + i;
            let before = text[..at].chars().next_back();
            let after = text[at + key.len()..].trim_start_matches('"').trim_start();
            let boundary = before.is_none_or(|b| !(b.is_alphanumeric() || b == '_'));
            if boundary && (after.starts_with('=') || after.starts_with(':')) {
                let (line, col) = src.line_col(span.start as usize + at);
                return Some(Loc::new(src.name.clone(), line, col));
            }
            from = at + key.len();
        }
        None
    }

    fn variables(&self, c: &mut Collector) {
        for v in &self.bake.config.variables {
            if v.source != "default" || !names::is_git_ref_var(&v.name) {
                continue;
            }
            let value = display_value(&v.value);
            if value.contains(':') || names::ref_kind(&value) != names::RefKind::Branch {
                continue;
            }
            let loc = v
                .span
                .and_then(|s| self.loc(s))
                .unwrap_or_else(|| Loc::new(self.target_loc("").file, 1, 1));
            c.add(
                MOVING_REF,
                &loc,
                format!(
                    "variable {} defaults to {value:?}, a branch, not a tag or commit",
                    v.name
                ),
            );
        }
    }

    /// The targets a build can ask for: every target but `_`-prefixed ones
    /// and parents that only exist to be inherited.
    fn buildable(&self) -> Vec<String> {
        let cfg = &self.bake.config;
        let inherited: HashSet<&str> = cfg
            .targets
            .iter()
            .flat_map(|t| t.inherits.iter().flatten())
            .map(String::as_str)
            .collect();
        let grouped: HashSet<&str> = cfg
            .groups
            .iter()
            .flat_map(|g| g.targets.iter())
            .map(String::as_str)
            .collect();
        cfg.targets
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| !n.starts_with('_') && (!inherited.contains(n) || grouped.contains(n)))
            .map(str::to_string)
            .collect()
    }

    fn targets(&self, c: &mut Collector) {
        let names = self.buildable();
        // All at once (one resolution); one by one only to place an error.
        if let Ok(r) = self.bake.resolve(&names, &[], &self.opts) {
            for name in &names {
                if let Some(t) = r.targets.get(name) {
                    self.target(name, t, c);
                }
            }
            return;
        }
        for name in names {
            match self
                .bake
                .resolve(std::slice::from_ref(&name), &[], &self.opts)
            {
                Ok(r) => {
                    if let Some(t) = r.targets.get(&name) {
                        self.target(&name, t, c);
                    }
                }
                Err(e) => c.add(PARSE_ERROR, &self.target_loc(&name), e.to_string()),
            }
        }
    }

    fn check_source_url(&self, name: &str, attr: &str, url: &str, c: &mut Collector) {
        let url = url.trim_start_matches("cwd://");
        if let Some(why) = names::url_secret(url) {
            c.add(
                SECRET_IN_ARG,
                &self.attr_loc(name, attr),
                format!("{attr} of target \"{name}\" is {why}"),
            );
        }
        if let Some(r) = names::git_url_ref(url) {
            let kind = names::ref_kind(&r);
            if matches!(kind, names::RefKind::Branch | names::RefKind::Empty) {
                let what = if r.is_empty() {
                    "names no ref, so it builds the default branch".to_string()
                } else {
                    format!("builds {r:?}, a branch")
                };
                c.add(
                    MOVING_REF,
                    &self.attr_loc(name, attr),
                    format!("git {attr} {url} of target \"{name}\" {what}"),
                );
            }
        }
    }

    fn target(&self, name: &str, t: &Target, c: &mut Collector) {
        let mut b = Build::new(format!("target \"{name}\""), self.target_loc(name), name);
        b.pushes = true;
        b.tags = t.tags.iter().flatten().map(|t| vec![t.clone()]).collect();
        for (attr, list, dst) in [
            ("cache-from", &t.cache_from, &mut b.cache_from),
            ("cache-to", &t.cache_to, &mut b.cache_to),
        ] {
            let loc = self.attr_loc(name, attr);
            dst.extend(
                list.iter()
                    .flatten()
                    .map(|e| CacheEntry::from_bake(e, loc.clone())),
            );
        }
        for e in t.output.iter().flatten() {
            let mut ce = CacheEntry::from_bake(e, self.attr_loc(name, "output"));
            ce.refs = ce
                .attrs
                .get("name")
                .map(|n| n.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            if let Some(host) = ce.insecure_tls_host() {
                c.add(
                    INSECURE_TLS,
                    &ce.loc,
                    format!("output of target \"{name}\" marks {host} insecure (plain HTTP), but {host} serves only TLS"),
                );
            }
        }
        for (k, v) in t.args.iter().flatten() {
            let Some(v) = v else { continue };
            b.args.insert(k.clone(), v.clone());
            let a = ArgUse {
                name: k,
                values: vec![v.clone()],
                loc: self.key_loc(name, "args", k),
                kind: ArgKind::BuildArg,
            };
            if check_arg(&a, c) {
                b.inline_arg = Some(a.loc);
            }
        }
        for (k, v) in t.labels.iter().flatten() {
            let Some(v) = v else { continue };
            let a = ArgUse {
                name: k,
                values: vec![v.clone()],
                loc: self.key_loc(name, "labels", k),
                kind: ArgKind::Label,
            };
            check_arg(&a, c);
        }
        if let Some(ctx) = &t.context {
            self.check_source_url(name, "context", ctx, c);
        }
        for v in t.contexts.iter().flatten().map(|(_, v)| v) {
            if !v.starts_with("target:") && !v.starts_with("docker-image://") {
                self.check_source_url(name, "contexts", v, c);
            }
        }
        b.platforms = t.platforms.as_ref().map_or(1, Vec::len).max(1);
        b.target = t.target.clone();
        b.dockerfile = self.dockerfile(name, t);
        self.check_paths(name, t, c);
        if let Some(DockerfileSource::Path(p)) = &b.dockerfile
            && p.is_file()
        {
            c.dockerfiles.insert(p.clone());
        }
        c.builds.push(b);
    }

    fn dockerfile(&self, name: &str, t: &Target) -> Option<DockerfileSource> {
        if let Some(inline) = &t.dockerfile_inline {
            return Some(DockerfileSource::Inline(inline.clone()));
        }
        let ctx = self.local_context(name, t)?;
        self.dockerfile_path(name, t, &ctx)
            .map(DockerfileSource::Path)
    }

    /// The directory bake resolves a target's paths from: lint takes it to
    /// be the directory of the bake file that declares the target (as bake
    /// run there, or with `BUILDX_BAKE_FILE_RELATIVE_PATHS=1`, resolves
    /// them).
    fn base_dir(&self, name: &str) -> PathBuf {
        self.bake
            .config
            .target_dirs
            .get(name)
            .map_or_else(|| PathBuf::from("."), PathBuf::from)
    }

    /// The target's build context when it is a local directory: `context`
    /// (default `.`, `cwd://` dropped) relative to [`Self::base_dir`]. `None`
    /// for a remote context (git, https), stdin, another scheme, or a value
    /// still holding a placeholder (`${GIT_SHA}`).
    fn local_context(&self, name: &str, t: &Target) -> Option<PathBuf> {
        let raw = t.context.as_deref().unwrap_or(".");
        if raw == "-" || kiln_bake::is_remote(raw) {
            return None;
        }
        let ctx = raw.strip_prefix("cwd://").unwrap_or(raw);
        if ctx.contains("://") || ctx.starts_with("target:") || ctx.contains("${") {
            return None;
        }
        Some(clean_path(&self.base_dir(name).join(ctx)))
    }

    /// The Dockerfile of a target whose local context is `ctx`, by bake's
    /// rule: `dockerfile` (default `Dockerfile`) relative to the context,
    /// unless absolute or `cwd://` (relative to [`Self::base_dir`]). `None`
    /// for a remote Dockerfile, stdin or a placeholder.
    fn dockerfile_path(&self, name: &str, t: &Target, ctx: &Path) -> Option<PathBuf> {
        let df = t
            .dockerfile
            .as_deref()
            .filter(|d| !d.is_empty())
            .unwrap_or("Dockerfile");
        if df == "-" || df.contains("${") {
            return None;
        }
        if let Some(rest) = df.strip_prefix("cwd://") {
            return Some(clean_path(&self.base_dir(name).join(rest)));
        }
        if kiln_bake::is_remote(df) || df.contains("://") {
            return None;
        }
        // `join` keeps an absolute path as it is.
        Some(clean_path(&ctx.join(df)))
    }

    /// `missing-dockerfile`: a local build context that is not a directory
    /// (at `context`), else a Dockerfile that is not a file (at
    /// `dockerfile`, or at the target when it is the default `Dockerfile`).
    /// `dockerfile-inline` reads no file; a remote context is not checked.
    fn check_paths(&self, name: &str, t: &Target, c: &mut Collector) {
        let Some(ctx) = self.local_context(name, t) else {
            return;
        };
        let raw_ctx = t.context.as_deref().unwrap_or(".");
        if !ctx.is_dir() {
            let what = if ctx.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            let how = if Path::new(raw_ctx.trim_start_matches("cwd://")).is_absolute() {
                String::new()
            } else {
                format!(" (context {raw_ctx:?}, relative to the bake file's directory)")
            };
            c.add(
                MISSING_DOCKERFILE,
                &self.attr_loc(name, "context"),
                format!(
                    "build context {} of target \"{name}\" {what}{how}",
                    display_path(&ctx)
                ),
            );
            return;
        }
        if t.dockerfile_inline.is_some() {
            return;
        }
        let Some(df) = self.dockerfile_path(name, t, &ctx) else {
            return;
        };
        if df.is_file() {
            return;
        }
        let what = if df.exists() {
            "is not a file"
        } else {
            "does not exist"
        };
        // Resolution sets `Dockerfile` when the bake file sets nothing: the
        // attribute's span tells the default from a written value.
        let raw = t
            .dockerfile
            .as_deref()
            .filter(|d| !d.is_empty())
            .unwrap_or("Dockerfile");
        let set = self.attr_span(name, "dockerfile", 0).is_some();
        let loc = if set {
            self.attr_loc(name, "dockerfile")
        } else {
            self.target_loc(name)
        };
        let how = if !set {
            format!(" (no dockerfile set: the default Dockerfile in the context {raw_ctx:?})")
        } else if raw.starts_with("cwd://") {
            format!(" (dockerfile {raw:?}, relative to the bake file's directory)")
        } else if Path::new(raw).is_absolute() {
            String::new()
        } else {
            format!(" (dockerfile {raw:?}, relative to the context {raw_ctx:?})")
        };
        c.add(
            MISSING_DOCKERFILE,
            &loc,
            format!(
                "Dockerfile {} of target \"{name}\" {what}{how}",
                display_path(&df)
            ),
        );
    }
}

/// `p` without `.` components (`./a/./b` → `a/b`), for messages.
fn clean_path(p: &Path) -> PathBuf {
    let out: PathBuf = p
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}
