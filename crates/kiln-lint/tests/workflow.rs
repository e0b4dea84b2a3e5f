//! Workflow reading beyond the fixtures: build-push-action steps, matrix and
//! cross-job writers, folded block scalars, `docker build` under an
//! installed buildx, buildkitd configs, multi-platform exports.

use std::path::Path;

use kiln_lint::{Collector, build, workflow};

/// (rule, line, column) of every finding for a workflow text.
fn findings(yaml: &str) -> Vec<(&'static str, usize, usize)> {
    let mut c = Collector::default();
    workflow::lint_text("w.yml", yaml, Path::new("/nonexistent"), &mut c);
    let builds = std::mem::take(&mut c.builds);
    build::check(&builds, &mut c);
    let mut v: Vec<_> = c
        .findings
        .iter()
        .map(|f| (f.rule, f.line, f.column))
        .collect();
    v.sort();
    v
}

const CACHE: &str = "--cache-from type=registry,ref=ghcr.io/a/app:buildcache --cache-to type=registry,ref=ghcr.io/a/app:buildcache,mode=max";

#[test]
fn build_push_action_steps() {
    let y = r#"
jobs:
  b:
    steps:
      - uses: docker/build-push-action@v6
        with:
          push: true
          tags: ghcr.io/a/app:${{ github.sha }}
          build-args: |
            BUILDKIT_INLINE_CACHE=1
            NPM_TOKEN=${{ secrets.NPM_TOKEN }}
"#;
    assert_eq!(
        findings(y),
        [
            ("inline-cache-under-buildx", 10, 13),
            ("no-cache-export", 5, 15),
            ("secret-in-arg", 11, 13),
        ]
    );
}

#[test]
fn concurrent_writers_share_a_ref() {
    let y = format!(
        r#"
jobs:
  a:
    strategy:
      matrix:
        arch: [amd64, arm64]
    steps:
      - run: docker buildx build {CACHE} -t ghcr.io/a/app:x --push .
  b:
    steps:
      - run: docker buildx build {CACHE} -t ghcr.io/a/app:y --push .
      - run: docker buildx build {CACHE} -t ghcr.io/a/app:z --push .
"#
    );
    let f = findings(&y);
    let dups: Vec<_> = f.iter().filter(|x| x.0 == "duplicate-cache-ref").collect();
    // The matrix job (its entries write at once), and both builds of job b
    // against job a, which runs concurrently; b's two builds run in
    // sequence and are not flagged against each other.
    let lines: Vec<usize> = dups.iter().map(|d| d.1).collect();
    assert_eq!(lines, [8, 11, 12], "{f:?}");
}

#[test]
fn multi_platform_build_exporting_one_ref() {
    let y = format!(
        "jobs:\n  a:\n    steps:\n      - run: docker buildx build --platform linux/amd64,linux/arm64 {CACHE} -t ghcr.io/a/app:x --push .\n"
    );
    assert!(findings(&y).iter().any(|f| f.0 == "duplicate-cache-ref"));
}

#[test]
fn folded_block_scalar_positions() {
    let y = "jobs:\n  a:\n    steps:\n      - run: >-\n          docker buildx build\n          --build-arg BUILDKIT_INLINE_CACHE=1\n          --cache-to type=registry,ref=ghcr.io/a/app:c,mode=max\n          -t ghcr.io/a/app:x --push .\n";
    assert_eq!(findings(y), [("inline-cache-under-buildx", 6, 11)]);
}

#[test]
fn docker_build_is_buildx_only_when_installed() {
    let classic = format!(
        "jobs:\n  a:\n    steps:\n      - run: docker build --build-arg BUILDKIT_INLINE_CACHE=1 {CACHE} -t ghcr.io/a/app:x .\n"
    );
    assert!(findings(&classic).is_empty(), "{:?}", findings(&classic));
    let installed = format!(
        "jobs:\n  a:\n    steps:\n      - uses: docker/setup-buildx-action@v3\n        with:\n          install: true\n      - run: docker build --build-arg BUILDKIT_INLINE_CACHE=1 {CACHE} -t ghcr.io/a/app:x .\n"
    );
    assert_eq!(findings(&installed), [("inline-cache-under-buildx", 7, 27)]);
}

#[test]
fn buildkitd_config_plain_http_for_a_tls_registry() {
    let y = r#"
jobs:
  a:
    steps:
      - uses: docker/setup-buildx-action@v3
        with:
          buildkitd-config-inline: |
            [registry."ghcr.io"]
              http = true
            [registry."zot.example.ts.net:8080"]
              http = true
"#;
    assert_eq!(findings(y), [("insecure-registry-tls", 9, 15)]);
}

#[test]
fn github_env_and_step_outputs_are_followed() {
    let y = r#"
jobs:
  a:
    steps:
      - id: meta
        run: |
          echo "ref=ghcr.io/a/app:${GITHUB_SHA}" >> "$GITHUB_OUTPUT"
          echo "SOURCE_DATE_EPOCH=$(git log -1 --pretty=%ct)" >> $GITHUB_ENV
      - run: |
          docker buildx build \
            --cache-from type=registry,ref=${{ steps.meta.outputs.ref }} \
            --cache-to type=registry,ref=${{ steps.meta.outputs.ref }},mode=max \
            -t ghcr.io/a/app:latest --push .
"#;
    let f = findings(y);
    let rules: Vec<&str> = f.iter().map(|x| x.0).collect();
    assert_eq!(rules, ["cache-per-commit-only", "sde-from-commit"], "{f:?}");
}
