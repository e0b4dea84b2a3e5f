//! The rule table: every rule's id, severity, one-line summary, why it
//! matters and how to fix it. The text output, the JSON contract, SARIF's
//! `tool.driver.rules` and the docs pages (`docs/lint/<id>.md`) all speak
//! from this one table.

use serde::Serialize;

/// How bad a finding is. Only `Error` makes `kiln lint` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The build is wrong or the cache cannot work: exit 1.
    Error,
    /// Likely to cost rebuilds or leak state; reported, exit 0.
    Warning,
    /// Worth knowing; reported, exit 0.
    Note,
}

impl Severity {
    /// `error`, `warning` or `note` (also SARIF's `level`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One rule.
#[derive(Debug)]
pub struct Rule {
    pub id: &'static str,
    pub severity: Severity,
    /// One line: what the rule finds.
    pub summary: &'static str,
    /// Why it matters (the mechanism).
    pub why: &'static str,
    /// How to fix it.
    pub fix: &'static str,
}

/// Where the docs of a rule live, relative to the repository root.
#[must_use]
pub fn doc_path(id: &str) -> String {
    format!("docs/lint/{id}.md")
}

/// The rule with this id. Panics on an unknown id: ids are compile-time
/// constants of this crate, so that is a bug caught by the tests.
#[must_use]
pub fn rule(id: &str) -> &'static Rule {
    RULES
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("unknown lint rule {id}"))
}

pub const PARSE_ERROR: &str = "parse-error";
pub const MISSING_DOCKERFILE: &str = "missing-dockerfile";
pub const INLINE_CACHE: &str = "inline-cache-under-buildx";
pub const CACHE_FROM_SELF: &str = "cache-from-self";
pub const PER_COMMIT_ONLY: &str = "cache-per-commit-only";
pub const NO_CACHE_EXPORT: &str = "no-cache-export";
pub const MODE_MIN: &str = "cache-mode-min-multistage";
pub const DUPLICATE_REF: &str = "duplicate-cache-ref";
pub const EARLY_VOLATILE: &str = "early-volatile-arg";
pub const SDE_FROM_COMMIT: &str = "sde-from-commit";
pub const SECRET_IN_ARG: &str = "secret-in-arg";
pub const INSECURE_TLS: &str = "insecure-registry-tls";
pub const MOVING_REF: &str = "moving-git-ref";
pub const JOBS_ARG: &str = "jobs-arg-in-key";

/// The rules kiln's cache policy answers (docs/cache-policy.md: a
/// commit-independent registry ref per target, imported with the
/// per-commit one and exported with `mode=max`): set aside for bake targets
/// judged as kiln builds them (see the `view` module).
pub const KILN_POLICY: &[&str] = &[CACHE_FROM_SELF, PER_COMMIT_ONLY, NO_CACHE_EXPORT];

/// Every rule, in documentation order.
pub static RULES: &[Rule] = &[
    Rule {
        id: PARSE_ERROR,
        severity: Severity::Error,
        summary: "a file kiln lint was asked to check cannot be read or parsed",
        why: "a bake file, Dockerfile or workflow that does not parse cannot be checked, and the build that reads it will fail the same way",
        fix: "correct the syntax at the position given; the message is the parser's",
    },
    Rule {
        id: MISSING_DOCKERFILE,
        severity: Severity::Error,
        summary: "a bake target whose Dockerfile or build context does not exist",
        why: "kiln build refuses the target before anything builds (exit 2) and docker buildx bake stops on it (failed to read dockerfile, or the context path not found), taking every other target of the invocation with it; a context is relative to the directory bake runs in, a Dockerfile to the context unless absolute or cwd://",
        fix: "create the Dockerfile, or correct the target's dockerfile (relative to its context) or context (relative to the directory bake runs in: the bake file's, with BUILDX_BAKE_FILE_RELATIVE_PATHS=1 or when bake runs there); a Dockerfile kept in the bake file goes in dockerfile-inline",
    },
    Rule {
        id: INLINE_CACHE,
        severity: Severity::Error,
        summary: "BUILDKIT_INLINE_CACHE passed as a build arg to a buildx build",
        why: "under buildx (docker buildx build, bake, build-push-action) the arg is honoured only by the classic docker driver; with a remote or container builder it exports nothing, and where it works it is inline cache, which holds only the layers of the final image (mode=min) and changes the image config digest",
        fix: "remove the build arg and export a registry cache: --cache-to type=registry,ref=<repo>:buildcache,mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true (bake: cache-to = [\"type=registry,ref=...,mode=max\"])",
    },
    Rule {
        id: CACHE_FROM_SELF,
        severity: Severity::Error,
        summary: "the only cache source is the tag the same build pushes",
        why: "for a new commit that tag does not exist yet, so the import finds nothing (or an existence guard drops --cache-from entirely) and every build starts cold; the cache ref must differ from the image being pushed",
        fix: "import from a commit-independent cache ref that the build also exports to (e.g. <repo>:buildcache), and keep the per-commit tag only as a second --cache-from",
    },
    Rule {
        id: PER_COMMIT_ONLY,
        severity: Severity::Error,
        summary: "every cache ref contains a per-commit component; none is stable",
        why: "a ref with the commit SHA, run number or build number in it is new on every commit, so the next commit never finds the previous commit's cache: layers are imported only when the same commit is rebuilt",
        fix: "add a ref without per-commit parts (per target and platform, e.g. <repo>:buildcache or <repo>:buildcache-<branch>) to both --cache-from and --cache-to; a per-commit ref may stay as an extra import",
    },
    Rule {
        id: NO_CACHE_EXPORT,
        severity: Severity::Error,
        summary: "a build that pushes (or a bake target) exports no layer cache",
        why: "without --cache-to nothing survives the builder's local cache: a fresh, pruned or different builder node rebuilds every step from scratch",
        fix: "add --cache-to type=registry,ref=<repo>:buildcache,mode=max,image-manifest=true,oci-mediatypes=true,ignore-error=true (bake: a cache-to entry per target), or let kiln build apply its cache policy",
    },
    Rule {
        id: MODE_MIN,
        severity: Severity::Error,
        summary: "cache exported in min mode while the Dockerfile discards builder stages",
        why: "min mode (the default for every exporter, and the only mode of inline cache) caches only the layers of the final image; stages that reach it through COPY --from or RUN --mount from= are not in that image, so their steps — usually the expensive compile — can never be restored on a cold builder",
        fix: "export with mode=max: --cache-to type=registry,ref=<repo>:buildcache,mode=max,image-manifest=true,oci-mediatypes=true",
    },
    Rule {
        id: DUPLICATE_REF,
        severity: Severity::Error,
        summary: "two targets, concurrent jobs or platforms export cache to one ref",
        why: "a cache ref is a single manifest: every export replaces it, so writers that do not build the same thing overwrite each other's cache and each one misses on its next run (separate solves per platform on a multi-node builder clobber it the same way)",
        fix: "give each (target, platform) its own ref, e.g. <repo>:buildcache-<target>-<arch>; importing from several refs is fine",
    },
    Rule {
        id: EARLY_VOLATILE,
        severity: Severity::Warning,
        summary: "a per-commit ARG (SHA, date, build number) is declared before RUN steps",
        why: "BuildKit passes every declared ARG to each later RUN of the stage as an environment variable, so its value is part of those steps' cache keys whether they use it or not: a value that changes every commit re-runs every RUN after the declaration",
        fix: "declare the ARG as late as possible — in the final stage, right before the one instruction that needs it — or pass the value as a label (bake labels / --label) instead of a build arg",
    },
    Rule {
        id: SDE_FROM_COMMIT,
        severity: Severity::Warning,
        summary: "SOURCE_DATE_EPOCH is set from the commit time",
        why: "SOURCE_DATE_EPOCH is a cache input: a new value invalidates WORKDIR and every later step, so an epoch taken from the commit changes on every commit and defeats a commit-independent cache for all stages",
        fix: "use a constant epoch (e.g. SOURCE_DATE_EPOCH=0 or a per-release constant) and keep the commit time in a label such as org.opencontainers.image.created",
    },
    Rule {
        id: SECRET_IN_ARG,
        severity: Severity::Error,
        summary: "a credential passed as a build arg, env, label or URL",
        why: "build args, ENV and labels are stored in the image config, its history and max-mode provenance, and are readable by anyone who can pull the image or its cache; a URL with userinfo or a token parameter leaks the same way",
        fix: "pass credentials as BuildKit secrets: --secret id=name,env=VAR (bake: secret = [\"id=name,env=VAR\"]) and read them with RUN --mount=type=secret,id=name (env= since Dockerfile 1.10)",
    },
    Rule {
        id: INSECURE_TLS,
        severity: Severity::Error,
        summary: "a registry marked insecure (plain HTTP) is a TLS-only registry",
        why: "registry.insecure=true (or an insecure/http registry entry in buildkitd's config) makes BuildKit speak plain HTTP to that host; a registry that serves only TLS (Docker Hub, GHCR, ECR, GCR/Artifact Registry, ACR, Quay, GitLab, port 443) then fails the cache export instead of falling back, and ignore-error=true swallows the failure",
        fix: "set registry.insecure=false (or drop the insecure entry) for TLS registries; keep insecure=true only for plain-HTTP registries such as a private registry on a tailnet",
    },
    Rule {
        id: MOVING_REF,
        severity: Severity::Warning,
        summary: "a source ref (…_REF / …_BRANCH / git context / ADD git) names a branch",
        why: "the layer that clones or downloads a ref is cached on the ref's text, not on the commit it points to: a branch is built once and then served from cache forever, so an update silently does nothing",
        fix: "pin a release tag (vX.Y.Z) or a full commit SHA, and bump it deliberately",
    },
    Rule {
        id: JOBS_ARG,
        severity: Severity::Warning,
        summary: "a parallel-jobs count (MAX_JOBS, MAKEFLAGS, …) reaches RUN as a build arg",
        why: "a declared ARG is part of the cache key of every later RUN, so a job count that differs per node or per run (derived from the node's cores or memory) makes identical builds miss each other's cache",
        fix: "read the count inside the RUN step and do not declare or pass it as a build arg: under kiln build, mount the secret kiln hands every build (RUN --mount=type=secret,id=kiln-jobs make -j\"$(cat /run/secrets/kiln-jobs 2>/dev/null || nproc)\"), the node's free memory / --gb-per-job (default 2) shared among its concurrent builds, never part of a cache key; elsewhere derive it from $(nproc) or MemAvailable in /proc/meminfo",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_documented_in_order() {
        let mut seen = std::collections::BTreeSet::new();
        for r in RULES {
            assert!(seen.insert(r.id), "duplicate rule {}", r.id);
            assert!(!r.why.is_empty() && !r.fix.is_empty());
        }
        assert_eq!(RULES.len(), 14);
    }

    #[test]
    fn every_rule_has_its_page_and_its_row() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let index = std::fs::read_to_string(root.join("docs/lint.md")).expect("docs/lint.md");
        for r in RULES {
            let page = std::fs::read_to_string(root.join(doc_path(r.id)))
                .unwrap_or_else(|e| panic!("{}: {e}", doc_path(r.id)));
            assert!(page.starts_with(&format!("# {}\n", r.id)), "{}", r.id);
            assert!(
                page.contains(&format!("Severity: **{}**", r.severity.as_str())),
                "{}",
                r.id
            );
            assert!(
                index.contains(&format!(
                    "- [`{0}`](lint/{0}.md) ({1}):",
                    r.id,
                    r.severity.as_str()
                )),
                "docs/lint.md lists no `- [`{0}`](lint/{0}.md) ({1}): what it finds` for {0}",
                r.id,
                r.severity.as_str()
            );
        }
    }
}
