//! The pure command line of a buildx build: one target with kiln's cache
//! policy becomes one `docker buildx build` argv ([`command`]), which the
//! buildx driver runs and `kiln plan --driver buildx` prints ([`render`]).
//!
//! Must never: run anything, or read anything but its arguments.

use std::collections::BTreeMap;
use std::path::Path;

use kiln_plan::cache::CachePolicy;

use crate::spec::{BuildSpec, ContextSource};

/// How to invoke buildx.
#[derive(Clone, Debug)]
pub struct BuildxOptions {
    /// `--builder NAME`.
    pub builder: String,
    /// The docker CLI with the buildx plugin.
    pub docker: String,
    /// Where buildx writes the build result (`--metadata-file`).
    pub metadata_file: Option<String>,
    /// A docker-driver builder is a docker context: buildx before 0.14
    /// selects it only as `docker --context NAME buildx`, so it is named
    /// that way instead of `--builder`.
    pub context: Option<String>,
    /// `--progress` (`rawjson`, or `plain` for a buildx without it).
    pub progress: String,
    /// Secrets kiln adds itself (the job count), after the bake file's.
    pub implicit_secrets: Vec<crate::spec::SecretSpec>,
    /// Extra tags (the per-run build tag when nothing is pushed).
    pub extra_tags: Vec<String>,
    /// Clamp the file times in the pushed layers to `SOURCE_DATE_EPOCH`
    /// (the image exporter's `rewrite-timestamp`), so that a rebuild of
    /// unchanged inputs is byte-identical. Only where BuildKit can: a
    /// pushed image of a builder whose exporter does not unpack into an
    /// engine (`rewrite_applies`).
    pub rewrite_timestamp: bool,
}

impl Default for BuildxOptions {
    fn default() -> Self {
        BuildxOptions {
            builder: "default".into(),
            docker: "docker".into(),
            metadata_file: None,
            context: None,
            progress: "rawjson".into(),
            implicit_secrets: Vec::new(),
            extra_tags: Vec::new(),
            rewrite_timestamp: false,
        }
    }
}

/// Whether a build of `spec` on a builder can have its layer file times
/// rewritten to `SOURCE_DATE_EPOCH`: it has one, its image is pushed, and
/// the builder keeps no engine image store. A docker-driver builder's
/// image exporter always unpacks into the engine, and BuildKit refuses
/// `rewrite-timestamp` with `unpack` (moby/buildkit#4230).
pub fn rewrite_applies(spec: &BuildSpec, keeps_images: bool) -> bool {
    !keeps_images
        && spec.pushes()
        && spec
            .args
            .get("SOURCE_DATE_EPOCH")
            .is_some_and(|v| !v.is_empty())
}

/// Shows `p` relative to `base` when it is inside it (stable snapshots and
/// shorter lines); otherwise as is.
fn shown(p: &Path, base: &Path) -> String {
    match p.strip_prefix(base) {
        Ok(r) if r.as_os_str().is_empty() => ".".into(),
        Ok(r) => r.display().to_string(),
        Err(_) => p.display().to_string(),
    }
}

/// The argv of `docker buildx build` for `spec` under `policy`.
///
/// `hand_over` maps each named context (and dependency tag) to the immutable
/// reference of what this run produced for it (`repo@sha256:…`). Paths are
/// shown relative to `cwd` (the directory buildx runs in).
pub fn command(
    spec: &BuildSpec,
    policy: &CachePolicy,
    hand_over: &BTreeMap<String, String>,
    opts: &BuildxOptions,
    cwd: &Path,
) -> Vec<String> {
    let mut a: Vec<String> = vec![opts.docker.clone()];
    match &opts.context {
        Some(c) => a.extend([
            "--context".into(),
            c.clone(),
            "buildx".into(),
            "build".into(),
        ]),
        None => a.extend([
            "buildx".into(),
            "build".into(),
            "--builder".into(),
            opts.builder.clone(),
        ]),
    }
    a.extend(["--progress".into(), opts.progress.clone()]);
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    match &spec.dockerfile_inline {
        // buildx reads an inline Dockerfile from stdin.
        Some(_) => flag("--file", "-".into()),
        None => flag("--file", shown(&spec.dockerfile, cwd)),
    }
    if let Some(t) = &spec.target {
        flag("--target", t.clone());
    }
    if !spec.platforms.is_empty() {
        flag("--platform", spec.platforms.join(","));
    }
    for (k, v) in &spec.args {
        // A dependency's tag used as an arg value resolves to what this run
        // built; a context name stays (buildx resolves it by --build-context).
        let v = match hand_over.get(v) {
            Some(r) if !spec.contexts.contains_key(v) => r.clone(),
            _ => v.clone(),
        };
        flag("--build-arg", format!("{k}={v}"));
    }
    for (k, v) in &spec.labels {
        flag("--label", format!("{k}={v}"));
    }
    for t in spec.tags.iter().chain(&opts.extra_tags) {
        flag("--tag", t.clone());
    }
    for (name, src) in &spec.contexts {
        let value = match src {
            ContextSource::Target { name: t } => hand_over
                .get(name)
                .or_else(|| hand_over.get(t))
                .map(|r| format!("docker-image://{r}"))
                .unwrap_or_else(|| format!("target:{t}")),
            ContextSource::Image { reference, .. } => format!(
                "docker-image://{}",
                hand_over.get(name).unwrap_or(reference)
            ),
            ContextSource::Local { path } => shown(Path::new(path), cwd),
        };
        flag("--build-context", format!("{name}={value}"));
    }
    // A dependency's tag (or a registry-pinned base image) named directly
    // in the Dockerfile resolves to what this run built: BuildKit takes a
    // named context whose name is an image reference in its place.
    for (name, r) in hand_over {
        if !spec.contexts.contains_key(name) && kiln_plan::ImageRef::parse(name).is_some() {
            flag("--build-context", format!("{name}=docker-image://{r}"));
        }
    }
    for s in spec.secrets.iter().chain(&opts.implicit_secrets) {
        let mut v = format!("id={}", s.id);
        if let Some(src) = &s.src {
            v.push_str(&format!(",src={}", shown(src, cwd)));
        } else if let Some(env) = &s.env {
            v.push_str(&format!(",env={env}"));
        }
        flag("--secret", v);
    }
    if let Some(n) = &spec.network {
        flag("--network", n.clone());
    }
    for v in &spec.attest {
        flag("--attest", v.clone());
    }
    for v in &spec.allow {
        flag("--allow", v.clone());
    }
    if spec.no_cache {
        a.push("--no-cache".into());
    }
    if spec.pull {
        a.push("--pull".into());
    }
    for e in &policy.from {
        a.push("--cache-from".into());
        a.push(e.csv());
    }
    for e in &policy.to {
        a.push("--cache-to".into());
        a.push(e.csv());
    }
    if let (true, Some(u)) = (spec.push, &spec.unit) {
        // A platform unit: pushed by digest into its target's repository,
        // no tag (its target's join puts the index under the tags), and
        // not stored in the builder's image store: units of one target
        // pushed at once would each store an image under the same
        // untagged name there, and all but the first fail ("already
        // exists"; seen on a BuildKit with a containerd image store).
        let mut out = format!(
            "type=image,name={},push-by-digest=true,name-canonical=true,push=true,store=false",
            u.repository
        );
        if opts.rewrite_timestamp {
            out.push_str(",rewrite-timestamp=true");
        }
        a.push("--output".into());
        a.push(out);
    } else if spec.push && !spec.tags.is_empty() {
        if opts.rewrite_timestamp {
            // `--push` is `--output type=registry`; the tags name it.
            a.push("--output".into());
            a.push("type=registry,rewrite-timestamp=true".into());
        } else {
            a.push("--push".into());
        }
    }
    if let Some(m) = &opts.metadata_file {
        a.push("--metadata-file".into());
        a.push(m.clone());
    }
    a.push(shown(&spec.context, cwd));
    a
}

/// The policy of a spec given none (a build outside `kiln build`'s cache
/// policy): no import, no export.
pub(super) fn no_cache_policy() -> CachePolicy {
    CachePolicy {
        driver: kiln_plan::cache::Driver::Buildx,
        platform: "native".into(),
        stable_ref: None,
        from: Vec::new(),
        to: Vec::new(),
        inline: false,
        notices: Vec::new(),
    }
}

/// Flags of `docker buildx build` that take no value.
const SWITCHES: [&str; 3] = ["--no-cache", "--push", "--load"];

/// A shell-quoted rendering of an argv for humans: the command on the first
/// line, then one flag (with its value) per line, the context last.
pub fn render(argv: &[String]) -> String {
    let q = |s: &str| {
        let plain = !s.is_empty()
            && s.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '@' | '+')
            });
        if plain {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let head = argv.len().min(3);
    let mut out = argv[..head]
        .iter()
        .map(|w| q(w))
        .collect::<Vec<_>>()
        .join(" ");
    let mut i = head;
    while i < argv.len() {
        let w = &argv[i];
        let takes_value =
            w.starts_with("--") && !SWITCHES.contains(&w.as_str()) && i + 1 < argv.len();
        if takes_value {
            out.push_str(&format!(" \\\n  {} {}", w, q(&argv[i + 1])));
            i += 2;
        } else {
            out.push_str(&format!(" \\\n  {}", q(w)));
            i += 1;
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_plan::cache::{CacheSettings, CacheTarget, Driver, policy};

    fn spec() -> BuildSpec {
        BuildSpec {
            name: "app".into(),
            context: "/w".into(),
            dockerfile: "/w/docker/Dockerfile.app".into(),
            args: [
                ("BASE_IMAGE".to_string(), "base-img".to_string()),
                ("VERSION".to_string(), "1.0".to_string()),
            ]
            .into(),
            tags: vec!["reg:5000/app:1".into()],
            contexts: [(
                "base-img".to_string(),
                ContextSource::Target {
                    name: "base".into(),
                },
            )]
            .into(),
            secrets: vec![crate::spec::SecretSpec {
                id: "tok".into(),
                src: None,
                env: Some("TOKEN".into()),
            }],
            network: Some("host".into()),
            push: true,
            ..BuildSpec::default()
        }
    }

    #[test]
    fn pull_attestations_and_entitlements_reach_buildx() {
        let s = BuildSpec {
            push: false,
            pull: true,
            attest: vec![
                "type=sbom,disabled=false".into(),
                "type=provenance,mode=max".into(),
            ],
            allow: vec!["security.insecure".into()],
            ..spec()
        };
        let line = command(
            &s,
            &no_cache_policy(),
            &Default::default(),
            &BuildxOptions::default(),
            Path::new("/w"),
        )
        .join(" ");
        assert!(
            line.contains("--attest type=sbom,disabled=false --attest type=provenance,mode=max --allow security.insecure"),
            "{line}"
        );
        assert!(line.contains(" --pull "), "{line}");
    }

    #[test]
    fn a_docker_driver_builder_is_named_by_its_context_and_secrets_follow() {
        let s = spec();
        let opts = BuildxOptions {
            context: Some("kiln-node1".into()),
            progress: "plain".into(),
            implicit_secrets: vec![crate::spec::SecretSpec {
                id: "kiln-jobs".into(),
                src: Some("/tmp/b/kiln-jobs".into()),
                env: None,
            }],
            extra_tags: vec!["kiln.local/app:run-1".into()],
            ..BuildxOptions::default()
        };
        let argv = command(
            &BuildSpec { push: false, ..s },
            &no_cache_policy(),
            &[(
                "reg:5000/base:1".to_string(),
                "kiln.local/base:abcd".to_string(),
            )]
            .into(),
            &opts,
            Path::new("/w"),
        );
        let line = argv.join(" ");
        assert!(
            line.starts_with("docker --context kiln-node1 buildx build --progress plain"),
            "{line}"
        );
        assert!(!line.contains("--builder"), "{line}");
        assert!(
            line.contains("--secret id=tok,env=TOKEN --secret id=kiln-jobs,src=/tmp/b/kiln-jobs"),
            "{line}"
        );
        assert!(line.contains("--tag kiln.local/app:run-1"), "{line}");
        // A dependency's tag named directly becomes a named context.
        assert!(
            line.contains("--build-context reg:5000/base:1=docker-image://kiln.local/base:abcd"),
            "{line}"
        );
        assert!(!line.contains("--push"), "{line}");
    }

    #[test]
    fn a_target_becomes_one_buildx_command_with_the_cache_policy() {
        let s = spec();
        let p = &policy(
            &CacheTarget {
                name: &s.name,
                tags: &s.tags,
                push: true,
                ..CacheTarget::default()
            },
            &CacheSettings::default(),
            Driver::Buildx,
        )[0];
        let hand: BTreeMap<String, String> = [(
            "base-img".to_string(),
            "reg:5000/base@sha256:aaaa".to_string(),
        )]
        .into();
        let argv = command(
            &s,
            p,
            &hand,
            &BuildxOptions {
                builder: "fleet".into(),
                ..BuildxOptions::default()
            },
            Path::new("/w"),
        );
        let line = argv.join(" ");
        assert!(line.starts_with("docker buildx build --builder fleet --progress rawjson --file docker/Dockerfile.app"), "{line}");
        assert!(
            line.contains("--build-context base-img=docker-image://reg:5000/base@sha256:aaaa"),
            "{line}"
        );
        assert!(line.contains("--cache-to type=registry,ref=reg:5000/app:buildcache-app-native,mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true"), "{line}");
        assert!(
            line.contains("--cache-from type=registry,ref=reg:5000/app:1"),
            "{line}"
        );
        assert!(line.contains("--secret id=tok,env=TOKEN"), "{line}");
        assert!(!line.contains("BUILDKIT_INLINE_CACHE"), "{line}");
        assert!(line.ends_with("--push ."), "{line}");
        let text = render(&argv);
        assert!(text.contains(" \\\n  --cache-to "), "{text}");
    }

    /// A platform unit is pushed by digest into its target's repository,
    /// with no tag, for its one platform.
    #[test]
    fn a_platform_unit_pushes_by_digest_without_a_tag() {
        let mut s = spec();
        s.name = "app@linux/arm64".into();
        s.tags.clear();
        s.platforms = vec!["linux/arm64".into()];
        s.push = true;
        s.unit = Some(crate::spec::Unit {
            target: "app".into(),
            platform: "linux/arm64".into(),
            repository: "reg:5000/app".into(),
        });
        assert!(s.pushes() && s.registry_only());
        let opts = BuildxOptions {
            builder: "b".into(),
            ..BuildxOptions::default()
        };
        let line = command(
            &s,
            &no_cache_policy(),
            &BTreeMap::new(),
            &opts,
            Path::new("/w"),
        )
        .join(" ");
        assert!(line.contains("--platform linux/arm64"), "{line}");
        assert!(
            !line.contains("--tag") && !line.contains("--push"),
            "{line}"
        );
        assert!(
            line.ends_with(
                "--output type=image,name=reg:5000/app,push-by-digest=true,name-canonical=true,push=true,store=false ."
            ),
            "{line}"
        );
        s.args.insert("SOURCE_DATE_EPOCH".into(), "0".into());
        assert!(rewrite_applies(&s, false));
        let opts = BuildxOptions {
            rewrite_timestamp: true,
            ..opts
        };
        let line = command(
            &s,
            &no_cache_policy(),
            &BTreeMap::new(),
            &opts,
            Path::new("/w"),
        )
        .join(" ");
        assert!(
            line.contains("store=false,rewrite-timestamp=true ."),
            "{line}"
        );
    }

    #[test]
    fn layer_times_are_rewritten_where_buildkit_can() {
        let mut s = spec();
        s.push = true;
        s.args.insert("SOURCE_DATE_EPOCH".into(), "0".into());
        // A builder that keeps no image store: rewritten, when pushed with
        // an epoch.
        assert!(rewrite_applies(&s, false));
        // A docker-driver builder unpacks into its engine, which BuildKit
        // refuses with rewrite-timestamp.
        assert!(!rewrite_applies(&s, true));
        let mut no_epoch = s.clone();
        no_epoch.args.remove("SOURCE_DATE_EPOCH");
        assert!(!rewrite_applies(&no_epoch, false));
        let mut unpushed = s.clone();
        unpushed.push = false;
        assert!(!rewrite_applies(&unpushed, false));

        let p = no_cache_policy();
        let argv = command(
            &s,
            &p,
            &BTreeMap::new(),
            &BuildxOptions {
                rewrite_timestamp: true,
                ..BuildxOptions::default()
            },
            Path::new("/w"),
        );
        let line = argv.join(" ");
        assert!(
            line.ends_with("--output type=registry,rewrite-timestamp=true ."),
            "{line}"
        );
        assert!(!line.contains("--push"), "{line}");
        assert!(line.contains("--build-arg SOURCE_DATE_EPOCH=0"), "{line}");
    }
}
