//! Content keys, recipe `k1`: a blake3 hash over exactly what a target's
//! build consumes, gathered in an [`InputManifest`].
//!
//! The recipe (also in docs/content-keys.md):
//!
//! ```text
//! key = "k1:" + hex(blake3(compact JSON of the InputManifest))
//! ```
//!
//! with the manifest's fields in declaration order and every map sorted:
//! `recipe` ("k1"), `dockerfile` (the canonical text of the needed stages,
//! see kiln-dockerfile), `target_stage`, `platform`, `args` (consumed build
//! args and their values), `files` (consumed context files after
//! `.dockerignore`: path, mode, blake3 of the content), `images` (external
//! images → digest), `upstreams` (named contexts → the upstream's output
//! digest), `remote` (ADD URLs / git → pinned checksum or commit), `secrets`
//! and `ssh` (ids only, never values), `source_date_epoch`, `labels`.
//!
//! Anything not in the manifest cannot change the key: files the needed
//! stages do not read, args they do not declare, stages the target does not
//! need, comments, tags.
//!
//! Must never: read files or contact anything; callers gather the inputs.

use std::collections::{BTreeMap, BTreeSet};

use kiln_dockerfile::dockerfile::{ContextSource, PathKind};
use kiln_dockerfile::ignore::PatternMatcher;
use serde::{Deserialize, Serialize};

/// The key recipe version; part of every key.
pub const RECIPE: &str = "k1";

/// A consumed context file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ContextFile {
    pub path: String,
    pub mode: u32,
    /// `blake3:<hex>` of the content (of the link target for symlinks; empty
    /// for directories).
    pub digest: String,
}

/// Everything a target's build consumes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputManifest {
    pub recipe: String,
    pub dockerfile: String,
    pub target_stage: Option<String>,
    pub platform: String,
    pub args: BTreeMap<String, String>,
    pub files: Vec<ContextFile>,
    pub images: BTreeMap<String, String>,
    pub upstreams: BTreeMap<String, String>,
    pub remote: BTreeMap<String, String>,
    pub secrets: Vec<String>,
    pub ssh: Vec<String>,
    pub source_date_epoch: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// Attestations (`--attest` values): they change what is pushed. Absent
    /// when none, so keys made before the field existed stay the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attest: Vec<String>,
}

impl InputManifest {
    /// Puts lists in canonical order (files by path, ids sorted and unique).
    pub fn normalize(&mut self) {
        self.recipe = RECIPE.to_string();
        self.files.sort();
        self.files.dedup_by(|a, b| a.path == b.path);
        self.secrets.sort();
        self.secrets.dedup();
        self.ssh.sort();
        self.ssh.dedup();
    }

    /// The content key of this manifest.
    pub fn key(&self) -> String {
        let mut m = self.clone();
        m.normalize();
        let bytes = serde_json::to_vec(&m).unwrap_or_default();
        format!("{RECIPE}:{}", blake3::hash(&bytes).to_hex())
    }
}

fn clean(p: &str) -> String {
    let p = p.trim_start_matches("./").trim_start_matches('/');
    p.trim_end_matches('/').to_string()
}

/// The files of a context (`all`, already filtered by `.dockerignore`)
/// that the given sources read, as BuildKit resolves them: the whole
/// context, a path and everything below it, or a glob matching paths or
/// their parents; `COPY --exclude` patterns remove matches.
pub fn select_files(all: &[ContextFile], sources: &[ContextSource]) -> Vec<ContextFile> {
    select_by(all, |f| f.path.as_str(), sources)
        .into_iter()
        .map(|i| all[i].clone())
        .collect()
}

/// [`select_files`] over any listing: the indices, in order, of the items
/// of `all` (each a `/`-separated path given by `path_of`) that the
/// sources read.
pub fn select_by<T>(
    all: &[T],
    path_of: impl Fn(&T) -> &str,
    sources: &[ContextSource],
) -> Vec<usize> {
    let mut chosen = vec![false; all.len()];
    for src in sources {
        let path = clean(&src.path);
        let excludes = if src.excludes.is_empty() {
            None
        } else {
            PatternMatcher::new(&src.excludes).ok()
        };
        let glob = if src.kind == PathKind::Glob {
            PatternMatcher::new(std::slice::from_ref(&path)).ok()
        } else {
            None
        };
        let hit = |f: &str| match src.kind {
            PathKind::Whole => true,
            _ if path.is_empty() => true,
            PathKind::Glob => glob
                .as_ref()
                .is_some_and(|m| m.matches_or_parent_matches(f).unwrap_or(false)),
            PathKind::Directory | PathKind::Path => is_at_or_below(f, &path),
        };
        for (i, item) in all.iter().enumerate() {
            let f = path_of(item);
            if !chosen[i]
                && hit(f)
                && !excludes
                    .as_ref()
                    .is_some_and(|m| m.matches_or_parent_matches(f).unwrap_or(false))
            {
                chosen[i] = true;
            }
        }
    }
    chosen
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.then_some(i))
        .collect()
}

/// The part of a context that `sources` can read (as [`select_by`]
/// selects): `None` when that may be any of it (the whole context, a glob
/// at its top, a path not worked out or not plain), else the paths
/// (`/`-separated, sorted) at or below which all they read lies; a glob
/// reads below its literal leading directories. A listing for a key needs
/// only these and the directories that lead to them.
pub fn reach(sources: &[ContextSource]) -> Option<Vec<String>> {
    let mut out = Vec::with_capacity(sources.len());
    for src in sources {
        let path = clean(&src.path);
        if src.kind == PathKind::Whole || path.is_empty() || path.contains('$') {
            return None;
        }
        let segments = path.split('/');
        let literal: Vec<&str> = match src.kind {
            PathKind::Glob => segments
                .take_while(|s| !s.contains(['*', '?', '[', '\\']))
                .collect(),
            _ => segments.collect(),
        };
        if literal.is_empty()
            || literal
                .iter()
                .any(|s| s.is_empty() || *s == "." || *s == "..")
        {
            return None;
        }
        out.push(literal.join("/"));
    }
    out.sort();
    out.dedup();
    Some(out)
}

/// Whether the `/`-separated `path` is `dir` or a path below it.
pub fn is_at_or_below(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// One difference between two manifests, for `kiln why`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "input", rename_all = "kebab-case")]
pub enum Change {
    Recipe {
        old: String,
        new: String,
    },
    Dockerfile,
    TargetStage {
        old: Option<String>,
        new: Option<String>,
    },
    Platform {
        old: String,
        new: String,
    },
    Arg {
        name: String,
        old: Option<String>,
        new: Option<String>,
    },
    File {
        path: String,
        change: String,
    },
    Image {
        reference: String,
        old: Option<String>,
        new: Option<String>,
    },
    Upstream {
        context: String,
        old: Option<String>,
        new: Option<String>,
    },
    Remote {
        source: String,
        old: Option<String>,
        new: Option<String>,
    },
    Secrets {
        old: Vec<String>,
        new: Vec<String>,
    },
    Ssh {
        old: Vec<String>,
        new: Vec<String>,
    },
    SourceDateEpoch {
        old: Option<String>,
        new: Option<String>,
    },
    Attest {
        old: Vec<String>,
        new: Vec<String>,
    },
    Label {
        name: String,
        old: Option<String>,
        new: Option<String>,
    },
}

fn shown(v: &Option<String>) -> String {
    match v {
        Some(s) => short(s),
        None => "(none)".into(),
    }
}

/// Digests shortened for humans; other values as they are.
fn short(s: &str) -> String {
    if let Some(rest) = s.strip_prefix("pending:") {
        return format!("(the new output of {rest}, not built yet)");
    }
    match s.split_once(':') {
        Some((algo, hex))
            if matches!(algo, "sha256" | "blake3")
                && hex.len() > 12
                && hex.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            format!("{algo}:{}", &hex[..12])
        }
        _ => s.to_string(),
    }
}

impl std::fmt::Display for Change {
    /// One line naming the input and, where it has one, its old and new
    /// value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Recipe { old, new } => write!(f, "key recipe {old} → {new}"),
            Change::Dockerfile => write!(f, "Dockerfile: the needed stages' text changed"),
            Change::TargetStage { old, new } => {
                write!(f, "target stage {} → {}", shown(old), shown(new))
            }
            Change::Platform { old, new } => write!(f, "platform {old} → {new}"),
            Change::Arg { name, old, new } => {
                write!(f, "build arg {name}: {} → {}", shown(old), shown(new))
            }
            Change::File { path, change } => write!(f, "file {path}: {change}"),
            Change::Image {
                reference,
                old,
                new,
            } => write!(f, "base image {reference}: {} → {}", shown(old), shown(new)),
            Change::Upstream { context, old, new } => write!(
                f,
                "upstream {context}: output {} → {}",
                shown(old),
                shown(new)
            ),
            Change::Remote { source, old, new } => {
                write!(f, "remote source {source}: {} → {}", shown(old), shown(new))
            }
            Change::Secrets { old, new } => {
                write!(f, "secret ids [{}] → [{}]", old.join(", "), new.join(", "))
            }
            Change::Ssh { old, new } => {
                write!(f, "ssh ids [{}] → [{}]", old.join(", "), new.join(", "))
            }
            Change::SourceDateEpoch { old, new } => {
                write!(f, "SOURCE_DATE_EPOCH {} → {}", shown(old), shown(new))
            }
            Change::Label { name, old, new } => {
                write!(f, "label {name}: {} → {}", shown(old), shown(new))
            }
            Change::Attest { old, new } => {
                write!(f, "attestations [{}] → [{}]", old.join(" "), new.join(" "))
            }
        }
    }
}

/// A short summary of changes for a plan's reason column: the first few,
/// then a count.
pub fn summarize(changes: &[Change]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = changes.iter().take(SHOWN).map(|c| c.to_string()).collect();
    if changes.len() > SHOWN {
        parts.push(format!("{} more", changes.len() - SHOWN));
    }
    parts.join("; ")
}

fn map_diff(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
    mut f: impl FnMut(String, Option<String>, Option<String>),
) {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for k in keys {
        let (a, b) = (old.get(k), new.get(k));
        if a != b {
            f(k.clone(), a.cloned(), b.cloned());
        }
    }
}

/// What differs between the manifest of the last build and the current one.
pub fn diff(old: &InputManifest, new: &InputManifest) -> Vec<Change> {
    let mut out = Vec::new();
    if old.recipe != new.recipe {
        out.push(Change::Recipe {
            old: old.recipe.clone(),
            new: new.recipe.clone(),
        });
    }
    if old.dockerfile != new.dockerfile {
        out.push(Change::Dockerfile);
    }
    if old.target_stage != new.target_stage {
        out.push(Change::TargetStage {
            old: old.target_stage.clone(),
            new: new.target_stage.clone(),
        });
    }
    if old.platform != new.platform {
        out.push(Change::Platform {
            old: old.platform.clone(),
            new: new.platform.clone(),
        });
    }
    map_diff(&old.args, &new.args, |name, old, new| {
        out.push(Change::Arg { name, old, new })
    });
    let of: BTreeMap<&str, &ContextFile> = old.files.iter().map(|f| (f.path.as_str(), f)).collect();
    let nf: BTreeMap<&str, &ContextFile> = new.files.iter().map(|f| (f.path.as_str(), f)).collect();
    for p in of.keys().chain(nf.keys()).collect::<BTreeSet<_>>() {
        let change = match (of.get(p), nf.get(p)) {
            (Some(_), None) => "removed",
            (None, Some(_)) => "added",
            (Some(a), Some(b)) if a.digest != b.digest => "content changed",
            (Some(a), Some(b)) if a.mode != b.mode => "mode changed",
            _ => continue,
        };
        out.push(Change::File {
            path: (*p).to_string(),
            change: change.into(),
        });
    }
    map_diff(&old.images, &new.images, |reference, old, new| {
        out.push(Change::Image {
            reference,
            old,
            new,
        })
    });
    map_diff(&old.upstreams, &new.upstreams, |context, old, new| {
        out.push(Change::Upstream { context, old, new })
    });
    map_diff(&old.remote, &new.remote, |source, old, new| {
        out.push(Change::Remote { source, old, new })
    });
    if old.secrets != new.secrets {
        out.push(Change::Secrets {
            old: old.secrets.clone(),
            new: new.secrets.clone(),
        });
    }
    if old.ssh != new.ssh {
        out.push(Change::Ssh {
            old: old.ssh.clone(),
            new: new.ssh.clone(),
        });
    }
    if old.source_date_epoch != new.source_date_epoch {
        out.push(Change::SourceDateEpoch {
            old: old.source_date_epoch.clone(),
            new: new.source_date_epoch.clone(),
        });
    }
    map_diff(&old.labels, &new.labels, |name, old, new| {
        out.push(Change::Label { name, old, new })
    });
    if old.attest != new.attest {
        out.push(Change::Attest {
            old: old.attest.clone(),
            new: new.attest.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_dockerfile::dockerfile::analyze;

    fn file(path: &str, content: &str) -> ContextFile {
        ContextFile {
            path: path.into(),
            mode: 0o644,
            digest: format!("blake3:{}", blake3::hash(content.as_bytes()).to_hex()),
        }
    }

    const DF: &str = "ARG UNUSED_GLOBAL=1\nFROM kiln/busybox:latest AS build\nARG VERSION=1.0\nCOPY src/lib/ /src/\nRUN echo $VERSION\n\nFROM kiln/busybox:latest AS docs\nCOPY docs/ /docs/\n\nFROM kiln/busybox:latest\n# a comment\nCOPY --from=build /src /src\nCOPY *.cfg /etc/\n";

    fn context() -> Vec<ContextFile> {
        vec![
            file("README.md", "readme"),
            file("app.cfg", "cfg"),
            file("docs/index.md", "docs"),
            file("src/lib/a.c", "a"),
            file("src/lib/b.c", "b"),
            file("src/other/c.c", "c"),
        ]
    }

    /// Builds the manifest the way the build will: analysis, consumed args,
    /// selected files.
    #[test]
    fn attestations_are_in_the_key_and_none_keeps_old_keys() {
        let m = manifest(DF, &context(), &[]);
        // No attestations: the field is not serialized, so a key made
        // before it existed is the key made now.
        assert!(
            !String::from_utf8(serde_json::to_vec(&m).unwrap())
                .unwrap()
                .contains("attest")
        );
        let signed = InputManifest {
            attest: vec!["type=provenance,mode=max".into()],
            ..m.clone()
        };
        assert_ne!(m.key(), signed.key());
        let changes = diff(&m, &signed);
        assert_eq!(
            changes.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            vec!["attestations [] → [type=provenance,mode=max]"]
        );
    }

    fn manifest(df: &str, ctx: &[ContextFile], args: &[(&str, &str)]) -> InputManifest {
        let given: BTreeMap<String, String> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let a = analyze(df, None, &given).unwrap();
        InputManifest {
            dockerfile: a.needed_text.clone(),
            platform: "linux/amd64".into(),
            args: a
                .consumed_args
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                .collect(),
            files: select_files(ctx, &a.context_sources),
            images: [("kiln/busybox:latest".to_string(), "sha256:base".to_string())].into(),
            ..InputManifest::default()
        }
    }

    #[test]
    fn selection_follows_what_the_needed_stages_read() {
        let m = manifest(DF, &context(), &[]);
        let paths: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["app.cfg", "src/lib/a.c", "src/lib/b.c"],
            "docs/ is only read by an unneeded stage"
        );
    }

    #[test]
    fn consumed_inputs_change_the_key() {
        let base = manifest(DF, &context(), &[]).key();
        assert!(base.starts_with("k1:"));
        // A consumed file's content.
        let mut ctx = context();
        ctx[3] = file("src/lib/a.c", "a2");
        assert_ne!(manifest(DF, &ctx, &[]).key(), base);
        // A consumed file's mode.
        let mut ctx = context();
        ctx[3].mode = 0o755;
        assert_ne!(manifest(DF, &ctx, &[]).key(), base);
        // A new file under a copied directory.
        let mut ctx = context();
        ctx.push(file("src/lib/new.c", "n"));
        assert_ne!(manifest(DF, &ctx, &[]).key(), base);
        // A declared arg's value.
        assert_ne!(manifest(DF, &context(), &[("VERSION", "2.0")]).key(), base);
        // The needed stages' text.
        assert_ne!(
            manifest(
                &DF.replace("echo $VERSION", "echo v$VERSION"),
                &context(),
                &[]
            )
            .key(),
            base
        );
        // The base image digest, platform, upstream, secret id, SDE, labels.
        let m = manifest(DF, &context(), &[]);
        let mut x = m.clone();
        x.images
            .insert("kiln/busybox:latest".into(), "sha256:other".into());
        assert_ne!(x.key(), base);
        let mut x = m.clone();
        x.platform = "linux/arm64".into();
        assert_ne!(x.key(), base);
        let mut x = m.clone();
        x.upstreams.insert("base".into(), "sha256:up".into());
        assert_ne!(x.key(), base);
        let mut x = m.clone();
        x.secrets.push("tok".into());
        assert_ne!(x.key(), base);
        let mut x = m.clone();
        x.source_date_epoch = Some("1700000000".into());
        assert_ne!(x.key(), base);
        let mut x = m;
        x.labels.insert("l".into(), "v".into());
        assert_ne!(x.key(), base);
    }

    #[test]
    fn unconsumed_inputs_do_not_change_the_key() {
        let base = manifest(DF, &context(), &[]).key();
        // A README, an unneeded stage's sources, a sibling directory.
        let mut ctx = context();
        ctx[0] = file("README.md", "changed");
        ctx[2] = file("docs/index.md", "changed");
        ctx[5] = file("src/other/c.c", "changed");
        assert_eq!(manifest(DF, &ctx, &[]).key(), base);
        // An arg no needed stage declares; a global arg not used in FROM.
        assert_eq!(
            manifest(
                DF,
                &context(),
                &[("NOT_DECLARED", "x"), ("UNUSED_GLOBAL", "2")]
            )
            .key(),
            base
        );
        // A comment and an unneeded stage's text.
        let df = DF
            .replace("# a comment", "# another comment")
            .replace("COPY docs/ /docs/", "COPY docs/ /d/");
        assert_eq!(manifest(&df, &context(), &[]).key(), base);
        // Order of inputs does not matter.
        let mut ctx = context();
        ctx.reverse();
        assert_eq!(manifest(DF, &ctx, &[]).key(), base);
    }

    #[test]
    fn why_names_what_changed() {
        let old = manifest(DF, &context(), &[]);
        let mut ctx = context();
        ctx[3] = file("src/lib/a.c", "a2");
        let new = manifest(DF, &ctx, &[("VERSION", "2.0")]);
        let d = diff(&old, &new);
        assert!(
            d.contains(&Change::File {
                path: "src/lib/a.c".into(),
                change: "content changed".into()
            }),
            "{d:?}"
        );
        assert!(
            d.contains(&Change::Arg {
                name: "VERSION".into(),
                old: Some("1.0".into()),
                new: Some("2.0".into())
            }),
            "{d:?}"
        );
        assert!(diff(&old, &old).is_empty());
    }

    #[test]
    fn globs_and_excludes() {
        let ctx = vec![
            file("a.txt", "a"),
            file("b.md", "b"),
            file("dir/c.txt", "c"),
            file("dir/sub/d.txt", "d"),
        ];
        let src = |path: &str, kind: PathKind, excludes: &[&str]| ContextSource {
            stage: 0,
            line: 1,
            via: kiln_dockerfile::dockerfile::SourceVia::Copy,
            path: path.into(),
            raw: path.into(),
            kind,
            excludes: excludes.iter().map(|s| s.to_string()).collect(),
        };
        let names = |v: Vec<ContextFile>| v.into_iter().map(|f| f.path).collect::<Vec<_>>();
        assert_eq!(
            names(select_files(&ctx, &[src("*.txt", PathKind::Glob, &[])])),
            ["a.txt"]
        );
        assert_eq!(
            names(select_files(&ctx, &[src("dir/*", PathKind::Glob, &[])])),
            ["dir/c.txt", "dir/sub/d.txt"]
        );
        assert_eq!(
            names(select_files(
                &ctx,
                &[src(".", PathKind::Whole, &["**/*.txt"])]
            )),
            ["b.md"]
        );
        assert_eq!(
            names(select_files(
                &ctx,
                &[src("./dir/", PathKind::Directory, &["dir/sub"])]
            )),
            ["dir/c.txt"]
        );
    }

    #[test]
    fn changes_read_as_one_line_each() {
        let c = Change::Arg {
            name: "ROCM".into(),
            old: Some("6.1".into()),
            new: None,
        };
        assert_eq!(c.to_string(), "build arg ROCM: 6.1 → (none)");
        let c = Change::Image {
            reference: "base:1".into(),
            old: Some(format!("sha256:{}", "a".repeat(64))),
            new: Some(format!("sha256:{}", "b".repeat(64))),
        };
        assert_eq!(
            c.to_string(),
            "base image base:1: sha256:aaaaaaaaaaaa → sha256:bbbbbbbbbbbb"
        );
        let c = Change::Upstream {
            context: "lib".into(),
            old: Some("sha256:0123456789abcdef".into()),
            new: Some("pending:lib".into()),
        };
        assert_eq!(
            c.to_string(),
            "upstream lib: output sha256:0123456789ab → (the new output of lib, not built yet)"
        );
        let c = Change::File {
            path: "src/a.c".into(),
            change: "mode changed".into(),
        };
        assert_eq!(c.to_string(), "file src/a.c: mode changed");
        let many: Vec<Change> = (0..5)
            .map(|i| Change::File {
                path: format!("f{i}"),
                change: "added".into(),
            })
            .collect();
        assert_eq!(
            summarize(&many),
            "file f0: added; file f1: added; file f2: added; 2 more"
        );
        assert_eq!(summarize(&many[..1]), "file f0: added");
    }
}
