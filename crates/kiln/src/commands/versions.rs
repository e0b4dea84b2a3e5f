//! `kiln versions`: every pinned ref of the bake file checked against its
//! upstream repository (`git ls-remote`): a tag, a commit or a branch (a
//! moving ref the layer cache serves forever), and the newest release tag.
//! docs/versions.md.
//!
//! Must never: change a pin or a file (it reports; updating is the
//! user's), fetch a repository (`git ls-remote` lists refs only), or wait
//! on a remote without a bound.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::cli::Format;
use crate::error::{CliError, Kind};
use crate::prepare::load;
use crate::settings::BakeSettings;

pub struct VersionsSettings {
    pub bake: BakeSettings,
    pub format: Format,
    /// Ask the registry which images built from each pin it holds.
    pub registry: bool,
}

/// One pinned ref and what its repository says of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Pin {
    pub variable: String,
    pub pin: String,
    /// The repository, and how it was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<String>,
    /// `tag`, `branch`, `commit`, `missing` (no such ref), `unreachable`
    /// (the repository did not answer) or `no-upstream`.
    pub kind: &'static str,
    /// The newest release tag (`v1.2.3`-like) the repository has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// Why, for `unreachable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The images built from this pin: every target the variable reaches
    /// as a build arg, by its first tag, and whether the registry holds it.
    pub images: Vec<PinImage>,
}

/// One image a pin is built into.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PinImage {
    pub target: String,
    pub tag: String,
    /// The registry has the tag; `None` when it could not be asked.
    pub in_registry: Option<bool>,
}

pub fn run(s: VersionsSettings, out: &mut dyn Write) -> Result<(), CliError> {
    let bake = load(&s.bake)?;
    // Targets as bake resolves them (paths file-relative when bake makes
    // them so, overrides applied); one that does not resolve is left out.
    let names: Vec<String> = bake.config.targets.iter().map(|t| t.name.clone()).collect();
    let mut resolved = Vec::new();
    for n in names.iter().filter(|n| !n.starts_with('_')) {
        if let Ok(r) = bake.resolve(std::slice::from_ref(n), &s.bake.sets, &s.bake.opts)
            && let Some(t) = r.targets.get(n)
        {
            resolved.push(t.clone());
        }
    }
    let dockerfiles = dockerfile_texts(&resolved, &s.bake.cwd);
    let values: Vec<(String, String)> = bake
        .config
        .variables
        .iter()
        .filter_map(|v| Some((v.name.clone(), v.value.as_str()?.to_string())))
        .collect();
    let mut pins = Vec::new();
    for (name, value) in &values {
        let Some(prefix) = name
            .strip_suffix("_REF")
            .or_else(|| name.strip_suffix("_VERSION"))
        else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        let from_var = values
            .iter()
            .find(|(n, v)| *n == format!("{prefix}_REPO") && !v.is_empty())
            .map(|(n, v)| (v.clone(), format!("variable {n}")));
        let repo = from_var.or_else(|| repo_in_dockerfiles(name, &dockerfiles));
        let mut pin = check(name, value, repo);
        pin.images = images_of(name, &resolved);
        pins.push(pin);
    }
    if s.registry {
        let found = crate::prepare::engine::probe_refs(
            pins.iter()
                .flat_map(|p| p.images.iter().map(|i| i.tag.clone())),
        )?;
        for i in pins.iter_mut().flat_map(|p| p.images.iter_mut()) {
            i.in_registry = found.get(&i.tag).copied().flatten();
        }
    }
    match s.format {
        Format::Json => {
            let text =
                serde_json::to_string_pretty(&pins).map_err(|e| CliError::env(e.to_string()))?;
            crate::output::write(out, &format!("{text}\n"))?;
        }
        Format::Text => {
            let mut rows = vec![vec![
                "VARIABLE".to_string(),
                "PIN".into(),
                "KIND".into(),
                "NEWEST".into(),
                "REPOSITORY".into(),
                "IMAGES".into(),
            ]];
            for p in &pins {
                rows.push(vec![
                    p.variable.clone(),
                    p.pin.clone(),
                    p.kind.to_string(),
                    p.newest.clone().unwrap_or_default(),
                    p.repository.clone().unwrap_or_default(),
                    images_cell(&p.images, s.registry),
                ]);
            }
            crate::output::write(out, &kiln_bake::tabwrite(&rows))?;
        }
    }
    let branches: Vec<&str> = pins
        .iter()
        .filter(|p| p.kind == "branch")
        .map(|p| p.variable.as_str())
        .collect();
    if !branches.is_empty() {
        return Err(CliError {
            kind: Kind::Failed,
            message: format!(
                "{} pinned to a branch: a moving ref is served from the layer cache forever (the clone is keyed on the ref's name, not what it points at)",
                branches.join(", ")
            ),
            hint: Some("pin a release tag or a commit instead".into()),
        });
    }
    if let Some(p) = pins.iter().find(|p| p.kind == "unreachable") {
        return Err(CliError::env(format!(
            "the repository of {} ({}) did not answer: {}",
            p.variable,
            p.repository.as_deref().unwrap_or(""),
            p.error.as_deref().unwrap_or("")
        )));
    }
    Ok(())
}

/// The targets a pin variable reaches as a build arg of the same name, by
/// their first tag.
fn images_of(name: &str, targets: &[kiln_bake::Target]) -> Vec<PinImage> {
    targets
        .iter()
        .filter(|t| {
            t.args
                .as_ref()
                .is_some_and(|a| a.get(name).is_some_and(|v| v.is_some()))
        })
        .filter_map(|t| {
            Some(PinImage {
                target: t.name.clone(),
                tag: t.tags.as_ref()?.first()?.clone(),
                in_registry: None,
            })
        })
        .collect()
}

/// `3/4 in the registry`, `2 image(s)` when the registry was not asked, or
/// `-` for a pin no target builds.
fn images_cell(images: &[PinImage], asked: bool) -> String {
    if images.is_empty() {
        return "-".into();
    }
    if !asked {
        return format!("{} image(s)", images.len());
    }
    let known = images.iter().filter(|i| i.in_registry.is_some()).count();
    let there = images
        .iter()
        .filter(|i| i.in_registry == Some(true))
        .count();
    if known == 0 {
        return format!("{} image(s), registry not reachable", images.len());
    }
    let mut cell = format!("{there}/{} in the registry", images.len());
    if known < images.len() {
        cell.push_str(&format!(
            " ({} unknown: registry not reachable)",
            images.len() - known
        ));
    }
    cell
}

/// The Dockerfiles of every target, as text.
fn dockerfile_texts(targets: &[kiln_bake::Target], cwd: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for t in targets {
        if let Some(inline) = &t.dockerfile_inline {
            out.push(inline.clone());
            continue;
        }
        let context = cwd.join(t.context.as_deref().unwrap_or("."));
        let file = t.dockerfile.as_deref().unwrap_or("Dockerfile");
        let path = if let Some(rest) = file.strip_prefix("cwd://") {
            cwd.join(rest)
        } else if Path::new(file).is_absolute() {
            Path::new(file).to_path_buf()
        } else {
            context.join(file)
        };
        if let Ok(text) = std::fs::read_to_string(path)
            && !out.contains(&text)
        {
            out.push(text);
        }
    }
    out
}

/// The repository a Dockerfile clones at `${name}`: `git clone --branch
/// ${NAME} URL` (or `-b`), `ADD URL.git#${NAME}` (or `URL#${NAME}` of a
/// git URL).
fn repo_in_dockerfiles(name: &str, texts: &[String]) -> Option<(String, String)> {
    let refs = [format!("${{{name}}}"), format!("${name}")];
    for text in texts {
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                // git clone ... --branch ${NAME} URL
                if (*w == "--branch" || *w == "-b")
                    && words
                        .get(i + 1)
                        .is_some_and(|r| refs.iter().any(|x| r == x))
                    && words[..i].windows(2).any(|p| p == ["git", "clone"])
                    && let Some(url) = words[i + 2..]
                        .iter()
                        .find(|u| u.contains("://") || u.starts_with("git@"))
                {
                    return Some((
                        url.trim_end_matches(['\\', ';']).to_string(),
                        "a git clone in a Dockerfile".into(),
                    ));
                }
                // ADD URL#${NAME}
                if let Some((url, r)) = w.split_once('#')
                    && refs.iter().any(|x| r == x)
                    && (url.ends_with(".git") || url.starts_with("git@") || url.contains("://"))
                {
                    return Some((url.to_string(), "an ADD in a Dockerfile".into()));
                }
            }
        }
    }
    None
}

/// What `git ls-remote` of `repo` says of `pin`.
fn check(name: &str, pin: &str, repo: Option<(String, String)>) -> Pin {
    let mut p = Pin {
        variable: name.to_string(),
        pin: pin.to_string(),
        repository: None,
        found_by: None,
        kind: "no-upstream",
        newest: None,
        error: None,
        images: Vec::new(),
    };
    let Some((url, how)) = repo else {
        return p;
    };
    p.repository = Some(url.clone());
    p.found_by = Some(how);
    match ls_remote(&url) {
        Err(e) => {
            p.kind = "unreachable";
            p.error = Some(e);
        }
        Ok(refs) => {
            let tags: Vec<&str> = refs
                .iter()
                .filter_map(|r| r.strip_prefix("refs/tags/"))
                .map(|t| t.trim_end_matches("^{}"))
                .collect();
            let heads: Vec<&str> = refs
                .iter()
                .filter_map(|r| r.strip_prefix("refs/heads/"))
                .collect();
            p.kind = if tags.contains(&pin) {
                "tag"
            } else if heads.contains(&pin) {
                "branch"
            } else if pin.len() >= 7
                && pin.len() <= 40
                && pin.chars().all(|c| c.is_ascii_hexdigit())
            {
                "commit"
            } else {
                "missing"
            };
            p.newest = newest_release(&tags).map(String::from);
        }
    }
    p
}

/// `git ls-remote --tags --heads URL`'s ref names, within 60 s, read
/// while git runs: a repository with thousands of tags lists megabytes.
fn ls_remote(url: &str) -> Result<Vec<String>, String> {
    let out = kiln_engine::proc::output(
        std::process::Command::new("git")
            .args(["ls-remote", "--tags", "--heads", "--", url])
            .env("GIT_TERMINAL_PROMPT", "0"),
        Duration::from_secs(60),
        kiln_engine::proc::DEFAULT_MAX_OUTPUT,
    )
    .map_err(|e| match e {
        kiln_engine::proc::ProcError::TimedOut { .. } => {
            "git ls-remote did not answer within 60 s".to_string()
        }
        e => e.to_string(),
    })?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(String::from))
        .collect())
}

/// The highest release-like tag (`v1.2.3`, `1.2`, `v0.1.29`): numbers
/// compared as numbers; pre-releases (`-rc1`) and other names left out.
fn newest_release<'a>(tags: &[&'a str]) -> Option<&'a str> {
    let parse = |t: &str| -> Option<Vec<u64>> {
        let v = t.strip_prefix('v').unwrap_or(t);
        v.split('.').map(|p| p.parse::<u64>().ok()).collect()
    };
    tags.iter()
        .filter_map(|t| Some((parse(t)?, *t)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_release_compares_numbers() {
        assert_eq!(
            newest_release(&["v1.9.0", "v1.10.0", "v1.10.0-rc1", "main-x", "v1.2"]),
            Some("v1.10.0")
        );
        assert_eq!(newest_release(&["latest"]), None);
    }

    #[test]
    fn clones_and_adds_in_dockerfiles_name_the_repository() {
        let texts = vec![
            "FROM x\nARG AITER_REF\nRUN git clone --depth 1 --branch ${AITER_REF} https://github.com/ROCm/aiter.git /src && \\\n  make\nADD https://github.com/vllm-project/vllm.git#${VLLM_REF} /vllm\n".to_string(),
        ];
        assert_eq!(
            repo_in_dockerfiles("AITER_REF", &texts).map(|r| r.0),
            Some("https://github.com/ROCm/aiter.git".into())
        );
        assert_eq!(
            repo_in_dockerfiles("VLLM_REF", &texts).map(|r| r.0),
            Some("https://github.com/vllm-project/vllm.git".into())
        );
        assert!(repo_in_dockerfiles("OTHER_REF", &texts).is_none());
    }
}
