//! Loading the bake files and resolving the requested targets, with the
//! positions and "did you mean" hints of unknown names.
//!
//! Must never: write to stdout (what buildx would ignore is a warning on
//! stderr), or change what was asked: a `--set` that shadows a variable is
//! warned about, never rewritten.

use kiln_bake::{Bake, Resolved, VariableInfo};

use crate::error::CliError;
use crate::settings::BakeSettings;

/// Loads and evaluates the bake files named by the settings. What buildx
/// accepts and ignores (an attribute or block it does not know) is a
/// warning on stderr, with its position.
pub fn load(s: &BakeSettings) -> Result<Bake, CliError> {
    let bake = kiln_bake::load_paths(&s.files, &s.opts).map_err(CliError::from)?;
    warn(&bake, s);
    Ok(bake)
}

/// Prints the warnings of an evaluation on stderr: what buildx ignores,
/// and `--var` names the files do not declare.
pub fn warn(bake: &Bake, s: &BakeSettings) {
    for w in bake.render_warnings() {
        eprintln!("warning: {}", w.trim_end());
    }
    for w in unknown_vars(&bake.config.variables, &s.given_vars) {
        eprintln!("warning: {w}");
    }
}

/// A warning for each `--var` name the bake files do not declare (as bake
/// does, kiln ignores it), with a "did you mean" when one is close.
/// `NAME_JSON` sets `NAME`.
fn unknown_vars(declared: &[VariableInfo], given: &[String]) -> Vec<String> {
    let known = |n: &str| declared.iter().any(|v| v.name == n);
    given
        .iter()
        .filter(|g| !known(g) && !g.strip_suffix("_JSON").is_some_and(known))
        .map(|g| {
            let hint = kiln_bake::suggest::suggest(g, declared.iter().map(|v| v.name.as_str()))
                .map(|s| format!("; did you mean {s:?}?"))
                .unwrap_or_else(|| "; `kiln vars` lists the variables".into());
            format!("--var {g}: the bake files declare no variable {g:?}, so it sets nothing{hint}")
        })
        .collect()
}

/// Checks requested names before resolution, so an unknown name gets a
/// "did you mean" hint and the position of the file that was searched.
pub fn check_requested(bake: &Bake, requested: &[String]) -> Result<(), CliError> {
    for r in requested {
        let n = r.replace('.', "_");
        if n.contains(['*', '?', '[']) {
            continue;
        }
        let known = bake.config.targets.iter().any(|t| t.name == n)
            || bake.config.groups.iter().any(|g| g.name == n);
        if !known {
            let names = bake
                .config
                .targets
                .iter()
                .map(|t| t.name.as_str())
                .chain(bake.config.groups.iter().map(|g| g.name.as_str()));
            if n == "default" {
                let mut names: Vec<&str> =
                    bake.config.groups.iter().map(|g| g.name.as_str()).collect();
                names.extend(
                    bake.config
                        .targets
                        .iter()
                        .map(|t| t.name.as_str())
                        .filter(|t| !t.starts_with('_')),
                );
                names.truncate(8);
                return Err(CliError::usage("the files define no `default` group or target, so there is nothing to do by default")
                    .with_hint(format!("name what to build, e.g. `{}`; `kiln print --list targets` lists them", names.join(" "))));
            }
            let mut err = CliError::usage(format!("unknown target or group {r:?}"));
            err = match kiln_bake::suggest::suggest(&n, names) {
                Some(s) => err.with_hint(format!(
                    "did you mean {s:?}? `kiln print --list targets` lists them"
                )),
                None => err.with_hint("`kiln print --list targets` lists the targets and groups"),
            };
            return Err(err);
        }
    }
    Ok(())
}

/// Resolves requested names with overrides (`ReadTargets`).
pub fn resolve(bake: &Bake, s: &BakeSettings, requested: &[String]) -> Result<Resolved, CliError> {
    if requested.is_empty() {
        check_requested(bake, &["default".to_string()])?;
    } else {
        check_requested(bake, requested)?;
    }
    for set in &s.sets {
        if let Some(w) = set_shadows_variable(set, &bake.config.variables) {
            eprintln!("warning: {w}");
        }
    }
    bake.resolve(requested, &s.sets, &s.opts)
        .map_err(|e| locate_resolve_error(bake, e))
}

/// A `--set` of `PATTERN.args.NAME` where `NAME` is a bake variable: it
/// adds a build arg `NAME` to every target the pattern matches (and
/// changes their keys), where the user most likely meant `--var NAME=...`.
pub fn set_shadows_variable(set: &str, variables: &[VariableInfo]) -> Option<String> {
    let (lhs, _) = set.split_once('=')?;
    let lhs = lhs.trim_end_matches('+');
    let mut parts = lhs.splitn(3, '.');
    let (pattern, attr, name) = (parts.next()?, parts.next()?, parts.next()?);
    if attr != "args" || !variables.iter().any(|v| v.name == name) {
        return None;
    }
    Some(format!(
        "--set {lhs}=... adds the build arg {name} to every target matching {pattern:?} (which changes their keys), but {name} is a variable of the bake file: --set never changes a variable; to change it for every target that uses it, use --var {name}=..."
    ))
}

/// Points resolution errors about `target:` links at the `contexts` entry
/// of the linking target (or its whole `contexts` attribute when the entry
/// was not written there), with a "did you mean" for unknown names.
fn locate_resolve_error(bake: &Bake, e: kiln_bake::Error) -> CliError {
    use kiln_bake::LinkProblem;
    let kiln_bake::Error::Resolve(kiln_bake::ResolveError {
        message,
        link: Some(link),
    }) = &e
    else {
        return CliError::from(e);
    };
    let hint = match link {
        LinkProblem::Unknown { missing, .. } => {
            let names = bake.config.targets.iter().map(|t| t.name.as_str());
            match kiln_bake::suggest::suggest(missing, names) {
                Some(s) => format!("did you mean \"target:{s}\"?"),
                None => "define that target, or point the context at an image (docker-image://...) or a directory".into(),
            }
        }
        LinkProblem::Loop { .. } => {
            "targets linked through target: contexts must not form a loop".to_string()
        }
        LinkProblem::Other { .. } => "check the target: contexts of this target".to_string(),
    };
    let message = match link.span(&bake.config) {
        Some(sp) => kiln_bake::diag::render(
            &kiln_bake::Diags::at(sp, message.clone(), ""),
            &bake.sources,
        ),
        None => message.clone(),
    };
    CliError::usage(message).with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables of a bake file.
    fn variables(src: &str) -> Vec<VariableInfo> {
        kiln_bake::load(
            vec![("docker-bake.hcl".into(), src.into())],
            &kiln_bake::Options::default(),
        )
        .unwrap()
        .config
        .variables
    }

    #[test]
    fn a_set_of_an_arg_named_like_a_variable_is_told() {
        let vars =
            variables("variable \"ROCM_VERSION\" {}\nvariable \"REG\" {}\ntarget \"t\" {}\n");
        let w = set_shadows_variable("*.args.ROCM_VERSION=7.1", &vars).unwrap();
        assert!(
            w.contains("--var ROCM_VERSION=") && w.contains("every target"),
            "{w}"
        );
        assert!(set_shadows_variable("t.args.OTHER=1", &vars).is_none());
        assert!(set_shadows_variable("t.tags=x", &vars).is_none());
        assert!(set_shadows_variable("t.args.REG+=x", &vars).is_some());
    }

    #[test]
    fn a_var_the_files_do_not_declare_is_told_with_a_did_you_mean() {
        let vars = variables("variable \"VERSION\" {}\nvariable \"TAGS\" {}\ntarget \"t\" {}\n");
        let given = |names: &[&str]| -> Vec<String> {
            unknown_vars(
                &vars,
                &names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            )
        };
        let w = given(&["VERSON", "VERSION", "TAGS_JSON"]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("--var VERSON: the bake files declare no variable \"VERSON\"")
                && w[0].ends_with("did you mean \"VERSION\"?"),
            "{w:?}"
        );
        let w = given(&["ZZZZZZZZ"]);
        assert!(w[0].contains("`kiln vars` lists the variables"), "{w:?}");
    }
}
