//! Gathering a target's input manifest (content key recipe `k1`, see
//! `kiln_plan::key`): the Dockerfile analysis says what the build reads;
//! this module reads it — the needed stages' text, the consumed context
//! files (after `.dockerignore`, hashed with the stat cache), the consumed
//! args — and combines it with what only the caller knows: external image
//! digests and upstream output digests.
//!
//! The job count kiln hands a build (secret `kiln-jobs`, `crate::jobs`) is
//! not an input: the manifest records the ids of the bake file's secrets
//! only, and the implicit one is not among them.
//!
//! Must never: resolve an image to a digest or build an upstream (the
//! caller passes both digests in), or put a secret's value in the
//! manifest: it records secret ids only.

use std::collections::BTreeMap;

use kiln_dockerfile::dockerfile::{RemoteKind, RemoteSource, analyze};
use kiln_plan::key::{ContextFile, InputManifest, RECIPE, is_at_or_below, select_by};

use crate::context;
use crate::error::EngineError;
use crate::hashing::{HashStats, StatCache, hash_paths};
use crate::spec::BuildSpec;

/// The manifest value of an `ADD <url>` without `--checksum`.
pub const UNPINNED: &str = "unpinned";
/// The prefix of a git source whose ref could not be resolved.
pub const UNRESOLVED_GIT: &str = "unresolved: ";

/// Why a target's key cannot vouch for its inputs, so it must always be
/// built: an external image that resolves to no digest, an `ADD` of an
/// unpinned URL, a git ref that cannot be resolved. Empty when the key
/// covers everything.
pub fn volatile(m: &InputManifest) -> Vec<String> {
    let mut out = Vec::new();
    for (image, d) in &m.images {
        if d == "unresolved" {
            out.push(format!(
                "base image {image} is neither on the engine nor resolvable to a registry digest"
            ));
        }
    }
    for (url, pin) in &m.remote {
        if pin == UNPINNED {
            out.push(format!(
                "ADD {url} is not pinned (add --checksum=sha256:… to let kiln skip it)"
            ));
        } else if let Some(why) = pin.strip_prefix(UNRESOLVED_GIT) {
            out.push(format!(
                "git source {url} cannot be resolved to a commit ({why})"
            ));
        }
    }
    out
}

/// The Dockerfile text a spec builds.
fn dockerfile_text(spec: &BuildSpec) -> Result<String, EngineError> {
    match &spec.dockerfile_inline {
        Some(t) => Ok(t.clone()),
        None => std::fs::read_to_string(&spec.dockerfile).map_err(|e| {
            EngineError::Input(format!(
                "target {}: cannot read Dockerfile {}: {e}",
                spec.name,
                spec.dockerfile.display()
            ))
        }),
    }
}

fn analysis(
    spec: &BuildSpec,
    text: &str,
    platform: &str,
) -> Result<kiln_dockerfile::dockerfile::Analysis, EngineError> {
    use kiln_dockerfile::dockerfile::DockerfileError as E;
    let mut args = spec.args.clone();
    args.extend(platform_args(platform));
    analyze(text, spec.target.as_deref(), &args).map_err(|e| {
        let path = spec.dockerfile.display();
        let source = |line: usize| {
            text.lines()
                .nth(line.saturating_sub(1))
                .map(|l| format!("\n{line:>4} | {l}"))
                .unwrap_or_default()
        };
        EngineError::Input(match &e {
            E::Parse {
                line,
                column,
                message,
            } => format!(
                "{path}:{line}:{column}: {message}{}\n{:>4} | {}^",
                source(*line),
                "",
                " ".repeat(column.saturating_sub(1))
            ),
            E::Invalid { line, message } => format!("{path}:{line}: {message}{}", source(*line)),
            _ => format!("{path}: {e}"),
        })
    })
}

/// Where the failing step `step` (`[build 3/4] RUN make test`, as BuildKit
/// named it) is written: `Dockerfile:LINE`, the path as the user knows it
/// (relative to the working directory when it is below it), or
/// `dockerfile-inline:LINE`. `None` when the step is not an instruction
/// of the target's Dockerfile.
pub fn step_location(spec: &BuildSpec, step: &str) -> Option<String> {
    let text = dockerfile_text(spec).ok()?;
    let a = analysis(spec, &text, "").ok()?;
    let line = kiln_dockerfile::dockerfile::step_line(&a, step)?;
    let path = if spec.dockerfile_inline.is_some() {
        "dockerfile-inline".to_string()
    } else {
        let cwd = std::env::current_dir().ok();
        cwd.as_deref()
            .and_then(|c| spec.dockerfile.strip_prefix(c).ok())
            .unwrap_or(&spec.dockerfile)
            .display()
            .to_string()
    };
    Some(format!("{path}:{line}"))
}

/// The args BuildKit sets from the target platform `os/arch[/variant]`
/// (`TARGETPLATFORM`, `TARGETOS`, `TARGETARCH`, `TARGETVARIANT`), which
/// may choose a stage or a file (`COPY bin/${TARGETARCH}/tool`). Empty for
/// an unknown platform. The platform itself is in the key, so their
/// values are kept out of the manifest's args.
fn platform_args(platform: &str) -> BTreeMap<String, String> {
    let mut parts = platform.split('/');
    let (Some(os), Some(arch)) = (parts.next(), parts.next()) else {
        return BTreeMap::new();
    };
    if os.is_empty() || arch.is_empty() {
        return BTreeMap::new();
    }
    let variant = parts.next().unwrap_or("");
    [
        ("TARGETPLATFORM", platform),
        ("TARGETOS", os),
        ("TARGETARCH", arch),
        ("TARGETVARIANT", variant),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// What the needed stages read, for every platform of `platform` (one
/// platform, or several joined with `,`): a target of several platforms
/// reads the union of what each platform's solve reads.
#[derive(Clone)]
struct Reads {
    context_sources: Vec<kiln_dockerfile::dockerfile::ContextSource>,
    remote_sources: Vec<RemoteSource>,
    images: Vec<String>,
    consumed_args: BTreeMap<String, Option<String>>,
    mounts: Vec<kiln_dockerfile::dockerfile::Mount>,
    needed_text: String,
}

/// What the needed stages of `spec`'s Dockerfile (`text`) read for
/// `platform`, worked out once per process for the same Dockerfile, text,
/// target, args and platform: a run asks it for each target's preflight,
/// its outside images and its key, and the analysis is most of each.
fn reads(spec: &BuildSpec, text: &str, platform: &str) -> Result<Reads, EngineError> {
    type Key = (
        std::path::PathBuf,
        String,
        Option<String>,
        BTreeMap<String, String>,
        String,
    );
    static MEMO: kiln_util::Memo<Key, Reads> = kiln_util::Memo::new();
    let key: Key = (
        spec.dockerfile.clone(),
        text.to_string(),
        spec.target.clone(),
        spec.args
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        platform.to_string(),
    );
    MEMO.get_or_try_insert_with(&key, || reads_now(spec, text, platform))
}

fn reads_now(spec: &BuildSpec, text: &str, platform: &str) -> Result<Reads, EngineError> {
    let mut r = Reads {
        context_sources: Vec::new(),
        remote_sources: Vec::new(),
        images: Vec::new(),
        consumed_args: BTreeMap::new(),
        mounts: Vec::new(),
        needed_text: String::new(),
    };
    let platforms: Vec<&str> = platform.split(',').collect();
    let mut texts: Vec<(&str, String)> = Vec::new();
    for p in &platforms {
        let a = analysis(spec, text, p)?;
        for c in a.context_sources {
            if !r.context_sources.contains(&c) {
                r.context_sources.push(c);
            }
        }
        for c in a.remote_sources {
            if !r.remote_sources.contains(&c) {
                r.remote_sources.push(c);
            }
        }
        for i in a.images {
            if !r.images.contains(&i) {
                r.images.push(i);
            }
        }
        for m in a.mounts {
            if !r.mounts.contains(&m) {
                r.mounts.push(m);
            }
        }
        for (k, v) in a.consumed_args {
            if !kiln_dockerfile::dockerfile::AUTOMATIC_ARGS.contains(&k.as_str()) {
                r.consumed_args.entry(k).or_insert(v);
            }
        }
        texts.push((p, a.needed_text));
    }
    // The needed stages' text, once when every platform needs the same
    // stages (the usual case, and a single platform's key is unchanged),
    // else per platform.
    r.needed_text = if texts.iter().all(|(_, t)| *t == texts[0].1) {
        texts.swap_remove(0).1
    } else {
        texts
            .iter()
            .map(|(p, t)| format!("# platform {p}\n{t}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(r)
}

/// The external images the needed stages read (named contexts excluded)
/// for `platform` (as [`gather`]; empty when unknown): the caller
/// resolves each to a digest.
pub fn external_images(spec: &BuildSpec, platform: &str) -> Result<Vec<String>, EngineError> {
    // A join reads no Dockerfile: its units do.
    if !spec.join.is_empty() {
        return Ok(Vec::new());
    }
    let text = dockerfile_text(spec)?;
    Ok(reads(spec, &text, platform)?
        .images
        .into_iter()
        .filter(|i| !spec.contexts.contains_key(i))
        .collect())
}

/// The Dockerfile's path relative to the build context, when it is inside.
fn dockerfile_in_context(spec: &BuildSpec) -> Option<String> {
    spec.dockerfile
        .strip_prefix(&spec.context)
        .ok()
        .map(|p| p.display().to_string())
}

/// Builds the input manifest of `spec`.
///
/// `images`: external image → digest (missing ones are recorded as
/// `unresolved`, which never matches a recorded key). `upstreams`: named
/// context → the output digest of what it resolves to.
pub fn gather(
    spec: &BuildSpec,
    platform: &str,
    images: &BTreeMap<String, String>,
    upstreams: &BTreeMap<String, String>,
    cache: &StatCache,
) -> Result<(InputManifest, HashStats), EngineError> {
    let g = gather_for_build(spec, platform, images, upstreams, cache)?;
    Ok((g.manifest, g.stats))
}

/// A target's manifest and what its build needs beyond it.
pub struct Gathered {
    pub manifest: InputManifest,
    pub stats: HashStats,
    /// Whether kiln hands the build the job count (secret `kiln-jobs`,
    /// see [`crate::jobs`]); never part of the manifest.
    pub jobs_secret: bool,
}

/// [`gather`], plus whether the needed stages mount the job-count secret.
pub fn gather_for_build(
    spec: &BuildSpec,
    platform: &str,
    images: &BTreeMap<String, String>,
    upstreams: &BTreeMap<String, String>,
    cache: &StatCache,
) -> Result<Gathered, EngineError> {
    // Stamps are keyed by their stand-ins (docs/stamps.md).
    let keyed = spec.keyed();
    let spec: &BuildSpec = &keyed;
    let own = own_inputs_once(spec, platform, cache)?;
    Ok(compose(spec, platform, &own, images, upstreams))
}

/// [`gather_for_build`] when what it reads of `spec`'s own files was
/// gathered ahead and is ready ([`pregather`]): no file is read and
/// nothing waits, so a caller on an async runtime may call it in place.
/// `None` (and nothing taken) otherwise.
pub fn gather_ready(
    spec: &BuildSpec,
    platform: &str,
    images: &BTreeMap<String, String>,
    upstreams: &BTreeMap<String, String>,
) -> Option<Gathered> {
    let keyed = spec.keyed();
    let spec: &BuildSpec = &keyed;
    let k = OwnKey::of(spec, platform);
    let mut m = EARLY.lock().ok()?;
    let early = m.as_mut()?;
    let own = match early.get(&k)? {
        Early::Slot(slot) => slot.get()?.clone()?,
        Early::Taken => return None,
    };
    early.insert(k, Early::Taken);
    drop(m);
    Some(compose(spec, platform, &own, images, upstreams))
}

/// The manifest of (keyed) `spec` from its own inputs, the images it reads
/// and the outputs of its upstreams.
fn compose(
    spec: &BuildSpec,
    platform: &str,
    own: &OwnInputs,
    images: &BTreeMap<String, String>,
    upstreams: &BTreeMap<String, String>,
) -> Gathered {
    let mut upstreams = upstreams.clone();
    upstreams.extend(own.local.iter().map(|(k, v)| (k.clone(), v.clone())));
    let mut image_digests = BTreeMap::new();
    for i in &own.images {
        image_digests.insert(
            i.clone(),
            images
                .get(i)
                .cloned()
                .unwrap_or_else(|| "unresolved".into()),
        );
    }
    let mut m = InputManifest {
        recipe: RECIPE.into(),
        dockerfile: own.dockerfile.clone(),
        target_stage: spec.target.clone(),
        platform: platform.to_string(),
        args: own.args.clone(),
        files: own.files.clone(),
        images: image_digests,
        upstreams,
        remote: own.remote.clone(),
        // The compiler cache's settings reach builds as a secret kiln
        // adds to every target: not an input.
        secrets: spec
            .secrets
            .iter()
            .filter(|s| s.id != kiln_store::compiler_cache::SECRET_ID)
            .map(|s| s.id.clone())
            .collect(),
        ssh: Vec::new(),
        source_date_epoch: spec.args.get("SOURCE_DATE_EPOCH").cloned(),
        labels: spec.labels.clone(),
        attest: spec.attest.clone(),
    };
    m.normalize();
    Gathered {
        manifest: m,
        stats: own.stats,
        jobs_secret: crate::jobs::wanted(spec, &own.mounts),
    }
}

/// What a target's key reads of its own: the needed stages of its
/// Dockerfile, the files they read from its context and its local named
/// contexts, and its remote sources' pins. Everything of the key but the
/// images and upstream outputs it builds on, so it can be gathered before
/// those are known ([`pregather`]).
struct OwnInputs {
    dockerfile: String,
    args: BTreeMap<String, String>,
    files: Vec<ContextFile>,
    /// Each local-directory named context's digest, by name.
    local: BTreeMap<String, String>,
    /// The external images the needed stages read (named contexts
    /// excluded).
    images: Vec<String>,
    remote: BTreeMap<String, String>,
    mounts: Vec<kiln_dockerfile::dockerfile::Mount>,
    stats: HashStats,
}

/// What [`OwnInputs`] are gathered from: every field of a (keyed) spec
/// they read, and the platform.
#[derive(Clone, PartialEq, Eq, Hash)]
struct OwnKey {
    name: String,
    context: std::path::PathBuf,
    dockerfile: std::path::PathBuf,
    inline: Option<String>,
    target: Option<String>,
    args: BTreeMap<String, String>,
    contexts: BTreeMap<String, crate::spec::ContextSource>,
    platform: String,
}

impl OwnKey {
    fn of(spec: &BuildSpec, platform: &str) -> OwnKey {
        OwnKey {
            name: spec.name.clone(),
            context: spec.context.clone(),
            dockerfile: spec.dockerfile.clone(),
            inline: spec.dockerfile_inline.clone(),
            target: spec.target.clone(),
            args: spec.args.clone(),
            contexts: spec.contexts.clone(),
            platform: platform.to_string(),
        }
    }
}

/// A target's [`OwnInputs`], gathered ahead ([`pregather`]) or now.
enum Early {
    /// Being gathered, or gathered (`None`: that failed, and is gathered
    /// again where its error is reported).
    Slot(std::sync::Arc<std::sync::OnceLock<Option<std::sync::Arc<OwnInputs>>>>),
    /// Taken by a key: never gathered ahead again in this process.
    Taken,
}

static EARLY: std::sync::Mutex<Option<std::collections::HashMap<OwnKey, Early>>> =
    std::sync::Mutex::new(None);

/// `spec`'s [`OwnInputs`]: what [`pregather`] gathered of it (waiting for
/// it when it is being gathered), taken once; else gathered now. A key
/// gathered later in the run (after a build) reads the files again.
fn own_inputs_once(
    spec: &BuildSpec,
    platform: &str,
    cache: &StatCache,
) -> Result<std::sync::Arc<OwnInputs>, EngineError> {
    let k = OwnKey::of(spec, platform);
    let early = EARLY.lock().ok().and_then(|mut m| {
        m.get_or_insert_with(Default::default)
            .insert(k, Early::Taken)
    });
    if let Some(Early::Slot(slot)) = early
        && let Some(own) = slot.get_or_init(|| {
            own_inputs(spec, platform, cache)
                .ok()
                .map(std::sync::Arc::new)
        })
    {
        return Ok(own.clone());
    }
    own_inputs(spec, platform, cache).map(std::sync::Arc::new)
}

/// Gathers the [`OwnInputs`] of `specs` (in their order; their keys on
/// `engine_platform` where they name no platform) for the keys the run is
/// about to make, so that the work runs beside the rest of the preparation
/// (the preflight waits on the engine) rather than level by level in the
/// run. Only what no key took yet; errors are left for the keys to meet.
pub fn pregather(specs: &[BuildSpec], engine_platform: &str, cache: &StatCache) {
    pregather_each(specs.iter(), engine_platform, cache, || true);
}

/// [`pregather`] from the last target back, while `waiting` says so
/// (asked before each target): a thread waiting for something else helps
/// the one gathering ahead from the first, and the two meet in the middle
/// (a target one of them is gathering, the other waits for).
pub fn pregather_from_last(
    specs: &[BuildSpec],
    engine_platform: &str,
    cache: &StatCache,
    waiting: impl Fn() -> bool,
) {
    pregather_each(specs.iter().rev(), engine_platform, cache, waiting);
}

fn pregather_each<'a>(
    specs: impl Iterator<Item = &'a BuildSpec>,
    engine_platform: &str,
    cache: &StatCache,
    go_on: impl Fn() -> bool,
) {
    for spec in specs.filter(|s| s.join.is_empty()) {
        if !go_on() {
            return;
        }
        let keyed = spec.keyed();
        let platform = key_platform(&keyed, engine_platform);
        let k = OwnKey::of(&keyed, &platform);
        let slot = match EARLY.lock() {
            Ok(mut m) => match m
                .get_or_insert_with(Default::default)
                .entry(k)
                .or_insert_with(|| Early::Slot(Default::default()))
            {
                Early::Slot(slot) => slot.clone(),
                Early::Taken => continue,
            },
            Err(_) => return,
        };
        slot.get_or_init(|| {
            own_inputs(&keyed, &platform, cache)
                .ok()
                .map(std::sync::Arc::new)
        });
    }
}

/// The platform a key of `spec` is made for: its own (several in its
/// order: BuildKit's `TARGETPLATFORM` and the index follow it), else the
/// engine's.
pub fn key_platform(spec: &BuildSpec, engine_platform: &str) -> String {
    if spec.platforms.is_empty() {
        engine_platform.to_string()
    } else {
        spec.platforms.join(",")
    }
}

fn own_inputs(
    spec: &BuildSpec,
    platform: &str,
    cache: &StatCache,
) -> Result<OwnInputs, EngineError> {
    let text = dockerfile_text(spec)?;
    let a = reads(spec, &text, platform)?;
    // Only the part of the context the sources can reach is listed (not
    // `.git`, say, when nothing copies it).
    let reach = kiln_plan::key::reach(&a.context_sources);
    let entries = context::list_for_keys(
        &spec.context,
        dockerfile_in_context(spec).as_deref(),
        reach.as_deref(),
    )?;
    missing_sources(spec, &a.context_sources, &entries)?;
    let selected: Vec<String> = select_by(&entries, |e| e.path.as_str(), &a.context_sources)
        .into_iter()
        .map(|i| entries[i].path.clone())
        .collect();
    let threads = crate::proc::cores();
    let (hashes, mut stats) = hash_paths(&spec.context, &selected, cache, threads)?;
    // A local-directory named context enters the key as a digest of every
    // file in it (paths, modes, contents): `COPY --from=NAME` and
    // `FROM NAME` read it, and what is read of it is not analysed.
    let mut local = BTreeMap::new();
    for (name, src) in &spec.contexts {
        if let crate::spec::ContextSource::Local { path } = src {
            let (digest, s) = local_context_digest(spec, name, path, cache, threads)?;
            stats.files += s.files;
            stats.read_files += s.read_files;
            stats.read_bytes += s.read_bytes;
            local.insert(name.clone(), digest);
        }
    }
    let files = hashes
        .into_iter()
        .map(|h| ContextFile {
            path: h.path,
            mode: h.mode,
            digest: h.digest,
        })
        .collect();
    let images = a
        .images
        .iter()
        .filter(|i| !spec.contexts.contains_key(*i))
        .cloned()
        .collect();
    let remote =
        a.remote_sources
            .iter()
            .map(|r: &RemoteSource| {
                let pin = match (&r.checksum, r.kind) {
                    (Some(c), _) => c.clone(),
                    (None, RemoteKind::Git) => crate::git::resolve(&r.url)
                        .unwrap_or_else(|e| format!("{UNRESOLVED_GIT}{e}")),
                    (None, RemoteKind::Http) => UNPINNED.into(),
                };
                (r.url.clone(), pin)
            })
            .collect();
    Ok(OwnInputs {
        dockerfile: a.needed_text.clone(),
        args: a
            .consumed_args
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect(),
        files,
        local,
        images,
        remote,
        mounts: a.mounts.clone(),
        stats,
    })
}

/// A named file or directory the needed stages read from the context
/// that the context does not hold (after `.dockerignore`): BuildKit would
/// fail on it mid-build without a Dockerfile line; kiln reads the context
/// to make the key anyway, so it says so first, with the line.
fn missing_sources(
    spec: &BuildSpec,
    sources: &[kiln_dockerfile::dockerfile::ContextSource],
    all: &[context::Entry],
) -> Result<(), EngineError> {
    use kiln_dockerfile::dockerfile::{PathKind, SourceVia};
    for src in sources {
        if !matches!(src.kind, PathKind::Path | PathKind::Directory) || src.path.contains('$') {
            continue;
        }
        let path = src
            .path
            .trim_start_matches("./")
            .trim_start_matches('/')
            .trim_end_matches('/');
        if path.is_empty() || path == "." {
            continue;
        }
        if all.iter().any(|f| is_at_or_below(&f.path, path)) {
            continue;
        }
        let via = match src.via {
            SourceVia::Copy => "COPY",
            SourceVia::Add => "ADD",
            SourceVia::BindMount => "RUN --mount=type=bind,source=",
        };
        let df = if spec.dockerfile_inline.is_some() {
            format!("target {} (inline Dockerfile)", spec.name)
        } else {
            spec.dockerfile.display().to_string()
        };
        let ignored = if spec.context.join(path).exists() {
            " (it exists, but .dockerignore leaves it out of the context)"
        } else {
            ""
        };
        return Err(EngineError::Input(format!(
            "{df}:{}: {via} {}: no such file or directory in the build context {}{ignored}; target {} would fail in BuildKit",
            src.line,
            src.raw,
            spec.context.display(),
            spec.name
        )));
    }
    Ok(())
}

/// `local:blake3:<hex>` over every entry of a local-directory named
/// context: each path, kind, permission bits and content digest, in path
/// order.
fn local_context_digest(
    spec: &BuildSpec,
    name: &str,
    path: &str,
    cache: &StatCache,
    threads: usize,
) -> Result<(String, HashStats), EngineError> {
    let dir = std::path::Path::new(path);
    if !dir.is_dir() {
        return Err(EngineError::Input(format!(
            "target {}: named context {name} = {path:?} is not a directory; create it, or name a target (target:NAME) or an image (docker-image://REF)",
            spec.name
        )));
    }
    let mut paths: Vec<String> = context::list_all(dir)?
        .into_iter()
        .map(|e| e.path)
        .collect();
    paths.sort();
    let (hashes, stats) = hash_paths(dir, &paths, cache, threads)?;
    let mut h = blake3::Hasher::new();
    for f in &hashes {
        h.update(format!("{}\0{:?}\0{:o}\0{}\n", f.path, f.kind, f.mode, f.digest).as_bytes());
    }
    Ok((format!("local:blake3:{}", h.finalize().to_hex()), stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A local-directory named context is in the key by its whole content:
    /// any file in it counts (also one `.dockerignore` would hide: buildx
    /// and BuildKit versions disagree on applying it), kiln's state
    /// directory does not, and a missing directory says what to do.
    #[test]
    fn a_local_named_context_enters_the_key_by_its_content() {
        let root = std::env::temp_dir().join(format!("kiln-local-ctx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let ctx = root.join("ctx");
        let vendor = root.join("vendor");
        std::fs::create_dir_all(&ctx).unwrap();
        std::fs::create_dir_all(vendor.join("sub")).unwrap();
        std::fs::write(
            ctx.join("Dockerfile"),
            "FROM scratch\nCOPY --from=vendor sub/a.txt /a\n",
        )
        .unwrap();
        std::fs::write(vendor.join("sub/a.txt"), "one\n").unwrap();
        std::fs::write(vendor.join(".dockerignore"), "ignored.txt\n").unwrap();
        let spec = BuildSpec {
            name: "app".into(),
            context: ctx.clone(),
            dockerfile: ctx.join("Dockerfile"),
            contexts: [(
                "vendor".to_string(),
                crate::spec::ContextSource::Local {
                    path: vendor.display().to_string(),
                },
            )]
            .into(),
            ..BuildSpec::default()
        };
        let key = || {
            let cache = StatCache::default();
            let g = gather_for_build(
                &spec,
                "linux/amd64",
                &BTreeMap::new(),
                &[("vendor".to_string(), format!("local:{}", vendor.display()))].into(),
                &cache,
            )
            .unwrap();
            (g.manifest.upstreams["vendor"].clone(), g.manifest.key())
        };
        let (d1, k1) = key();
        assert!(d1.starts_with("local:blake3:"), "{d1}");
        assert_eq!(key().1, k1, "stable");
        std::fs::write(vendor.join("sub/a.txt"), "two\n").unwrap();
        let (d2, k2) = key();
        assert_ne!(d2, d1);
        assert_ne!(k2, k1);
        std::fs::write(vendor.join("ignored.txt"), "x\n").unwrap();
        let k3 = key().1;
        assert_ne!(k3, k2, "a file .dockerignore names still counts");
        std::fs::create_dir_all(vendor.join(".kiln")).unwrap();
        std::fs::write(vendor.join(".kiln/state"), "x\n").unwrap();
        assert_eq!(key().1, k3, "kiln's state directory never counts");
        std::fs::remove_dir_all(&vendor).unwrap();
        let cache = StatCache::default();
        let Err(err) = gather_for_build(
            &spec,
            "linux/amd64",
            &BTreeMap::new(),
            &BTreeMap::new(),
            &cache,
        ) else {
            panic!("a missing directory is an error");
        };
        let err = err.to_string();
        assert!(
            err.contains("named context vendor") && err.contains("not a directory"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// `TARGETARCH` and its kin take the target platform's values, as in
    /// BuildKit: they choose files and stages; a target of several
    /// platforms reads what each platform reads; a file no platform reads
    /// never counts.
    #[test]
    fn platform_args_choose_what_each_platform_reads() {
        let ctx = std::env::temp_dir().join(format!("kiln-platform-args-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&ctx);
        std::fs::create_dir_all(ctx.join("src")).unwrap();
        std::fs::write(
            ctx.join("Dockerfile"),
            "FROM scratch AS base-amd64\nFROM busybox AS base-arm64\nFROM base-${TARGETARCH}\nARG TARGETARCH\nCOPY src/${TARGETARCH}.txt /arch.txt\n",
        )
        .unwrap();
        for f in ["amd64", "arm64", "riscv64"] {
            std::fs::write(ctx.join(format!("src/{f}.txt")), format!("{f}\n")).unwrap();
        }
        let spec = BuildSpec {
            name: "app".into(),
            context: ctx.clone(),
            dockerfile: ctx.join("Dockerfile"),
            ..BuildSpec::default()
        };
        let gathered = |platform: &str| {
            gather_for_build(
                &spec,
                platform,
                &BTreeMap::new(),
                &BTreeMap::new(),
                &StatCache::default(),
            )
            .unwrap()
            .manifest
        };
        let files = |m: &InputManifest| m.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
        let amd = gathered("linux/amd64");
        assert_eq!(files(&amd), ["src/amd64.txt"]);
        assert!(
            amd.images.is_empty(),
            "scratch is no image: {:?}",
            amd.images
        );
        assert!(
            !amd.args.contains_key("TARGETARCH"),
            "the platform stands for it"
        );
        let arm = gathered("linux/arm64");
        assert_eq!(files(&arm), ["src/arm64.txt"]);
        assert_eq!(external_images(&spec, "linux/arm64").unwrap(), ["busybox"]);
        let both = gathered("linux/amd64,linux/arm64");
        assert_eq!(files(&both), ["src/amd64.txt", "src/arm64.txt"]);
        assert_eq!(
            external_images(&spec, "linux/amd64,linux/arm64").unwrap(),
            ["busybox"]
        );
        assert_ne!(both.key(), amd.key());
        assert_ne!(both.key(), arm.key());
        // Only what a platform reads counts.
        std::fs::write(ctx.join("src/riscv64.txt"), "changed\n").unwrap();
        assert_eq!(gathered("linux/amd64,linux/arm64").key(), both.key());
        std::fs::write(ctx.join("src/arm64.txt"), "changed\n").unwrap();
        assert_ne!(gathered("linux/amd64,linux/arm64").key(), both.key());
        assert_eq!(gathered("linux/amd64").key(), amd.key());
        let _ = std::fs::remove_dir_all(&ctx);
    }

    #[test]
    fn unresolved_images_and_unpinned_sources_make_a_key_volatile() {
        let mut m = InputManifest::default();
        assert!(volatile(&m).is_empty());
        m.images.insert("base:1".into(), "sha256:abc".into());
        m.remote
            .insert("https://x/a.tgz".into(), "sha256:def".into());
        m.remote
            .insert("https://x/y.git#v1".into(), "git:0123".into());
        assert!(volatile(&m).is_empty(), "pinned inputs are fine");
        m.images.insert("gone:1".into(), "unresolved".into());
        m.remote.insert("https://x/b.tgz".into(), UNPINNED.into());
        m.remote.insert(
            "https://x/z.git#main".into(),
            format!("{UNRESOLVED_GIT}no such repo"),
        );
        let v = volatile(&m);
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(v[0].contains("gone:1"), "{v:?}");
        assert!(v.iter().any(|x| x.contains("b.tgz is not pinned")), "{v:?}");
        assert!(v.iter().any(|x| x.contains("no such repo")), "{v:?}");
    }

    /// Serves the files under `root` over plain HTTP (git's "dumb"
    /// protocol needs nothing more) until the test process ends.
    fn serve(root: std::path::PathBuf) -> u16 {
        use std::io::{BufRead, BufReader, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                let mut line = String::new();
                let mut r = BufReader::new(c.try_clone().unwrap());
                if r.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) <= 2 {
                        break;
                    }
                }
                let path = line.split(' ').nth(1).unwrap_or("/");
                let path = path.split('?').next().unwrap_or("/");
                let resp = match std::fs::read(root.join(path.trim_start_matches('/'))) {
                    Ok(b) => {
                        let mut v = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            b.len()
                        )
                        .into_bytes();
                        v.extend(b);
                        v
                    }
                    Err(_) => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = c.write_all(&resp);
            }
        });
        port
    }

    /// A git `ADD` takes the commit its ref names now: moving the branch
    /// changes the key. (A real repository, served over HTTP.)
    #[test]
    fn a_git_add_keys_on_the_commit() {
        let dir = std::env::temp_dir().join(format!("kiln-gitkey-{}", std::process::id()));
        let work = dir.join("work");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&work).unwrap();
        let git = |cwd: &std::path::Path, args: &[&str]| {
            let o = std::process::Command::new("git")
                .args(args)
                .current_dir(cwd)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("f"), "1").unwrap();
        git(&work, &["add", "f"]);
        git(&work, &["commit", "-q", "-m", "one"]);
        let bare = dir.join("srv/repo.git");
        let publish = || {
            let _ = std::fs::remove_dir_all(&bare);
            git(
                &dir,
                &[
                    "clone",
                    "-q",
                    "--bare",
                    work.to_str().unwrap(),
                    bare.to_str().unwrap(),
                ],
            );
            git(&bare, &["update-server-info"]);
        };
        publish();
        let port = serve(dir.join("srv"));
        let spec = BuildSpec {
            name: "g".into(),
            context: dir.clone(),
            dockerfile: dir.join("Dockerfile"),
            dockerfile_inline: Some(format!(
                "FROM scratch\nADD http://127.0.0.1:{port}/repo.git#main /src\n"
            )),
            ..BuildSpec::default()
        };
        let cache = StatCache::default();
        let none = BTreeMap::new();
        let (m1, _) = gather(&spec, "linux/amd64", &none, &none, &cache).unwrap();
        let pin = m1.remote.values().next().expect("a remote source").clone();
        assert!(pin.starts_with("git:"), "{pin}");
        assert!(volatile(&m1).is_empty());
        let (again, _) = gather(&spec, "linux/amd64", &none, &none, &cache).unwrap();
        assert_eq!(m1.key(), again.key(), "same commit, same key");
        std::fs::write(work.join("f"), "2").unwrap();
        git(&work, &["commit", "-q", "-am", "two"]);
        publish();
        let (m2, _) = gather(&spec, "linux/amd64", &none, &none, &cache).unwrap();
        assert_ne!(m1.key(), m2.key(), "a moved branch changes the key");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `COPY . .` reads the whole context, but kiln's own state is not
    /// part of it: recording a build does not change the key.
    #[test]
    fn kiln_state_never_changes_a_key() {
        let dir = std::env::temp_dir().join(format!("kiln-statekey-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".kiln/store")).unwrap();
        std::fs::write(dir.join("a.txt"), "a").unwrap();
        let spec = BuildSpec {
            name: "all".into(),
            context: dir.clone(),
            dockerfile: dir.join("Dockerfile"),
            dockerfile_inline: Some("FROM scratch\nCOPY . /src/\n".into()),
            ..BuildSpec::default()
        };
        let cache = StatCache::default();
        let none = BTreeMap::new();
        let (m1, _) = gather(&spec, "linux/amd64", &none, &none, &cache).unwrap();
        std::fs::write(dir.join(".kiln/store/record.json"), "{}").unwrap();
        std::fs::write(dir.join(".kiln/stat-cache.json"), "{}").unwrap();
        let (m2, _) = gather(&spec, "linux/amd64", &none, &none, &cache).unwrap();
        assert_eq!(m1.key(), m2.key());
        std::fs::write(dir.join("a.txt"), "b").unwrap();
        let (m3, _) = gather(&spec, "linux/amd64", &none, &none, &cache).unwrap();
        assert_ne!(m1.key(), m3.key(), "the context itself still counts");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
