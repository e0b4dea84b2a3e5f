//! Platforms (`os/arch[/variant]`) as the schedule compares them: a node builds a
//! platform natively or under emulation, and a multi-platform target is split into one
//! unit per platform.
//!
//! Names are normalised as containerd's `platforms.Normalize` does for the forms a bake
//! file or `docker buildx inspect` writes: lower case, `x86_64`/`x86-64` → `amd64`,
//! `aarch64` → `arm64`, `arm64/v8` → `arm64` (v8 is arm64's only variant that buildx
//! omits), `armhf` → `arm/v7`, `armel` → `arm/v6`, `i386`/`i686` → `386`.

/// The normalised form of `text`, or why it is not a platform.
pub fn normalize(text: &str) -> Result<String, String> {
    let lower = text.trim().to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('/').collect();
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    };
    if !(2..=3).contains(&parts.len()) || !parts.iter().all(|p| ok(p)) {
        return Err(format!(
            "`{text}` is not a platform: write os/arch or os/arch/variant (linux/amd64, linux/arm64, linux/arm/v7)"
        ));
    }
    let os = parts[0];
    let (arch, variant) = match (parts[1], parts.get(2).copied()) {
        ("x86_64" | "x86-64", v) => ("amd64", v),
        ("aarch64", v) | ("arm64", v) => ("arm64", v.filter(|v| *v != "v8")),
        ("armhf", None) => ("arm", Some("v7")),
        ("armel", None) => ("arm", Some("v6")),
        ("i386" | "i686", v) => ("386", v),
        (a, v) => (a, v),
    };
    Ok(match variant {
        Some(v) => format!("{os}/{arch}/{v}"),
        None => format!("{os}/{arch}"),
    })
}

/// Whether a node whose native platforms are `node` (normalised) builds `platform`
/// (normalised) natively. A node that states no platforms builds every platform as
/// its own: its platforms are not known, and nothing is assumed about them.
pub fn builds_natively(node: &[String], platform: &str) -> bool {
    node.is_empty() || node.iter().any(|p| p == platform)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_are_compared_in_containerds_normal_form() {
        for (given, normal) in [
            ("linux/amd64", "linux/amd64"),
            ("Linux/X86_64", "linux/amd64"),
            ("linux/aarch64", "linux/arm64"),
            ("linux/arm64/v8", "linux/arm64"),
            ("linux/arm/v7", "linux/arm/v7"),
            ("linux/armhf", "linux/arm/v7"),
            ("linux/i686", "linux/386"),
            ("windows/amd64", "windows/amd64"),
        ] {
            assert_eq!(normalize(given).unwrap(), normal, "{given}");
        }
        for bad in [
            "linux",
            "",
            "linux/",
            "linux/amd64/v2/x",
            "linux amd64/x",
            "/amd64",
        ] {
            let e = normalize(bad).unwrap_err();
            assert!(e.contains("is not a platform"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_node_without_stated_platforms_builds_every_one() {
        assert!(builds_natively(&[], "linux/arm64"));
        let amd = vec!["linux/amd64".to_string(), "linux/386".to_string()];
        assert!(builds_natively(&amd, "linux/386"));
        assert!(!builds_natively(&amd, "linux/arm64"));
    }
}
