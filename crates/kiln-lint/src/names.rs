//! Name and value classifiers the rules share: what looks per-commit, what is
//! a job count, a credential, a branch, a TLS-only registry. Pure string
//! functions; every heuristic is here so the docs can point at one place.

use std::sync::LazyLock;

use regex::Regex;

fn upper(name: &str) -> String {
    name.trim().to_ascii_uppercase()
}

/// A variable or ARG whose value changes every commit or run: a commit SHA,
/// a build date, a build or run number (`GIT_SHA`, `VCS_REF`, `BUILD_DATE`,
/// `GITHUB_RUN_NUMBER`, `CI_PIPELINE_ID`, `IMAGE_TAG`…). `*_COMMIT` is not
/// on its own: `TRITON_COMMIT` is an upstream pin whose change is a real
/// input change.
#[must_use]
pub fn is_volatile_name(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "SHA",
        "GIT_SHA",
        "GITHUB_SHA",
        "COMMIT",
        "COMMIT_SHA",
        "COMMIT_HASH",
        "SHORT_SHA",
        "GIT_COMMIT",
        "GIT_HASH",
        "GIT_REVISION",
        "SOURCE_COMMIT",
        "VCS_REF",
        "VCS_COMMIT",
        "REVISION",
        "BUILD_DATE",
        "BUILD_TIME",
        "BUILD_TIMESTAMP",
        "BUILD_NUMBER",
        "BUILD_NUM",
        "BUILD_ID",
        "IMAGE_TAG",
    ];
    const SUFFIX: &[&str] = &[
        "_SHA",
        "_COMMIT_SHA",
        "_COMMIT_HASH",
        "_BUILD_NUMBER",
        "_BUILD_ID",
        "_BUILD_DATE",
        "_RUN_ID",
        "_RUN_NUMBER",
        "_PIPELINE_ID",
        "_IMAGE_TAG",
    ];
    const PREFIX: &[&str] = &[
        "GITHUB_RUN_",
        "CI_PIPELINE_",
        "CI_COMMIT_",
        "CI_JOB_",
        "BUILDKITE_BUILD_",
        "BUILDKITE_COMMIT",
        "CIRCLE_SHA",
        "CIRCLE_BUILD_",
        "TRAVIS_COMMIT",
        "TRAVIS_BUILD_",
    ];
    let n = upper(name);
    EXACT.contains(&n.as_str())
        || SUFFIX.iter().any(|s| n.ends_with(s))
        || PREFIX.iter().any(|p| n.starts_with(p))
}

/// A variable that makes a cache ref per-commit: the volatile names plus
/// `*_COMMIT` (in a ref, any commit makes it per-commit).
#[must_use]
pub fn is_per_commit_var(name: &str) -> bool {
    is_volatile_name(name) || upper(name).ends_with("_COMMIT")
}

/// A variable holding a commit's timestamp (`COMMIT_TIME`, `GIT_COMMIT_DATE`,
/// `COMMIT_EPOCH`…).
#[must_use]
pub fn is_commit_time_var(name: &str) -> bool {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(COMMIT|GIT).*(TIME|DATE|EPOCH|_TS|TIMESTAMP)$|^(COMMIT|GIT)_?(TIME|DATE|EPOCH|TS|TIMESTAMP)")
            .expect("valid regex")
    });
    let n = upper(name);
    n != "SOURCE_DATE_EPOCH" && RE.is_match(&n)
}

/// A build arg that carries a parallel-jobs count.
#[must_use]
pub fn is_jobs_name(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "JOBS",
        "NPROC",
        "NPROCS",
        "NJOBS",
        "N_JOBS",
        "MAKEFLAGS",
        "MAKEOPTS",
        "CMAKE_BUILD_PARALLEL_LEVEL",
        "NINJAFLAGS",
    ];
    let n = upper(name);
    EXACT.contains(&n.as_str()) || n.ends_with("_JOBS")
}

/// A name that looks like it holds a credential. Names that end in a part
/// naming *where* or *which* a credential is (`_URL`, `_FILE`, `_ID`,
/// `_NAME`…) are not: `TOKEN_URL`, `SECRET_ID`, `PASSWORD_FILE` hold no
/// secret themselves.
#[must_use]
pub fn is_credential_name(name: &str) -> bool {
    const MARKERS: &[&str] = &[
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "SECRET",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "CREDENTIAL",
        "AUTH_KEY",
    ];
    const NOT_A_VALUE: &[&str] = &[
        "_URL",
        "_URI",
        "_ENDPOINT",
        "_HOST",
        "_PORT",
        "_FILE",
        "_PATH",
        "_DIR",
        "_NAME",
        "_ID",
        "_TYPE",
        "_HEADER",
        "_ENV",
        "_VAR",
        "_REGION",
        "_KIND",
        "_MODE",
        "_TTL",
        "_EXPIRY",
        "_LENGTH",
    ];
    let n = upper(name).replace('-', "_");
    MARKERS.iter().any(|m| n.contains(m))
        && !NOT_A_VALUE.iter().any(|s| n.ends_with(s))
        && !n.contains("PUBLIC")
}

/// Why a value carries a credential: a URL with a password (or a token as its
/// user), or a token query parameter. `None` when it does not.
#[must_use]
pub fn url_secret(value: &str) -> Option<&'static str> {
    static USERINFO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://([^/@\s:]*):([^/@\s]+)@").expect("valid regex")
    });
    static TOKEN_USER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://(ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|[A-Za-z0-9_-]{24,}@)[^/\s]*")
            .expect("valid regex")
    });
    static QUERY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)[?&](token|access_token|private_token|auth_token|api_key|apikey|password|sig|x-amz-signature|x-amz-credential)=[^&\s]+")
            .expect("valid regex")
    });
    if USERINFO.is_match(value) {
        Some("a URL with a user and password")
    } else if TOKEN_USER.is_match(value) {
        Some("a URL with a token as its user")
    } else if QUERY.is_match(value) {
        Some("a URL with a token query parameter")
    } else {
        None
    }
}

/// What a git ref names, judged from its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    Empty,
    Commit,
    Tag,
    Branch,
}

/// Classifies a git ref: a 7–40 (or 64) hex commit, a tag (`v1.2.3`,
/// `1.22.0`, `v0.33.0-rc1`, `rocm-6.2.0`, `refs/tags/…`), or else a branch
/// (`main`, `release/2.5`, `HEAD`, `refs/heads/…`).
#[must_use]
pub fn ref_kind(value: &str) -> RefKind {
    static TAG: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^([A-Za-z][A-Za-z0-9]*[-_])*v?[0-9]+(\.[0-9]+)*([-+._]?[0-9A-Za-z][0-9A-Za-z.+-]*)?$",
        )
        .expect("valid regex")
    });
    let v = value.trim();
    if v.is_empty() {
        return RefKind::Empty;
    }
    if v.starts_with("refs/tags/") {
        return RefKind::Tag;
    }
    if v.starts_with("refs/heads/") || v == "HEAD" {
        return RefKind::Branch;
    }
    if is_hex_commit(v) {
        return RefKind::Commit;
    }
    if TAG.is_match(v) && v.chars().any(|c| c.is_ascii_digit()) {
        return RefKind::Tag;
    }
    RefKind::Branch
}

fn is_hex_commit(v: &str) -> bool {
    ((7..=40).contains(&v.len()) || v.len() == 64)
        && v.chars().all(|c| c.is_ascii_hexdigit())
        && v.chars().any(|c| c.is_ascii_digit())
}

/// A variable name that holds a git ref (`*_REF`, `*_BRANCH`, `*_COMMIT`,
/// `GIT_REF`); `VCS_REF` is the build's own commit, not a source pin.
#[must_use]
pub fn is_git_ref_var(name: &str) -> bool {
    let n = upper(name);
    n != "VCS_REF"
        && !n.starts_with("CACHE")
        && (n.ends_with("_REF")
            || n.ends_with("_BRANCH")
            || n.ends_with("_COMMIT")
            || n == "BRANCH")
}

/// The git ref of a git URL (`https://…/x.git#ref`, `git@host:x.git#ref:dir`,
/// `…?ref=x`): `Some("")` when the URL names no ref (the default branch),
/// `None` when it is not a git URL.
#[must_use]
pub fn git_url_ref(url: &str) -> Option<String> {
    let l = url.to_ascii_lowercase();
    let is_url = l.starts_with("http://") || l.starts_with("https://");
    let git = l.starts_with("git@")
        || l.starts_with("git://")
        || l.starts_with("ssh://")
        || (is_url && (l.contains(".git#") || l.ends_with(".git") || l.contains(".git?")));
    if !git {
        return None;
    }
    if let Some((_, frag)) = url.split_once('#') {
        let r = frag.split(':').next().unwrap_or("");
        // `#ref=x,subdir=y` (the newer query-like form).
        if let Some(rest) = r.strip_prefix("ref=") {
            return Some(rest.split(',').next().unwrap_or("").to_string());
        }
        return Some(r.split(',').next().unwrap_or("").to_string());
    }
    if let Some((_, q)) = url.split_once('?') {
        for kv in q.split('&') {
            if let Some(v) = kv.strip_prefix("ref=").or_else(|| kv.strip_prefix("tag=")) {
                return Some(v.to_string());
            }
            if let Some(v) = kv.strip_prefix("branch=") {
                return Some(format!("refs/heads/{v}"));
            }
        }
    }
    Some(String::new())
}

/// The registry host of an image or cache reference (`docker.io` when it
/// has none), lowercased.
#[must_use]
pub fn registry_host(reference: &str) -> String {
    let r = reference.trim();
    let r = r.split_once("://").map_or(r, |(_, rest)| rest);
    match r.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first.to_ascii_lowercase()
        }
        _ => "docker.io".to_string(),
    }
}

/// A registry that serves only TLS: Docker Hub, GHCR, Quay, GCR/Artifact
/// Registry, ECR, ACR, GitLab, NGC, JFrog, OCIR, MCR, or any host on port 443.
#[must_use]
pub fn is_tls_only_registry(host: &str) -> bool {
    const EXACT: &[&str] = &[
        "docker.io",
        "index.docker.io",
        "registry-1.docker.io",
        "registry.hub.docker.com",
        "ghcr.io",
        "docker.pkg.github.com",
        "quay.io",
        "gcr.io",
        "public.ecr.aws",
        "registry.gitlab.com",
        "nvcr.io",
        "mcr.microsoft.com",
    ];
    const SUFFIX: &[&str] = &[
        ".gcr.io",
        ".pkg.dev",
        ".amazonaws.com",
        ".azurecr.io",
        ".jfrog.io",
        ".ocir.io",
    ];
    let h = host.to_ascii_lowercase();
    if h.ends_with(":443") {
        return true;
    }
    let bare = h.split(':').next().unwrap_or(&h);
    EXACT.contains(&bare) || SUFFIX.iter().any(|s| bare.ends_with(s))
}

/// Whether a string is a true value as buildx/BuildKit read options
/// (`true`, `1`, `yes`, `on`).
#[must_use]
pub fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on" | "t"
    )
}

/// A 7–40 hex literal (with a digit) standing as its own component of a
/// ref: a commit SHA written out.
#[must_use]
pub fn has_hex_literal(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| (7..=40).contains(&w.len()) && is_hex_commit(w))
}

/// Every variable a template references: `$X`, `${X}`, `${X:-d}`,
/// `${{ env.X }}` (as `X`).
#[must_use]
pub fn referenced_vars(template: &str) -> Vec<String> {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}|\$\{([A-Za-z_][A-Za-z0-9_]*)|\$([A-Za-z_][A-Za-z0-9_]*)")
            .expect("valid regex")
    });
    RE.captures_iter(template)
        .filter_map(|c| c.get(1).or_else(|| c.get(2)).or_else(|| c.get(3)))
        .map(|m| m.as_str().to_string())
        .collect()
}

/// Whether a (resolved) ref or value has a component that changes every
/// commit or run: a per-commit variable, a GitHub expression on the SHA or
/// run, a command substitution of git/date, or a hex literal.
#[must_use]
pub fn is_per_commit_value(s: &str) -> bool {
    if referenced_vars(s).iter().any(|v| is_per_commit_var(v)) {
        return true;
    }
    let l = s.to_ascii_lowercase();
    let expr_volatile = l.split("${{").skip(1).any(|e| {
        let e = e.split("}}").next().unwrap_or("");
        e.contains("sha")
            || e.contains("run_number")
            || e.contains("run_id")
            || e.contains("run_attempt")
            || e.contains("head_commit")
    });
    expr_volatile
        || l.contains("$(git rev-parse")
        || l.contains("$(git describe")
        || l.contains("$(date")
        || has_hex_literal(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_names() {
        for n in [
            "GIT_SHA",
            "VCS_REF",
            "BUILD_DATE",
            "GITHUB_RUN_NUMBER",
            "CI_PIPELINE_IID",
            "git_commit",
            "IMAGE_TAG",
        ] {
            assert!(is_volatile_name(n), "{n}");
        }
        for n in ["TRITON_COMMIT", "PYTORCH_VERSION", "GIT_REF", "SHAPE"] {
            assert!(!is_volatile_name(n), "{n}");
        }
        assert!(is_per_commit_var("TRITON_COMMIT"));
    }

    #[test]
    fn credentials() {
        for n in [
            "NPM_TOKEN",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "API_KEY",
            "pip-token",
        ] {
            assert!(is_credential_name(n), "{n}");
        }
        for n in [
            "TOKEN_URL",
            "SECRET_ID",
            "PASSWORD_FILE",
            "AWS_ACCESS_KEY_ID",
            "PUBLIC_TOKEN",
            "SCCACHE_BUCKET",
        ] {
            assert!(!is_credential_name(n), "{n}");
        }
        assert!(url_secret("https://user:pass@example.com/x").is_some());
        assert!(url_secret("https://ghp_abc@github.com/x.git").is_some());
        assert!(url_secret("https://h/x?token=abc").is_some());
        assert!(url_secret("https://example.com/x?ref=1").is_none());
        assert!(url_secret("git@github.com:a/b.git").is_none());
    }

    #[test]
    fn refs() {
        assert_eq!(ref_kind("main"), RefKind::Branch);
        assert_eq!(ref_kind("release/2.5"), RefKind::Branch);
        assert_eq!(ref_kind("HEAD"), RefKind::Branch);
        assert_eq!(ref_kind("v0.1.29"), RefKind::Tag);
        assert_eq!(ref_kind("1.22.0"), RefKind::Tag);
        assert_eq!(ref_kind("v0.33.0-rc1"), RefKind::Tag);
        assert_eq!(ref_kind("rocm-6.2.0"), RefKind::Tag);
        assert_eq!(
            ref_kind("aad2a60d958f945420c5c40936b37d411fb02e89"),
            RefKind::Commit
        );
        assert_eq!(ref_kind("deadbee"), RefKind::Branch, "no digit: a word");
        assert_eq!(ref_kind(""), RefKind::Empty);
        assert_eq!(
            git_url_ref("https://github.com/a/b.git#main").as_deref(),
            Some("main")
        );
        assert_eq!(
            git_url_ref("https://github.com/a/b.git").as_deref(),
            Some("")
        );
        assert_eq!(
            git_url_ref("git@github.com:a/b.git#v1.2:sub").as_deref(),
            Some("v1.2")
        );
        assert_eq!(git_url_ref("https://example.com/x.tar.gz"), None);
    }

    #[test]
    fn registries() {
        assert_eq!(registry_host("user/app:cache"), "docker.io");
        assert_eq!(registry_host("ghcr.io/a/b:c"), "ghcr.io");
        assert_eq!(registry_host("host.ts.net:8080/a/b:c"), "host.ts.net:8080");
        assert!(is_tls_only_registry("123.dkr.ecr.us-east-1.amazonaws.com"));
        assert!(is_tls_only_registry("docker.io"));
        assert!(is_tls_only_registry("registry.example.com:443"));
        assert!(!is_tls_only_registry(
            "snoc-strix.fold-leaffish.ts.net:8080"
        ));
        assert!(!is_tls_only_registry("127.0.0.1:5000"));
    }

    #[test]
    fn per_commit_values() {
        assert!(is_per_commit_value("repo:${GITHUB_SHA}"));
        assert!(is_per_commit_value("repo:${{ github.sha }}"));
        assert!(is_per_commit_value("repo:cache-${{github.run_number}}"));
        assert!(is_per_commit_value("repo:${IMAGE_TAG}"));
        assert!(is_per_commit_value("repo:aee6940"));
        assert!(!is_per_commit_value("repo:buildcache"));
        assert!(!is_per_commit_value(
            "repo:buildcache-${{ github.ref_name }}"
        ));
        assert!(!is_per_commit_value("repo:2.15.0-10.1.0-full-gfx950"));
    }
}
