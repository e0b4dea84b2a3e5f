//! One build, whatever described it (a bake target, a `docker buildx build`
//! command line, a build-push-action step), and the rules that judge its
//! cache configuration: inline cache under buildx, cache-from equal to the
//! pushed tag, per-commit-only refs, no export, min mode over discarded
//! builder stages, and refs shared by several writers. Also the build-arg
//! checks every reader applies to the args it finds.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::names;
use crate::rules::*;
use crate::{Collector, Finding, Loc};

/// A cache import or export entry.
#[derive(Debug, Clone)]
pub struct CacheEntry {
    /// `registry`, `local`, `gha`, `inline`, `s3`, `azblob`.
    pub ty: String,
    /// The entry's attributes (of its first possible value).
    pub attrs: BTreeMap<String, String>,
    /// Every value its location (ref, dest/src, scope, name) can have.
    pub refs: Vec<String>,
    pub loc: Loc,
}

impl CacheEntry {
    /// Builds an entry from the possible texts of one `--cache-from/-to`
    /// value (`type=registry,ref=…` or a bare ref).
    #[must_use]
    pub fn parse(alternatives: &[String], loc: Loc) -> Vec<CacheEntry> {
        let mut per_alt: Vec<Vec<BTreeMap<String, String>>> = Vec::new();
        for a in alternatives {
            let Ok(entries) =
                kiln_bake::model::parse_entries(a, kiln_bake::model::EntryKind::Cache)
            else {
                continue;
            };
            per_alt.push(
                entries
                    .into_iter()
                    .map(|e| {
                        e.into_iter()
                            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .collect(),
            );
        }
        let Some(first) = per_alt.first() else {
            return Vec::new();
        };
        first
            .iter()
            .enumerate()
            .map(|(i, attrs)| {
                let mut refs: Vec<String> = Vec::new();
                for alt in &per_alt {
                    if let Some(r) = alt.get(i).and_then(location_of)
                        && !refs.contains(&r)
                    {
                        refs.push(r);
                    }
                }
                CacheEntry {
                    ty: attrs
                        .get("type")
                        .cloned()
                        .unwrap_or_else(|| "registry".into()),
                    attrs: attrs.clone(),
                    refs,
                    loc: loc.clone(),
                }
            })
            .collect()
    }

    /// From a bake entry (already parsed by the evaluator).
    #[must_use]
    pub fn from_bake(e: &kiln_bake::model::Entry, loc: Loc) -> CacheEntry {
        let attrs: BTreeMap<String, String> = e
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                )
            })
            .collect();
        CacheEntry {
            ty: attrs
                .get("type")
                .cloned()
                .unwrap_or_else(|| "registry".into()),
            refs: location_of(&attrs).into_iter().collect(),
            attrs,
            loc,
        }
    }

    fn is_max(&self) -> bool {
        self.ty != "inline" && self.attrs.get("mode").is_some_and(|m| m == "max")
    }
    fn is_registry(&self) -> bool {
        self.ty == "registry"
    }
    /// `registry.insecure=true` on an entry whose registry is TLS-only.
    pub fn insecure_tls_host(&self) -> Option<String> {
        let insecure = self
            .attrs
            .get("registry.insecure")
            .is_some_and(|v| names::truthy(v));
        if !insecure {
            return None;
        }
        self.refs
            .iter()
            .map(|r| names::registry_host(r))
            .find(|h| names::is_tls_only_registry(h))
    }
}

/// Where a cache entry keeps its cache: the registry ref, the local
/// directory, the gha scope or the s3/azblob name.
fn location_of(attrs: &BTreeMap<String, String>) -> Option<String> {
    let ty = attrs.get("type").map_or("registry", String::as_str);
    let key = match ty {
        "registry" => "ref",
        "local" => {
            if attrs.contains_key("dest") {
                "dest"
            } else {
                "src"
            }
        }
        "gha" => "scope",
        "s3" | "azblob" => "name",
        _ => return None,
    };
    attrs.get(key).filter(|v| !v.is_empty()).cloned()
}

/// The Dockerfile a build reads.
#[derive(Debug, Clone)]
pub enum DockerfileSource {
    Path(PathBuf),
    Inline(String),
}

/// One build.
#[derive(Debug, Clone)]
pub struct Build {
    /// How messages name it: `target "app"`, `docker buildx build`.
    pub what: String,
    /// Where the build is declared (a target's header, the `docker` word).
    pub loc: Loc,
    /// Runs under buildx (bake, `docker buildx`, build-push-action).
    pub buildx: bool,
    /// Pushes its image (or is a bake target, which `--push` pushes).
    pub pushes: bool,
    /// Tags, each with every value it can have.
    pub tags: Vec<Vec<String>>,
    pub cache_from: Vec<CacheEntry>,
    pub cache_to: Vec<CacheEntry>,
    /// `BUILDKIT_INLINE_CACHE=1` given as a build arg.
    pub inline_arg: Option<Loc>,
    pub platforms: usize,
    pub dockerfile: Option<DockerfileSource>,
    pub target: Option<String>,
    pub args: BTreeMap<String, String>,
    /// Who writes its cache: builds of different writers run concurrently
    /// (bake targets, workflow jobs); one writer's builds run in sequence.
    pub writer: String,
    /// A matrix job: several copies of this build run at once.
    pub matrix: bool,
    /// Built by kiln, whose cache policy adds a commit-independent ref,
    /// imported and exported (a bake target judged as kiln builds it, see
    /// the `view` module): the findings of the rules about missing cache refs
    /// ([`KILN_POLICY`]) are set aside.
    pub policy_applied: bool,
    /// A bake target: why its file was judged as it was (`--kiln`,
    /// `--buildx`, the workflow step that runs bake on it…). Findings of
    /// [`KILN_POLICY`] say it, and how to get the other judgement.
    pub judged_because: Option<String>,
}

impl Build {
    #[must_use]
    pub fn new(what: impl Into<String>, loc: Loc, writer: impl Into<String>) -> Build {
        Build {
            what: what.into(),
            loc,
            buildx: true,
            pushes: false,
            tags: Vec::new(),
            cache_from: Vec::new(),
            cache_to: Vec::new(),
            inline_arg: None,
            platforms: 1,
            dockerfile: None,
            target: None,
            args: BTreeMap::new(),
            writer: writer.into(),
            matrix: false,
            policy_applied: false,
            judged_because: None,
        }
    }
}

/// Normalises an image reference for comparison (`app` →
/// `docker.io/library/app:latest`); symbolic parts (`${TAG}`) stay as they are.
#[must_use]
pub fn normalize_ref(r: &str) -> String {
    let r = r.trim();
    if r.starts_with('$') {
        // A registry and repository from a variable: compare as written.
        return r.to_string();
    }
    let (name, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    // A symbolic last part (`${TAG}`) may carry its own tag: leave it alone.
    let tagged = last.contains(':') || last.contains("${");
    let host = names::registry_host(name);
    let has_host =
        (name.starts_with(&host) && host != "docker.io") || name.starts_with("docker.io/");
    let mut full = if has_host {
        name.to_string()
    } else {
        format!("docker.io/{name}")
    };
    if full.starts_with("docker.io/") && full.matches('/').count() == 1 {
        full = full.replacen("docker.io/", "docker.io/library/", 1);
    }
    if digest.is_none() && !tagged {
        full.push_str(":latest");
    }
    if let Some(d) = digest {
        full.push('@');
        full.push_str(d);
    }
    full
}

/// A build arg (or label) as a reader found it.
pub struct ArgUse<'a> {
    pub name: &'a str,
    /// Every value it can have; empty when it is taken from the environment
    /// (`--build-arg NAME`).
    pub values: Vec<String>,
    pub loc: Loc,
    pub kind: ArgKind,
}

/// What carries a value into the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    BuildArg,
    Label,
    Env,
}

fn commit_time_re() -> &'static regex::Regex {
    static RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"git\s+(log|show)\b[^)`]*%(ct|at|cd|ad|ci|ai|cI|aI|cs|as)|head_commit\.timestamp|committer\.date|commits\[0\]\.timestamp",
        )
        .expect("valid regex")
    });
    &RE
}

/// Whether a value takes a commit's time: `$(git log -1 --format=%ct)`,
/// `${{ github.event.head_commit.timestamp }}`, a `COMMIT_TIME`-like variable.
#[must_use]
pub fn is_commit_time_value(v: &str) -> bool {
    commit_time_re().is_match(v)
        || names::referenced_vars(v)
            .iter()
            .any(|n| names::is_commit_time_var(n))
}

/// The checks every build arg gets; returns whether it turns on inline cache.
pub fn check_arg(a: &ArgUse<'_>, c: &mut Collector) -> bool {
    let name = a.name;
    let shown = |v: &String| {
        if v.chars().count() > 60 {
            format!("{}…", v.chars().take(60).collect::<String>())
        } else {
            v.clone()
        }
    };
    let what = match a.kind {
        ArgKind::BuildArg => "build arg",
        ArgKind::Label => "label",
        ArgKind::Env => "ENV",
    };
    if names::is_credential_name(name)
        && (a.values.is_empty() || a.values.iter().any(|v| !v.trim().is_empty()))
    {
        c.add(
            SECRET_IN_ARG,
            &a.loc,
            format!(
                "{what} {name} carries a credential; it is stored in the image config and history"
            ),
        );
    } else if let Some(why) = a.values.iter().find_map(|v| names::url_secret(v)) {
        c.add(
            SECRET_IN_ARG,
            &a.loc,
            format!("{what} {name} holds {why}; it is stored in the image config and history"),
        );
    }
    if a.kind != ArgKind::BuildArg {
        return false;
    }
    if names::is_jobs_name(name) {
        let v = a
            .values
            .first()
            .map(shown)
            .unwrap_or_else(|| "from the environment".into());
        c.add(
            JOBS_ARG,
            &a.loc,
            format!("{name} is passed as a build arg ({v}); a different count changes the cache key of every RUN after its ARG"),
        );
    }
    if name == "SOURCE_DATE_EPOCH" && a.values.iter().any(|v| is_commit_time_value(v)) {
        c.add(
            SDE_FROM_COMMIT,
            &a.loc,
            "SOURCE_DATE_EPOCH is passed from the commit time; every commit changes the cache key of WORKDIR and everything after it",
        );
    }
    if names::is_git_ref_var(name)
        && let Some(v) = a.values.first()
        && !v.contains(':')
        && !v.contains('$')
        && names::ref_kind(v) == names::RefKind::Branch
    {
        c.add(
            MOVING_REF,
            &a.loc,
            format!("build arg {name}={v} names a branch, not a tag or commit"),
        );
    }
    name == "BUILDKIT_INLINE_CACHE" && a.values.iter().any(|v| names::truthy(v))
}

/// The stages of a Dockerfile whose results the target discards (reached
/// only through `COPY --from` / `RUN --mount from=`) and that run something.
#[must_use]
pub fn discarded_stages(
    src: &DockerfileSource,
    target: Option<&str>,
    args: &BTreeMap<String, String>,
) -> Option<Vec<String>> {
    use kiln_dockerfile::dockerfile::{FromSource, InstructionKind, analyze};
    let text = match src {
        DockerfileSource::Path(p) => std::fs::read_to_string(p).ok()?,
        DockerfileSource::Inline(t) => t.clone(),
    };
    let a = analyze(&text, target, args).ok()?;
    let mut chain = vec![a.target];
    let mut t = a.target;
    while let Some(FromSource::Stage(p)) = a.stages.get(t).map(|s| &s.from) {
        if chain.contains(p) {
            break;
        }
        chain.push(*p);
        t = *p;
    }
    let out: Vec<String> = a
        .needed
        .iter()
        .filter(|i| !chain.contains(i))
        .filter_map(|i| a.stages.get(*i))
        .filter(|s| {
            s.instructions
                .iter()
                .any(|i| i.kind == InstructionKind::Run)
        })
        .map(|s| s.name.clone().unwrap_or_else(|| format!("#{}", s.index)))
        .collect();
    Some(out)
}

/// When, on some path, every entry has a ref that satisfies `pred`: those
/// refs, as a message shows them.
fn all_possible(entries: &[&CacheEntry], pred: impl Fn(&str) -> bool) -> Option<String> {
    let shown: Option<Vec<String>> = entries
        .iter()
        .map(|e| e.refs.iter().find(|r| pred(r)).cloned())
        .collect();
    shown.filter(|s| !s.is_empty()).map(|s| dedup(s).join(", "))
}

fn first_ref(e: &CacheEntry) -> String {
    e.refs.first().cloned().unwrap_or_default()
}

/// Adds a finding of a rule kiln's cache policy answers ([`KILN_POLICY`]):
/// set aside for a bake target judged as kiln builds it; on one judged as
/// `docker buildx bake` builds it, the message says why and how to get
/// kiln's judgement.
fn policy_finding(b: &Build, rule: &'static str, loc: &Loc, message: String, c: &mut Collector) {
    if b.policy_applied {
        c.set_aside.push(Finding::new(rule, loc, message));
        return;
    }
    match &b.judged_because {
        Some(because) => c.add(
            rule,
            loc,
            format!(
                "{message}; judged as `docker buildx bake` builds it ({because}): if kiln builds \
                 it, kiln applies this cache policy itself, see `kiln lint --kiln`"
            ),
        ),
        None => c.add(rule, loc, message),
    }
}

/// Runs the cache rules over every build.
pub fn check(builds: &[Build], c: &mut Collector) {
    for b in builds {
        check_one(b, c);
    }
    check_duplicates(builds, c);
}

fn check_one(b: &Build, c: &mut Collector) {
    if let (Some(loc), true) = (&b.inline_arg, b.buildx) {
        c.add(
            INLINE_CACHE,
            loc,
            format!("{} passes BUILDKIT_INLINE_CACHE as a build arg; under buildx it exports no registry cache", b.what),
        );
    }
    for e in b.cache_from.iter().chain(&b.cache_to) {
        if let Some(host) = e.insecure_tls_host() {
            c.add(
                INSECURE_TLS,
                &e.loc,
                format!(
                    "cache {} marks {host} insecure (plain HTTP), but {host} serves only TLS",
                    first_ref(e)
                ),
            );
        }
    }

    // cache-from-self: on some path, every import is a tag this build pushes.
    let tags: Vec<String> = b.tags.iter().flatten().map(|t| normalize_ref(t)).collect();
    let imports: Vec<&CacheEntry> = b.cache_from.iter().filter(|e| e.is_registry()).collect();
    let is_tag = |r: &str| tags.contains(&normalize_ref(r));
    if !tags.is_empty()
        && imports.len() == b.cache_from.len()
        && let Some(shown) = all_possible(&imports, is_tag)
    {
        policy_finding(
            b,
            CACHE_FROM_SELF,
            &imports[0].loc,
            format!(
                "{} imports cache only from {shown}, the tag it pushes; a new commit finds nothing there",
                b.what
            ),
            c,
        );
    }

    // cache-per-commit-only: on some path, every ref has a per-commit part.
    let all: Vec<&CacheEntry> = b
        .cache_from
        .iter()
        .chain(&b.cache_to)
        .filter(|e| !e.refs.is_empty())
        .collect();
    if let Some(shown) = all_possible(&all, names::is_per_commit_value) {
        policy_finding(
            b,
            PER_COMMIT_ONLY,
            &all[0].loc,
            format!(
                "every cache ref of {} changes with each commit ({shown}); no commit-independent ref",
                b.what
            ),
            c,
        );
    }

    // no-cache-export.
    let exports_inline = b.inline_arg.is_some() && !b.buildx;
    if b.pushes && b.cache_to.is_empty() && !exports_inline {
        policy_finding(
            b,
            NO_CACHE_EXPORT,
            &b.loc,
            format!("{} exports no layer cache (no cache-to)", b.what),
            c,
        );
    }

    // cache-mode-min-multistage.
    let min_loc = if b.cache_to.is_empty() {
        b.inline_arg.clone()
    } else if b.cache_to.iter().any(CacheEntry::is_max) {
        None
    } else {
        Some(b.cache_to[0].loc.clone())
    };
    if let (Some(loc), Some(df)) = (min_loc, &b.dockerfile)
        && let Some(stages) = discarded_stages(df, b.target.as_deref(), &b.args)
        && !stages.is_empty()
    {
        let how = if b.cache_to.is_empty() {
            "inline cache (min mode only)"
        } else {
            "cache in min mode (mode=max is not set)"
        };
        c.add(
            MODE_MIN,
            &loc,
            format!(
                "{} exports {how}, but builder stage{} {} never reach{} the image: their steps cannot be restored from this cache",
                b.what,
                if stages.len() == 1 { "" } else { "s" },
                stages.join(", "),
                if stages.len() == 1 { "es" } else { "" },
            ),
        );
    }

    // One multi-platform build exporting one ref.
    if b.platforms > 1 {
        for e in &b.cache_to {
            if !e.refs.is_empty() && e.ty != "inline" {
                c.add(
                    DUPLICATE_REF,
                    &e.loc,
                    format!(
                        "{} exports the cache of {} platforms to one ref ({}); builds per platform on separate nodes overwrite each other",
                        b.what,
                        b.platforms,
                        first_ref(e)
                    ),
                );
            }
        }
    }
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn check_duplicates(builds: &[Build], c: &mut Collector) {
    // ref → (writer, what), per file (a bake file set or a workflow).
    let mut first: HashMap<(String, String), (String, String)> = HashMap::new();
    for b in builds {
        for e in &b.cache_to {
            let Some(r) = e.refs.first() else { continue };
            if e.ty == "inline" {
                continue;
            }
            let key = (b.loc.file.clone(), format!("{}:{}", e.ty, normalize_ref(r)));
            if b.matrix && !r.contains("matrix.") {
                c.add(
                    DUPLICATE_REF,
                    &e.loc,
                    format!(
                        "{} runs once per matrix entry, and every entry exports cache to {r}",
                        b.what
                    ),
                );
            }
            match first.get(&key) {
                Some((w, what)) if *w != b.writer => c.add(
                    DUPLICATE_REF,
                    &e.loc,
                    format!(
                        "{} exports cache to {r}, as {what} does; each export replaces the other",
                        b.what
                    ),
                ),
                Some(_) => {}
                None => {
                    first.insert(key, (b.writer.clone(), b.what.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_refs() {
        assert_eq!(normalize_ref("app"), "docker.io/library/app:latest");
        assert_eq!(normalize_ref("org/app:1"), "docker.io/org/app:1");
        assert_eq!(normalize_ref("ghcr.io/o/a:${TAG}"), "ghcr.io/o/a:${TAG}");
        assert_eq!(normalize_ref("localhost:5000/a"), "localhost:5000/a:latest");
        assert_eq!(normalize_ref("${IMG}:${TAG}"), "${IMG}:${TAG}");
    }

    #[test]
    fn parses_cache_values() {
        let e = CacheEntry::parse(
            &[
                "type=registry,ref=r/a:b,mode=max".into(),
                "type=registry,ref=r/a:c".into(),
            ],
            Loc::new("f", 1, 1),
        );
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].refs, ["r/a:b", "r/a:c"]);
        assert!(e[0].is_max());
        let e = CacheEntry::parse(&["r/a:cache".into()], Loc::new("f", 1, 1));
        assert_eq!(e[0].ty, "registry");
        assert_eq!(e[0].refs, ["r/a:cache"]);
    }
}
