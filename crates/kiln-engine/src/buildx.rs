//! The buildx driver: the `docker buildx build` command line that builds a
//! target on a buildx builder (remote, docker-container or kubernetes
//! driver), with kiln's cache policy applied.
//!
//! buildx is not installable on the reference machine, so this driver is a
//! command-line generator whose output is tested as data (snapshots of the
//! twin's command lines); running it is a plain process spawn.
//!
//! What it always does: registry cache import of the stable ref and the
//! per-commit ref, export to the stable ref with `mode=max`; named contexts
//! handed over as `--build-context NAME=docker-image://REF@DIGEST` (the
//! builder is remote, so hand-over is through the registry by digest, never
//! a tag); secrets by id and source only; `--progress rawjson` and a
//! metadata file so kiln can read the outcome.
//! What it never does: add `BUILDKIT_INLINE_CACHE`, or pass a secret value.
//!
//! Must never: evaluate bake files or decide what to build.

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
}

impl Default for BuildxOptions {
    fn default() -> Self {
        BuildxOptions {
            builder: "default".into(),
            docker: "docker".into(),
            metadata_file: None,
        }
    }
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
    let mut a: Vec<String> = vec![
        opts.docker.clone(),
        "buildx".into(),
        "build".into(),
        "--builder".into(),
        opts.builder.clone(),
        "--progress".into(),
        "rawjson".into(),
    ];
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
    for t in &spec.tags {
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
            ContextSource::Local { path } => path.clone(),
        };
        flag("--build-context", format!("{name}={value}"));
    }
    for s in &spec.secrets {
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
    if spec.no_cache {
        a.push("--no-cache".into());
    }
    for e in &policy.from {
        a.push("--cache-from".into());
        a.push(e.csv());
    }
    for e in &policy.to {
        a.push("--cache-to".into());
        a.push(e.csv());
    }
    if spec.push {
        a.push("--push".into());
    }
    if let Some(m) = &opts.metadata_file {
        a.push("--metadata-file".into());
        a.push(m.clone());
    }
    a.push(shown(&spec.context, cwd));
    a
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
}
