//! What a run is called: its id (`--run-id`, `$RUN_ID`, or made of the
//! pid and the time) and the name each build gets in BuildKit's history.
//!
//! Must never: touch the engine, the store or the run's records.

use crate::error::CliError;

/// This run's id: `--run-id`, else `$RUN_ID`, else made of the pid and
/// the time. `Err` for one that cannot be part of a build name.
pub fn run_id(flag: Option<&str>, env: Option<&str>) -> Result<String, CliError> {
    let given = flag.or(env.filter(|v| !v.is_empty()));
    match given {
        Some(id)
            if !id.is_empty()
                && id.len() <= 128
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
        {
            Ok(id.to_string())
        }
        Some(id) => Err(CliError::usage(format!(
            "run id {id:?} is not 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
        ))
        .with_hint("it names builds in BuildKit's history (<project>/<target>/<arch>/<run-id>); pass --run-id with such a value")),
        None => Ok(format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        )),
    }
}

/// The name of `spec`'s build in BuildKit's history,
/// `<project>/<target>/<arch>/<run-id>`, unless the bake file names it
/// itself (`args = { BUILDKIT_BUILD_NAME = ... }`). A frontend option, not a
/// Dockerfile ARG: no key or layer-cache key changes with it.
pub fn name_build(spec: &mut kiln_engine::BuildSpec, project: &str, run_id: &str) {
    if spec.args.contains_key("BUILDKIT_BUILD_NAME") {
        return;
    }
    let arch = |p: &str| p.split('/').nth(1).unwrap_or(p).to_string();
    let arch = if spec.platforms.is_empty() {
        arch(&crate::settings::local_platform())
    } else {
        spec.platforms
            .iter()
            .map(|p| arch(p))
            .collect::<Vec<_>>()
            .join("+")
    };
    spec.args.insert(
        "BUILDKIT_BUILD_NAME".into(),
        format!("{project}/{}/{arch}/{run_id}", spec.name),
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_ids_come_from_the_flag_then_the_environment_and_are_checked() {
        assert_eq!(super::run_id(Some("ci-42"), Some("env")).unwrap(), "ci-42");
        assert_eq!(super::run_id(None, Some("gh.7_1")).unwrap(), "gh.7_1");
        let made = super::run_id(None, Some("")).unwrap();
        assert!(made.chars().all(|c| c.is_ascii_hexdigit()), "{made}");
        for bad in ["a/b", "has space", ""] {
            let e = super::run_id(Some(bad), None).unwrap_err();
            assert!(e.message.contains("run id"), "{}", e.message);
        }
        let mut spec = kiln_engine::BuildSpec {
            name: "app".into(),
            platforms: vec!["linux/arm64".into(), "linux/amd64".into()],
            ..Default::default()
        };
        super::name_build(&mut spec, "proj", "r1");
        assert_eq!(spec.args["BUILDKIT_BUILD_NAME"], "proj/app/arm64+amd64/r1");
        spec.args
            .insert("BUILDKIT_BUILD_NAME".into(), "mine".into());
        super::name_build(&mut spec, "proj", "r2");
        assert_eq!(
            spec.args["BUILDKIT_BUILD_NAME"], "mine",
            "the bake file's own name stays"
        );
    }
}
