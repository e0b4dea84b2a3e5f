//! How kiln names images: the unique local reference of a built image
//! (derived from its identity, so it never moves), the per-run tag a build
//! names its image with before its identity is known, and a pushed tag
//! turned into its immutable `repo@digest` form.
//!
//! Must never: talk to an engine or a registry; every function here is a
//! pure function of its arguments.

use crate::spec::BuildSpec;

/// The unique local reference of a built image: derived from its id, so it
/// never moves (`FROM name@<image id>` does not resolve on a local engine).
pub fn local_ref(target: &str, image_id: &str) -> String {
    let hex = image_id.trim_start_matches("sha256:");
    let safe: String = target
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("kiln.local/{safe}:{}", &hex[..hex.len().min(16)])
}

/// The per-run tag a build names its image with (`kiln.local/<t>:run-<id>`).
pub fn build_tag(spec: &BuildSpec, run_id: &str) -> String {
    format!("kiln.local/{}:run-{run_id}", spec.name.to_ascii_lowercase())
}

/// `repo:tag` pushed as `digest` → `repo@digest` (immutable).
pub fn by_digest(reference: &str, digest: &str) -> String {
    format!("{}@{digest}", kiln_plan::repository_name(reference))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_derived_from_identity_and_never_move() {
        let id = "sha256:0123456789abcdef0123456789abcdef";
        assert_eq!(local_ref("App/x", id), "kiln.local/app-x:0123456789abcdef");
        assert_eq!(local_ref("app", "short"), "kiln.local/app:short");
        assert_eq!(
            local_ref("Pytorch.Base", "sha256:0123456789abcdef0123"),
            "kiln.local/pytorch.base:0123456789abcdef"
        );
        let spec = BuildSpec {
            name: "Web".into(),
            ..BuildSpec::default()
        };
        assert_eq!(build_tag(&spec, "r1"), "kiln.local/web:run-r1");
        assert_eq!(
            by_digest("reg.test:5000/team/app:1.0", "sha256:ab"),
            "reg.test:5000/team/app@sha256:ab"
        );
    }
}
