//! The reference stack (`stacks/rocm/docker-bake.hcl`) evaluates, and kiln's
//! graph for it is exactly seed 003's flowchart: 27 edges, three groups.

use std::collections::BTreeSet;
use std::process::Command;

mod common;
use common::{root, seed_edges};

fn kiln(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    common::kiln_json(env!("CARGO_BIN_EXE_kiln"), args, env)
}

fn plan_edges(env: &[(&str, &str)]) -> (BTreeSet<(String, String)>, Vec<String>) {
    common::plan_edges(
        env!("CARGO_BIN_EXE_kiln"),
        "stacks/rocm/docker-bake.hcl",
        env,
    )
}

#[test]
fn graph_matches_seed_flowchart() {
    let want = seed_edges();
    assert_eq!(want.len(), 27, "edges.txt lists the seed's 27 edges");
    let (edges, order) = plan_edges(&[]);
    assert_eq!(order.len(), 16, "sixteen targets: {order:?}");
    assert_eq!(edges, want);
}

#[test]
fn published_inputs_keep_the_same_graph() {
    // With PUBLISHED_INPUTS=1 the target: contexts collapse to registry
    // references; kiln still finds every edge through the tags.
    let (edges, _) = plan_edges(&[("PUBLISHED_INPUTS", "1")]);
    assert_eq!(edges, seed_edges());
}

#[test]
fn groups_match_the_seed() {
    let v = kiln(
        &[
            "print",
            "-f",
            "stacks/rocm/docker-bake.hcl",
            "default",
            "wheels",
            "serving",
        ],
        &[],
    );
    let members = |g: &str| -> BTreeSet<String> {
        v["group"][g]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    let set = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        members("wheels"),
        set(&[
            "pytorch-wheel",
            "triton-wheel",
            "aiter-wheel",
            "nixl-wheel",
            "torchvision-wheel",
            "cupy-wheel",
            "vllm-wheel",
            "lmcache-wheel"
        ])
    );
    assert_eq!(
        members("serving"),
        set(&[
            "torchvision-wheel",
            "cupy-wheel",
            "nixl-wheel",
            "vllm",
            "vllm-wheel",
            "lmcache",
            "lmcache-wheel"
        ])
    );
    let dv = kiln(&["print", "-f", "stacks/rocm/docker-bake.hcl"], &[]);
    let dflt: BTreeSet<String> = dv["target"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(dflt.len(), 14, "default builds 14 targets: {dflt:?}");
    assert!(!dflt.contains("pytorch-test") && !dflt.contains("pytorch-run"));
}

#[test]
fn variables_carry_the_seed_defaults() {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "print",
            "-f",
            "stacks/rocm/docker-bake.hcl",
            "--list",
            "variables",
        ])
        .current_dir(root())
        .env_clear()
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let value = |name: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.split('\t').next() == Some(name))
            .unwrap_or_else(|| panic!("variable {name} missing"));
        let cells: Vec<&str> = line.split('\t').filter(|c| !c.is_empty()).collect();
        // NAME [TYPE] VALUE [DESCRIPTION]: find the value by the seed's table.
        cells.get(1..).map(|c| c.join("\t")).unwrap_or_default()
    };
    // Seed 004's tables (versions, registry, build shape, cache, reproducibility).
    for (name, want) in [
        ("PYTORCH_VERSION", "2.15.0"),
        ("ROCM_VERSION", "10.1.0-full"),
        ("PYTHON_VERSION", "3.14"),
        ("TRITON_VERSION", "3.9.0"),
        ("TRITON_REF", "aad2a60d958f945420c5c40936b37d411fb02e89"),
        ("AITER_REF", "v0.1.29"),
        ("TORCHVISION_REF", "v0.29.2"),
        ("ATOM_REF", "v0.1.9"),
        ("NIXL_REF", "v1.5.2"),
        ("UCX_REF", "v1.22.0"),
        ("VLLM_REF", "v0.33.0"),
        ("CUPY_REF", "v14.2.0"),
        ("LMCACHE_REF", "v0.5.7"),
        ("RUST_VERSION", "1.95"),
        ("REGISTRY", "snoc-strix.fold-leaffish.ts.net:8080"),
        ("REGISTRY_NAME", "rocm-pytorch"),
        ("PYTORCH_ROCM_ARCH", "gfx950"),
        ("ROCM_PRUNE_PROFILE", "keep-toolchain"),
        ("SCCACHE_WEBDAV_PORT", "8081"),
        ("SCCACHE_VERSION", "0.19.0"),
        ("SDE_EPOCH", "1700000000"),
        ("RUN_ID", "dev"),
    ] {
        let v = value(name);
        assert!(v.contains(want), "{name}: expected {want:?} in {v:?}");
    }
    assert!(
        text.lines().count() > 50,
        "seed 004 lists over fifty variables"
    );
}

/// `kiln versions` on the reference stack, its upstreams served by loopback
/// mirrors (git's `url.<mirror>.insteadOf`, as a CI would point at a mirror):
/// every `*_REF` is found from the bake file or from how the Dockerfiles
/// clone it, none is a branch, and each is told against its mirror's
/// newest release.
#[test]
fn the_reference_stacks_pins_are_tags_or_commits_of_their_upstreams() {
    let mirrors = std::env::temp_dir().join(format!("kiln-rocm-mirrors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&mirrors);
    std::fs::create_dir_all(&mirrors).unwrap();
    let insteadof = format!("url.file://{}/.insteadOf", mirrors.display());
    let run = |extra: &[&str]| {
        let mut args = vec!["versions", "-f", "docker-bake.hcl", "--format", "json"];
        args.extend_from_slice(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(&args)
            .current_dir(common::root().join("stacks/rocm"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &mirrors)
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", &insteadof)
            .env("GIT_CONFIG_VALUE_0", "https://github.com/")
            .output()
            .unwrap()
    };
    // No mirror yet: every repository is named, and none answers (exit 3).
    let o = run(&["--no-registry"]);
    assert_eq!(o.status.code(), Some(3), "{}", common::stderr(&o));
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pins = pins.as_array().unwrap().clone();
    let repos: BTreeSet<(String, String)> = pins
        .iter()
        .filter_map(|p| {
            Some((
                p["variable"].as_str()?.to_string(),
                p["repository"].as_str()?.to_string(),
            ))
        })
        .collect();
    let with_repo: BTreeSet<&str> = repos.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        with_repo,
        [
            "AITER_REF",
            "ATOM_REF",
            "CUPY_REF",
            "LMCACHE_REF",
            "NIXL_REF",
            "TORCHVISION_REF",
            "TRITON_REF",
            "UCX_REF",
            "VLLM_REF"
        ]
        .into(),
        "every pinned upstream ref is found: {pins:#?}"
    );
    // The mirrors: the pinned tag and a newer release of each.
    for p in &pins {
        let (Some(var), Some(url)) = (p["variable"].as_str(), p["repository"].as_str()) else {
            continue;
        };
        let path = url
            .strip_prefix("https://github.com/")
            .and_then(|r| r.strip_suffix(".git"))
            .unwrap_or_else(|| panic!("{var}: {url} is not a GitHub repository"));
        let pin = p["pin"].as_str().unwrap();
        let tags: Vec<&str> = if pin.len() == 40 {
            vec!["v99.0.0"]
        } else {
            vec![pin, "v99.0.0"]
        };
        common::git_repo(&mirrors, path, &tags, &["main-dev"]);
    }
    let o = run(&["--no-registry"]);
    assert!(
        o.status.success(),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let pins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for p in pins.as_array().unwrap() {
        if p["repository"].is_null() {
            continue;
        }
        let kind = if p["pin"].as_str().unwrap().len() == 40 {
            "commit"
        } else {
            "tag"
        };
        assert_eq!(p["kind"], kind, "{p}");
        assert_eq!(p["newest"], "v99.0.0", "{p}");
    }
    // What is built from each pin: the targets it reaches as an arg.
    let vllm = pins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["variable"] == "VLLM_REF")
        .unwrap();
    let targets: Vec<&str> = vllm["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["vllm", "vllm-wheel"], "{vllm}");
    let _ = std::fs::remove_dir_all(&mirrors);
}

/// The reference stack passes kiln's own lint with no error: every target's
/// Dockerfile and sources are there, the refs come from the bake file.
#[test]
fn the_reference_stack_lints_without_errors() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["lint", "--format", "json", "stacks/rocm"])
        .current_dir(common::root())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let errors: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| f["severity"] == "error" || f["level"] == "error")
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // What is left are the seed's deliberate MAX_JOBS override (passed only
    // when pinned), told as warnings.
    for f in findings {
        assert_eq!(f["rule"], "jobs-arg-in-key", "{f}");
    }
}
