//! Bake targets → engine [`BuildSpec`]s, and the cache policy of each
//! driver applied to them.
//!
//! Must never: read a secret's value (only whether its file or variable is
//! there), or ask the engine or a registry anything: a spec is made from
//! the resolved bake target and the files it names.

use std::path::{Path, PathBuf};

use kiln_engine::{BuildSpec, ContextSource, SecretSpec};
use kiln_plan::cache::CacheSettings;

use super::plan::Planned;
use crate::error::CliError;

/// `p` (a `cwd://` prefix dropped) relative to `cwd`, without `.` components.
fn abs(cwd: &Path, p: &str) -> PathBuf {
    let p = p.strip_prefix("cwd://").unwrap_or(p);
    let path = Path::new(p);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    // Drop `.` components so messages show clean paths.
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// Applies the local driver's cache policy to a spec: inline cache and
/// `cache-from` of the previously pushed image for targets that push.
pub fn apply_local_cache(
    spec: &mut BuildSpec,
    planned: &Planned,
    settings: &kiln_plan::cache::CacheSettings,
) -> Vec<String> {
    let Some(t) = planned.targets.get(&spec.name) else {
        return Vec::new();
    };
    let policies = cache_policy(t, settings, kiln_plan::cache::Driver::Local, spec.push);
    let Some(p) = policies.first() else {
        return Vec::new();
    };
    spec.inline_cache = p.inline;
    spec.cache_from = p
        .from
        .iter()
        .filter(|e| e.kind() == "registry")
        .filter_map(|e| e.reference().map(String::from))
        .collect();
    p.notices.clone()
}

/// Applies the buildx driver's cache policy to a spec: the stable registry
/// ref and the per-commit tag imported, the stable ref exported `mode=max`
/// (docs/cache-policy.md).
pub fn apply_buildx_cache(
    spec: &mut BuildSpec,
    planned: &Planned,
    settings: &kiln_plan::cache::CacheSettings,
) {
    // A join builds nothing; a platform unit has its own ref, of its
    // target and its one platform.
    if !spec.join.is_empty() {
        spec.buildx_cache = None;
        return;
    }
    let name = spec.unit.as_ref().map_or(&spec.name, |u| &u.target);
    let Some(t) = planned.targets.get(name) else {
        return;
    };
    let mut t = t.clone();
    if let Some(u) = &spec.unit {
        t.platforms = Some(vec![u.platform.clone()]);
    }
    spec.buildx_cache = cache_policy(&t, settings, kiln_plan::cache::Driver::Buildx, spec.push)
        .into_iter()
        .next();
}

/// The build spec of one planned target; `push` forces pushing its tags.
pub fn spec_for(
    planned: &Planned,
    name: &str,
    cwd: &Path,
    push: bool,
) -> Result<BuildSpec, CliError> {
    let t = planned
        .targets
        .get(name)
        .ok_or_else(|| CliError::usage(format!("target {name} was planned but not resolved")))?;
    check_supported(name, t)?;
    declare_insecure_registries(t);
    let context_str = t.context.clone().unwrap_or_else(|| ".".into());
    if kiln_bake::is_remote(&context_str) {
        return Err(CliError::usage(format!(
            "target {name}: remote build contexts ({context_str}) are not supported by the local engine driver yet"
        )));
    }
    let context = abs(cwd, &context_str);
    let df = t.dockerfile.clone().unwrap_or_else(|| "Dockerfile".into());
    let dockerfile = if let Some(rest) = df.strip_prefix("cwd://") {
        cwd.join(rest)
    } else if Path::new(&df).is_absolute() {
        PathBuf::from(&df)
    } else {
        context.join(&df)
    };
    let mut contexts = std::collections::BTreeMap::new();
    for (k, v) in t.contexts.clone().unwrap_or_default() {
        let src = if let Some(n) = v.strip_prefix("target:") {
            ContextSource::Target {
                name: n.to_string(),
            }
        } else if let Some(r) = v.strip_prefix("docker-image://") {
            let producer = planned
                .graph
                .producers(r)
                .into_iter()
                .find(|p| *p != name)
                .map(String::from);
            ContextSource::Image {
                reference: r.to_string(),
                producer,
            }
        } else if kiln_bake::is_remote(&v) || v.contains("://") {
            return Err(CliError::usage(format!(
                "target {name}: named context {k} = {v}: only target:, docker-image:// and local-directory named contexts are built so far"
            ))
            .with_hint("build it as a target of its own and name it with target:NAME, or push it and use docker-image://REF"));
        } else {
            // Relative to the directory bake resolves paths from, as the
            // build context is.
            ContextSource::Local {
                path: abs(cwd, &v).display().to_string(),
            }
        };
        contexts.insert(k, src);
    }
    let secrets = t
        .secret
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|e| SecretSpec {
            id: e
                .get("id")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string(),
            src: e.get("src").and_then(|v| v.as_str()).map(|p| abs(cwd, p)),
            env: e.get("env").and_then(|v| v.as_str()).map(String::from),
        })
        .collect();
    let outputs_push = outputs_push(t);
    let strip = |m: Option<std::collections::BTreeMap<String, Option<String>>>| {
        m.unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect()
    };
    Ok(BuildSpec {
        name: name.to_string(),
        context,
        dockerfile,
        dockerfile_inline: t.dockerfile_inline.clone(),
        args: strip(t.args.clone()),
        labels: strip(t.labels.clone()),
        tags: t.tags.clone().unwrap_or_default(),
        target: t.target.clone(),
        platforms: t.platforms.clone().unwrap_or_default(),
        network: t
            .network
            .clone()
            .filter(|n| !n.is_empty() && n != "default"),
        no_cache: t.no_cache.unwrap_or(false),
        pull: t.pull.unwrap_or(false),
        load: t
            .output
            .iter()
            .flatten()
            .any(|e| e.get("type").and_then(|v| v.as_str()) == Some("docker")),
        attest: t.attest.iter().flatten().map(attest_value).collect(),
        allow: t.entitlements.clone().unwrap_or_default(),
        contexts,
        secrets,
        deps: planned
            .graph
            .deps(name)
            .into_iter()
            .map(String::from)
            .collect(),
        push: push || outputs_push,
        cache_from: Vec::new(),
        inline_cache: false,
        buildx_cache: None,
        key_view: planned.key_views.get(name).cloned(),
        unit: None,
        join: Vec::new(),
    })
}

/// Checks what targets ask beyond a plain build against what the run
/// grants and where it builds: every entitlement a target names must be
/// granted with `--allow` (bake refuses the same without a terminal to ask
/// on), and on the Docker engine (`on_engine`: the engine driver, or a
/// fleet with an engine node), whose build API takes neither attestations
/// nor entitlements other than the host network, those are refused before
/// anything builds.
pub fn check_grants(
    specs: &[BuildSpec],
    allow: &[String],
    on_engine: bool,
) -> Result<(), CliError> {
    for s in specs {
        // `network = "host"` names its entitlement itself (bake's print
        // lists it); kiln has always built it without `--allow`.
        let implied = |e: &str| e == "network.host" && s.network.as_deref() == Some("host");
        if let Some(e) = s
            .allow
            .iter()
            .find(|e| !allow.contains(e) && !implied(e.as_str()))
        {
            return Err(CliError::usage(format!(
                "target {}: it asks for the entitlement {e}, which this run does not grant",
                s.name
            ))
            .with_hint(format!("pass --allow {e} if the build may have it")));
        }
        if !on_engine {
            continue;
        }
        if !s.attest.is_empty() {
            return Err(CliError::usage(format!(
                "target {}: attestations ({}) need a buildx builder: the Docker engine's build API takes none",
                s.name,
                s.attest.join(" ")
            ))
            .with_hint(format!(
                "build with --driver buildx, or drop them with --set {}.attest=",
                s.name
            )));
        }
        if let Some(e) = s.allow.iter().find(|e| *e != "network.host") {
            return Err(CliError::usage(format!(
                "target {}: the Docker engine's build API cannot grant the entitlement {e}",
                s.name
            ))
            .with_hint("build with --driver buildx on a builder created with it (docker buildx create --buildkitd-flags '--allow-insecure-entitlement …')"));
        }
    }
    Ok(())
}

/// An `attest` entry as buildx's `--attest` takes it: `type=` first, the
/// other keys in order, a value holding `,` or `"` quoted as CSV.
fn attest_value(e: &kiln_bake::model::Entry) -> String {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let field = |k: &str, v: &serde_json::Value| {
        let pair = format!("{k}={}", text(v));
        if pair.contains([',', '"']) {
            format!("\"{}\"", pair.replace('"', "\"\""))
        } else {
            pair
        }
    };
    let mut out: Vec<String> = e
        .get("type")
        .map(|v| field("type", v))
        .into_iter()
        .collect();
    out.extend(
        e.iter()
            .filter(|(k, _)| *k != "type")
            .map(|(k, v)| field(k, v)),
    );
    out.join(",")
}

/// The registries a target's outputs (`name=`) and cache attributes
/// (`ref=`) declare insecure with `registry.insecure=true`, as buildx reads
/// them (seed 004's `REGISTRY_INSECURE` writes them): every kiln client of
/// those registries then speaks to them as insecure
/// (`kiln_store::registry_io`).
pub fn declare_insecure_registries(t: &kiln_bake::Target) {
    let entries = [&t.output, &t.cache_to, &t.cache_from];
    for e in entries.into_iter().flatten().flatten() {
        let attr = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or("");
        if !matches!(attr("registry.insecure"), "true" | "1") {
            continue;
        }
        for name in attr("name").split(',').chain([attr("ref")]) {
            if let Some(r) = kiln_plan::ImageRef::parse(name.trim()) {
                kiln_store::registry_io::declare_insecure(
                    r.domain(),
                    kiln_store::registry_io::Insecure::Attribute(t.name.clone()),
                );
            }
        }
    }
}

/// Whether the bake target's outputs push (`type=registry`, `push=true`).
fn outputs_push(t: &kiln_bake::Target) -> bool {
    t.output.iter().flatten().any(|e| {
        e.get("type").and_then(|v| v.as_str()) == Some("registry")
            || e.get("push").and_then(|v| v.as_str()) == Some("true")
    })
}

/// Refuses attributes the local engine driver cannot honour, rather than
/// building something other than what the bake file asks for.
fn check_supported(name: &str, t: &kiln_bake::Target) -> Result<(), CliError> {
    let mut missing = Vec::new();
    for o in t.output.iter().flatten() {
        let ty = o.get("type").and_then(|v| v.as_str()).unwrap_or("");
        if !matches!(ty, "image" | "docker" | "registry" | "cacheonly") {
            missing.push(format!("output type={ty}"));
        }
    }
    if t.ssh.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("ssh".into());
    }
    if t.ulimits.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("ulimits".into());
    }
    if t.shm_size.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("shm-size".into());
    }
    if t.extra_hosts.as_ref().is_some_and(|v| !v.is_empty()) {
        missing.push("extra-hosts".into());
    }
    if t.call.as_deref().is_some_and(|c| c != "build") {
        missing.push(format!("call={}", t.call.as_deref().unwrap_or("")));
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "target {name}: the local engine driver cannot honour {} yet",
        missing.join(", ")
    ))
    .with_hint("remove them for local builds (e.g. --set NAME.output=type=docker), or build this target with docker buildx bake"))
}

/// The build specs of a plan, in build order. A missing Dockerfile is an
/// input error found before anything builds.
pub fn specs_for(
    bake: &kiln_bake::Bake,
    planned: &Planned,
    cwd: &Path,
    push: bool,
) -> Result<Vec<BuildSpec>, CliError> {
    let specs = planned
        .plan
        .targets
        .iter()
        .map(|t| spec_for(planned, &t.name, cwd, push))
        .collect::<Result<Vec<_>, _>>()?;
    for spec in &specs {
        missing_dockerfile(bake, spec)?;
        for w in missing_secret_sources(spec, |v| std::env::var_os(v).is_some()) {
            eprintln!("warning: {w}");
        }
    }
    Ok(specs)
}

/// A declared secret whose source is not there: the build gets no secret,
/// and a step that needs it fails — or builds without it. Said before
/// anything builds (the value itself never appears anywhere).
pub fn missing_secret_sources(spec: &BuildSpec, env_set: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for s in &spec.secrets {
        match (&s.src, &s.env) {
            (Some(p), _) if !p.is_file() => out.push(format!(
                "target {}: secret {} reads the file {}, which does not exist; the build gets no such secret",
                spec.name,
                s.id,
                p.display()
            )),
            (None, Some(e)) if !env_set(e) => out.push(format!(
                "target {}: secret {} reads the environment variable {e}, which is not set; the build gets no such secret",
                spec.name, s.id
            )),
            // buildx reads `id=X` alone from the environment variable X.
            (None, None) if !env_set(&s.id) => out.push(format!(
                "target {}: secret {} names no src or env, so it is read from the environment variable {}, which is not set; the build gets no such secret",
                spec.name, s.id, s.id
            )),
            _ => {}
        }
    }
    out
}

/// An error pointing at the target's `dockerfile` attribute when the
/// Dockerfile does not exist.
pub fn missing_dockerfile(bake: &kiln_bake::Bake, spec: &BuildSpec) -> Result<(), CliError> {
    let no_context = !spec.context.is_dir();
    if !no_context && (spec.dockerfile_inline.is_some() || spec.dockerfile.is_file()) {
        return Ok(());
    }
    // A missing context says so (not that the Dockerfile under it is
    // missing), pointing at `context`.
    let (msg, attr) = if no_context {
        (
            format!(
                "target {}: the build context {} is not a directory",
                spec.name,
                spec.context.display()
            ),
            "context",
        )
    } else {
        (
            format!(
                "target {}: Dockerfile {} does not exist",
                spec.name,
                spec.dockerfile.display()
            ),
            "dockerfile",
        )
    };
    let span = bake
        .config
        .attr_spans
        .get(&(spec.name.clone(), attr.to_string()))
        .or_else(|| bake.config.target_spans.get(&spec.name));
    let rendered = match span {
        Some(sp) => {
            kiln_bake::diag::render(&kiln_bake::Diags::at(*sp, msg.clone(), ""), &bake.sources)
        }
        None => msg,
    };
    Err(CliError::usage(rendered).with_hint(
        "the path is relative to the target's context (bake's rule); check `dockerfile` and `context`, and the directory kiln runs in",
    ))
}

/// The cache policy of a resolved bake target on `driver`, one per platform.
pub fn cache_policy(
    t: &kiln_bake::Target,
    settings: &kiln_plan::cache::CacheSettings,
    driver: kiln_plan::cache::Driver,
    push: bool,
) -> Vec<kiln_plan::cache::CachePolicy> {
    use kiln_plan::cache::{CacheTarget, entry_pairs, policy};
    let pairs = |v: &Option<Vec<kiln_bake::model::Entry>>| -> Vec<Vec<(String, String)>> {
        v.iter().flatten().map(entry_pairs).collect()
    };
    let tags = t.tags.clone().unwrap_or_default();
    let platforms = t.platforms.clone().unwrap_or_default();
    let from = pairs(&t.cache_from);
    let to = pairs(&t.cache_to);
    let pushes = push || outputs_push(t);
    policy(
        &CacheTarget {
            name: &t.name,
            tags: &tags,
            platforms: &platforms,
            cache_from: &from,
            cache_to: &to,
            push: pushes,
        },
        settings,
        driver,
    )
}

/// Each driver reads its own cache-policy fields, so a fleet of both kinds
/// gets both; what the engine's policy cannot do for a pushed target is a
/// note on stderr.
pub fn apply_cache_policies(
    driver: crate::cli::DriverKind,
    fleet: bool,
    cache: &CacheSettings,
    nodes: &[kiln_engine::run::NodeSpec],
    planned: &Planned,
    specs: &mut [BuildSpec],
) {
    let buildx = driver == crate::cli::DriverKind::Buildx;
    let (uses_buildx, uses_engine) = if fleet {
        (
            nodes.iter().any(|n| n.builder.is_some()),
            nodes.iter().any(|n| n.builder.is_none()),
        )
    } else {
        (buildx, !buildx)
    };
    let mut notices = std::collections::BTreeSet::new();
    for spec in specs.iter_mut() {
        if uses_buildx {
            apply_buildx_cache(spec, planned, cache);
        }
        if uses_engine {
            let n = apply_local_cache(spec, planned, cache);
            if spec.push {
                notices.extend(n);
            }
        }
    }
    for n in &notices {
        eprintln!("note: {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_engine::spec::SecretSpec;

    #[test]
    fn a_secret_without_its_source_is_told() {
        let secret = |id: &str, src: Option<&str>, env: Option<&str>| SecretSpec {
            id: id.into(),
            src: src.map(PathBuf::from),
            env: env.map(String::from),
        };
        let spec = BuildSpec {
            name: "app".into(),
            secrets: vec![
                secret("pip", None, Some("PIP_TOKEN")),
                secret("aws", Some("/nonexistent/kiln/aws"), None),
                secret("GH_TOKEN", None, None),
                secret("here", None, Some("SET")),
                secret("file", Some("/etc/hostname"), None),
            ],
            ..BuildSpec::default()
        };
        let w = missing_secret_sources(&spec, |v| v == "SET");
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].contains("secret pip") && w[0].contains("PIP_TOKEN"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("/nonexistent/kiln/aws"), "{}", w[1]);
        assert!(w[2].contains("environment variable GH_TOKEN"), "{}", w[2]);
    }
}
